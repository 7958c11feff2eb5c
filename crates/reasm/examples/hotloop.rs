//! Profiling aid: IPv4/IPv6 4,416-byte UDP datagrams, 64 in flight, in
//! order, through the zero-copy path (or the copying one with `copy`), for a
//! fixed number of datagrams, so instruction counts per fragment can be read
//! from `valgrind --tool=callgrind` or `perf`.
//!
//! `cargo run --release -p flowsteer-reasm --example hotloop -- [4|6] [chain|copy] [datagrams]`

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
    let in_flight = 64;
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
        for k in 0..n {
            for d in &mut dgrams {
                let f = std::mem::take(&mut d[k]);
                l3s.push(parse_frame(&f, LinkType::Ethernet, &ParseOptions::new()).unwrap().outer.unwrap());
                frames.push(f);
            }
        }
    }
    let cfg = ReasmConfig { high_thresh: 64 << 20, low_thresh: 48 << 20, ..ReasmConfig::default() };
    let mut done = 0usize;
    let mut sum = 0usize;
    let t = std::time::Instant::now();
    let mut pushes = 0usize;
    if chain {
        let mut pool: Vec<Frame> =
            frames.into_iter().enumerate().map(|(i, bytes)| Frame { slot: i as u32, bytes }).collect();
        let mut r: Reassembler<Frame> = Reassembler::new_owning(cfg).unwrap();
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
    } else {
        let mut r = Reassembler::new(cfg).unwrap();
        let mut out = Vec::new();
        while done < total {
            for (f, l3) in frames.iter().zip(&l3s) {
                pushes += 1;
                if let Verdict::Complete { .. } = r.push(f, l3, 0, &mut out) {
                    done += 1;
                    sum += out.len();
                }
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{done} datagrams, {pushes} pushes in {secs:.3}s: {:.2} M dgrams/s, {:.1} ns/frag (check {sum})",
        done as f64 / secs / 1e6,
        secs * 1e9 / pushes as f64
    );
}
