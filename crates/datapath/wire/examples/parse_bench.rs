//! Rough per-frame cost of `parse_frame`:
//! `cargo run --release -p flowsteer-wire --example parse_bench`.

use std::hint::black_box;
use std::net::IpAddr;
use std::time::Instant;

use flowsteer_wire::build::{self, VlanTag};
use flowsteer_wire::{parse_frame, parse_frame_into, LinkType, ParseOptions};

fn bench(name: &str, frame: &[u8], opts: &ParseOptions) {
    const BATCH: u32 = 200_000;
    const BATCHES: usize = 25;
    let mut acc = 0usize;
    let mut per_frame = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let start = Instant::now();
        for _ in 0..BATCH {
            let p = parse_frame(black_box(frame), LinkType::Ethernet, black_box(opts));
            // read a few fields like a hasher would
            if let Some(l3) = p.as_ref().ok().and_then(|p| p.innermost()) {
                acc = acc.wrapping_add(l3.l3_offset);
                if let Some((s, d)) = l3.tuple.ports {
                    acc = acc.wrapping_add(usize::from(s ^ d));
                }
            }
        }
        per_frame.push(start.elapsed().as_nanos() as f64 / f64::from(BATCH));
    }
    per_frame.sort_by(f64::total_cmp);
    println!(
        "{name:<24} min {:5.1} ns/frame, median {:5.1} ns/frame  ({})",
        per_frame[0],
        per_frame[BATCHES / 2],
        black_box(acc) % 10
    );
}

fn bench_into(name: &str, frame: &[u8], opts: &ParseOptions) {
    const BATCH: u32 = 200_000;
    const BATCHES: usize = 25;
    let mut out = parse_frame(frame, LinkType::Ethernet, opts).expect("valid frame");
    let mut acc = 0usize;
    let mut per_frame = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let start = Instant::now();
        for _ in 0..BATCH {
            if parse_frame_into(black_box(frame), LinkType::Ethernet, black_box(opts), &mut out).is_ok() {
                if let Some(l3) = out.innermost() {
                    acc = acc.wrapping_add(l3.l3_offset);
                    if let Some((s, d)) = l3.tuple.ports {
                        acc = acc.wrapping_add(usize::from(s ^ d));
                    }
                }
            }
        }
        per_frame.push(start.elapsed().as_nanos() as f64 / f64::from(BATCH));
    }
    per_frame.sort_by(f64::total_cmp);
    println!(
        "{name:<24} min {:5.1} ns/frame, median {:5.1} ns/frame  ({})",
        per_frame[0],
        per_frame[BATCHES / 2],
        black_box(acc) % 10
    );
}

fn main() {
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let b: IpAddr = "10.0.0.2".parse().unwrap();
    let a6: IpAddr = "2001:db8::1".parse().unwrap();
    let peer6: IpAddr = "2001:db8::2".parse().unwrap();
    let payload = [0u8; 64];
    let outer = ParseOptions::default();
    let inner = ParseOptions::default().with_inner(true);
    bench("eth/ipv4/udp", &build::udp_frame(a, b, 1, 2, &payload), &outer);
    bench_into("eth/ipv4/udp (into)", &build::udp_frame(a, b, 1, 2, &payload), &outer);
    bench("eth/ipv4/tcp", &build::tcp_frame(a, b, 1, 2, 0, 2, &payload), &outer);
    bench("eth/ipv6/udp", &build::udp_frame(a6, peer6, 1, 2, &payload), &outer);
    bench(
        "qinq/ipv4/udp",
        &build::with_vlans(&build::udp_frame(a, b, 1, 2, &payload), &[VlanTag::dot1ad(1), VlanTag::dot1q(2)]),
        &outer,
    );
    let inner_frame = build::udp_frame(a6, peer6, 1, 2, &payload);
    bench("vxlan (inner parsed)", &build::vxlan_frame(a, b, 5, 6, &inner_frame), &inner);
}
