//! GRE header, version 0 (RFC 2784 with the RFC 2890 key and sequence
//! extensions).
//!
//! Layout: flags+version (2), protocol type (2), then checksum+reserved (4)
//! if C, key (4) if K, sequence number (4) if S. The RFC 1701 routing bit
//! (R) makes the header length depend on a source route list that no
//! deployed stack sends: it is rejected (`BadHeaderLen{Gre}`), as are
//! versions other than 0 (`BadVersion`; version 1 is PPTP's enhanced GRE).

use crate::error::{Layer, ParseError};

/// Checksum present.
pub const FLAG_C: u16 = 0x8000;
/// Routing present (RFC 1701, rejected).
pub const FLAG_R: u16 = 0x4000;
/// Key present.
pub const FLAG_K: u16 = 0x2000;
/// Sequence number present.
pub const FLAG_S: u16 = 0x1000;
/// Version mask.
pub const VERSION_MASK: u16 = 0x0007;

/// A checked view of a GRE header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrePacket<'a> {
    hdr: &'a [u8; GrePacket::MIN_HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> GrePacket<'a> {
    /// Header length without optional fields.
    pub const MIN_HEADER_LEN: usize = 4;

    /// Validates the header, see the module docs; `Truncated{Gre}` when the
    /// optional fields the flags announce are not all present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let truncated = ParseError::Truncated { layer: Layer::Gre };
        let hdr: &[u8; 4] = buf.first_chunk().ok_or(truncated)?;
        let p = GrePacket { hdr, buf };
        if p.version() != 0 {
            return Err(ParseError::BadVersion);
        }
        if p.flags() & FLAG_R != 0 {
            return Err(ParseError::BadHeaderLen { layer: Layer::Gre });
        }
        if p.header_len() > buf.len() {
            return Err(truncated);
        }
        Ok(p)
    }

    /// The flags+version word.
    pub fn flags(&self) -> u16 {
        u16::from_be_bytes([self.hdr[0], self.hdr[1]])
    }

    /// Version (0).
    pub fn version(&self) -> u8 {
        self.hdr[1] & 0x07
    }

    /// Protocol type (an ethertype).
    pub fn protocol(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// C bit.
    pub fn checksum_present(&self) -> bool {
        self.flags() & FLAG_C != 0
    }

    /// K bit.
    pub fn key_present(&self) -> bool {
        self.flags() & FLAG_K != 0
    }

    /// S bit.
    pub fn seq_present(&self) -> bool {
        self.flags() & FLAG_S != 0
    }

    /// Header length in bytes (4, 8, 12 or 16).
    pub fn header_len(&self) -> usize {
        let opt = [self.checksum_present(), self.key_present(), self.seq_present()];
        opt.iter().fold(Self::MIN_HEADER_LEN, |n, &p| if p { n.saturating_add(4) } else { n })
    }

    fn word_at(&self, at: usize) -> Option<u32> {
        let w: &[u8; 4] = self.buf.get(at..)?.first_chunk()?;
        Some(u32::from_be_bytes(*w))
    }

    /// Checksum field, if present.
    pub fn checksum(&self) -> Option<u16> {
        if self.checksum_present() {
            self.word_at(4).map(|w| (w >> 16) as u16)
        } else {
            None
        }
    }

    /// Key, if present.
    pub fn key(&self) -> Option<u32> {
        if self.key_present() {
            let at = if self.checksum_present() { 8 } else { 4 };
            self.word_at(at)
        } else {
            None
        }
    }

    /// Sequence number, if present.
    pub fn sequence(&self) -> Option<u32> {
        if self.seq_present() {
            self.word_at(self.header_len().saturating_sub(4))
        } else {
            None
        }
    }

    /// Everything after the header.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(self.header_len()..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_with_fields() {
        let b = [0x00, 0x00, 0x08, 0x00, 0x45];
        let g = GrePacket::new_checked(&b).unwrap();
        assert_eq!(g.protocol(), 0x0800);
        assert_eq!(g.header_len(), 4);
        assert_eq!((g.checksum(), g.key(), g.sequence()), (None, None, None));
        assert_eq!(g.payload(), &[0x45]);

        let b = [0xb0, 0x00, 0x65, 0x58, 0xab, 0xcd, 0, 0, 0, 0, 0, 42, 0, 0, 1, 0, 0xee];
        let g = GrePacket::new_checked(&b).unwrap();
        assert_eq!(g.header_len(), 16);
        assert_eq!(g.checksum(), Some(0xabcd));
        assert_eq!(g.key(), Some(42));
        assert_eq!(g.sequence(), Some(256));
        assert_eq!(g.payload(), &[0xee]);
        for n in 0..16 {
            assert_eq!(GrePacket::new_checked(&b[..n]), Err(ParseError::Truncated { layer: Layer::Gre }));
        }

        let k = [0x20, 0x00, 0x86, 0xdd, 0, 0, 0, 7];
        assert_eq!(GrePacket::new_checked(&k).unwrap().key(), Some(7));
    }

    #[test]
    fn rejected() {
        assert_eq!(
            GrePacket::new_checked(&[0x30, 0x01, 0x88, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(ParseError::BadVersion)
        );
        assert_eq!(
            GrePacket::new_checked(&[0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0]),
            Err(ParseError::BadHeaderLen { layer: Layer::Gre })
        );
    }
}
