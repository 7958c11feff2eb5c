//! GTP-U header (3GPP TS 29.281), UDP port [`crate::GTPU_PORT`] (2152):
//! flags (version 1, PT 1, E, S, PN), message type, length, TEID; when any
//! of E, S or PN is set, a sequence number, an N-PDU number and the type of
//! the first extension header follow; each extension header is a length
//! (in 4-byte words), its content and the type of the next one (0 ends the
//! chain). At most [`MAX_GTPU_EXT_HEADERS`] extension headers are followed.
//! A G-PDU (message type 255) carries a user IP packet.

use crate::error::{Layer, ParseError};

/// Most GTP-U extension headers followed; a longer chain is
/// `BadHeaderLen{GtpU}`.
pub const MAX_GTPU_EXT_HEADERS: usize = 8;

/// Message type of a G-PDU (a tunnelled user packet).
pub const MSG_GPDU: u8 = 0xff;

fn truncated() -> ParseError {
    ParseError::Truncated { layer: Layer::GtpU }
}

/// A checked view of a GTP-U header with its extension headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GtpuPacket<'a> {
    hdr: &'a [u8; GtpuPacket::BASE_LEN],
    buf: &'a [u8],
    header_len: usize,
    ext_headers: u8,
}

impl<'a> GtpuPacket<'a> {
    /// Length of the mandatory header.
    pub const BASE_LEN: usize = 8;

    /// Checks version 1 and PT 1 (`BadVersion`), walks the optional fields
    /// and the extension headers (`Truncated{GtpU}` when cut short,
    /// `BadHeaderLen{GtpU}` for a zero-length or too long chain).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr: &[u8; GtpuPacket::BASE_LEN] = buf.first_chunk().ok_or_else(truncated)?;
        if hdr[0] >> 5 != 1 || hdr[0] & 0x10 == 0 {
            return Err(ParseError::BadVersion);
        }
        let mut header_len = Self::BASE_LEN;
        let mut ext_headers = 0u8;
        if hdr[0] & 0x07 != 0 {
            // Sequence number (2), N-PDU number (1), next extension type (1).
            let mut next = *buf.get(11).ok_or_else(truncated)?;
            header_len = 12;
            while next != 0 {
                if usize::from(ext_headers) >= MAX_GTPU_EXT_HEADERS {
                    return Err(ParseError::BadHeaderLen { layer: Layer::GtpU });
                }
                let words = usize::from(*buf.get(header_len).ok_or_else(truncated)?);
                if words == 0 {
                    return Err(ParseError::BadHeaderLen { layer: Layer::GtpU });
                }
                let end = header_len.saturating_add(words.saturating_mul(4));
                next = *buf.get(end.saturating_sub(1)).ok_or_else(truncated)?;
                header_len = end;
                ext_headers = ext_headers.saturating_add(1);
            }
        }
        Ok(GtpuPacket { hdr, buf, header_len, ext_headers })
    }

    /// Message type (255: G-PDU).
    pub fn message_type(&self) -> u8 {
        self.hdr[1]
    }

    /// Tunnel endpoint identifier.
    pub fn teid(&self) -> u32 {
        u32::from_be_bytes([self.hdr[4], self.hdr[5], self.hdr[6], self.hdr[7]])
    }

    /// Header length with the optional fields and extension headers.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Number of extension headers.
    pub fn ext_headers(&self) -> u8 {
        self.ext_headers
    }

    /// What follows the headers (the user packet of a G-PDU).
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(self.header_len..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_with_extension_headers() {
        let b = [0x30, 0xff, 0, 1, 0, 0, 0, 7, 0x45];
        let g = GtpuPacket::new_checked(&b).unwrap();
        assert_eq!((g.message_type(), g.teid(), g.header_len(), g.payload()), (0xff, 7, 8, &[0x45][..]));
        // E set: sequence, N-PDU, next type 0x85 (PDU session container, 1 word), then end.
        let b = [0x34, 0xff, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0x10, 0x05, 0x00, 0x60];
        let g = GtpuPacket::new_checked(&b).unwrap();
        assert_eq!((g.header_len(), g.ext_headers(), g.payload()), (16, 1, &[0x60][..]));
        for n in 0..16 {
            assert!(GtpuPacket::new_checked(&b[..n]).is_err(), "{n}");
        }
        let mut zero = b;
        zero[12] = 0;
        assert_eq!(GtpuPacket::new_checked(&zero), Err(ParseError::BadHeaderLen { layer: Layer::GtpU }));
        assert_eq!(GtpuPacket::new_checked(&[0x50, 0xff, 0, 0, 0, 0, 0, 0]), Err(ParseError::BadVersion));
        assert_eq!(GtpuPacket::new_checked(&[0x20, 0xff, 0, 0, 0, 0, 0, 0]), Err(ParseError::BadVersion));
        // A chain longer than the limit.
        let mut long = vec![0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85];
        for _ in 0..=MAX_GTPU_EXT_HEADERS {
            long.extend_from_slice(&[1, 0, 0, 0x85]);
        }
        assert_eq!(GtpuPacket::new_checked(&long), Err(ParseError::BadHeaderLen { layer: Layer::GtpU }));
    }
}
