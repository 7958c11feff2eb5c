//! The generator's datagram: a 32-byte header (magic, flow id, per-flow
//! sequence number, send timestamp, total length, header check) followed by
//! padding that is a pure function of (flow, sequence, offset). The client
//! can therefore check every echoed byte without keeping a copy of what it
//! sent.
//!
//! Layout (all fields big-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `FSU1` |
//! | 4  | 4 | flow id |
//! | 8  | 8 | sequence number (per flow, from 0) |
//! | 16 | 8 | send time, ns since the generator started |
//! | 24 | 4 | total datagram length |
//! | 28 | 4 | FNV-1a of bytes 0..28 |

/// `FSU1`.
pub const MAGIC: u32 = 0x4653_5531;
/// Bytes of header; the smallest datagram the generator sends.
pub const HEADER_LEN: usize = 32;
/// The largest datagram: the IPv4 UDP payload limit (65535 - 20 - 8).
pub const MAX_DATAGRAM: usize = 65_507;

/// The decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub flow: u32,
    pub seq: u64,
    pub ts_ns: u64,
    pub len: u32,
}

/// Why a datagram is not one we sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    Short,
    Magic,
    Check,
    Length,
    Padding,
}

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The padding byte at `offset` of datagram (flow, seq).
#[inline]
fn pad_byte(flow: u32, seq: u64, offset: usize) -> u8 {
    let x = (seq as u32).wrapping_mul(0x9e37_79b9) ^ flow.wrapping_mul(0x85eb_ca6b) ^ (offset as u32);
    (x ^ (x >> 8) ^ (x >> 16)) as u8
}

/// Write header and padding into `buf` (its whole length is the datagram).
/// `buf` must be at least [`HEADER_LEN`] long; shorter buffers are left
/// untouched and `false` is returned.
pub fn encode(buf: &mut [u8], h: &Header) -> bool {
    if buf.len() < HEADER_LEN {
        return false;
    }
    buf[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    buf[4..8].copy_from_slice(&h.flow.to_be_bytes());
    buf[8..16].copy_from_slice(&h.seq.to_be_bytes());
    buf[16..24].copy_from_slice(&h.ts_ns.to_be_bytes());
    let len = buf.len() as u32;
    buf[24..28].copy_from_slice(&len.to_be_bytes());
    let check = fnv1a(&buf[0..28]);
    buf[28..32].copy_from_slice(&check.to_be_bytes());
    for (i, b) in buf.iter_mut().enumerate().skip(HEADER_LEN) {
        *b = pad_byte(h.flow, h.seq, i);
    }
    true
}

/// Decode only the header (magic and check verified).
pub fn decode_header(buf: &[u8]) -> Result<Header, Mismatch> {
    if buf.len() < HEADER_LEN {
        return Err(Mismatch::Short);
    }
    let u32_at = |o: usize| u32::from_be_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[o..o + 8]);
        u64::from_be_bytes(b)
    };
    if u32_at(0) != MAGIC {
        return Err(Mismatch::Magic);
    }
    if u32_at(28) != fnv1a(&buf[0..28]) {
        return Err(Mismatch::Check);
    }
    Ok(Header { flow: u32_at(4), seq: u64_at(8), ts_ns: u64_at(16), len: u32_at(24) })
}

/// Decode and verify every byte: the header, the length field against the
/// actual length and the expected size, and the padding.
pub fn verify(buf: &[u8], expected_len: usize) -> Result<Header, Mismatch> {
    let h = decode_header(buf)?;
    if h.len as usize != buf.len() || buf.len() != expected_len {
        return Err(Mismatch::Length);
    }
    if buf.iter().enumerate().skip(HEADER_LEN).any(|(i, &b)| b != pad_byte(h.flow, h.seq, i)) {
        return Err(Mismatch::Padding);
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_every_byte_is_checked() {
        for size in [HEADER_LEN, 33, 64, 1472, 9000] {
            let mut buf = vec![0u8; size];
            let h = Header { flow: 7, seq: 123_456_789_012, ts_ns: 987_654_321, len: size as u32 };
            assert!(encode(&mut buf, &h));
            assert_eq!(verify(&buf, size), Ok(h));
            // Flip each byte in turn: every one is noticed.
            for i in 0..size {
                let mut bad = buf.clone();
                bad[i] ^= 0x40;
                assert!(verify(&bad, size).is_err(), "size {size}: byte {i} flipped went unnoticed");
            }
        }
    }

    #[test]
    fn wrong_lengths_and_garbage_are_rejected() {
        let mut buf = vec![0u8; 100];
        encode(&mut buf, &Header { flow: 1, seq: 2, ts_ns: 3, len: 100 });
        assert_eq!(verify(&buf[..99], 99), Err(Mismatch::Length));
        assert_eq!(verify(&buf, 64), Err(Mismatch::Length));
        assert_eq!(verify(&buf[..10], 10), Err(Mismatch::Short));
        assert_eq!(verify(&[0u8; 64], 64), Err(Mismatch::Magic));
        let mut short = [0u8; 8];
        assert!(!encode(&mut short, &Header { flow: 0, seq: 0, ts_ns: 0, len: 8 }));
        assert_eq!(short, [0u8; 8]);
    }

    #[test]
    fn padding_differs_between_flows_and_sequences() {
        let mut a = vec![0u8; 256];
        let mut b = vec![0u8; 256];
        encode(&mut a, &Header { flow: 1, seq: 5, ts_ns: 0, len: 256 });
        encode(&mut b, &Header { flow: 2, seq: 5, ts_ns: 0, len: 256 });
        assert_ne!(a[HEADER_LEN..], b[HEADER_LEN..]);
        encode(&mut b, &Header { flow: 1, seq: 6, ts_ns: 0, len: 256 });
        assert_ne!(a[HEADER_LEN..], b[HEADER_LEN..]);
    }
}
