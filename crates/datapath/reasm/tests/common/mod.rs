//! Helpers shared by the integration tests: fragment builders on top of
//! `flowsteer_wire::build`, a seeded RNG and the end-of-test invariants.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use flowsteer_reasm::{ReasmConfig, Reassembler, Verdict};
use flowsteer_wire::build::{self, FrameBuilder, Ipv6Ext};
use flowsteer_wire::{parse_frame, L3Info, LinkType, ParseOptions};

pub const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const DST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// Non-periodic test payload `p[k] = (k*31+7) & 0xff` (the byte-exact
/// sweep).
pub fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|k| (k.wrapping_mul(31).wrapping_add(7) & 0xff) as u8).collect()
}

pub fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

pub fn v6(last: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last)
}

pub fn l3(frame: &[u8]) -> L3Info {
    parse_frame(frame, LinkType::Ethernet, &ParseOptions::default()).unwrap().outer.unwrap()
}

pub fn reasm() -> Reassembler {
    Reassembler::with_seed(ReasmConfig::default(), (0x0123_4567, 0x89ab_cdef)).unwrap()
}

pub fn reasm_with(cfg: ReasmConfig) -> Reassembler {
    Reassembler::with_seed(cfg, (7, 11)).unwrap()
}

/// Pushes one Ethernet frame; returns the verdict and, on completion, the datagram.
pub fn push(r: &mut Reassembler, frame: &[u8], now: u64) -> (Verdict, Option<Vec<u8>>) {
    let mut out = Vec::new();
    let v = r.push(frame, &l3(frame), now, &mut out);
    assert!(r.stats().conservation_ok(), "conservation after push: {:?}", r.stats());
    assert!(r.mem_used() <= r.config().high_thresh);
    match v {
        Verdict::Complete { .. } => {
            // Ready to use: re-parseable as a raw IP packet, no longer a fragment.
            let p = parse_frame(&out, LinkType::RawIp, &ParseOptions::default()).unwrap().outer.unwrap();
            assert!(p.frag.is_none() && !p.atomic_frag && !p.truncated);
            assert_eq!(p.ip_total_len, out.len());
            (v, Some(out))
        }
        _ => {
            assert!(out.is_empty());
            (v, None)
        }
    }
}

/// End of every test: flush, then table empty, memory 0, counters add up.
pub fn finish(r: &mut Reassembler) {
    r.flush();
    assert_eq!(r.pending(), 0);
    assert_eq!(r.mem_used(), 0);
    assert_eq!(r.stats().pending, 0);
    assert!(r.stats().conservation_ok(), "{:?}", r.stats());
}

/// An IPv4 fragment frame: the header of `whole` (an unfragmented IPv4
/// packet) with this offset / MF / data, and the given ECN.
pub fn v4_frag_data(whole: &[u8], offset: usize, more: bool, data: &[u8], ecn: u8) -> Vec<u8> {
    let ihl = usize::from(whole[0] & 0x0f) * 4;
    let mut f = Vec::new();
    build::write_ethernet(&mut f, DST_MAC, SRC_MAC, &[], 0x0800);
    let s = f.len();
    f.extend_from_slice(&whole[..ihl]);
    let tl = (ihl + data.len()) as u16;
    f[s + 2..s + 4].copy_from_slice(&tl.to_be_bytes());
    let fo = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
    f[s + 6..s + 8].copy_from_slice(&fo.to_be_bytes());
    f[s + 1] = (f[s + 1] & !3) | (ecn & 3);
    let ck = build::ipv4_header_checksum(&f[s..s + ihl]);
    f[s + 10..s + 12].copy_from_slice(&ck.to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// Fragment `[offset, offset+len)` of the IPv4 packet `whole`.
pub fn v4_frag(whole: &[u8], offset: usize, len: usize, more: bool) -> Vec<u8> {
    let ihl = usize::from(whole[0] & 0x0f) * 4;
    let body = &whole[ihl..];
    v4_frag_data(whole, offset, more, &body[offset..(offset + len).min(body.len())], whole[1] & 3)
}

/// An unfragmented UDP/IPv4 packet with identification `id`.
pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, id: u16, n: usize) -> Vec<u8> {
    let p = payload(n);
    FrameBuilder { ident: id, ..FrameBuilder::udp(src.into(), dst.into(), 1000, 2000, &p) }.ip_packet()
}

/// An IPv6 fragment frame of the unfragmented IPv6 packet `whole`, whose
/// unfragmentable part is `whole[..unfrag]` with the Next Header field that
/// will point at the Fragment header at `nh_field`.
pub fn v6_frag_data(
    whole: &[u8],
    unfrag: usize,
    nh_field: usize,
    id: u32,
    offset: usize,
    more: bool,
    data: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    build::write_ethernet(&mut f, DST_MAC, SRC_MAC, &[], 0x86dd);
    let s = f.len();
    f.extend_from_slice(&whole[..unfrag]);
    let frag_nh = whole[nh_field];
    f[s + nh_field] = 44;
    let plen = (unfrag - 40 + 8 + data.len()) as u16;
    f[s + 4..s + 6].copy_from_slice(&plen.to_be_bytes());
    f.push(frag_nh);
    f.push(0);
    f.extend_from_slice(&((offset as u16 & 0xfff8) | u16::from(more)).to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// Fragment `[offset, offset+len)` of the fragmentable part of `whole`.
pub fn v6_frag(
    whole: &[u8],
    unfrag: usize,
    nh_field: usize,
    id: u32,
    offset: usize,
    len: usize,
    more: bool,
) -> Vec<u8> {
    let body = &whole[unfrag..];
    v6_frag_data(whole, unfrag, nh_field, id, offset, more, &body[offset..(offset + len).min(body.len())])
}

/// An unfragmented UDP/IPv6 packet with the given extension headers.
pub fn udp6(src: Ipv6Addr, dst: Ipv6Addr, ext: &[Ipv6Ext], n: usize) -> Vec<u8> {
    let p = payload(n);
    FrameBuilder { ipv6_ext: ext, ..FrameBuilder::udp(IpAddr::V6(src), IpAddr::V6(dst), 1000, 2000, &p) }.ip_packet()
}

/// Splits `total` bytes into `(offset, len, more)` pieces of `size` bytes.
pub fn pieces(total: usize, size: usize) -> Vec<(usize, usize, bool)> {
    (0..total.div_ceil(size))
        .map(|i| {
            let off = i * size;
            let len = size.min(total - off);
            (off, len, off + len < total)
        })
        .collect()
}

/// SplitMix64.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// A seed from `REASM_SEED` or fresh, printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("REASM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(test.as_bytes());
        h.finish()
    });
    println!("{test}: REASM_SEED={s}");
    s
}

/// The push orders of the byte-exact sweep over `n` fragments.
pub fn orders(n: usize, rng: &mut Rng) -> Vec<(&'static str, Vec<usize>)> {
    let in_order: Vec<usize> = (0..n).collect();
    let reverse: Vec<usize> = (0..n).rev().collect();
    let odd_even: Vec<usize> = (0..n).filter(|i| i % 2 == 1).chain((0..n).filter(|i| i % 2 == 0)).collect();
    let (a, b) = (n / 3, 2 * n / 3);
    let block: Vec<usize> = (b..n).chain(a..b).chain(0..a).collect();
    let runs: Vec<usize> = (6.min(n)..n).chain(3.min(n)..6.min(n)).chain(0..3.min(n)).collect();
    let mut shuffled = in_order.clone();
    rng.shuffle(&mut shuffled);
    vec![
        ("in-order", in_order),
        ("reverse", reverse),
        ("odd-then-even", odd_even),
        ("block", block),
        ("runs", runs),
        ("shuffle", shuffled),
    ]
}
