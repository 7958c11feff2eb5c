//! Linux "cooked" capture headers (`LINKTYPE_LINUX_SLL` 113 and
//! `LINKTYPE_LINUX_SLL2` 276), written by `tcpdump -i any`.
//!
//! SLL: packet type (2), ARPHRD type (2), address length (2), address (8),
//! protocol (2) = 16 bytes. SLL2: protocol (2), reserved (2), interface
//! index (4), ARPHRD type (2), packet type (1), address length (1),
//! address (8) = 20 bytes. The protocol field holds an ethertype for the
//! frames we care about.

use crate::error::{Layer, ParseError};

fn truncated() -> ParseError {
    ParseError::Truncated { layer: Layer::LinuxSll }
}

/// A checked view of a Linux SLL (v1) header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SllHeader<'a> {
    hdr: &'a [u8; SllHeader::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> SllHeader<'a> {
    /// Length of the SLL header.
    pub const HEADER_LEN: usize = 16;

    /// Checks that the 16-byte header is present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr = buf.first_chunk().ok_or_else(truncated)?;
        Ok(SllHeader { hdr, buf })
    }

    /// Packet type (0 to us, 1 broadcast, 2 multicast, 3 other host, 4 outgoing).
    pub fn packet_type(&self) -> u16 {
        u16::from_be_bytes([self.hdr[0], self.hdr[1]])
    }

    /// ARPHRD_ device type (1 Ethernet, 772 loopback, ...).
    pub fn arphrd_type(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Link-layer address length.
    pub fn addr_len(&self) -> u16 {
        u16::from_be_bytes([self.hdr[4], self.hdr[5]])
    }

    /// The 8-byte link-layer address field (only the first `addr_len` bytes are meaningful).
    pub fn addr(&self) -> [u8; 8] {
        let h = self.hdr;
        [h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13]]
    }

    /// Protocol (ethertype).
    pub fn protocol(&self) -> u16 {
        u16::from_be_bytes([self.hdr[14], self.hdr[15]])
    }

    /// Everything after the header.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

/// A checked view of a Linux SLL2 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sll2Header<'a> {
    hdr: &'a [u8; Sll2Header::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> Sll2Header<'a> {
    /// Length of the SLL2 header.
    pub const HEADER_LEN: usize = 20;

    /// Checks that the 20-byte header is present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr = buf.first_chunk().ok_or_else(truncated)?;
        Ok(Sll2Header { hdr, buf })
    }

    /// Protocol (ethertype).
    pub fn protocol(&self) -> u16 {
        u16::from_be_bytes([self.hdr[0], self.hdr[1]])
    }

    /// Interface index.
    pub fn if_index(&self) -> u32 {
        u32::from_be_bytes([self.hdr[4], self.hdr[5], self.hdr[6], self.hdr[7]])
    }

    /// ARPHRD_ device type.
    pub fn arphrd_type(&self) -> u16 {
        u16::from_be_bytes([self.hdr[8], self.hdr[9]])
    }

    /// Packet type.
    pub fn packet_type(&self) -> u8 {
        self.hdr[10]
    }

    /// Link-layer address length.
    pub fn addr_len(&self) -> u8 {
        self.hdr[11]
    }

    /// The 8-byte link-layer address field.
    pub fn addr(&self) -> [u8; 8] {
        let h = self.hdr;
        [h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]
    }

    /// Everything after the header.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sll_fields() {
        let mut b = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x86, 0xdd];
        b.push(0x60);
        let h = SllHeader::new_checked(&b).unwrap();
        assert_eq!(h.packet_type(), 4);
        assert_eq!(h.arphrd_type(), 1);
        assert_eq!(h.addr_len(), 6);
        assert_eq!(h.addr(), [2, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(h.protocol(), 0x86dd);
        assert_eq!(h.payload(), &[0x60]);
        for n in 0..16 {
            assert_eq!(SllHeader::new_checked(&b[..n]), Err(truncated()));
        }
    }

    #[test]
    fn sll2_fields() {
        let b = [0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
        let h = Sll2Header::new_checked(&b).unwrap();
        assert_eq!(h.protocol(), 0x0800);
        assert_eq!(h.if_index(), 3);
        assert_eq!(h.arphrd_type(), 1);
        assert_eq!(h.packet_type(), 0);
        assert_eq!(h.addr_len(), 6);
        assert_eq!(h.addr()[0], 2);
        assert!(h.payload().is_empty());
        for n in 0..20 {
            assert!(Sll2Header::new_checked(&b[..n]).is_err());
        }
    }
}
