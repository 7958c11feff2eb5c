//! TCP header (RFC 9293).
//!
//! [`TcpPacket::new_checked`] requires the data offset to be >= 5
//! (`BadHeaderLen{Tcp}`) and the whole header, options included, to be in
//! the buffer (`Truncated{Tcp}`).

use crate::error::{Layer, ParseError};

/// FIN flag.
pub const FIN: u8 = 0x01;
/// SYN flag.
pub const SYN: u8 = 0x02;
/// RST flag.
pub const RST: u8 = 0x04;
/// PSH flag.
pub const PSH: u8 = 0x08;
/// ACK flag.
pub const ACK: u8 = 0x10;
/// URG flag.
pub const URG: u8 = 0x20;
/// ECE flag.
pub const ECE: u8 = 0x40;
/// CWR flag.
pub const CWR: u8 = 0x80;

/// A checked view of a TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPacket<'a> {
    hdr: &'a [u8; TcpPacket::MIN_HEADER_LEN],
    buf: &'a [u8],
    header_len: usize,
}

impl<'a> TcpPacket<'a> {
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Validates the header, see the module docs.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let truncated = ParseError::Truncated { layer: Layer::Tcp };
        let hdr: &[u8; 20] = buf.first_chunk().ok_or(truncated)?;
        let header_len = usize::from((hdr[12] >> 4) << 2);
        if header_len < Self::MIN_HEADER_LEN {
            return Err(ParseError::BadHeaderLen { layer: Layer::Tcp });
        }
        if header_len > buf.len() {
            return Err(truncated);
        }
        Ok(TcpPacket { hdr, buf, header_len })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.hdr[0], self.hdr[1]])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        u32::from_be_bytes([self.hdr[4], self.hdr[5], self.hdr[6], self.hdr[7]])
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        u32::from_be_bytes([self.hdr[8], self.hdr[9], self.hdr[10], self.hdr[11]])
    }

    /// Header length in bytes (data offset * 4, 20..=60).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The flag byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub fn flags(&self) -> u8 {
        self.hdr[13]
    }

    /// Receive window.
    pub fn window(&self) -> u16 {
        u16::from_be_bytes([self.hdr[14], self.hdr[15]])
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.hdr[16], self.hdr[17]])
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        u16::from_be_bytes([self.hdr[18], self.hdr[19]])
    }

    /// The options (possibly empty).
    pub fn options(&self) -> &'a [u8] {
        self.buf.get(Self::MIN_HEADER_LEN..self.header_len).unwrap_or(&[])
    }

    /// Everything after the header.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(self.header_len..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_truncation() {
        let mut b = vec![0x00, 0x50, 0xc0, 0x00, 0, 0, 0, 1, 0, 0, 0, 2, 0x60, SYN | ACK, 0xff, 0xff, 0x12, 0x34, 0, 7];
        b.extend_from_slice(&[2, 4, 5, 0xb4, 0xaa]);
        let t = TcpPacket::new_checked(&b).unwrap();
        assert_eq!(t.src_port(), 80);
        assert_eq!(t.dst_port(), 0xc000);
        assert_eq!(t.seq(), 1);
        assert_eq!(t.ack(), 2);
        assert_eq!(t.header_len(), 24);
        assert_eq!(t.flags(), SYN | ACK);
        assert_eq!(t.window(), 0xffff);
        assert_eq!(t.checksum(), 0x1234);
        assert_eq!(t.urgent(), 7);
        assert_eq!(t.options(), &[2, 4, 5, 0xb4]);
        assert_eq!(t.payload(), &[0xaa]);
        for n in 0..24 {
            assert_eq!(TcpPacket::new_checked(&b[..n]), Err(ParseError::Truncated { layer: Layer::Tcp }));
        }
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b), Err(ParseError::BadHeaderLen { layer: Layer::Tcp }));
        b[12] = 0xf0;
        assert_eq!(TcpPacket::new_checked(&b), Err(ParseError::Truncated { layer: Layer::Tcp }));
    }
}
