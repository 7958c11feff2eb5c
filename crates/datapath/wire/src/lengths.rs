//! The length checks a host makes before it accepts a packet.
//!
//! [`crate::parse_frame`] is lenient on purpose: a NIC hashes whatever
//! headers it finds, and a capture cut by its snap length still parses (with
//! [`L3Info::truncated`] set). A receiver that hands a packet to an
//! application must not be: Linux drops an IPv4 packet whose total length
//! exceeds what arrived or whose options are malformed (`ip_rcv_core`,
//! `ip_options_compile`) and a UDP datagram whose length field is below 8 or
//! beyond the IP payload (`udp_rcv`: "short packet"). [`check_lengths`] is
//! that check; it reads only the bytes the parse already located. (A TCP
//! data offset past the segment is already a parse error.)
//!
//! Every host also drops an IPv4 packet whose header checksum is wrong
//! (RFC 1122 3.2.1.2; Linux `ip_rcv_core` computes it in software whatever
//! the NIC offloads): [`check_ipv4_checksum`] is that check, kept apart so a
//! receiver that trusts a NIC's verdict can skip it.

use crate::proto;
use crate::types::L3Info;

/// Why [`check_lengths`] refuses a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// The IP total length (IPv6: 40 + payload length) exceeds the bytes of
    /// the frame.
    IpBeyondFrame,
    /// An IPv4 option with a length below 2 or running past the header.
    Ipv4Option,
    /// A UDP length field below 8 or beyond the IP payload.
    UdpLength,
    /// An IPv4 header whose checksum does not verify.
    Ipv4Checksum,
}

impl Malformed {
    /// Number of reasons: one counter slot each ([`Malformed::index`]).
    pub const COUNT: usize = 4;

    /// Every reason, in [`Malformed::index`] order.
    pub const ALL: [Malformed; Malformed::COUNT] =
        [Malformed::IpBeyondFrame, Malformed::Ipv4Option, Malformed::UdpLength, Malformed::Ipv4Checksum];

    /// This reason's counter slot, in `0..Malformed::COUNT`.
    pub const fn index(self) -> usize {
        match self {
            Malformed::IpBeyondFrame => 0,
            Malformed::Ipv4Option => 1,
            Malformed::UdpLength => 2,
            Malformed::Ipv4Checksum => 3,
        }
    }

    /// The stable counter name (`ip_len_beyond_frame`, ...).
    pub const fn reason(self) -> &'static str {
        match self {
            Malformed::IpBeyondFrame => "ip_len_beyond_frame",
            Malformed::Ipv4Option => "ipv4_bad_option",
            Malformed::UdpLength => "udp_bad_length",
            Malformed::Ipv4Checksum => "ipv4_bad_checksum",
        }
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

/// Checks the lengths of the IP packet `l3` (a parse result of `frame`)
/// against the frame, see the module docs. For a fragment only the IP layer
/// is checked: its UDP length belongs to the whole datagram, which is
/// checked again once reassembled.
#[inline]
pub fn check_lengths(frame: &[u8], l3: &L3Info) -> Result<(), Malformed> {
    check_lengths_in(frame, frame.len(), l3)
}

/// [`check_lengths`] for a packet of `len` bytes of which `head` holds at
/// least the headers (a reassembled datagram handed on by its first bytes).
#[inline]
pub fn check_lengths_in(head: &[u8], len: usize, l3: &L3Info) -> Result<(), Malformed> {
    // Offsets and lengths here are below 2^17 (a frame, an IP length), so
    // wrapping additions cannot wrap; they are cheaper than saturating ones
    // on a path every packet takes.
    let ip_end = l3.l3_offset.wrapping_add(l3.ip_total_len);
    if ip_end > len {
        return Err(Malformed::IpBeyondFrame);
    }
    if l3.ip_header_len > 20 && l3.tuple.src.is_ipv4() {
        check_ipv4_options(head, l3)?;
    }
    if l3.tuple.proto != proto::UDP || l3.frag.is_some() {
        return Ok(());
    }
    let Some(l4) = l3.l4_offset else { return Ok(()) };
    let udp_len = match head.get(l4.wrapping_add(4)..l4.wrapping_add(6)) {
        Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
        _ => return Err(Malformed::UdpLength),
    };
    if udp_len < 8 || udp_len > ip_end.wrapping_sub(l4) {
        return Err(Malformed::UdpLength);
    }
    Ok(())
}

/// Verifies the IPv4 header checksum of `l3` (a parse result of a frame
/// whose first bytes are `head`): the one's complement sum over the header
/// (options included) must fold to zero. Always `Ok` for IPv6, which has no
/// header checksum. A header cut short by `head` is
/// [`Malformed::IpBeyondFrame`].
#[inline]
pub fn check_ipv4_checksum(head: &[u8], l3: &L3Info) -> Result<(), Malformed> {
    if !l3.tuple.src.is_ipv4() {
        return Ok(());
    }
    let header = head.get(l3.l3_offset..l3.l3_offset.wrapping_add(l3.ip_header_len));
    match header {
        Some(h) if crate::checksum::internet_checksum(h) == 0 => Ok(()),
        Some(_) => Err(Malformed::Ipv4Checksum),
        None => Err(Malformed::IpBeyondFrame),
    }
}

/// The options of the IPv4 header of `l3`, checked by
/// [`check_option_list`] (out of line: few packets carry options).
#[cold]
#[inline(never)]
fn check_ipv4_options(head: &[u8], l3: &L3Info) -> Result<(), Malformed> {
    let options = head.get(l3.l3_offset.saturating_add(20)..l3.l3_offset.saturating_add(l3.ip_header_len));
    check_option_list(options.ok_or(Malformed::IpBeyondFrame)?)
}

/// RFC 791 option list: End of Option List (0) ends it, No Operation (1) is
/// one byte, every other option carries a length of at least 2 that stays
/// inside the header.
fn check_option_list(mut opts: &[u8]) -> Result<(), Malformed> {
    loop {
        match opts {
            [] | [0, ..] => return Ok(()),
            [1, rest @ ..] => opts = rest,
            [_, len, ..] if usize::from(*len) >= 2 && usize::from(*len) <= opts.len() => {
                opts = opts.get(usize::from(*len)..).unwrap_or(&[]);
            }
            _ => return Err(Malformed::Ipv4Option),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::udp_frame;
    use crate::{parse_frame, LinkType, ParseOptions};

    fn check(frame: &[u8]) -> Result<(), Malformed> {
        let p = parse_frame(frame, LinkType::Ethernet, &ParseOptions::default()).unwrap();
        check_lengths(frame, &p.outer.unwrap())
    }

    fn v4() -> Vec<u8> {
        udp_frame("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 4000, 9000, b"hello")
    }

    fn v6() -> Vec<u8> {
        udp_frame("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap(), 4000, 9000, b"hello")
    }

    /// IPv4 with `opts` inserted after the fixed header (lengths fixed up).
    fn with_options(opts: &[u8]) -> Vec<u8> {
        let mut f = v4();
        let tail = f.split_off(34);
        f.extend_from_slice(opts);
        f.extend_from_slice(&tail);
        f[14] = 0x40 | (5 + opts.len() / 4) as u8;
        let total = u16::from_be_bytes([f[16], f[17]]) + opts.len() as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f
    }

    #[test]
    fn well_formed_packets_pass() {
        assert_eq!(check(&v4()), Ok(()));
        assert_eq!(check(&v6()), Ok(()));
        // Ethernet padding after the datagram is fine.
        let mut padded = v4();
        padded.resize(80, 0);
        assert_eq!(check(&padded), Ok(()));
        // A UDP length shorter than the IP payload: the kernel trims, so do we.
        let mut short = v4();
        short[38..40].copy_from_slice(&12u16.to_be_bytes());
        assert_eq!(check(&short), Ok(()));
        assert_eq!(check(&with_options(&[1, 1, 1, 0])), Ok(()));
        assert_eq!(check(&with_options(&[7, 4, 0, 0])), Ok(()));
        assert_eq!(check(&with_options(&[1, 7, 3, 4])), Ok(()));
    }

    #[test]
    fn ip_length_past_the_frame() {
        for mut f in [v4(), v6()] {
            let at = if f[12] == 0x08 { 16 } else { 18 };
            let len = u16::from_be_bytes([f[at], f[at + 1]]) + 1;
            f[at..at + 2].copy_from_slice(&len.to_be_bytes());
            assert_eq!(check(&f), Err(Malformed::IpBeyondFrame));
        }
    }

    #[test]
    fn udp_length_zero_short_or_past_the_datagram() {
        for f in [v4(), v6()] {
            let l4 = if f[12] == 0x08 { 34 } else { 54 };
            for bad in [0u16, 7, 14, 0xffff] {
                let mut g = f.clone();
                g[l4 + 4..l4 + 6].copy_from_slice(&bad.to_be_bytes());
                assert_eq!(check(&g), Err(Malformed::UdpLength), "length {bad}");
            }
        }
    }

    #[test]
    fn bad_ipv4_options() {
        for opts in [&[7u8, 0, 0, 0][..], &[7, 1, 0, 0], &[1, 1, 1, 7], &[7, 5, 0, 0], &[1, 1, 0x44, 9]] {
            assert_eq!(check(&with_options(opts)), Err(Malformed::Ipv4Option), "{opts:?}");
        }
    }

    #[test]
    fn tcp_data_offset_past_the_segment_is_a_parse_error() {
        let mut f = crate::build::tcp_frame(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            4000,
            80,
            1,
            crate::tcp::ACK,
            b"0123456789abcdefghijklmnopqrstuvwxyz0123456789",
        );
        f[34 + 12] = 15 << 4; // 60 bytes of header in a 66-byte segment: fine
        assert_eq!(check(&f), Ok(()));
        // Shrink the IP total length so the 60-byte header no longer fits.
        f[16..18].copy_from_slice(&(20u16 + 40).to_be_bytes());
        assert!(parse_frame(&f, LinkType::Ethernet, &ParseOptions::default()).is_err());
    }

    #[test]
    fn fragments_are_checked_at_the_ip_layer_only() {
        let mut f = v4();
        f[20] = 0x20; // MF: a first fragment; its UDP length is the datagram's
        f[38..40].copy_from_slice(&1000u16.to_be_bytes());
        assert_eq!(check(&f), Ok(()));
    }

    #[test]
    fn ipv4_header_checksum() {
        let ok = |f: &[u8]| {
            let p = parse_frame(f, LinkType::Ethernet, &ParseOptions::default()).unwrap();
            check_ipv4_checksum(f, &p.outer.unwrap())
        };
        assert_eq!(ok(&v4()), Ok(()));
        assert_eq!(ok(&v6()), Ok(()));
        let mut bad = v4();
        bad[24] ^= 0x01;
        assert_eq!(ok(&bad), Err(Malformed::Ipv4Checksum));
        // Options are covered: change one, the sum no longer verifies.
        let mut opt = with_options(&[1, 1, 1, 0]);
        opt[24..26].copy_from_slice(&[0, 0]);
        let c = crate::checksum::internet_checksum(&opt[14..38]);
        opt[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(ok(&opt), Ok(()));
        opt[35] = 0;
        assert_eq!(ok(&opt), Err(Malformed::Ipv4Checksum));
        // A zero checksum field is not "no checksum" in IPv4.
        let mut zero = v4();
        zero[24..26].copy_from_slice(&[0, 0]);
        assert_eq!(ok(&zero), Err(Malformed::Ipv4Checksum));
    }

    #[test]
    fn indexes_are_dense_and_names_unique() {
        for (i, m) in Malformed::ALL.iter().enumerate() {
            assert_eq!(m.index(), i);
        }
        let mut names: Vec<_> = Malformed::ALL.iter().map(|m| m.reason()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Malformed::COUNT);
    }
}
