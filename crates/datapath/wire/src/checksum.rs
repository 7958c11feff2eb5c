//! The Internet checksum (RFC 1071) and the pseudo-header sums of UDP / TCP.

use std::net::IpAddr;

/// One's complement sum of `data` as big-endian 16-bit words (an odd last
/// byte is padded with zero), added to `initial`, not yet folded.
///
/// Partial sums of even-length pieces can be added together before
/// [`fold`]ing. Eight bytes are added at a time, as two 32-bit halves:
/// since 2^32 = 2^16 = 1 modulo 0xffff, that sum folds to the same value as
/// the sum of the 16-bit words (RFC 1071, section 2(C): any word size).
pub fn sum(data: &[u8], initial: u64) -> u64 {
    let mut acc = initial;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        if let Ok(b) = <[u8; 8]>::try_from(w) {
            let v = u64::from_be_bytes(b);
            acc = acc.wrapping_add(v >> 32).wrapping_add(v & 0xffff_ffff);
        }
    }
    let mut chunks = words.remainder().chunks_exact(2);
    for c in &mut chunks {
        if let &[a, b] = c {
            acc = acc.wrapping_add(u64::from(u16::from_be_bytes([a, b])));
        }
    }
    if let &[last] = chunks.remainder() {
        acc = acc.wrapping_add(u64::from(u16::from_be_bytes([last, 0])));
    }
    acc
}

/// Folds a 64-bit sum to 16 bits with end-around carry and complements it.
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff).wrapping_add(acc >> 16);
    }
    // acc <= 0xffff here, the cast keeps all bits.
    !(acc as u16)
}

/// The Internet checksum of `data`: the value to store in a zeroed checksum
/// field. Over data that already contains a correct checksum it is 0.
pub fn internet_checksum(data: &[u8]) -> u16 {
    fold(sum(data, 0))
}

/// The unfolded sum of the UDP/TCP pseudo header (RFC 768 / RFC 8200 8.1).
///
/// With mixed address families the IPv4 one is used as IPv4-mapped IPv6.
pub fn pseudo_header_sum(src: IpAddr, dst: IpAddr, proto: u8, upper_len: u32) -> u64 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let acc = sum(&s.octets(), 0);
            let acc = sum(&d.octets(), acc);
            // proto and length (upper_len fits 16 bits for IPv4, take it all anyway)
            let acc = acc.wrapping_add(u64::from(proto));
            acc.wrapping_add(u64::from(upper_len >> 16)).wrapping_add(u64::from(upper_len & 0xffff))
        }
        (s, d) => {
            let s = to_v6(s);
            let d = to_v6(d);
            let acc = sum(&s.octets(), 0);
            let acc = sum(&d.octets(), acc);
            acc.wrapping_add(u64::from(upper_len >> 16))
                .wrapping_add(u64::from(upper_len & 0xffff))
                .wrapping_add(u64::from(proto))
        }
    }
}

fn to_v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// UDP / TCP checksum of `segment` (header with its checksum field zeroed, or
/// containing a checksum, which then yields 0, plus payload).
///
/// For UDP a computed 0 must be transmitted as 0xffff; see
/// [`udp_checksum`].
pub fn transport_checksum(src: IpAddr, dst: IpAddr, proto: u8, segment: &[u8]) -> u16 {
    let len = u32::try_from(segment.len()).unwrap_or(u32::MAX);
    fold(sum(segment, pseudo_header_sum(src, dst, proto, len)))
}

/// The UDP checksum to store for `datagram` (whose checksum field is zero):
/// like [`transport_checksum`] but 0 is sent as 0xffff (RFC 768).
pub fn udp_checksum(src: IpAddr, dst: IpAddr, datagram: &[u8]) -> u16 {
    match transport_checksum(src, dst, crate::proto::UDP, datagram) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: sum 0xddf2, checksum !0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), !0xddf2);
    }

    #[test]
    fn odd_length_and_empty() {
        assert_eq!(internet_checksum(&[]), 0xffff);
        assert_eq!(internet_checksum(&[0x12]), !0x1200);
        assert_eq!(internet_checksum(&[0x12, 0x34, 0x56]), !(0x1234u16 + 0x5600));
    }

    #[test]
    fn known_ipv4_header() {
        // Wikipedia's IPv4 header checksum example.
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&hdr), 0xb861);
        hdr[10] = 0xb8;
        hdr[11] = 0x61;
        assert_eq!(internet_checksum(&hdr), 0);
    }

    proptest::proptest! {
        /// Eight bytes at a time folds as 16 bits at a time does, for any
        /// data and starting sum.
        #[test]
        fn wide_sum_folds_as_16_bit_words(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300), init in 0u64..1 << 40) {
            let mut narrow = init;
            for c in data.chunks(2) {
                narrow += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
            proptest::prop_assert_eq!(fold(sum(&data, init)), fold(narrow));
        }
    }

    #[test]
    fn carries_fold() {
        let data = [0xff; 64];
        assert_eq!(internet_checksum(&data), 0);
        assert_eq!(fold(u64::MAX), 0);
    }
}
