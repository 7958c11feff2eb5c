//! Counters: kept by each core in plain integers, published to the
//! control thread a few hundred times a second, summed into the
//! `netstat -Q` view and checked for conservation.
//!
//! Definitions (per worker, FreeBSD netisr names):
//! * `Disp'd`: processed inline by the receiving thread under `direct`.
//! * `HDisp'd`: processed inline under `hybrid` (owner == receiving core).
//! * `Queued`: handed to this worker's queues (from every receive thread).
//! * `QDrops`: refused because a queue to this worker was full.
//! * `Len` / `WMark`: packets in its queues now / most ever seen at once.
//! * `Handled` = Disp'd + HDisp'd + dequeued; so `Handled = Disp'd + HDisp'd
//!   + (Queued - Len)` holds at every snapshot (the simulation tests check it).
//!
//! Conservation: `received + reassembled = delivered + dropped (by
//! reason) + in flight + absorbed`, where in flight is the sum of `Len` plus
//! fragments waiting for their first fragment (zero after the final drain),
//! `delivered = Handled - worker drops - fragments taken into a worker's
//! reassembler`, `reassembled`
//! counts datagrams rebuilt from fragments (each re-enters as one packet) and
//! `absorbed` the fragments inside them or still pending. Without
//! reassembly the last two are zero: `received = delivered + dropped + in flight`.

use crate::drops::{DropCounts, DropReason};
use crate::ingress::Ingress;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::AddAssign;

/// Counters one core keeps (as receive thread and as worker).
#[derive(Clone, Debug, Default)]
pub struct LcoreCounters {
    pub received: u64,
    pub rx_bytes: u64,
    /// Drops by reason (every reason but `queue_full`, which is counted
    /// per destination in `qdrops_to`).
    pub drops: DropCounts,
    /// Per destination worker: packets queued / refused (queue full).
    pub queued_to: Vec<u64>,
    pub qdrops_to: Vec<u64>,
    pub dispatched: u64,
    pub hdispatched: u64,
    pub dequeued: u64,
    pub handled_bytes: u64,
    /// Delivered to the listener of the packet's bucket / to the wildcard.
    pub listener_bucket: u64,
    pub listener_wildcard: u64,
    pub timers_fired: u64,
    /// Datagrams rebuilt by this core's reassembler (each re-enters steering
    /// as one packet), and those whose owner differs from the 2-tuple one.
    pub reassembled: u64,
    pub reinjected: u64,
    /// Fragments the reassembler took in and did not drop: in delivered
    /// datagrams or still pending.
    pub reasm_absorbed: u64,
    pub reasm_pending: u64,
    /// Fragments a worker took into its reassembler (policies `rehash` and
    /// `owner`): handled, but not delivered (the datagram is).
    pub frag_taken: u64,
    /// Fragments waiting on the receive side for their first fragment
    /// (policy `owner`; a gauge, counted as in flight).
    pub frag_held: u64,
    pub order_violations: u64,
    /// Packets whose consumer (the application thread of the flow) runs on
    /// this worker's core / another core.
    pub consumer_local: u64,
    pub consumer_remote: u64,
    pub flows: u64,
    pub flows_expired: u64,
    pub flow_max_probe: u64,
    /// Steering entries moved (RFS / rebalance) and packets held back by
    /// the drain rule, on this core's receive side.
    pub steer_moves: u64,
    pub held_for_drain: u64,
    /// Per software bucket: packets steered (for the rebalancer).
    pub bucket_packets: Vec<u64>,
}

impl LcoreCounters {
    pub fn new(workers: usize, buckets: usize) -> LcoreCounters {
        LcoreCounters {
            queued_to: vec![0; workers],
            qdrops_to: vec![0; workers],
            bucket_packets: vec![0; buckets],
            ..Default::default()
        }
    }

    pub fn handled(&self) -> u64 {
        self.dispatched + self.hdispatched + self.dequeued
    }

    /// Packets handled but not delivered to the application (flow table
    /// full, no listener, fragments taken into a reassembler).
    pub fn not_delivered(&self) -> u64 {
        self.drops.get(DropReason::FlowTableFull) + self.drops.get(DropReason::NoListener) + self.frag_taken
    }
}

/// Sums another core's counters into these: every count and gauge adds up
/// (per-worker and per-bucket vectors element by element), except
/// `flow_max_probe`, which keeps the longer probe.
impl AddAssign<&LcoreCounters> for LcoreCounters {
    fn add_assign(&mut self, o: &LcoreCounters) {
        fn add_vec(a: &mut Vec<u64>, b: &[u64]) {
            if a.len() < b.len() {
                a.resize(b.len(), 0);
            }
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        self.received += o.received;
        self.rx_bytes += o.rx_bytes;
        self.drops += &o.drops;
        add_vec(&mut self.queued_to, &o.queued_to);
        add_vec(&mut self.qdrops_to, &o.qdrops_to);
        self.dispatched += o.dispatched;
        self.hdispatched += o.hdispatched;
        self.dequeued += o.dequeued;
        self.handled_bytes += o.handled_bytes;
        self.listener_bucket += o.listener_bucket;
        self.listener_wildcard += o.listener_wildcard;
        self.timers_fired += o.timers_fired;
        self.reassembled += o.reassembled;
        self.reinjected += o.reinjected;
        self.reasm_absorbed += o.reasm_absorbed;
        self.reasm_pending += o.reasm_pending;
        self.frag_taken += o.frag_taken;
        self.frag_held += o.frag_held;
        self.order_violations += o.order_violations;
        self.consumer_local += o.consumer_local;
        self.consumer_remote += o.consumer_remote;
        self.flows += o.flows;
        self.flows_expired += o.flows_expired;
        self.flow_max_probe = self.flow_max_probe.max(o.flow_max_probe);
        self.steer_moves += o.steer_moves;
        self.held_for_drain += o.held_for_drain;
        add_vec(&mut self.bucket_packets, &o.bucket_packets);
    }
}

/// The non-zero drops of `d` by name (names are made here, not when counting).
fn named(d: &DropCounts) -> BTreeMap<String, u64> {
    d.nonzero().map(|(reason, n)| (reason.name().into_owned(), n)).collect()
}

/// One worker's line in the `netstat -Q`-style table.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct WorkerRow {
    pub worker: u16,
    pub cpu: u32,
    pub len: u64,
    pub wmark: u64,
    pub dispatched: u64,
    pub hdispatched: u64,
    pub qdrops: u64,
    pub queued: u64,
    pub handled: u64,
    pub pps: f64,
    pub flows: u64,
    pub order_violations: u64,
    pub received: u64,
    pub consumer_local: u64,
    pub consumer_remote: u64,
    pub drops: BTreeMap<String, u64>,
    /// Longest probe seen in this worker's flow table (hostile tuples show here).
    pub flow_max_probe: u64,
}

/// Totals over all workers.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Totals {
    pub received: u64,
    pub handled: u64,
    pub delivered: u64,
    pub in_flight: u64,
    pub dropped: u64,
    pub drops: BTreeMap<String, u64>,
    pub order_violations: u64,
    pub steer_moves: u64,
    pub held_for_drain: u64,
    pub rebalance_moves: u64,
    /// Packets delivered to a per-bucket listener / to a wildcard listener.
    pub listener_bucket: u64,
    pub listener_wildcard: u64,
    /// Timers fired, each on its own core.
    pub timers_fired: u64,
    pub flows_expired: u64,
    /// Reassembly (fragment policies `local`, `rehash`, `owner`): datagrams
    /// rebuilt, of which steered on to another worker than the one that
    /// reassembled them; fragments absorbed into datagrams or pending.
    pub reassembled: u64,
    pub reinjected: u64,
    pub reasm_absorbed: u64,
    pub reasm_pending: u64,
    /// Fragments taken into a worker's reassembler after a hand-off.
    pub frag_taken: u64,
    /// Fragments waiting for their first fragment (included in `in_flight`).
    pub frag_held: u64,
    pub pps: f64,
    pub bytes: u64,
}

/// A snapshot of the whole engine.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Snapshot {
    pub schema: &'static str,
    pub elapsed_s: f64,
    pub workers: Vec<WorkerRow>,
    pub totals: Totals,
    /// `received == delivered + dropped + in_flight` and, per worker,
    /// `handled == dispatched + hdispatched + (queued - len)`; for a live
    /// source also the sum from the interface in (see [`Ingress`]).
    pub conservation_ok: bool,
    /// The sum that `conservation_ok` checks, in words with its numbers.
    pub conservation: String,
    /// A live source's counts from before the engine (final snapshot only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Ingress>,
}

impl Snapshot {
    /// Adds a live source's counts from before the engine: the sum is
    /// stated and checked with the engine's.
    pub fn with_ingress(mut self, ingress: Ingress) -> Snapshot {
        self.conservation_ok &= ingress.adds_up(self.totals.received);
        self.conservation = format!(
            "{}; received {} = delivered by the source {}; {}",
            self.conservation,
            self.totals.received,
            ingress.delivered,
            ingress.statement()
        );
        self.ingress = Some(ingress);
        self
    }

    /// This snapshot as one interval's report: each worker's counts
    /// (dispatched, hdispatched, qdrops, queued, handled, order violations,
    /// drops) and rate over the interval since `prev` (the start when
    /// `None`) instead of since the start; its levels (len, wmark, flows) as
    /// they are. The totals stay cumulative except their rate (`pps`: the
    /// interval's delivered per second).
    pub fn interval_since(&self, prev: Option<&Snapshot>) -> Snapshot {
        let mut iv = self.clone();
        let dt = self.elapsed_s - prev.map_or(0.0, |p| p.elapsed_s);
        for w in &mut iv.workers {
            let before =
                prev.and_then(|p| p.workers.iter().find(|x| x.worker == w.worker)).cloned().unwrap_or_default();
            let d = |b: u64, n: u64| interval_rate(b, n, dt).0;
            w.pps = interval_rate(before.handled, w.handled, dt).1;
            w.dispatched = d(before.dispatched, w.dispatched);
            w.hdispatched = d(before.hdispatched, w.hdispatched);
            w.qdrops = d(before.qdrops, w.qdrops);
            w.queued = d(before.queued, w.queued);
            w.handled = d(before.handled, w.handled);
            w.order_violations = d(before.order_violations, w.order_violations);
            for (reason, n) in &mut w.drops {
                *n = d(before.drops.get(reason).copied().unwrap_or(0), *n);
            }
        }
        iv.totals.pps = interval_rate(prev.map_or(0, |p| p.totals.delivered), self.totals.delivered, dt).1;
        iv
    }

    /// (received, delivered, dropped) in the interval since `prev` (the
    /// start when `None`).
    pub fn counts_since(&self, prev: Option<&Snapshot>) -> (u64, u64, u64) {
        let (t, p) = (&self.totals, prev.map(|p| &p.totals));
        let d = |f: fn(&Totals) -> u64| interval_rate(p.map_or(0, f), f(t), 1.0).0;
        (d(|t| t.received), d(|t| t.delivered), d(|t| t.dropped))
    }
}

/// One interval of a cumulative counter: `(count in the interval, rate per
/// second over it)`. `prev` and `now` are the cumulative counts at the
/// interval's start and end, `secs` its length. A counter that went
/// backwards (a restart) counts from zero.
pub fn interval_rate(prev: u64, now: u64, secs: f64) -> (u64, f64) {
    let n = now.checked_sub(prev).unwrap_or(now);
    let rate = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    (n, rate)
}

/// Schema name of [`Snapshot`] as the engine serializes it (bump on
/// incompatible change; new fields are only ever appended). A document that
/// embeds a snapshot names itself (`flowsteer run --json`: its own schema).
pub const SNAPSHOT_SCHEMA: &str = "flowsteer.snapshot.v1";

/// Sum the published counters into a snapshot. `ring_len[r][w]` and
/// `ring_wmark[r][w]` are the queue from receive core `r` to worker `w`.
pub fn snapshot(
    lcores: &[LcoreCounters],
    cpus: &[u32],
    ring_len: &[Vec<u64>],
    ring_wmark: &[Vec<u64>],
    elapsed_s: f64,
    rebalance_moves: u64,
) -> Snapshot {
    let n = lcores.len();
    let mut rows = Vec::with_capacity(n);
    let mut totals = Totals { rebalance_moves, ..Default::default() };
    let mut sum = LcoreCounters::default();
    let mut ok = true;
    for (w, c) in lcores.iter().enumerate() {
        let len: u64 = ring_len.iter().map(|r| r.get(w).copied().unwrap_or(0)).sum();
        let wmark: u64 = ring_wmark.iter().map(|r| r.get(w).copied().unwrap_or(0)).max().unwrap_or(0);
        let queued: u64 = lcores.iter().map(|l| l.queued_to.get(w).copied().unwrap_or(0)).sum();
        let qdrops: u64 = lcores.iter().map(|l| l.qdrops_to.get(w).copied().unwrap_or(0)).sum();
        let handled = c.handled();
        // Counters are published by different threads at different moments,
        // so the identity is exact only once every thread has stopped.
        if queued < len || handled != c.dispatched + c.hdispatched + (queued - len) {
            ok = false;
        }
        rows.push(WorkerRow {
            worker: w as u16,
            cpu: cpus.get(w).copied().unwrap_or(w as u32),
            len,
            wmark,
            dispatched: c.dispatched,
            hdispatched: c.hdispatched,
            qdrops,
            queued,
            handled,
            pps: if elapsed_s > 0.0 { handled as f64 / elapsed_s } else { 0.0 },
            flows: c.flows,
            order_violations: c.order_violations,
            received: c.received,
            consumer_local: c.consumer_local,
            consumer_remote: c.consumer_remote,
            drops: named(&c.drops),
            flow_max_probe: c.flow_max_probe,
        });
        sum += c;
        totals.delivered += handled - c.not_delivered().min(handled);
        totals.in_flight += len;
    }
    totals.received = sum.received;
    totals.handled = sum.handled();
    totals.listener_bucket = sum.listener_bucket;
    totals.listener_wildcard = sum.listener_wildcard;
    totals.timers_fired = sum.timers_fired;
    totals.flows_expired = sum.flows_expired;
    totals.in_flight += sum.frag_held;
    totals.order_violations = sum.order_violations;
    totals.steer_moves = sum.steer_moves;
    totals.held_for_drain = sum.held_for_drain;
    totals.bytes = sum.handled_bytes;
    totals.reassembled = sum.reassembled;
    totals.reinjected = sum.reinjected;
    totals.reasm_absorbed = sum.reasm_absorbed;
    totals.reasm_pending = sum.reasm_pending;
    totals.frag_taken = sum.frag_taken;
    totals.frag_held = sum.frag_held;
    totals.drops = named(&sum.drops);
    let qd: u64 = sum.qdrops_to.iter().sum();
    if qd > 0 {
        totals.drops.insert(DropReason::QueueFull.name().into_owned(), qd);
    }
    totals.dropped = totals.drops.values().sum();
    totals.pps = if elapsed_s > 0.0 { totals.delivered as f64 / elapsed_s } else { 0.0 };
    // A rebuilt datagram re-enters as one packet; the fragments it absorbed
    // (and those still pending) leave the count there.
    if totals.received + totals.reassembled
        != totals.delivered + totals.dropped + totals.in_flight + totals.reasm_absorbed
    {
        ok = false;
    }
    let conservation = format!(
        "received {} + reassembled {} = delivered {} + dropped {} + in flight {} + absorbed {}",
        totals.received, totals.reassembled, totals.delivered, totals.dropped, totals.in_flight, totals.reasm_absorbed
    );
    Snapshot {
        schema: SNAPSHOT_SCHEMA,
        elapsed_s,
        workers: rows,
        totals,
        conservation_ok: ok,
        conservation,
        ingress: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rates_are_the_interval_own_not_the_average_since_start() {
        // 100 kpps steady: cumulative 100k, 200k, 300k at 1, 2, 3 s.
        let cum = [0u64, 100_000, 200_000, 300_000];
        for w in cum.windows(2) {
            assert_eq!(interval_rate(w[0], w[1], 1.0), (100_000, 100_000.0));
        }
        assert_eq!(interval_rate(50, 10, 1.0).0, 10);
    }

    #[test]
    fn an_interval_snapshot_counts_since_the_previous_one() {
        let snap = |s: f64, handled: u64, delivered: u64| Snapshot {
            elapsed_s: s,
            workers: vec![WorkerRow { worker: 0, handled, len: 7, ..Default::default() }],
            totals: Totals { received: delivered + 1, delivered, dropped: 1, ..Default::default() },
            ..Default::default()
        };
        let (a, b) = (snap(1.0, 100_000, 100_000), snap(2.0, 250_000, 250_000));
        let iv = b.interval_since(Some(&a));
        assert_eq!((iv.workers[0].handled, iv.workers[0].pps, iv.workers[0].len), (150_000, 150_000.0, 7));
        assert_eq!(iv.totals.pps, 150_000.0);
        assert_eq!(iv.totals.delivered, 250_000, "totals stay cumulative");
        assert_eq!(b.counts_since(Some(&a)), (150_000, 150_000, 0));
        assert_eq!(a.counts_since(None), (100_001, 100_000, 1));
    }
}
