//! Fragment streams through `flowsteer_reasm::Reassembler` with small limits.
//!
//! Input: a sequence of records `[ctl: u8][len: u16 LE][len bytes of frame]`
//! (a short last record takes what is left). `ctl` bit 0 picks the link type
//! (0 raw IP, 1 Ethernet); bits 1..4 pick the clock step taken before the
//! push; bit 4 adds an `expire` call after it. After every call the
//! counters must be conserved and accounted memory must stay under
//! `high_thresh`; a final flush must leave nothing behind.
#![no_main]
use flowsteer_reasm::{ReasmConfig, Reassembler};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use libfuzzer_sys::fuzz_target;

const MS: u64 = 1_000_000;
const STEPS: [u64; 8] = [0, 0, 1, MS, 100 * MS, 900 * MS, 1_500 * MS, 3_000 * MS];

fn check(r: &Reassembler) {
    assert!(r.stats().conservation_ok(), "conservation: {:?}", r.stats());
    assert!(r.mem_used() <= r.config().high_thresh, "mem {} > high_thresh", r.mem_used());
    assert!(r.stats().pending as usize >= r.pending(), "pending fragments < queues");
}

fuzz_target!(|data: &[u8]| {
    let cfg = ReasmConfig {
        high_thresh: 16 << 10,
        low_thresh: 12 << 10,
        timeout_v4_ns: 1_000 * MS,
        timeout_v6_ns: 2_000 * MS,
        max_frags: 8,
        max_datagrams: 16,
        max_dist: 4,
    };
    let mut r = Reassembler::with_seed(cfg, (1, 2)).expect("valid config");
    let opts = ParseOptions::default();
    let mut out = Vec::new();
    let mut now = 0u64;
    let mut rest = data;
    while let Some((&ctl, tail)) = rest.split_first() {
        let (len, tail) = match tail {
            [a, b, t @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), t),
            t => (t.len(), &t[t.len()..]),
        };
        let (frame, next) = tail.split_at(len.min(tail.len()));
        rest = next;
        now = now.saturating_add(STEPS[usize::from(ctl >> 1) & 7]);
        let link = if ctl & 1 == 0 { LinkType::RawIp } else { LinkType::Ethernet };
        if let Ok(p) = parse_frame(frame, link, &opts) {
            if let Some(l3) = p.outer {
                let _ = r.push(frame, &l3, now, &mut out);
                check(&r);
            }
        }
        if ctl & 0x10 != 0 {
            r.expire(now);
            check(&r);
        }
    }
    r.flush();
    check(&r);
    assert_eq!(r.mem_used(), 0);
    assert_eq!(r.pending(), 0);
    assert_eq!(r.stats().pending, 0);
});
