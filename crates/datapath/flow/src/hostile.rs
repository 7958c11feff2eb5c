//! Key sets for the hostile-traffic test (the flow table against keys
//! crafted to collide in the RSS hash, `tests/hostile.rs`): IPv4 UDP
//! tuples whose Toeplitz hashes all agree in their low 16 bits, i.e. that a
//! table indexed by the RSS hash would put in one chain, and random tuples
//! to compare against. Pure and deterministic; used by the tests and by
//! `flowsteer_bench::flow`.
//!
//! How the colliding set is built: Toeplitz is linear over GF(2), so
//! flipping input bit `p` flips the hash by the 32-bit key window `W_p`.
//! Take the 24 host bits of a source address in `10.0.0.0/8` and the 16
//! source-port bits as free variables (40 of them) and the low 16 bits of
//! their windows as the columns of a 16 x 40 matrix. Its null space has at
//! least 24 dimensions; XOR-ing any combination of null-space vectors into
//! a base tuple leaves the low 16 hash bits unchanged, and distinct
//! combinations give distinct tuples (so up to 2^24 of them).

use crate::table::{FlowStats, FlowTable, FlowTableConfig};
use crate::FlowKey;
use flowsteer_prim::SplitMix64;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

/// The Microsoft RSS verification key (the "Verifying the RSS Hash
/// Calculation" page of the Windows driver docs; also DPDK's and many NICs'
/// default): `6d5a56da...6a42b73bbeac01fa`.
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Destination of every generated tuple: a DNS server, 192.0.2.1:53.
const DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DPORT: u16 = 53;
const UDP: u8 = 17;

fn key_bit(key: &[u8], pos: usize) -> u32 {
    key.get(pos / 8).map_or(0, |b| u32::from(b >> (7 - pos % 8) & 1))
}

/// The 32 key bits starting at bit `pos` (MSB first): what input bit `pos`
/// contributes to the hash.
fn window(key: &[u8], pos: usize) -> u32 {
    (0..32).fold(0, |w, i| (w << 1) | key_bit(key, pos + i))
}

/// The bit-by-bit Toeplitz hash (key bits beyond the key read as 0).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let mut h = 0;
    for (i, byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                h ^= window(key, i * 8 + bit);
            }
        }
    }
    h
}

/// The RSS hash input of an IPv4 4-tuple: src ‖ dst ‖ sport ‖ dport, network order.
pub fn v4_input(k: &FlowKey) -> Option<[u8; 12]> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (k.src, k.dst) else { return None };
    let mut b = [0u8; 12];
    b[0..4].copy_from_slice(&s.octets());
    b[4..8].copy_from_slice(&d.octets());
    b[8..10].copy_from_slice(&k.sport.to_be_bytes());
    b[10..12].copy_from_slice(&k.dport.to_be_bytes());
    Some(b)
}

fn tuple(src: u32, sport: u16) -> FlowKey {
    FlowKey { src: IpAddr::V4(Ipv4Addr::from(src)), dst: IpAddr::V4(DST), proto: UDP, sport, dport: DPORT }
}

/// `n` distinct random UDP tuples `10.x.y.z:sport -> 192.0.2.1:53`.
pub fn random_v4_udp(n: usize, seed: u64) -> Vec<FlowKey> {
    let mut rng = SplitMix64(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next_u64();
        let src = 0x0a00_0000 | (r as u32 & 0x00ff_ffff);
        let sport = (r >> 32) as u16;
        if seen.insert((src, sport)) {
            out.push(tuple(src, sport));
        }
    }
    out
}

/// Up to `n` distinct UDP tuples `10.x.y.z:sport -> 192.0.2.1:53` whose
/// Toeplitz hashes under `key` all have the same low 16 bits (fewer than
/// `n` only if the key leaves fewer than `n` solutions: at least 2^24 for
/// any key). `seed` picks the base tuple.
pub fn colliding_v4_udp(n: usize, key: &[u8], seed: u64) -> Vec<FlowKey> {
    // Free variable v: v < 24 is source-address bit v (input position
    // 31 - v), v >= 24 is source-port bit v - 24 (input position 64 + 15 - (v - 24)).
    let pos = |v: usize| if v < 24 { 31 - v } else { 64 + 15 - (v - 24) };
    // Gaussian elimination over GF(2) on the 16-bit columns, tracking which
    // variables each reduced column combines; a column that reduces to 0
    // gives a null-space vector.
    let mut pivots: [Option<(u16, u64)>; 16] = [None; 16];
    let mut null = Vec::new();
    for v in 0..40 {
        let (mut val, mut combo) = (window(key, pos(v)) as u16, 1u64 << v);
        for bit in (0..16).rev() {
            if val >> bit & 1 == 0 {
                continue;
            }
            match pivots[bit] {
                Some((pv, pc)) => {
                    val ^= pv;
                    combo ^= pc;
                }
                None => {
                    pivots[bit] = Some((val, combo));
                    break;
                }
            }
        }
        if val == 0 {
            null.push(combo);
        }
    }
    let n = n.min(1usize.checked_shl(null.len() as u32).unwrap_or(usize::MAX));
    let r = SplitMix64(seed).next_u64();
    let (src0, sport0) = (0x0a00_0000 | (r as u32 & 0x00ff_ffff), (r >> 32) as u16);
    // Gray-code walk: consecutive masks differ by one null-space vector.
    let mut mask = 0u64;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 {
            mask ^= null[i.trailing_zeros() as usize];
        }
        out.push(tuple(src0 ^ (mask as u32 & 0x00ff_ffff), sport0 ^ (mask >> 24) as u16));
    }
    out
}

/// Insert every key into a fresh table sized for them (hash key `seed`),
/// then look each up; returns the table's counters (`hits == keys.len()`
/// when all were found; `max_probe` is the longest probe seen).
pub fn fill(keys: &[FlowKey], seed: (u64, u64)) -> FlowStats {
    let cfg = FlowTableConfig { capacity: keys.len().max(1), idle_timeout_ns: u64::MAX };
    let Ok(mut t) = FlowTable::<u32>::with_seed(cfg, seed) else { return FlowStats::default() };
    for (i, k) in keys.iter().enumerate() {
        let _ = t.lookup_or_insert(k, 0, || i as u32);
    }
    for k in keys {
        let _ = t.get(k);
    }
    t.stats()
}
