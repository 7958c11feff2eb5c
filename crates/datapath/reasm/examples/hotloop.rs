//! Profiling aid: IPv4/IPv6 4,416-byte UDP datagrams, 64 in flight, in
//! order, through the zero-copy path (or the copying one with `copy`), for a
//! fixed number of datagrams, so instruction counts per fragment can be read
//! from `valgrind --tool=callgrind` or `perf`. Optionally another fragment
//! order within each datagram (`reversed`, `shuffled`: a fixed rotation per
//! datagram) and another number in flight.
//!
//! `cargo run --release -p flowsteer-reasm --example hotloop -- [4|6] [chain|ref|copy] [datagrams] [in-order|reversed|shuffled] [in_flight] [max_dist]`
//!
//! `chain` hands over owned frame buffers (a pool slot and a `Vec`, 32
//! bytes, put back after delivery); `ref` hands over a borrowed frame handle
//! (16 bytes, as `flowsteer bench reasm` does); `copy` lends the frame.
//!
//! Instructions per fragment: run it under callgrind with two datagram
//! counts and divide the difference by the difference in fragments (the
//! set-up cancels out).
//!
//! `flood` (as the order): `datagrams` never-completing datagrams (a lone
//! middle fragment each, fresh random source and id) interleaved with the
//! in-order set at 10 per legitimate datagram (whole rounds of the set),
//! default 4 MiB configuration, as in `flowsteer bench reasm --set flood`;
//! the instruction count per fragment must not grow with `datagrams`.

use flowsteer_reasm::{Chain, ReasmConfig, Reassembler, Verdict};
use flowsteer_wire::build::{ipv4_fragments, ipv6_fragments};
use flowsteer_wire::{parse_frame, L3Info, LinkType, ParseOptions};
use std::net::{Ipv4Addr, Ipv6Addr};

struct Frame {
    slot: u32,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let family: u8 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4);
    let chain = args.get(2).is_none_or(|s| s != "copy");
    let total: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let order = args.get(4).map_or("in-order", String::as_str);
    let in_flight: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(64);
    let max_dist: u32 = args.get(6).and_then(|s| s.parse().ok()).unwrap_or(ReasmConfig::default().max_dist);
    let payload: Vec<u8> = (0..4416).map(|i| (i * 7) as u8).collect();
    let mut frames = Vec::new();
    let mut l3s: Vec<L3Info> = Vec::new();
    for b in 0..2 {
        let mut dgrams = Vec::new();
        for j in 0..in_flight {
            let i = (b * in_flight + j) as u32;
            dgrams.push(if family == 4 {
                let src = Ipv4Addr::from(0x0a00_0000 | (i >> 4));
                ipv4_fragments(src, Ipv4Addr::new(192, 0, 2, 1), 4000, 5000, (i & 0xf) as u16, &payload, 1480)
            } else {
                let src = Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i));
                ipv6_fragments(src, "2001:db8::1".parse().unwrap(), 4000, 5000, i, &payload, 1448)
            });
        }
        let n = dgrams[0].len();
        for (j, d) in dgrams.iter_mut().enumerate() {
            match order {
                "reversed" => d.reverse(),
                // A deterministic mix: odd datagrams reversed, then rotated.
                "shuffled" => {
                    if j % 2 == 1 {
                        d.reverse();
                    }
                    d.rotate_left(j % n);
                }
                _ => {}
            }
        }
        for k in 0..n {
            for d in &mut dgrams {
                let f = std::mem::take(&mut d[k]);
                l3s.push(parse_frame(&f, LinkType::Ethernet, &ParseOptions::new()).unwrap().outer.unwrap());
                frames.push(f);
            }
        }
    }
    let flood = order == "flood";
    let cfg = if flood {
        ReasmConfig::default()
    } else {
        ReasmConfig { high_thresh: 64 << 20, low_thresh: 48 << 20, max_dist, ..ReasmConfig::default() }
    };
    // Flood: a middle fragment (fragment 1 of the first datagram) as the
    // template; legitimate pushes in whole rounds of the set.
    let (flood_frame, flood_l3) = (frames[in_flight].clone(), l3s[in_flight]);
    let set_len = frames.len();
    let frags_per = set_len / (2 * in_flight);
    let legit_pushes = (total / 10 * frags_per).div_ceil(set_len).max(1) * set_len;
    let mut rng = 0x5eed_u64;
    // A fresh source and id, in the parse result and in the frame's header
    // (the reassembler reads an option-less IPv4 header's key from the
    // frame itself; the IPv4 checksum is left stale, nothing here reads it).
    let mut flood_key = move |l3: &mut L3Info, frame: &mut [u8]| {
        rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let r = (rng ^ (rng >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let r = r ^ (r >> 29);
        let ip = l3.l3_offset;
        if family == 4 {
            let (src, id) = (Ipv4Addr::from(r as u32), (r >> 32) as u16);
            l3.tuple.src = src.into();
            frame[ip + 12..ip + 16].copy_from_slice(&src.octets());
            frame[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
            if let Some(f) = l3.frag.as_mut() {
                f.id = u32::from(id);
            }
        } else {
            let (src, id) = (Ipv6Addr::from((0xfd00u128 << 112) | u128::from(r)), (r >> 32) as u32);
            l3.tuple.src = src.into();
            frame[ip + 8..ip + 24].copy_from_slice(&src.octets());
            // Fragment header right after the fixed header: id at +4.
            frame[ip + 44..ip + 48].copy_from_slice(&id.to_be_bytes());
            if let Some(f) = l3.frag.as_mut() {
                f.id = id;
            }
        }
    };
    let t = std::time::Instant::now();
    let (done, pushes, sum) = if args.get(2).is_some_and(|s| s == "ref") {
        in_flight_ref(&frames, &l3s, total, cfg)
    } else if chain {
        let pool: Vec<Frame> =
            frames.into_iter().enumerate().map(|(i, bytes)| Frame { slot: i as u32, bytes }).collect();
        let r: Reassembler<Frame> = Reassembler::new_owning(cfg).unwrap();
        if flood {
            let free: Vec<Frame> =
                (0..16384).map(|k| Frame { slot: (set_len + k) as u32, bytes: flood_frame.clone() }).collect();
            flood_chain(r, pool, free, &l3s, flood_l3, total, legit_pushes, &mut flood_key)
        } else {
            in_flight_chain(r, pool, &l3s, total)
        }
    } else {
        let r = Reassembler::new(cfg).unwrap();
        if flood {
            flood_copy(r, &frames, &l3s, &flood_frame, flood_l3, total, legit_pushes, &mut flood_key)
        } else {
            in_flight_copy(r, &frames, &l3s, total)
        }
    };
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{done} datagrams, {pushes} pushes in {secs:.3}s: {:.2} M dgrams/s, {:.1} ns/frag (check {sum})",
        done as f64 / secs / 1e6,
        secs * 1e9 / pushes as f64
    );
}

/// Each loop in a function of its own, so what the compiler inlines into it
/// does not depend on the other loops (as in the bench's driver).
#[inline(never)]
fn in_flight_chain(
    mut r: Reassembler<Frame>,
    mut pool: Vec<Frame>,
    l3s: &[L3Info],
    total: usize,
) -> (usize, usize, usize) {
    let (mut done, mut pushes, mut sum) = (0, 0, 0);
    let mut out = Chain::new();
    let mut spare = Vec::new();
    while done < total {
        for i in 0..pool.len() {
            let f = std::mem::replace(&mut pool[i], Frame { slot: u32::MAX, bytes: Vec::new() });
            pushes += 1;
            if let Verdict::Complete { .. } = r.push_owned(f, &l3s[i], 0, &mut out, &mut spare) {
                done += 1;
                sum += out.len() + usize::from(out.header()[0]);
                for f in out.drain_buffers() {
                    let s = f.slot as usize;
                    pool[s] = f;
                }
            }
            for f in spare.drain(..) {
                let s = f.slot as usize;
                pool[s] = f;
            }
        }
    }
    (done, pushes, sum)
}

/// A borrowed frame handle (16 bytes): the frame stays in the set, the
/// reassembler holds the handle, as it would an AF_XDP UMEM frame address.
struct FrameRef<'a>(&'a [u8]);

impl AsRef<[u8]> for FrameRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self.0
    }
}

#[inline(never)]
fn in_flight_ref(frames: &[Vec<u8>], l3s: &[L3Info], total: usize, cfg: ReasmConfig) -> (usize, usize, usize) {
    let mut r: Reassembler<FrameRef<'_>> = Reassembler::new_owning(cfg).unwrap();
    let (mut done, mut pushes, mut sum) = (0, 0, 0);
    let mut out = Chain::new();
    let mut spare = Vec::new();
    while done < total {
        for (f, l3) in frames.iter().zip(l3s) {
            pushes += 1;
            if let Verdict::Complete { .. } = r.push_owned(FrameRef(f), l3, 0, &mut out, &mut spare) {
                done += 1;
                sum += out.len() + usize::from(out.header()[0]);
                sum += out.drain_buffers().count();
            }
            spare.clear();
        }
    }
    (done, pushes, sum)
}

#[inline(never)]
fn in_flight_copy(mut r: Reassembler, frames: &[Vec<u8>], l3s: &[L3Info], total: usize) -> (usize, usize, usize) {
    let (mut done, mut pushes, mut sum) = (0, 0, 0);
    let mut out = Vec::new();
    while done < total {
        for (f, l3) in frames.iter().zip(l3s) {
            pushes += 1;
            if let Verdict::Complete { .. } = r.push(f, l3, 0, &mut out) {
                done += 1;
                sum += out.len();
            }
        }
    }
    (done, pushes, sum)
}

#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn flood_chain(
    mut r: Reassembler<Frame>,
    mut pool: Vec<Frame>,
    mut free: Vec<Frame>,
    l3s: &[L3Info],
    mut fl3: L3Info,
    total: usize,
    legit_pushes: usize,
    flood_key: &mut impl FnMut(&mut L3Info, &mut [u8]),
) -> (usize, usize, usize) {
    let (mut done, mut pushes, mut sum) = (0, 0, 0);
    let mut out = Chain::new();
    let mut spare = Vec::new();
    let set_len = pool.len();
    let back = |f: Frame, pool: &mut Vec<Frame>, free: &mut Vec<Frame>| {
        let s = f.slot as usize;
        if s < set_len {
            pool[s] = f;
        } else {
            free.push(f);
        }
    };
    for j in 0..legit_pushes {
        for _ in 0..((j + 1) * total / legit_pushes - j * total / legit_pushes) {
            let mut f = free.pop().unwrap();
            flood_key(&mut fl3, &mut f.bytes);
            pushes += 1;
            r.push_owned(f, &fl3, 0, &mut out, &mut spare);
            for f in spare.drain(..) {
                back(f, &mut pool, &mut free);
            }
        }
        let i = j % set_len;
        let f = std::mem::replace(&mut pool[i], Frame { slot: u32::MAX, bytes: Vec::new() });
        pushes += 1;
        if let Verdict::Complete { .. } = r.push_owned(f, &l3s[i], 0, &mut out, &mut spare) {
            done += 1;
            sum += out.len() + usize::from(out.header()[0]);
            for f in out.drain_buffers() {
                back(f, &mut pool, &mut free);
            }
        }
        for f in spare.drain(..) {
            back(f, &mut pool, &mut free);
        }
    }
    (done, pushes, sum)
}

#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn flood_copy(
    mut r: Reassembler,
    frames: &[Vec<u8>],
    l3s: &[L3Info],
    flood_frame: &[u8],
    mut fl3: L3Info,
    total: usize,
    legit_pushes: usize,
    flood_key: &mut impl FnMut(&mut L3Info, &mut [u8]),
) -> (usize, usize, usize) {
    let (mut done, mut pushes, mut sum) = (0, 0, 0);
    let mut out = Vec::new();
    // Lent, not held: one frame, its header rewritten per push.
    let mut flood_frame = flood_frame.to_vec();
    for j in 0..legit_pushes {
        for _ in 0..((j + 1) * total / legit_pushes - j * total / legit_pushes) {
            flood_key(&mut fl3, &mut flood_frame);
            pushes += 1;
            r.push(&flood_frame, &fl3, 0, &mut out);
        }
        let i = j % frames.len();
        pushes += 1;
        if let Verdict::Complete { .. } = r.push(&frames[i], &l3s[i], 0, &mut out) {
            done += 1;
            sum += out.len();
        }
    }
    (done, pushes, sum)
}
