//! PPPoE session stage (RFC 2516, ethertype 0x8864) and the PPP protocol
//! field behind it.
//!
//! Layout: ver/type (1, 0x11), code (1, 0 for session data), session id (2),
//! length (2, of the PPP payload incl. the protocol field), PPP protocol (2).
//! [`PppoeSession::new_checked`] needs all 8 bytes (`Truncated{Pppoe}`),
//! ver/type 0x11 (`BadVersion`) and a length of at least 2
//! (`BadHeaderLen{Pppoe}`). Protocol field compression is not supported
//! (RFC 2516 forbids it for the session stage's first byte anyway).

use crate::error::{Layer, ParseError};

/// PPP protocol: IPv4.
pub const PPP_IPV4: u16 = 0x0021;
/// PPP protocol: IPv6.
pub const PPP_IPV6: u16 = 0x0057;
/// PPP protocol: LCP.
pub const PPP_LCP: u16 = 0xc021;

/// A checked view of a PPPoE session header plus PPP protocol field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PppoeSession<'a> {
    hdr: &'a [u8; PppoeSession::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> PppoeSession<'a> {
    /// PPPoE header (6) + PPP protocol (2).
    pub const HEADER_LEN: usize = 8;

    /// Validates the header, see the module docs.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr: &[u8; 8] = buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Pppoe })?;
        if hdr[0] != 0x11 {
            return Err(ParseError::BadVersion);
        }
        let p = PppoeSession { hdr, buf };
        if p.length() < 2 {
            return Err(ParseError::BadHeaderLen { layer: Layer::Pppoe });
        }
        Ok(p)
    }

    /// Version (1).
    pub fn version(&self) -> u8 {
        self.hdr[0] >> 4
    }

    /// Type (1).
    pub fn kind(&self) -> u8 {
        self.hdr[0] & 0x0f
    }

    /// Code (0 for session data).
    pub fn code(&self) -> u8 {
        self.hdr[1]
    }

    /// Session id.
    pub fn session_id(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Length field: PPP protocol + payload.
    pub fn length(&self) -> u16 {
        u16::from_be_bytes([self.hdr[4], self.hdr[5]])
    }

    /// PPP protocol.
    pub fn protocol(&self) -> u16 {
        u16::from_be_bytes([self.hdr[6], self.hdr[7]])
    }

    /// Offset (in the buffer) where the PPPoE payload ends: min(6 + length, buffer).
    pub fn end(&self) -> usize {
        usize::from(self.length()).saturating_add(6).min(self.buf.len())
    }

    /// True when the buffer holds fewer bytes than the length field says.
    pub fn is_truncated(&self) -> bool {
        usize::from(self.length()).saturating_add(6) > self.buf.len()
    }

    /// The PPP payload (after the protocol field), Ethernet padding excluded.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..self.end()).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_errors() {
        let b = [0x11, 0x00, 0x12, 0x34, 0x00, 0x03, 0x00, 0x21, 0x45, 0, 0];
        let p = PppoeSession::new_checked(&b).unwrap();
        assert_eq!((p.version(), p.kind(), p.code()), (1, 1, 0));
        assert_eq!(p.session_id(), 0x1234);
        assert_eq!(p.length(), 3);
        assert_eq!(p.protocol(), PPP_IPV4);
        assert_eq!(p.payload(), &[0x45]);
        assert!(!p.is_truncated());
        for n in 0..8 {
            assert_eq!(PppoeSession::new_checked(&b[..n]), Err(ParseError::Truncated { layer: Layer::Pppoe }));
        }
        let mut bad = b;
        bad[0] = 0x21;
        assert_eq!(PppoeSession::new_checked(&bad), Err(ParseError::BadVersion));
        let mut bad = b;
        bad[5] = 1;
        assert_eq!(PppoeSession::new_checked(&bad), Err(ParseError::BadHeaderLen { layer: Layer::Pppoe }));
        let mut long = b;
        long[4] = 1;
        let p = PppoeSession::new_checked(&long).unwrap();
        assert!(p.is_truncated());
        assert_eq!(p.payload(), &[0x45, 0, 0]);
    }
}
