//! RSS keys: the Microsoft default, symmetric keys, random keys from OS
//! randomness, and keys read as hex.
//!
//! A key must be at least [`MIN_KEY_LEN`] bytes (the 36-byte IPv6 4-tuple plus
//! the 4-byte hash window) and at most [`MAX_KEY_LEN`] bytes.

use std::fmt;

/// Shortest key: covers a 36-byte IPv6 4-tuple input (input length + 4).
pub const MIN_KEY_LEN: usize = 40;
/// Longest key we accept (DPDK tests 200-byte keys; nothing real is longer).
pub const MAX_KEY_LEN: usize = 256;
/// Key length Linux (`netdev_rss_key_fill`) and i40e/ice use.
pub const LINUX_KEY_LEN: usize = 52;

/// The Microsoft verification key: also the FreeBSD, DPDK, VPP, ixgbe and
/// Chelsio T5 default. Public: anyone can aim traffic at one queue with it.
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// What to tell the user when a public key ([`RssKey::is_public`]) meets
/// real traffic: said once, by whoever puts the key on a NIC or hashes
/// live traffic with it (models and replays of captures stay silent).
pub const PUBLIC_KEY_WARNING: &str =
    "the Microsoft default key is public: anyone can aim traffic at one queue with it (use --key random in production)";

/// Where a key came from; drives the warnings the CLI prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// The public Microsoft key.
    MicrosoftDefault,
    /// `0x6d5a` repeated: both directions of a flow hash alike, but only 16
    /// bits of the hash carry entropy.
    Symmetric,
    /// Generated from OS randomness and checked for spread.
    Random,
    /// Drawn from SplitMix64 with this seed ([`RssKey::from_seed`]) and
    /// checked for spread: reproducible, and only as secret as the seed.
    Seeded(u64),
    /// Given by the user (hex, or read from `ethtool -x`).
    User,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    TooShort { len: usize },
    TooLong { len: usize },
    BadHex { position: usize },
    OddDigits,
    Randomness(String),
    SpreadRejected { attempts: u32 },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::TooShort { len } => {
                write!(f, "RSS key is {len} bytes; at least {MIN_KEY_LEN} are needed")
            }
            KeyError::TooLong { len } => {
                write!(f, "RSS key is {len} bytes; at most {MAX_KEY_LEN} are accepted")
            }
            KeyError::BadHex { position } => {
                write!(f, "RSS key: not a hex digit at character {}", position + 1)
            }
            KeyError::OddDigits => write!(f, "RSS key: odd number of hex digits"),
            KeyError::Randomness(e) => write!(f, "RSS key: OS randomness unavailable: {e}"),
            KeyError::SpreadRejected { attempts } => {
                write!(f, "RSS key: {attempts} random keys in a row failed the spread test (broken RNG?)")
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// An RSS (Toeplitz) secret key of [`MIN_KEY_LEN`]..=[`MAX_KEY_LEN`] bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct RssKey {
    bytes: Vec<u8>,
    kind: KeyKind,
}

impl fmt::Debug for RssKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RssKey({:?}, {})", self.kind, self.to_hex())
    }
}

impl RssKey {
    /// The Microsoft default key (40 bytes).
    pub fn microsoft() -> RssKey {
        RssKey { bytes: MICROSOFT_KEY.to_vec(), kind: KeyKind::MicrosoftDefault }
    }

    /// The symmetric key `6d5a` repeated to `len` bytes (even, >= 40).
    pub fn symmetric(len: usize) -> Result<RssKey, KeyError> {
        check_len(len)?;
        let bytes = (0..len).map(|i| if i % 2 == 0 { 0x6d } else { 0x5a }).collect();
        Ok(RssKey { bytes, kind: KeyKind::Symmetric })
    }

    /// Wrap user bytes (from hex or `ethtool -x`). A key equal to the
    /// Microsoft key (or its first 40 bytes followed by anything) is
    /// recognised as [`KeyKind::MicrosoftDefault`]; a 16-bit-periodic key as
    /// [`KeyKind::Symmetric`].
    pub fn from_bytes(bytes: &[u8]) -> Result<RssKey, KeyError> {
        check_len(bytes.len())?;
        let kind = if bytes.starts_with(&MICROSOFT_KEY) {
            KeyKind::MicrosoftDefault
        } else if is_period_16(bytes) {
            KeyKind::Symmetric
        } else {
            KeyKind::User
        };
        Ok(RssKey { bytes: bytes.to_vec(), kind })
    }

    /// Parse hex with or without `:` (or `-`, spaces) between bytes, and an
    /// optional `0x` prefix.
    pub fn parse_hex(text: &str) -> Result<RssKey, KeyError> {
        let text = text.trim();
        let body = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
        let offset = text.len() - body.len();
        let mut digits = Vec::with_capacity(body.len());
        for (i, c) in body.char_indices() {
            match c {
                ':' | '-' | ' ' | '\t' | '\n' | '\r' => {}
                _ => match c.to_digit(16) {
                    Some(d) => digits.push(d as u8),
                    None => return Err(KeyError::BadHex { position: offset + i }),
                },
            }
        }
        if digits.len() % 2 != 0 {
            return Err(KeyError::OddDigits);
        }
        let bytes: Vec<u8> = digits.chunks_exact(2).map(|p| (p[0] << 4) | p[1]).collect();
        RssKey::from_bytes(&bytes)
    }

    /// A key drawn at random or from a seed (see [`RssKey::random`] and
    /// [`RssKey::from_seed`], in `quality.rs` beside the spread test that
    /// vets them).
    pub(crate) fn drawn(bytes: Vec<u8>, kind: KeyKind) -> RssKey {
        RssKey { bytes, kind }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// True when the key is public knowledge (Microsoft default): an attacker
    /// can plan tuples that all land on one queue.
    pub fn is_public(&self) -> bool {
        self.kind == KeyKind::MicrosoftDefault
    }

    /// True when the key repeats every 16 bits, which makes the hash
    /// symmetric (swap src/dst and ports: same hash) and leaves only 16
    /// distinct hash bits.
    pub fn is_symmetric(&self) -> bool {
        is_period_16(&self.bytes)
    }

    /// Lowercase hex, bytes joined by `:`: the form `ethtool -x` prints and
    /// `ethtool -X hkey` and [`RssKey::parse_hex`] (`--key`) accept.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(self.bytes.len() * 3);
        for (i, b) in self.bytes.iter().enumerate() {
            if i > 0 {
                s.push(':');
            }
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

pub(crate) fn check_len(len: usize) -> Result<(), KeyError> {
    if len < MIN_KEY_LEN {
        Err(KeyError::TooShort { len })
    } else if len > MAX_KEY_LEN {
        Err(KeyError::TooLong { len })
    } else {
        Ok(())
    }
}

fn is_period_16(bytes: &[u8]) -> bool {
    bytes.len() >= 2 && bytes.iter().enumerate().all(|(i, &b)| b == bytes[i % 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_forms_parse_alike() {
        let plain = "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa";
        let k1 = RssKey::parse_hex(plain).unwrap();
        let colon = RssKey::microsoft().to_hex();
        let k2 = RssKey::parse_hex(&colon).unwrap();
        let k3 = RssKey::parse_hex(&format!("0x{}", plain.to_uppercase())).unwrap();
        assert_eq!(k1.as_bytes(), &MICROSOFT_KEY);
        assert_eq!(k1, k2);
        assert_eq!(k1, k3);
        assert_eq!(k1.kind(), KeyKind::MicrosoftDefault);
    }

    #[test]
    fn bad_keys_are_errors() {
        assert_eq!(RssKey::parse_hex("6d5a"), Err(KeyError::TooShort { len: 2 }));
        assert_eq!(RssKey::parse_hex("6d5"), Err(KeyError::OddDigits));
        assert_eq!(RssKey::parse_hex("6x"), Err(KeyError::BadHex { position: 1 }));
        assert_eq!(RssKey::parse_hex(""), Err(KeyError::TooShort { len: 0 }));
        assert!(matches!(RssKey::from_bytes(&[1u8; 300]), Err(KeyError::TooLong { .. })));
        assert!(matches!(RssKey::symmetric(20), Err(KeyError::TooShort { .. })));
        // Never panics on multi-byte characters.
        assert!(matches!(RssKey::parse_hex("ééé"), Err(KeyError::BadHex { .. })));
    }

    #[test]
    fn symmetric_key_is_recognised() {
        let k = RssKey::symmetric(52).unwrap();
        assert!(k.is_symmetric());
        assert_eq!(RssKey::from_bytes(k.as_bytes()).unwrap().kind(), KeyKind::Symmetric);
        assert!(!RssKey::microsoft().is_symmetric());
    }

    #[test]
    fn random_keys_differ_and_pass() {
        let a = RssKey::random(52).unwrap();
        let b = RssKey::random(52).unwrap();
        assert_ne!(a.as_bytes(), b.as_bytes());
        assert_eq!(a.len(), 52);
        assert_eq!(a.kind(), KeyKind::Random);
    }
}
