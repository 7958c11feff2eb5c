//! VXLAN header (RFC 7348): flags (1, I bit 0x08), reserved (3), VNI (3),
//! reserved (1), followed by an inner Ethernet frame.
//!
//! The parser treats a UDP datagram to [`crate::ParseOptions::vxlan_port`]
//! as VXLAN only when the I flag is set.

use crate::error::{Layer, ParseError};

/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;

/// A checked view of a VXLAN header and the inner frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VxlanPacket<'a> {
    hdr: &'a [u8; VxlanPacket::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> VxlanPacket<'a> {
    /// Length of the VXLAN header.
    pub const HEADER_LEN: usize = 8;

    /// Checks that the 8-byte header is present (`Truncated{Vxlan}`).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr = buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Vxlan })?;
        Ok(VxlanPacket { hdr, buf })
    }

    /// Flags byte.
    pub fn flags(&self) -> u8 {
        self.hdr[0]
    }

    /// The I flag is set (the VNI is valid).
    pub fn vni_valid(&self) -> bool {
        self.hdr[0] & FLAG_I != 0
    }

    /// VXLAN network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        u32::from_be_bytes([0, self.hdr[4], self.hdr[5], self.hdr[6]])
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let b = [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0, 0xaa];
        let v = VxlanPacket::new_checked(&b).unwrap();
        assert!(v.vni_valid());
        assert_eq!(v.flags(), 8);
        assert_eq!(v.vni(), 0x123456);
        assert_eq!(v.payload(), &[0xaa]);
        for n in 0..8 {
            assert!(VxlanPacket::new_checked(&b[..n]).is_err());
        }
        let v = VxlanPacket::new_checked(&[0; 8]).unwrap();
        assert!(!v.vni_valid());
    }
}
