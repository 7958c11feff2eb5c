//! IPv4 ID wrap-around does not mis-assemble (RFC 4963), thanks to the
//! per-source max-distance rule (Linux `ipfrag_max_dist`,
//! [`ReasmConfig::max_dist`]).

mod common;

use common::*;
use flowsteer_reasm::{DropReason, ReasmConfig, Reassembler, Verdict};
use flowsteer_wire::build::{self, FrameBuilder};
use std::net::Ipv4Addr;

const SEC: u64 = 1_000_000_000;
/// UDP payload bytes per datagram: 8 + 100 = 108 bytes of fragmentable part,
/// cut into 40 + 40 + 28.
const PAYLOAD: usize = 100;
const FRAG: usize = 40;

/// Payload of the sender's `n`-th datagram (IP ID `n & 0xffff`):
/// `p[k] = (k*31 + 7 + id + 97*cycle) & 0xff` with `cycle = n >> 16`. The
/// cycle term matters: with the 16-bit ID alone, datagrams 65 536 apart
/// would carry the same bytes and a mis-assembly could not be seen.
fn wrap_payload(n: u32) -> Vec<u8> {
    let (id, cycle) = (n & 0xffff, n >> 16);
    (0..PAYLOAD as u32)
        .map(|k| (k.wrapping_mul(31).wrapping_add(7).wrapping_add(id).wrapping_add(97 * cycle) & 0xff) as u8)
        .collect()
}

struct WrapRun {
    delivered: u64,
    corrupt: u64,
    lossy: u64,
}

/// A sender at `src` cycles the IPv4 ID space twice (131 072 datagrams of 3
/// fragments) within one IPv4 timeout, losing one fragment (first, middle
/// or last in turn) of every 100th datagram. Every delivered datagram is
/// checked against the one being sent.
fn id_wrap_run(r: &mut Reassembler) -> WrapRun {
    let (src, dst) = (v4(192, 0, 2, 1), v4(198, 51, 100, 7));
    let total: u32 = 2 * 65_536;
    let step = 200_000; // 0.2 ms per datagram: 26.2 s in all
    assert!(u64::from(total) * step < r.config().timeout_v4_ns);
    let mut run = WrapRun { delivered: 0, corrupt: 0, lossy: 0 };
    for n in 0..total {
        let id = (n & 0xffff) as u16;
        let p = wrap_payload(n);
        let frames = build::ipv4_fragments(src, dst, 1000, 2000, id, &p, FRAG);
        assert_eq!(frames.len(), 3);
        let lost = (n % 100 == 0).then_some((n / 100 % 3) as usize);
        run.lossy += u64::from(lost.is_some());
        let now = u64::from(n) * step;
        for (i, f) in frames.iter().enumerate() {
            if Some(i) == lost {
                continue;
            }
            let (v, out) = push(r, f, now);
            if let Some(dgram) = out {
                assert!(matches!(v, Verdict::Complete { .. }));
                run.delivered += 1;
                // The only datagram that can complete now is datagram n.
                let want =
                    FrameBuilder { ident: id, ..FrameBuilder::udp(src.into(), dst.into(), 1000, 2000, &p) }.ip_packet();
                let body_ok = dgram.get(28..) == Some(&p[..]);
                if dgram != want || !body_ok {
                    run.corrupt += 1;
                }
            }
        }
    }
    run
}

// The max-distance rule (default 64) drops the stale queues the
// first cycle left behind; nothing corrupt is delivered.
#[test]
fn id_wrap_no_misassembly() {
    let mut r = reasm();
    assert_eq!(r.config().max_dist, 64);
    let run = id_wrap_run(&mut r);
    assert_eq!(run.corrupt, 0, "corrupt datagrams delivered");
    assert_eq!(run.lossy, 1311);
    assert_eq!(run.delivered, 131_072 - run.lossy);
    let s = r.stats().clone();
    // The 656 lossy datagrams of the first cycle are found stale by the
    // first fragment of the second cycle's datagram with their ID; that
    // datagram then reassembles normally.
    assert_eq!(s.datagrams_dropped(DropReason::StaleQueue), 656);
    assert_eq!(s.dropped(DropReason::StaleQueue), 2 * 656);
    assert_eq!(s.dropped(DropReason::Duplicate), 0);
    assert_eq!(s.dropped(DropReason::TimedOut), 0);
    assert_eq!(s.dropped(DropReason::Evicted), 0);
    assert_eq!(r.pending(), 655); // the second cycle's lossy datagrams
    assert!(s.conservation_ok());
    finish(&mut r);
    assert_eq!(r.stats().datagrams_dropped(DropReason::Flushed), 655);
    assert_eq!(r.stats().dropped(DropReason::Flushed), 2 * 655);
    assert_eq!(r.pending(), 0);
    assert_eq!(r.mem_used(), 0);
}

// Control: with the rule off (and the timeout longer than the wrap), the
// same stream is mis-assembled, so the pattern check above has teeth.
#[test]
fn control_without_max_dist_misassembles() {
    let mut r = reasm_with(ReasmConfig { max_dist: 0, ..ReasmConfig::default() });
    let run = id_wrap_run(&mut r);
    assert_eq!(run.corrupt, 656);
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 0);
    finish(&mut r);
}

/// A fragment from `src` with ID `id` that starts a queue and stays pending
/// (the first 40 bytes of a 3-fragment datagram).
fn lone_first(src: Ipv4Addr, id: u16) -> Vec<u8> {
    build::ipv4_fragments(src, v4(198, 51, 100, 7), 1000, 2000, id, &wrap_payload(u32::from(id)), FRAG).swap_remove(0)
}

/// Queue Q (ID 1 from `src`) gets its first two fragments, then `filler`
/// fragments arrive from `filler_src` (lone first fragments, other IDs),
/// then Q's last fragment. Returns the verdict of that last fragment.
fn distance_case(max_dist: u32, filler_src: Ipv4Addr, filler: u16) -> (Reassembler, Verdict) {
    let mut r = reasm_with(ReasmConfig { max_dist, ..ReasmConfig::default() });
    let src = v4(192, 0, 2, 1);
    let frames = build::ipv4_fragments(src, v4(198, 51, 100, 7), 1000, 2000, 1, &wrap_payload(1), FRAG);
    assert_eq!(push(&mut r, &frames[0], 0).0, Verdict::Held);
    assert_eq!(push(&mut r, &frames[1], 0).0, Verdict::Held);
    for i in 0..filler {
        assert_eq!(push(&mut r, &lone_first(filler_src, 100 + i), SEC).0, Verdict::Held);
    }
    let v = push(&mut r, &frames[2], 2 * SEC).0;
    (r, v)
}

// The boundary: the distance is the source's fragments counted from the
// queue's last extension up to and including the arriving one; more than
// `max_dist` is stale.
#[test]
fn max_dist_boundary() {
    let src = v4(192, 0, 2, 1);
    // 63 fragments in between: distance 64, not stale.
    let (mut r, v) = distance_case(64, src, 63);
    assert_eq!(v, Verdict::Complete { fragments: 3 });
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 0);
    finish(&mut r);
    // 64 in between: distance 65, stale. Q's two fragments go, the last
    // fragment starts a fresh queue.
    let (mut r, v) = distance_case(64, src, 64);
    assert_eq!(v, Verdict::Held);
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 2);
    assert_eq!(r.stats().datagrams_dropped(DropReason::StaleQueue), 1);
    assert_eq!(r.stats().datagrams_completed, 0);
    assert_eq!(r.pending(), 65);
    assert_eq!(DropReason::StaleQueue.name(), "stale");
    finish(&mut r);
    // Small max_dist.
    let (mut r, v) = distance_case(1, src, 0);
    assert_eq!(v, Verdict::Complete { fragments: 3 });
    finish(&mut r);
    let (mut r, v) = distance_case(1, src, 1);
    assert_eq!(v, Verdict::Held);
    assert_eq!(r.stats().datagrams_dropped(DropReason::StaleQueue), 1);
    finish(&mut r);
}

// The counter is per source: another source's fragments do not age Q; and
// max_dist 0 disables the rule.
#[test]
fn per_source_and_disabled() {
    let (mut r, v) = distance_case(64, v4(192, 0, 2, 99), 5000);
    assert_eq!(v, Verdict::Complete { fragments: 3 });
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 0);
    finish(&mut r);
    let (mut r, v) = distance_case(0, v4(192, 0, 2, 1), 5000);
    assert_eq!(v, Verdict::Complete { fragments: 3 });
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 0);
    finish(&mut r);
}

/// A complete 2-fragment datagram from `src` (leaves no queue behind).
fn push_complete(r: &mut Reassembler, src: Ipv4Addr, id: u16) {
    let p = wrap_payload(u32::from(id));
    let frames = build::ipv4_fragments(src, v4(198, 51, 100, 7), 1000, 2000, id, &p[..60], FRAG);
    assert_eq!(frames.len(), 2);
    assert_eq!(push(r, &frames[0], 0).0, Verdict::Held);
    assert_eq!(push(r, &frames[1], 0).0, Verdict::Complete { fragments: 2 });
}

// The source table is bounded: 20 000 other sources push through it and
// replace Q's source's entry, yet a queue is never judged stale against a
// replaced entry (its new counter restarts at 0, which a plain distance
// would read as ~2^32 behind). Duplicates do not count as extensions.
#[test]
fn source_table_replacement_never_drops_live_queue() {
    let mut r = reasm_with(ReasmConfig { max_dist: 4, ..ReasmConfig::default() });
    let src = v4(192, 0, 2, 1);
    for id in 0..10 {
        push_complete(&mut r, src, 1000 + id);
    }
    let frames = build::ipv4_fragments(src, v4(198, 51, 100, 7), 1000, 2000, 1, &wrap_payload(1), FRAG);
    // Q remembers counter 21 of its source's entry.
    assert_eq!(push(&mut r, &frames[0], 0).0, Verdict::Held);
    for i in 0..20_000u32 {
        push_complete(&mut r, Ipv4Addr::from(0x0a00_0000 + i), 7);
    }
    assert_eq!(r.pending(), 1);
    // Q's source comes back with a fresh entry (counter 1): not stale.
    assert_eq!(push(&mut r, &frames[1], 0).0, Verdict::Held);
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 0);
    // Three more fragments from the source and a duplicate (distance 4: not
    // stale, and not an extension), then Q's last fragment at distance 5.
    push_complete(&mut r, src, 2000);
    assert_eq!(push(&mut r, &lone_first(src, 2001), 0).0, Verdict::Held);
    assert_eq!(push(&mut r, &frames[1], 0).0, Verdict::Dropped(DropReason::Duplicate));
    assert_eq!(push(&mut r, &frames[2], 0).0, Verdict::Held);
    assert_eq!(r.stats().dropped(DropReason::StaleQueue), 2);
    assert_eq!(r.stats().datagrams_dropped(DropReason::StaleQueue), 1);
    finish(&mut r);
}
