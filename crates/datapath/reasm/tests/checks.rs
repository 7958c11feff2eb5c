//! Behaviour tests, each an input against the outcome Linux, FreeBSD, DPDK,
//! VPP or the RFCs give: byte-exact reassembly in six orders, overlaps,
//! duplicates, the fragment cap, timeouts, the memory bound under a flood,
//! FragmentSmack, malformed fragments, IPv6 atomic fragments and extension
//! headers, the IPv4 key, ECN, limits set to zero, the table bound. Every
//! push checks the counters' conservation law; most tests end by checking
//! that nothing is pending and no memory is accounted.

mod common;

use common::*;
use flowsteer_reasm::{DropReason, ReasmConfig, Verdict};
use flowsteer_wire::build::{self, FrameBuilder, Ipv6Ext};
use flowsteer_wire::proto;

const SEC: u64 = 1_000_000_000;

/// Pushes `frames` in `order`; asserts exactly one completion, at the last push.
fn run_order(r: &mut flowsteer_reasm::Reassembler, frames: &[Vec<u8>], order: &[usize], now: u64) -> Vec<u8> {
    let mut got = None;
    for (k, &i) in order.iter().enumerate() {
        let (v, out) = push(r, &frames[i], now);
        if k + 1 < order.len() {
            assert_eq!(v, Verdict::Held, "push {k} of {}", order.len());
        } else {
            assert_eq!(v, Verdict::Complete { fragments: frames.len() as u32 });
            got = out;
        }
    }
    got.unwrap()
}

// Byte-exact sweep, IPv4 and IPv6, six orders.
#[test]
fn byte_exact_sweep() {
    let mut rng = Rng(seed("byte_exact_sweep"));
    let cfg = ReasmConfig { max_frags: 8192, ..ReasmConfig::default() };
    let mut r = reasm_with(cfg);
    let (s4, d4) = (v4(10, 0, 0, 1), v4(10, 0, 0, 2));
    let (s6, d6) = (v6(1), v6(2));
    let mut size = 8usize;
    let mut id = 0u16;
    let mut inputs = 0u64;
    while size <= 65507 {
        let dgram = size + 8;
        let max_f = (1480usize).min((dgram - 1) / 8 * 8).max(8);
        let fsize = 8 * (1 + rng.below(max_f / 8));
        let p = payload(size);
        // IPv4
        id = id.wrapping_add(1);
        let whole4 = FrameBuilder { ident: id, ..FrameBuilder::udp(s4.into(), d4.into(), 1000, 2000, &p) }.ip_packet();
        let frames4 = build::ipv4_fragments(s4, d4, 1000, 2000, id, &p, fsize);
        assert!(frames4.len() >= 2);
        // IPv6
        let whole6 = FrameBuilder::udp(s6.into(), d6.into(), 1000, 2000, &p).ip_packet();
        let frames6 = build::ipv6_fragments(s6, d6, 1000, 2000, u32::from(id), &p, fsize);
        for (fam, whole, frames) in [("v4", &whole4, &frames4), ("v6", &whole6, &frames6)] {
            for (name, order) in orders(frames.len(), &mut rng) {
                let got = run_order(&mut r, frames, &order, 0);
                assert_eq!(got.len(), whole.len(), "{fam} {name} size {size} frag {fsize}");
                assert!(got == *whole, "{fam} {name} size {size} frag {fsize}: bytes differ");
                inputs += 1;
            }
        }
        assert_eq!(r.pending(), 0);
        assert_eq!(r.mem_used(), 0);
        size += 1 + rng.below(2500);
    }
    assert_eq!(r.stats().datagrams_completed, inputs);
    assert_eq!(r.stats().dropped_total(), 0);
    finish(&mut r);
}

/// Three 600-byte fragments of a 1800-byte IPv4 datagram.
fn dgram4(id: u16) -> Vec<u8> {
    udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), id, 1800 - 8)
}

// Every overlap geometry kills the whole datagram at once.
#[test]
fn overlap_kills_datagram_v4() {
    // (first, second) pushes; then the remaining valid fragments.
    type Piece = (usize, usize, bool);
    let geometries: [(&str, Piece, Piece); 4] = [
        ("overlap arriving second", (0, 600, true), (296, 600, true)),
        ("overlap arriving first", (296, 600, true), (0, 600, true)),
        ("contained, different bounds", (0, 600, true), (200, 200, true)),
        ("tail overlap", (600, 600, true), (1192, 608, false)),
    ];
    let mut r = reasm();
    for (k, (name, a, b)) in geometries.iter().enumerate() {
        let whole = dgram4(k as u16);
        assert_eq!(push(&mut r, &v4_frag(&whole, a.0, a.1, a.2), 0).0, Verdict::Held, "{name}");
        assert_eq!(push(&mut r, &v4_frag(&whole, b.0, b.1, b.2), 0).0, Verdict::Dropped(DropReason::Overlap), "{name}");
        // Freed at detection, not at timeout.
        assert_eq!((r.pending(), r.mem_used()), (0, 0), "{name}");
        assert_eq!(r.stats().datagrams_dropped(DropReason::Overlap), k as u64 + 1);
        // The rest of the valid fragments start a fresh queue that never completes.
        for (off, len, more) in pieces(1800, 600) {
            if (off, len, more) != *a && (off, len, more) != *b && off != 0 {
                let (v, out) = push(&mut r, &v4_frag(&whole, off, len, more), 0);
                assert!(out.is_none() && v == Verdict::Held, "{name}: {v:?}");
            }
        }
        r.flush();
    }
    assert_eq!(r.stats().dropped(DropReason::Overlap), 8);
    assert_eq!(r.stats().datagrams_completed, 0);
    finish(&mut r);
}

#[test]
fn overlap_kills_datagram_v6() {
    let whole = udp6(v6(1), v6(2), &[], 1800 - 8);
    let mut r = reasm();
    assert_eq!(push(&mut r, &v6_frag(&whole, 40, 6, 9, 0, 600, true), 0).0, Verdict::Held);
    assert_eq!(push(&mut r, &v6_frag(&whole, 40, 6, 9, 600, 600, true), 0).0, Verdict::Held);
    let v = push(&mut r, &v6_frag(&whole, 40, 6, 9, 896, 600, true), 0).0;
    assert_eq!(v, Verdict::Dropped(DropReason::Overlap));
    assert_eq!((r.pending(), r.mem_used()), (0, 0));
    assert_eq!(r.stats().dropped(DropReason::Overlap), 3);
    // Later fragments of the same key: a fresh queue, which can complete
    // only with a full, consistent set.
    for (off, len, more) in pieces(1800, 600) {
        let (_, out) = push(&mut r, &v6_frag(&whole, 40, 6, 9, off, len, more), 0);
        if let Some(out) = out {
            assert_eq!(out, whole);
        }
    }
    assert_eq!(r.stats().datagrams_completed, 1);
    finish(&mut r);
}

// Duplicates are harmless.
#[test]
fn duplicates_are_harmless() {
    let mut r = reasm();
    let whole = dgram4(1);
    let frames: Vec<Vec<u8>> = pieces(1800, 600).iter().map(|&(o, l, m)| v4_frag(&whole, o, l, m)).collect();
    // Every fragment twice.
    let mut done = 0;
    for f in &frames {
        for _ in 0..2 {
            if let (Verdict::Complete { fragments: 3 }, Some(out)) = push(&mut r, f, 0) {
                assert_eq!(out, whole);
                done += 1;
            }
        }
    }
    assert_eq!(done, 1);
    assert_eq!(r.stats().dropped(DropReason::Duplicate), 2);
    // Duplicate first / middle / last before completion.
    for dup in 0..3 {
        let whole = dgram4(10 + dup as u16);
        let frames: Vec<Vec<u8>> = pieces(1800, 600).iter().map(|&(o, l, m)| v4_frag(&whole, o, l, m)).collect();
        let order = [(dup + 1) % 3, dup, dup, (dup + 2) % 3];
        let mut outs = vec![];
        for &i in &order {
            outs.extend(push(&mut r, &frames[i], 0).1);
        }
        assert_eq!(outs, vec![whole]);
    }
    assert_eq!(r.stats().dropped(DropReason::Duplicate), 5);
    // First fragment + 10 duplicates with max_frags = 3; duplicates do not
    // count against the cap.
    let mut r3 = reasm_with(ReasmConfig { max_frags: 3, ..ReasmConfig::default() });
    let whole = dgram4(20);
    let first = v4_frag(&whole, 0, 600, true);
    assert_eq!(push(&mut r3, &first, 0).0, Verdict::Held);
    // A re-sent first fragment with a different header (TTL) is ignored.
    let mut other = whole.clone();
    other[8] = 7;
    for k in 0..10 {
        let f = if k % 2 == 0 { first.clone() } else { v4_frag(&other, 0, 600, true) };
        assert_eq!(push(&mut r3, &f, 0).0, Verdict::Dropped(DropReason::Duplicate));
    }
    assert_eq!(push(&mut r3, &v4_frag(&whole, 600, 600, true), 0).0, Verdict::Held);
    let (v, out) = push(&mut r3, &v4_frag(&whole, 1200, 600, false), 0);
    assert_eq!(v, Verdict::Complete { fragments: 3 });
    assert_eq!(out.unwrap(), whole);
    assert_eq!(r3.stats().dropped(DropReason::Duplicate), 10);
    finish(&mut r);
    finish(&mut r3);
}

#[test]
fn v6_resent_first_with_other_unfragmentable_part_is_ignored() {
    let mut r = reasm();
    let whole = udp6(v6(1), v6(2), &[], 1200 - 8);
    let with_hbh = udp6(v6(1), v6(2), &[Ipv6Ext::HopByHop { len: 8 }], 1200 - 8);
    push(&mut r, &v6_frag(&whole, 40, 6, 5, 0, 600, true), 0);
    let v = push(&mut r, &v6_frag(&with_hbh, 48, 40, 5, 0, 600, true), 0).0;
    assert_eq!(v, Verdict::Dropped(DropReason::Duplicate));
    let (_, out) = push(&mut r, &v6_frag(&whole, 40, 6, 5, 600, 600, false), 0);
    assert_eq!(out.unwrap(), whole);
    finish(&mut r);
}

// The per-datagram fragment cap at its boundary.
#[test]
fn fragment_cap_boundary() {
    let n = 8;
    let mut r = reasm_with(ReasmConfig { max_frags: n, ..ReasmConfig::default() });
    // N fragments reassemble.
    let whole = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 1, n * 64 - 8);
    let frames: Vec<Vec<u8>> = pieces(n * 64, 64).iter().map(|&(o, l, m)| v4_frag(&whole, o, l, m)).collect();
    assert_eq!(frames.len(), n);
    let order: Vec<usize> = (0..n).rev().collect();
    assert_eq!(run_order(&mut r, &frames, &order, 0), whole);
    // N+1 flushes the queue.
    let whole = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 2, (n + 1) * 64 - 8);
    let frames: Vec<Vec<u8>> = pieces((n + 1) * 64, 64).iter().map(|&(o, l, m)| v4_frag(&whole, o, l, m)).collect();
    for f in &frames[..n] {
        assert_eq!(push(&mut r, f, 0).0, Verdict::Held);
    }
    assert_eq!(push(&mut r, &frames[n], 0).0, Verdict::Dropped(DropReason::TooManyFrags));
    assert_eq!((r.pending(), r.mem_used()), (0, 0));
    assert_eq!(r.stats().datagrams_dropped(DropReason::TooManyFrags), 1);
    assert_eq!(r.stats().dropped(DropReason::TooManyFrags), n as u64 + 1);
    finish(&mut r);
}

// Timeouts on the virtual clock, not extended by later fragments.
#[test]
fn timeout_virtual_clock() {
    let mut r = reasm();
    let k = 10u16;
    let mut lasts = vec![];
    for id in 0..k {
        let whole = dgram4(100 + id);
        // Even ids hold the offset-0 fragment, odd ids only the middle one.
        if id % 2 == 0 {
            push(&mut r, &v4_frag(&whole, 0, 600, true), u64::from(id));
        }
        push(&mut r, &v4_frag(&whole, 600, 600, true), u64::from(id));
        lasts.push((whole.clone(), id));
    }
    assert_eq!(r.pending(), 10);
    assert_eq!(r.poll_timeout(), Some(30 * SEC));
    assert_eq!(r.expire(30 * SEC - 1), 0);
    assert_eq!(r.expire(30 * SEC), 1); // only id 0 (created at t=0) is 30 s old
    assert_eq!(r.expire(30 * SEC + 100), 9);
    assert_eq!(r.stats().dropped(DropReason::TimedOut), 15);
    assert_eq!(r.stats().datagrams_dropped(DropReason::TimedOut), 10);
    assert_eq!(r.stats().time_exceeded, 5);
    for (whole, _) in &lasts {
        let (v, out) = push(&mut r, &v4_frag(whole, 1200, 600, false), 31 * SEC);
        assert_eq!((v, out), (Verdict::Held, None));
    }
    r.flush();
    // Not extended: first at t=0, middle at t=29 s, last at t=30 s.
    let whole = dgram4(500);
    push(&mut r, &v4_frag(&whole, 0, 600, true), 100 * SEC);
    push(&mut r, &v4_frag(&whole, 600, 600, true), 129 * SEC);
    let (v, out) = push(&mut r, &v4_frag(&whole, 1200, 600, false), 130 * SEC);
    assert_eq!((v, out), (Verdict::Held, None));
    // IPv6 uses its own (60 s) timeout.
    let w6 = udp6(v6(1), v6(2), &[], 1192);
    push(&mut r, &v6_frag(&w6, 40, 6, 1, 0, 600, true), 200 * SEC);
    let (_, out) = push(&mut r, &v6_frag(&w6, 40, 6, 1, 600, 600, false), 259 * SEC);
    assert_eq!(out.unwrap(), w6);
    finish(&mut r);
}

// Memory bound under a never-completing flood; warm queues survive.
#[test]
fn flood_memory_bound_warm_queues_survive() {
    let mut r = reasm();
    let high = r.config().high_thresh;
    let attacker = v4(192, 0, 2, 66);
    let victim = v4(10, 9, 9, 9);
    let flood_whole = udp4(attacker, victim, 0, 3 * 1480 - 8);
    let mut flood = v4_frag(&flood_whole, 1480, 1480, true);
    let legit_n = 10_000usize;
    let legit: Vec<Vec<Vec<u8>>> = (0..legit_n)
        .map(|i| {
            let src = v4(10, 1, (i >> 8) as u8, i as u8);
            let whole = udp4(src, victim, i as u16, 4416 - 8);
            pieces(4416, 1480).iter().map(|&(o, l, m)| v4_frag(&whole, o, l, m)).collect()
        })
        .collect();
    let mut li = 0usize; // next legit fragment (datagram li / 3, fragment li % 3)
    let mut completed = 0usize;
    let mut now = 0u64;
    for id in 0..100_000u32 {
        // A new flood id: rewrite identification and checksum in place.
        flood[14 + 4..14 + 6].copy_from_slice(&(id as u16).to_be_bytes());
        flood[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
        let ck = build::ipv4_header_checksum(&flood[14..34]);
        flood[14 + 10..14 + 12].copy_from_slice(&ck.to_be_bytes());
        let mut out = Vec::new();
        r.push(&flood, &l3(&flood), now, &mut out);
        assert!(r.mem_used() <= high);
        now += 1000;
        if id % 3 == 0 && li < legit_n * 3 {
            let f = &legit[li / 3][li % 3];
            if let Verdict::Complete { .. } = r.push(f, &l3(f), now, &mut out) {
                completed += 1;
            }
            assert!(r.mem_used() <= high);
            li += 1;
        }
    }
    let s = r.stats();
    assert!(s.conservation_ok());
    assert!(s.mem_high_watermark <= high);
    assert!(s.dropped(DropReason::Evicted) > 90_000, "{s:?}");
    assert!(completed * 100 >= legit_n * 99, "completed {completed} of {legit_n}");
    finish(&mut r);
}

// FragmentSmack. The cap bounds the queue; the other flow keeps
// zero loss. With the cap lifted, 8000 tiny fragments in reverse order still
// reassemble (the BTreeMap keeps each insert O(log n); timing is left to the
// benchmark tier).
#[test]
fn fragmentsmack() {
    let mut r = reasm();
    let big = udp4(v4(192, 0, 2, 1), v4(10, 0, 0, 2), 77, 65000);
    let mut rng = Rng(seed("fragmentsmack"));
    let mut good = 0;
    for k in 0..10_000usize {
        let off = 8 * (1 + rng.below(8000));
        push(&mut r, &v4_frag(&big, off, 8, true), k as u64);
        assert!(r.stats().pending <= 64);
        if k % 100 == 0 {
            let whole = dgram4(k as u16);
            for (o, l, m) in pieces(1800, 600) {
                if let (_, Some(out)) = push(&mut r, &v4_frag(&whole, o, l, m), k as u64) {
                    assert_eq!(out, whole);
                    good += 1;
                }
            }
        }
    }
    assert_eq!(good, 100);
    assert!(r.stats().datagrams_dropped(DropReason::TooManyFrags) > 100);
    finish(&mut r);

    let mut r = reasm_with(ReasmConfig { max_frags: 10_000, ..ReasmConfig::default() });
    let whole = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 3, 64000 - 8);
    let frames: Vec<Vec<u8>> = pieces(64000, 8).iter().map(|&(o, l, m)| v4_frag(&whole, o, l, m)).collect();
    let order: Vec<usize> = (0..frames.len()).rev().collect();
    assert_eq!(run_order(&mut r, &frames, &order, 0), whole);
    finish(&mut r);
}

// Malformed single fragments, each with its own reason, never stored.
#[test]
fn malformed_singles() {
    let mut r = reasm();
    let whole = dgram4(1);
    let d = |r: &mut flowsteer_reasm::Reassembler, f: &[u8]| push(r, f, 0).0;
    // (a) non-last not a multiple of 8
    assert_eq!(d(&mut r, &v4_frag(&whole, 0, 601, true)), Verdict::Dropped(DropReason::BadLength));
    // (b) zero length
    assert_eq!(d(&mut r, &v4_frag_data(&whole, 600, true, &[], 0)), Verdict::Dropped(DropReason::BadLength));
    // (c) offset + len > 65535 (IPv4 including the header; IPv6 payload)
    assert_eq!(d(&mut r, &v4_frag_data(&whole, 65504, false, &[0; 16], 0)), Verdict::Dropped(DropReason::TooLarge));
    let w6 = udp6(v6(1), v6(2), &[], 1192);
    assert_eq!(d(&mut r, &v6_frag_data(&w6, 40, 6, 1, 65528, false, &[0; 16])), Verdict::Dropped(DropReason::TooLarge));
    // Tiny first fragment: TCP first fragment with 16 bytes (RFC 1858), TCP at offset 8.
    let p = payload(600);
    let tcp =
        FrameBuilder { ident: 9, ..FrameBuilder::tcp(v4(1, 1, 1, 1).into(), v4(2, 2, 2, 2).into(), 1, 2, 0, 0x02, &p) }
            .ip_packet();
    assert_eq!(d(&mut r, &v4_frag(&tcp, 0, 16, true)), Verdict::Dropped(DropReason::TinyFirst));
    assert_eq!(d(&mut r, &v4_frag(&tcp, 8, 16, true)), Verdict::Dropped(DropReason::TinyFirst));
    // (f) truncated: the frame holds fewer bytes than the IP length says.
    let mut f = v4_frag(&whole, 0, 600, true);
    f.truncate(f.len() - 10);
    assert_eq!(d(&mut r, &f), Verdict::Dropped(DropReason::Truncated));
    assert_eq!((r.pending(), r.mem_used()), (0, 0), "nothing malformed is stored");
    // (d) second last fragment with a different end; last ending before held data.
    push(&mut r, &v4_frag(&whole, 1200, 600, false), 0);
    assert_eq!(d(&mut r, &v4_frag(&whole, 1200, 592, false)), Verdict::Dropped(DropReason::ConflictingEnd));
    assert_eq!((r.pending(), r.mem_used()), (0, 0));
    push(&mut r, &v4_frag(&whole, 1200, 600, true), 0);
    assert_eq!(d(&mut r, &v4_frag(&whole, 600, 600, false)), Verdict::Dropped(DropReason::ConflictingEnd));
    // (e) non-last fragment beyond a known end.
    push(&mut r, &v4_frag(&whole, 600, 600, false), 0);
    assert_eq!(d(&mut r, &v4_frag_data(&whole, 1200, true, &[0; 8], 0)), Verdict::Dropped(DropReason::ConflictingEnd));
    assert_eq!((r.pending(), r.mem_used()), (0, 0));
    for (reason, n) in [
        (DropReason::BadLength, 2),
        (DropReason::TooLarge, 2),
        (DropReason::TinyFirst, 2),
        (DropReason::Truncated, 1),
        (DropReason::ConflictingEnd, 6),
    ] {
        assert_eq!(r.stats().dropped(reason), n, "{reason}");
    }
    assert_eq!(r.stats().datagrams_dropped(DropReason::ConflictingEnd), 3);
    // IPv6 (f)/(10c): a Fragment header cut short never reaches the
    // reassembler, the parser rejects it.
    let mut cut = v6_frag(&w6, 40, 6, 1, 0, 600, true);
    cut.truncate(14 + 40 + 4);
    cut[14 + 4..14 + 6].copy_from_slice(&8u16.to_be_bytes());
    assert!(flowsteer_wire::parse_frame(&cut, flowsteer_wire::LinkType::Ethernet, &Default::default()).is_err());
    finish(&mut r);
}

// IPv6 atomic fragments bypass reassembly.
#[test]
fn atomic_fragments() {
    let mut r = reasm();
    let w6 = udp6(v6(1), v6(2), &[], 1192);
    push(&mut r, &v6_frag(&w6, 40, 6, 42, 0, 600, true), 0);
    let small = udp6(v6(1), v6(2), &[], 100);
    let atomic = v6_frag(&small, 40, 6, 42, 0, 108, false);
    assert_eq!(push(&mut r, &atomic, 0).0, Verdict::Atomic);
    let with_dst = udp6(v6(1), v6(2), &[Ipv6Ext::DestOpts { len: 8 }], 100);
    assert_eq!(push(&mut r, &v6_frag(&with_dst, 48, 40, 42, 0, 108, false), 0).0, Verdict::Atomic);
    assert_eq!(r.pending(), 1);
    let (_, out) = push(&mut r, &v6_frag(&w6, 40, 6, 42, 600, 600, false), 0);
    assert_eq!(out.unwrap(), w6);
    assert_eq!(r.stats().atomic, 2);
    assert_eq!(r.stats().fragments_in, 2);
    finish(&mut r);
}

// Extension headers before the Fragment header.
#[test]
fn v6_unfragmentable_part() {
    let mut r = reasm();
    let mut rng = Rng(seed("v6_unfragmentable_part"));
    let ext_sets: [(&[Ipv6Ext], usize, usize); 4] = [
        (&[Ipv6Ext::HopByHop { len: 8 }], 48, 40),
        (&[Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::Routing { len: 24 }], 72, 48),
        (&[Ipv6Ext::HopByHop { len: 16 }, Ipv6Ext::Routing { len: 24 }, Ipv6Ext::DestOpts { len: 16 }], 96, 80),
        // Destination Options after the Fragment header: fragmentable.
        (&[Ipv6Ext::HopByHop { len: 8 }, Ipv6Ext::DestOpts { len: 16 }], 48, 40),
    ];
    for (k, (ext, unfrag, nh)) in ext_sets.iter().enumerate() {
        let whole = udp6(v6(1), v6(2), ext, 3000);
        let body = whole.len() - unfrag;
        let frames: Vec<Vec<u8>> =
            pieces(body, 1232).iter().map(|&(o, l, m)| v6_frag(&whole, *unfrag, *nh, k as u32, o, l, m)).collect();
        for (name, order) in orders(frames.len(), &mut rng) {
            assert_eq!(run_order(&mut r, &frames, &order, 0), whole, "set {k} {name}");
        }
    }
    finish(&mut r);
}

// The IPv4 key includes the protocol.
#[test]
fn key_includes_protocol() {
    let mut r = reasm();
    let (s, d) = (v4(10, 0, 0, 1), v4(10, 0, 0, 2));
    let p = payload(1800);
    let udp = FrameBuilder { ident: 5, ..FrameBuilder::udp(s.into(), d.into(), 1, 2, &p[..1792]) }.ip_packet();
    let icmp = FrameBuilder { ident: 5, ..FrameBuilder::raw(s.into(), d.into(), proto::ICMP, &p[8..]) }.ip_packet();
    let fu: Vec<Vec<u8>> = pieces(1800, 600).iter().map(|&(o, l, m)| v4_frag(&udp, o, l, m)).collect();
    let fi: Vec<Vec<u8>> = pieces(1792, 600).iter().map(|&(o, l, m)| v4_frag(&icmp, o, l, m)).collect();
    let mut outs = vec![];
    for i in 0..3 {
        outs.extend(push(&mut r, &fu[i], 0).1);
        outs.extend(push(&mut r, &fi[i], 0).1);
    }
    assert_eq!(outs.len(), 2);
    for (got, want) in outs.iter().zip([&udp, &icmp]) {
        let diff = got.iter().zip(want.iter()).position(|(a, b)| a != b);
        assert!(got.len() == want.len() && diff.is_none(), "len {} vs {}, first diff {diff:?}", got.len(), want.len());
    }
    finish(&mut r);
}

// ECN combination (RFC 3168 §5.3).
#[test]
fn ecn_combination() {
    let mut r = reasm();
    let whole = dgram4(1);
    let body = &whole[20..];
    // Not-ECT + CE: dropped.
    push(&mut r, &v4_frag_data(&whole, 0, true, &body[..600], 0), 0);
    let v = push(&mut r, &v4_frag_data(&whole, 600, false, &body[600..1200], 3), 0).0;
    assert_eq!(v, Verdict::Dropped(DropReason::EcnMismatch));
    // Actually 1200 bytes is not the whole: rebuild with a two-fragment datagram.
    r.flush();
    let whole = udp4(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 2, 1200 - 8);
    let body = &whole[20..];
    push(&mut r, &v4_frag_data(&whole, 0, true, &body[..600], 0), 0);
    let v = push(&mut r, &v4_frag_data(&whole, 600, false, &body[600..], 3), 0).0;
    assert_eq!(v, Verdict::Dropped(DropReason::EcnMismatch));
    assert_eq!((r.pending(), r.mem_used()), (0, 0));
    // ECT(0) + CE: delivered with CE.
    push(&mut r, &v4_frag_data(&whole, 0, true, &body[..600], 2), 0);
    let (v, out) = push(&mut r, &v4_frag_data(&whole, 600, false, &body[600..], 3), 0);
    assert_eq!(v, Verdict::Complete { fragments: 2 });
    let out = out.unwrap();
    assert_eq!(out[1] & 3, 3);
    assert_eq!(build::ipv4_header_checksum(&out[..20]).to_be_bytes(), [out[10], out[11]]);
    assert_eq!(out[20..], whole[20..]);
    finish(&mut r);
}

// Limits set to zero.
#[test]
fn limits_set_to_zero_disable_reassembly() {
    for cfg in [
        ReasmConfig { max_frags: 0, ..ReasmConfig::default() },
        ReasmConfig { max_datagrams: 0, ..ReasmConfig::default() },
    ] {
        let mut r = reasm_with(cfg);
        let whole = dgram4(1);
        for (o, l, m) in pieces(1800, 600) {
            assert_eq!(push(&mut r, &v4_frag(&whole, o, l, m), 0).0, Verdict::Dropped(DropReason::Disabled));
        }
        let plain = build::udp_frame(v4(1, 1, 1, 1).into(), v4(2, 2, 2, 2).into(), 1, 2, b"x");
        assert_eq!(push(&mut r, &plain, 0).0, Verdict::NotFragment);
        assert_eq!(r.stats().dropped(DropReason::Disabled), 3);
        finish(&mut r);
    }
    // A memory budget too small for any fragment: dropped as no_memory.
    let mut r = reasm_with(ReasmConfig { high_thresh: 100, low_thresh: 50, ..ReasmConfig::default() });
    let whole = dgram4(1);
    assert_eq!(push(&mut r, &v4_frag(&whole, 0, 600, true), 0).0, Verdict::Dropped(DropReason::NoMemory));
    finish(&mut r);
}

// Table bound: a full table evicts its oldest queue.
#[test]
fn table_bound_evicts_oldest() {
    let mut r = reasm_with(ReasmConfig { max_datagrams: 4, ..ReasmConfig::default() });
    let wholes: Vec<Vec<u8>> = (0..6).map(dgram4).collect();
    for (i, w) in wholes.iter().enumerate() {
        push(&mut r, &v4_frag(w, 0, 600, true), i as u64);
    }
    assert_eq!(r.pending(), 4);
    assert_eq!(r.stats().datagrams_dropped(DropReason::Evicted), 2);
    // 0 and 1 were evicted; 2..6 complete.
    for w in &wholes[2..] {
        push(&mut r, &v4_frag(w, 600, 600, true), 10);
        let (_, out) = push(&mut r, &v4_frag(w, 1200, 600, false), 10);
        assert!(out.unwrap() == *w);
    }
    for w in &wholes[..2] {
        assert_eq!(push(&mut r, &v4_frag(w, 600, 600, true), 10).0, Verdict::Held);
    }
    finish(&mut r);
}

#[test]
fn config_validation() {
    let cfg = ReasmConfig { low_thresh: 10, high_thresh: 5, ..ReasmConfig::default() };
    assert!(flowsteer_reasm::Reassembler::new(cfg).is_err());
    let r = flowsteer_reasm::Reassembler::new(ReasmConfig::default()).unwrap();
    assert_eq!(r.mem_used(), 0);
}

/// A parse result that does not match its frame (a header longer than any
/// real packet's) is dropped with a reason, never stored: the queue keeps
/// header lengths in 16 bits.
#[test]
fn header_length_beyond_16_bits_is_dropped() {
    let p = payload(3000);
    for family6 in [false, true] {
        let frames = if family6 {
            build::ipv6_fragments(v6(1), v6(2), 1000, 2000, 7, &p, 1448)
        } else {
            build::ipv4_fragments(v4(10, 0, 0, 1), v4(10, 0, 0, 2), 1000, 2000, 7, &p, 1480)
        };
        let mut r = reasm();
        let mut l3 = l3(&frames[0]);
        l3.ip_header_len = 70_000;
        let mut out = Vec::new();
        let v = r.push(&frames[0], &l3, 0, &mut out);
        assert!(matches!(v, Verdict::Dropped(_)), "IPv6 {family6}: {v:?}");
        assert_eq!(r.pending(), 0);
        assert_eq!(r.mem_used(), 0);
        assert!(r.stats().conservation_ok(), "{:?}", r.stats());
    }
}
