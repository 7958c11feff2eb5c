//! A MAC flood: host 1 sends 100,000 frames with random source MACs while
//! hosts 2 and 3 exchange sequenced UDP flows through the bridge. The table
//! stays within its limit and says so (`not_learned_full`), the process
//! grows by less than 64 MiB resident, and the flows between 2 and 3 arrive
//! complete and in order. Root only; prints "skipped: <reason>" otherwise.
//!
//! The tests of this file run one at a time ([`common::one_at_a_time`]:
//! their resident sizes are of one process).

mod common;

use common::{assert_conserved, fdb, ping, random_mac, raw_frames, reset_hwm, start, status_kib, udp_flow};
use flowsteer_bridge::PortKind;
use flowsteer_netns::Star;

const FLOOD: u64 = 100_000;
const FLOOD_RATE: u32 = 25_000;
const FLOW: u32 = 20_000;
const FLOW_RATE: u32 = 5_000;
/// Most the process's resident size grows while bridging (over its size
/// before the bridge starts: a test that failed earlier in this process
/// may have left memory resident, such as its printed backtrace's debug
/// information).
const MAX_RSS_KIB: u64 = 64 * 1024;

fn flood(kind: PortKind, tag: &str, max_learned: usize) {
    let _one = common::one_at_a_time();
    if common::skip() {
        return;
    }
    let star = Star::new(tag, 3).unwrap();
    reset_hwm();
    let rss_before = status_kib("VmRSS");
    let bridge = start(&star, kind, 3, |c| c.max_learned = max_learned);
    let ctl = bridge.control();
    // Hosts 2 and 3 are known before the flood.
    assert!(ping(&star, 2, 3) && ping(&star, 3, 2));

    let flows = [udp_flow(&star, 2, 3, 40_001, FLOW, FLOW_RATE), udp_flow(&star, 3, 2, 40_002, FLOW, FLOW_RATE)];
    // An unknown unicast destination: every frame floods to hosts 2 and 3,
    // whose kernels drop it (not theirs).
    let sender = raw_frames(&star, 1, [0x02, 0xee, 0, 0, 0, 1], FLOOD, FLOOD_RATE, |i| random_mac(1, i));
    let sent = sender.join().unwrap().unwrap();
    assert_eq!(sent as u64, FLOOD);
    for (f, what) in flows.into_iter().zip(["2 -> 3", "3 -> 2"]) {
        f.wait().assert_complete_with(FLOW, what, ctl.as_ref());
    }

    let dev1 = star.hub_dev(1).to_string();
    let s = common::stats_when(ctl.as_ref(), |s| common::port(s, &dev1).received >= FLOOD);
    let hwm = status_kib("VmHWM");
    let rss_now = status_kib("VmRSS");
    println!(
        "{kind:?} max_learned {max_learned}: VmRSS before {rss_before} KiB, VmHWM while bridging {hwm} KiB, VmRSS after {rss_now} KiB; fdb {:?}",
        s.fdb
    );
    assert!(
        hwm - rss_before < MAX_RSS_KIB,
        "resident peak {hwm} KiB, {rss_before} KiB before: grew >= {MAX_RSS_KIB} KiB"
    );
    assert_conserved(&s);
    let p1 = common::port(&s, star.hub_dev(1));
    assert_eq!(p1.received, FLOOD, "{p1:?}");
    assert!(s.fdb.learned_entries <= max_learned as u64, "{:?}", s.fdb);
    assert_eq!(s.fdb.entries, s.fdb.learned_entries);
    // The writer may still be learning queued sources: the table read
    // between two equal counts is the one they count.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (rows, entries) = loop {
        let before = common::stats(ctl.as_ref()).fdb.entries;
        let rows = fdb(ctl.as_ref());
        if common::stats(ctl.as_ref()).fdb.entries == before || std::time::Instant::now() >= deadline {
            break (rows, before);
        }
    };
    assert_eq!(rows.len() as u64, entries);
    if max_learned < FLOOD as usize / 10 {
        // Full: exactly at the limit, the rest counted.
        assert_eq!(s.fdb.learned_entries, max_learned as u64, "{:?}", s.fdb);
        assert!(s.fdb.not_learned_full > 0, "{:?}", s.fdb);
    } else {
        assert_eq!(s.fdb.not_learned_full, 0, "{:?}", s.fdb);
    }
    // The hosts learned before the flood keep their entries.
    for i in [2, 3] {
        assert!(rows.iter().any(|r| r.mac == star.mac_text(i) && r.port == star.hub_dev(i)), "host {i}");
    }
    let end = bridge.stop();
    assert_conserved(&end);
    // Every flooding source is accounted for (the final counters hold the
    // workers' last copies): learned, not learned (full), its learning
    // event dropped or suppressed, or its frame dropped by the kernel
    // before the bridge saw it (a flood at 25,000 a second may overflow
    // the port's receive ring; counted, and in `received` above).
    let f = &end.fdb;
    let kernel = common::port(&end, &dev1).dropped.get("kernel").copied().unwrap_or(0);
    assert!(
        f.learned + f.not_learned_full + f.events_dropped + f.events_suppressed + kernel >= FLOOD,
        "{f:?}, kernel {kernel}"
    );
}

#[test]
fn afxdp_mac_flood_small_table() {
    flood(PortKind::Afxdp, "fx", 1_000);
}

#[test]
fn afpacket_mac_flood_small_table() {
    flood(PortKind::Afpacket, "fp", 1_000);
}

#[test]
fn afxdp_mac_flood_default_table() {
    flood(PortKind::Afxdp, "fd", 65_536);
}
