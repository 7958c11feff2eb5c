//! Fragment streams through `flowsteer_reasm::Reassembler` with small limits.
//!
//! Input: a sequence of records `[ctl: u8][len: u16 LE][len bytes of frame]`
//! (a short last record takes what is left). `ctl` bit 0 picks the link type
//! (0 raw IP, 1 Ethernet); bits 1..4 pick the clock step taken before the
//! push; bit 4 adds an `expire` call after it; bit 5 hands the frame over
//! (`push_owned`, zero-copy) instead of lending it. After every call the
//! counters must be conserved, accounted memory must stay under
//! `high_thresh` and no more frames may be alive than fragments are held;
//! a final flush must leave nothing behind, every frame freed.
#![no_main]
use flowsteer_reasm::{Chain, ReasmConfig, Reassembler, Verdict};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use std::rc::Rc;

/// A handed-over frame that counts how many are alive.
struct Tracked {
    bytes: Vec<u8>,
    alive: Rc<Cell<usize>>,
}

impl Tracked {
    fn new(bytes: &[u8], alive: &Rc<Cell<usize>>) -> Self {
        alive.set(alive.get() + 1);
        Tracked { bytes: bytes.to_vec(), alive: alive.clone() }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.alive.set(self.alive.get() - 1);
    }
}

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

const MS: u64 = 1_000_000;
const STEPS: [u64; 8] = [0, 0, 1, MS, 100 * MS, 900 * MS, 1_500 * MS, 3_000 * MS];

fn check(r: &Reassembler<Tracked>) {
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
    let mut r: Reassembler<Tracked> = Reassembler::with_seed_owning(cfg, (1, 2)).expect("valid config");
    let alive = Rc::new(Cell::new(0usize));
    let mut chain = Chain::new();
    let mut spare = Vec::new();
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
                if ctl & 0x20 != 0 {
                    let v = r.push_owned(Tracked::new(frame, &alive), &l3, now, &mut chain, &mut spare);
                    if let Verdict::Complete { .. } = v {
                        chain.copy_into(&mut out);
                        assert_eq!(out.len(), chain.len());
                        chain.drain_buffers().for_each(drop);
                    }
                    spare.clear();
                } else {
                    let _ = r.push(frame, &l3, now, &mut out);
                }
                check(&r);
                assert!(alive.get() as u64 <= r.stats().pending, "frames alive but not held");
            }
        }
        if ctl & 0x10 != 0 {
            r.expire_into(now, &mut spare);
            spare.clear();
            check(&r);
        }
    }
    r.flush_into(&mut spare);
    spare.clear();
    assert_eq!(alive.get(), 0, "frames not given back");
    check(&r);
    assert_eq!(r.mem_used(), 0);
    assert_eq!(r.pending(), 0);
    assert_eq!(r.stats().pending, 0);
});
