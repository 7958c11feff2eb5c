//! Geneve header (RFC 8926), UDP destination port [`crate::GENEVE_PORT`]
//! (6081): version (2 bits, 0) and options length (6 bits, in 4-byte
//! words), flags (O, C), protocol type (an ethertype: 0x6558 Ethernet,
//! 0x0800 IPv4, 0x86DD IPv6), VNI (24 bits), reserved; then up to 252 bytes
//! of options, then the tunnelled packet.

use crate::error::{Layer, ParseError};

/// A checked view of a Geneve header, its options and the packet behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenevePacket<'a> {
    hdr: &'a [u8; GenevePacket::BASE_LEN],
    buf: &'a [u8],
}

impl<'a> GenevePacket<'a> {
    /// Length of the fixed header.
    pub const BASE_LEN: usize = 8;

    /// Checks the fixed header, the version (0, else `BadVersion`) and that
    /// the options are present (`Truncated{Geneve}`).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr: &[u8; GenevePacket::BASE_LEN] =
            buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Geneve })?;
        let p = GenevePacket { hdr, buf };
        if hdr[0] >> 6 != 0 {
            return Err(ParseError::BadVersion);
        }
        if buf.len() < p.header_len() {
            return Err(ParseError::Truncated { layer: Layer::Geneve });
        }
        Ok(p)
    }

    /// Length of the options in bytes (0 to 252).
    pub fn options_len(&self) -> usize {
        usize::from(self.hdr[0] & 0x3f) * 4
    }

    /// Fixed header plus options.
    pub fn header_len(&self) -> usize {
        Self::BASE_LEN.saturating_add(self.options_len())
    }

    /// The O flag: a control packet.
    pub fn is_control(&self) -> bool {
        self.hdr[1] & 0x80 != 0
    }

    /// Protocol type of the tunnelled packet (an ethertype).
    pub fn protocol(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Virtual network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        u32::from_be_bytes([0, self.hdr[4], self.hdr[5], self.hdr[6]])
    }

    /// The options, undecoded.
    pub fn options(&self) -> &'a [u8] {
        self.buf.get(Self::BASE_LEN..self.header_len()).unwrap_or(&[])
    }

    /// The tunnelled packet.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(self.header_len()..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_options_and_errors() {
        // Two words of options, protocol IPv4, VNI 0x0a0b0c.
        let mut b = vec![0x02, 0x00, 0x08, 0x00, 0x0a, 0x0b, 0x0c, 0x00];
        b.extend_from_slice(&[0x01, 0x02, 0x03, 0x01, 9, 9, 9, 9]);
        b.push(0x45);
        let g = GenevePacket::new_checked(&b).unwrap();
        assert_eq!((g.options_len(), g.header_len(), g.protocol(), g.vni()), (8, 16, 0x0800, 0x0a0b0c));
        assert_eq!((g.options().len(), g.payload()), (8, &[0x45][..]));
        assert!(!g.is_control());
        for n in 0..16 {
            assert_eq!(GenevePacket::new_checked(&b[..n]), Err(ParseError::Truncated { layer: Layer::Geneve }));
        }
        b[0] |= 0x40;
        assert_eq!(GenevePacket::new_checked(&b), Err(ParseError::BadVersion));
    }
}
