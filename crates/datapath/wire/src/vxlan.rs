//! VXLAN header (RFC 7348): flags (1, I bit 0x08), reserved (3), VNI (3),
//! reserved (1), followed by an inner Ethernet frame.
//!
//! The parser treats a UDP datagram to [`crate::ParseOptions::vxlan_port`]
//! as VXLAN only when the I flag is set.

use crate::error::{Layer, ParseError};

/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;

/// VXLAN-GPE (generic protocol extension, draft-ietf-nvo3-vxlan-gpe), UDP
/// port [`crate::VXLAN_GPE_PORT`] (4790): flags (version 2 bits, I, P, B,
/// O), reserved (2), next protocol (1: 1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH,
/// 5 MPLS), VNI (3), reserved (1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VxlanGpePacket<'a> {
    hdr: &'a [u8; VxlanGpePacket::HEADER_LEN],
    buf: &'a [u8],
}

/// What a VXLAN-GPE header says follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpeNext {
    /// IPv4 (next protocol 1).
    Ipv4,
    /// IPv6 (2).
    Ipv6,
    /// Ethernet (3, or no P flag: VXLAN compatible).
    Ethernet,
    /// Anything else (NSH, MPLS, ...).
    Other(u8),
}

impl<'a> VxlanGpePacket<'a> {
    /// Length of the header.
    pub const HEADER_LEN: usize = 8;

    /// Checks that the header is present (`Truncated{Vxlan}`) and its
    /// version is 0 (`BadVersion`).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr: &[u8; VxlanGpePacket::HEADER_LEN] =
            buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Vxlan })?;
        if (hdr[0] >> 4) & 0x03 != 0 {
            return Err(ParseError::BadVersion);
        }
        Ok(VxlanGpePacket { hdr, buf })
    }

    /// The I flag: the VNI is valid.
    pub fn vni_valid(&self) -> bool {
        self.hdr[0] & FLAG_I != 0
    }

    /// The next protocol (Ethernet without the P flag).
    pub fn next(&self) -> GpeNext {
        if self.hdr[0] & 0x04 == 0 {
            return GpeNext::Ethernet;
        }
        match self.hdr[3] {
            1 => GpeNext::Ipv4,
            2 => GpeNext::Ipv6,
            3 => GpeNext::Ethernet,
            other => GpeNext::Other(other),
        }
    }

    /// VXLAN network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        u32::from_be_bytes([0, self.hdr[4], self.hdr[5], self.hdr[6]])
    }

    /// The tunnelled packet.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

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

    #[test]
    fn gpe_fields() {
        let b = [0x0c, 0, 0, 2, 0, 0, 9, 0, 0x60];
        let g = VxlanGpePacket::new_checked(&b).unwrap();
        assert!(g.vni_valid());
        assert_eq!((g.next(), g.vni(), g.payload()), (GpeNext::Ipv6, 9, &[0x60][..]));
        let g = VxlanGpePacket::new_checked(&[0x08, 0, 0, 1, 0, 0, 0, 0]).unwrap();
        assert_eq!(g.next(), GpeNext::Ethernet);
        let g = VxlanGpePacket::new_checked(&[0x0c, 0, 0, 4, 0, 0, 0, 0]).unwrap();
        assert_eq!(g.next(), GpeNext::Other(4));
        assert_eq!(VxlanGpePacket::new_checked(&[0x2c, 0, 0, 1, 0, 0, 0, 0]), Err(ParseError::BadVersion));
        assert!(VxlanGpePacket::new_checked(&[0x0c; 7]).is_err());
    }
}
