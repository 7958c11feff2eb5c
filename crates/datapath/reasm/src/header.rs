//! Header work: the offset-0 header's rewrite for the reassembled datagram
//! (IPv4 with the incremental checksum update, IPv6 payload length and Next
//! Header), the walk to the Next Header field that names the Fragment
//! header, the ECN combination and the smallest upper-layer header an
//! offset-0 fragment must carry.

use flowsteer_wire::proto;

use crate::key::Family;

/// Linux `IPFRAG_ECN_*` bits: Not-ECT 0x01, ECT(1) 0x02, ECT(0) 0x04, CE 0x08,
/// i.e. `1 << codepoint` ([`ecn_bit`]).
const ECN_NOT_ECT: u8 = 0x01;
const ECN_CE: u8 = 0x08;

/// The `IPFRAG_ECN_*` bit of an ECN code point.
#[inline(always)]
pub(crate) fn ecn_bit(ecn: u8) -> u8 {
    1 << (ecn & 3)
}

/// Linux `ip_frag_ecn_table`: None = invalid mix (drop), Some(true) = set CE
/// on the reassembled datagram, Some(false) = keep the offset-0 header's ECN.
pub(crate) fn ecn_combine(seen: u8) -> Option<bool> {
    if seen & ECN_NOT_ECT != 0 && seen & !ECN_NOT_ECT != 0 {
        None
    } else {
        Some(seen & ECN_CE != 0)
    }
}

/// Smallest upper-layer header an offset-0 fragment must carry whole
/// (RFC 1858 for TCP, RFC 7112 for IPv6; Linux `ipv6frag_thdr_truncated`).
pub(crate) fn min_l4_len(protocol: u8) -> usize {
    match protocol {
        proto::TCP => 20,
        proto::UDP | proto::ICMP | proto::ICMPV6 => 8,
        proto::SCTP => 12,
        _ => 0,
    }
}

/// IPv6 extension header types that may precede the Fragment header.
const NH_FRAGMENT: u8 = 44;
const NH_AUTH: u8 = 51;

/// Walks the unfragmentable part `ip[40..frag_at]` of an IPv6 packet and
/// returns the position of the Next Header field that names the Fragment
/// header. None when the chain does not end exactly at `frag_at` with a
/// Fragment header.
pub(crate) fn v6_next_header_field(ip: &[u8], frag_at: usize) -> Option<usize> {
    let mut field = 6usize;
    let mut next = *ip.get(6)?;
    let mut pos = 40usize;
    // Bounded: every step advances at least 8 bytes and pos < frag_at <= 65535.
    while pos < frag_at {
        let hlen = usize::from(*ip.get(pos.checked_add(1)?)?);
        let len =
            if next == NH_AUTH { hlen.checked_add(2)?.checked_mul(4)? } else { hlen.checked_add(1)?.checked_mul(8)? };
        field = pos;
        next = *ip.get(pos)?;
        pos = pos.checked_add(len)?;
    }
    (pos == frag_at && next == NH_FRAGMENT).then_some(field)
}

/// Rewrites the first 12 bytes of an offset-0 IPv4 header for the
/// reassembled datagram of `ip_len` bytes: total length, MF and offset
/// cleared (DF kept), CE if combined. The header checksum is updated for
/// the three 16-bit words that change (RFC 1624, eqn. 3: HC' = ~(~HC + ~m +
/// m')), as a router updates it, not recomputed: for a header whose
/// checksum was right (every header a sender built) the result is the same
/// 16 bits a full computation gives (both are the folded one's complement
/// sum, nonzero, of the same words), and a header that arrived corrupted
/// (this crate does not verify IPv4 header checksums) stays detectably
/// corrupted instead of being given a checksum that vouches for it. It
/// reads only the header's own bytes, never one just rewritten, so the
/// stores and loads do not wait on each other.
#[inline(always)]
pub(crate) fn fix_ipv4_words(h: &mut [u8; 12], ip_len: usize, set_ce: bool) {
    // Words in memory order: the one's complement sum does not depend on
    // the byte order, as long as every word is read and written alike.
    let [t0, t1, l0, l1, _, _, f0, f1, _, _, c0, c1] = *h;
    let word = |a: u8, b: u8| u16::from_ne_bytes([a, b]);
    let (tos, flags, check) = (word(t0, t1), word(f0, f1), word(c0, c1));
    let new_tos = tos | word(0, if set_ce { 3 } else { 0 });
    // The word whose memory bytes are the length in network order.
    let new_len = u16::try_from(ip_len).unwrap_or(u16::MAX).to_be();
    // Keep DF, clear MF and the offset.
    let new_flags = flags & word(0x40, 0);
    // At most 7 x 0xffff: two folds bring it to 16 bits.
    let sum = [!check, !tos, new_tos, !word(l0, l1), new_len, !flags, new_flags]
        .into_iter()
        .fold(0u32, |acc, w| acc.wrapping_add(u32::from(w)));
    let sum = (sum & 0xffff).wrapping_add(sum >> 16);
    let sum = (sum & 0xffff).wrapping_add(sum >> 16);
    [h[0], h[1]] = new_tos.to_ne_bytes();
    [h[2], h[3]] = new_len.to_ne_bytes();
    [h[6], h[7]] = new_flags.to_ne_bytes();
    [h[10], h[11]] = (!(sum as u16)).to_ne_bytes();
}

/// Appends `src` to `dst`; the usual header lengths (20, 40) as fixed-size
/// copies, which compile to a few moves instead of a `memcpy` call.
#[inline]
pub(crate) fn copy_small(dst: &mut Vec<u8>, src: &[u8]) {
    if let Ok(a) = <&[u8; 20]>::try_from(src) {
        dst.extend_from_slice(a);
    } else if let Ok(a) = <&[u8; 40]>::try_from(src) {
        dst.extend_from_slice(a);
    } else {
        dst.extend_from_slice(src);
    }
}

/// Rewrites the offset-0 header `hdr` for the reassembled datagram of
/// `ip_len` bytes: IPv4 total length, MF and offset cleared (DF kept),
/// CE if combined, checksum updated ([`fix_ipv4_words`], which the
/// option-less fast path calls directly); IPv6 payload
/// length, the Next Header that named the Fragment header, CE if combined.
pub(crate) fn fix_header(family: Family, hdr: &mut [u8], ip_len: usize, set_ce: bool, v6_next: Option<(usize, u8)>) {
    match family {
        Family::V4 => {
            if let Some(h) = hdr.first_chunk_mut::<12>() {
                fix_ipv4_words(h, ip_len, set_ce);
            }
        }
        Family::V6 => {
            let plen = u16::try_from(ip_len.saturating_sub(40)).unwrap_or(u16::MAX).to_be_bytes();
            if let Some(b) = hdr.get_mut(4..6) {
                b.copy_from_slice(&plen);
            }
            if let Some((field, nh)) = v6_next {
                if let Some(b) = hdr.get_mut(field) {
                    *b = nh;
                }
            }
            if set_ce {
                if let Some(b) = hdr.get_mut(1) {
                    *b |= 0x30;
                }
            }
        }
    }
}
