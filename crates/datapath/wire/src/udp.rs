//! UDP header (RFC 768).
//!
//! Only the 8-byte header is required; the length field is reported but not
//! validated by [`UdpPacket::new_checked`] (a NIC hashes the ports whatever
//! the length says).

use crate::error::{Layer, ParseError};

/// A checked view of a UDP datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpPacket<'a> {
    hdr: &'a [u8; UdpPacket::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> UdpPacket<'a> {
    /// Length of the UDP header.
    pub const HEADER_LEN: usize = 8;

    /// Checks that the 8-byte header is present (`Truncated{Udp}`).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr = buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Udp })?;
        Ok(UdpPacket { hdr, buf })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.hdr[0], self.hdr[1]])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Length field (header + payload).
    pub fn len_field(&self) -> u16 {
        u16::from_be_bytes([self.hdr[4], self.hdr[5]])
    }

    /// Checksum field (0: none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.hdr[6], self.hdr[7]])
    }

    /// The payload: after the header, up to the length field when it is
    /// plausible (>= 8), else to the end of the buffer; never past the buffer.
    pub fn payload(&self) -> &'a [u8] {
        let len = usize::from(self.len_field());
        let end = if len >= Self::HEADER_LEN { len.min(self.buf.len()) } else { self.buf.len() };
        self.buf.get(Self::HEADER_LEN..end).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_truncation() {
        let b = [0x30, 0x39, 0x12, 0xb5, 0x00, 0x0a, 0xab, 0xcd, 1, 2, 3];
        let u = UdpPacket::new_checked(&b).unwrap();
        assert_eq!(u.src_port(), 12345);
        assert_eq!(u.dst_port(), 4789);
        assert_eq!(u.len_field(), 10);
        assert_eq!(u.checksum(), 0xabcd);
        assert_eq!(u.payload(), &[1, 2]);
        for n in 0..8 {
            assert_eq!(UdpPacket::new_checked(&b[..n]), Err(ParseError::Truncated { layer: Layer::Udp }));
        }
        let mut bad = b;
        bad[5] = 3; // length < 8: whole buffer
        assert_eq!(UdpPacket::new_checked(&bad).unwrap().payload(), &[1, 2, 3]);
        bad[4] = 0xff; // length > buffer
        assert_eq!(UdpPacket::new_checked(&bad).unwrap().payload(), &[1, 2, 3]);
    }
}
