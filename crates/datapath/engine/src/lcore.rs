//! One core of the engine: the receive side (poll its receive queues, parse,
//! hash, steer, hand off) and the worker side (drain the queues addressed to
//! it, run the flow table and the application). The threaded runtime and
//! the deterministic simulation drive the same [`Lcore`] methods.

use crate::carry::{CarryIn, CarryOut};
use crate::counters::LcoreCounters;
use crate::desc::{PacketDesc, NO_FLOW_ID};
use crate::dest::DestFilter;
use crate::drops::DropReason;
use crate::error::EngineError;
use crate::fraghold::{DgramKey, FragHold, FragHoldConfig, HoldVerdict};
use crate::fragsteer::FragSteer;
use crate::order::{ConsumerMap, OrderBook};
use crate::source::RxSource;
use flowsteer_flow::table::Prepared;
use flowsteer_flow::{FlowKey, FlowTable, Listeners, TimerWheel, TimerWheelConfig};
use flowsteer_reasm::{Chain, Reassembler, Verdict};
use flowsteer_ring::{Consumer, Producer, RingStats};
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_steer::dispatch::{decide, Action, Dispatch};
use flowsteer_steer::steer::{QueueView, SharedTables, SockFlowTable, Steerer};
use flowsteer_steer::WorkerId;
use flowsteer_wire::{
    check_ipv4_checksum, check_lengths, check_lengths_in, parse_frame_into, proto, L3Info, LinkType, ParseOptions,
    Parsed,
};
use std::sync::{Arc, Mutex};

/// Per-flow state the built-in application keeps in the flow table.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowState {
    pub packets: u64,
    pub bytes: u64,
}

/// Which listener took a packet (FreeBSD `IP_RSS_LISTEN_BUCKET`: one
/// listening socket per bucket, plus a wildcard for buckets that move here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    Bucket(u16),
    Wildcard,
}

/// Bytes of a reassembled datagram the engine reads (IP header with
/// extension headers, L4 header, generator stamp).
const DATAGRAM_HEAD: usize = 256;

/// Per-core timer tokens.
const TIMER_EXPIRE: u64 = 1;
const TIMER_PUBLISH: u64 = 2;
/// Flow expiry sweep and counter publication period (per core, on that core).
pub const HOUSEKEEPING_NS: u64 = 1_000_000;
/// Packets the worker side gathers before it runs them through the flow
/// table: their table lines are requested as each arrives and read once the
/// batch is full or the poll ends (see [`WorkSide::submit`]).
pub const PIPELINE: usize = 32;
/// Flow tables up to this size are processed packet by packet, without the
/// pipeline: their lines stay in a core's L2 (512 KiB, half the L2 of the
/// machines measured), where requesting them early gains nothing and the
/// staging costs a few ns per packet. From 10,000 flows (a 1.4 MiB table)
/// on, the pipeline wins (`bench flows`).
pub const PIPELINE_MIN_TABLE_BYTES: usize = 512 << 10;

/// The queue counters a receive side reads for the drain rule.
struct Rings<'a>(&'a [RingStats]);

impl QueueView for Rings<'_> {
    #[inline]
    fn done(&self, w: WorkerId) -> u64 {
        self.0.get(w.index()).map_or(u64::MAX, |s| s.done())
    }
}

/// Everything one core owns. Aligned to 128 bytes (two cache lines: the
/// adjacent-line prefetcher) so that one core's hot counters never share a
/// line with another core's, wherever the allocator puts them.
#[repr(align(128))]
pub struct Lcore {
    pub id: WorkerId,
    /// Receive queues this core polls.
    pub rxqs: Vec<QueueId>,
    source: Box<dyn RxSource>,
    rx: RxSide,
    work: WorkSide,
    pub counters: LcoreCounters,
    published: Arc<Mutex<LcoreCounters>>,
    burst: usize,
    /// This core's timers: they fire here, on the core that owns the flows.
    timers: TimerWheel,
}

struct RxSide {
    dispatch: Dispatch,
    dest: DestFilter,
    rss: RssConfig,
    opts: ParseOptions,
    order_stamps: bool,
    frag_steer: FragSteer,
    /// Policy `owner`: datagram id -> owner hash, and early fragments.
    hold: FragHold,
    /// Fragment bytes to each worker (policies `rehash` and `owner`),
    /// paired with `producers`.
    carry_out: Vec<CarryOut>,
    /// Reused parse result of a fragment taken by this worker.
    frag_parsed: Parsed,
    /// Reused parse result (no per-packet copy of the summary).
    parsed: Parsed,
    steerer: Steerer,
    shared: SharedTables,
    /// Producers to every worker (index = worker), incl. this core's own.
    producers: Vec<Producer<PacketDesc>>,
    stats: Vec<RingStats>,
    stage: Vec<Vec<PacketDesc>>,
    stage_tail: Vec<u64>,
}

struct WorkSide {
    id: WorkerId,
    consumers: Vec<Consumer<PacketDesc>>,
    buf: Vec<PacketDesc>,
    flows: FlowTable<FlowState>,
    /// Packets submitted, not yet processed, in arrival order (at most
    /// [`PIPELINE`]); empty whenever an [`Lcore`] method returns, and
    /// whenever this core pushes descriptors to a queue.
    pending: Vec<(PacketDesc, Prepared)>,
    /// The flow table is too large for the caches: pipeline (see
    /// [`PIPELINE_MIN_TABLE_BYTES`]).
    pipelined: bool,
    order: Arc<OrderBook>,
    consumer_map: Arc<ConsumerMap>,
    sock: Option<Arc<SockFlowTable>>,
    /// Application listeners; empty: every packet is accepted.
    listeners: Listeners<Listener>,
    listening: bool,
    bucket_mask: u32,
    /// This core's reassembler (every fragment policy but `off`).
    reasm: Option<Reassembler>,
    /// Reassembled datagram (raw IP) and its parse result, reused.
    reasm_out: Vec<u8>,
    reasm_parsed: Parsed,
    /// Fragment bytes from each receive core, paired with `consumers`.
    carry_in: Vec<CarryIn>,
    /// Reassembled datagram still in its fragment buffers (zero-copy path).
    chain: Chain<Vec<u8>>,
    /// Buffers the reassembler handed back, to recycle through `carry_in`.
    spare: Vec<Vec<u8>>,
    /// First bytes of a reassembled datagram (headers and stamp), reused.
    head: Vec<u8>,
}

/// What an [`Lcore`] is built from.
pub struct LcoreParts {
    pub id: WorkerId,
    pub rxqs: Vec<QueueId>,
    pub source: Box<dyn RxSource>,
    pub dispatch: Dispatch,
    pub rss: RssConfig,
    pub steerer: Steerer,
    pub shared: SharedTables,
    pub producers: Vec<Producer<PacketDesc>>,
    pub consumers: Vec<Consumer<PacketDesc>>,
    pub flows: FlowTable<FlowState>,
    pub order: Arc<OrderBook>,
    pub consumer_map: Arc<ConsumerMap>,
    pub burst: usize,
    pub buckets: usize,
    /// `(protocol, port)` the application listens on; empty: everything.
    pub listen: Vec<(u8, u16)>,
    /// The destinations taken besides unicast to this host.
    pub dest: DestFilter,
    /// Read generator stamps for the order check.
    pub order_stamps: bool,
    /// This core's reassembler (every fragment policy but `off`).
    pub reasm: Option<Reassembler>,
    pub frag_steer: FragSteer,
    pub frag_hold: FragHoldConfig,
    /// Fragment byte channels to every worker / from every receive core
    /// (empty unless the policy carries bytes).
    pub carry_out: Vec<CarryOut>,
    pub carry_in: Vec<CarryIn>,
}

impl Lcore {
    /// Fails only if the per-core timer wheel cannot be built.
    pub fn new(p: LcoreParts) -> Result<Lcore, EngineError> {
        let workers = p.producers.len();
        let stats = p.producers.iter().map(|pr| pr.stats()).collect();
        let counters = LcoreCounters::new(workers, p.buckets);
        // One listener per (proto, port) per bucket this core owns, plus a
        // wildcard (binding cannot fail: every key is distinct).
        let mut listeners = Listeners::new();
        for &(proto, port) in &p.listen {
            let _ = listeners.bind(proto, port, None, Listener::Wildcard);
            for b in 0..p.shared.buckets.len() {
                if p.shared.buckets.worker(b) == p.id {
                    let _ = listeners.bind(proto, port, Some(b as u16), Listener::Bucket(b as u16));
                }
            }
        }
        let mut timers = TimerWheel::new(TimerWheelConfig { slots: 64, tick_ns: HOUSEKEEPING_NS / 4, capacity: 16 })
            .map_err(EngineError::Timers)?;
        let _ = timers.schedule(0, HOUSEKEEPING_NS, TIMER_EXPIRE);
        let _ = timers.schedule(0, HOUSEKEEPING_NS, TIMER_PUBLISH);
        let pipelined = p.flows.memory_bytes() > PIPELINE_MIN_TABLE_BYTES;
        Ok(Lcore {
            id: p.id,
            rxqs: p.rxqs,
            source: p.source,
            rx: RxSide {
                dispatch: p.dispatch,
                dest: p.dest,
                rss: p.rss,
                opts: ParseOptions::default(),
                order_stamps: p.order_stamps,
                frag_steer: p.frag_steer,
                hold: FragHold::new(p.frag_hold),
                carry_out: p.carry_out,
                frag_parsed: Parsed::default(),
                parsed: Parsed::default(),
                steerer: p.steerer,
                shared: p.shared.clone(),
                producers: p.producers,
                stats,
                stage: (0..workers).map(|_| Vec::with_capacity(p.burst)).collect(),
                stage_tail: vec![0; workers],
            },
            work: WorkSide {
                id: p.id,
                consumers: p.consumers,
                buf: vec![PacketDesc::default_desc(); p.burst.max(1)],
                flows: p.flows,
                pending: Vec::with_capacity(PIPELINE),
                pipelined,
                order: p.order,
                consumer_map: p.consumer_map,
                sock: p.shared.sock.clone(),
                listening: !p.listen.is_empty(),
                listeners,
                bucket_mask: (p.shared.buckets.len() as u32).wrapping_sub(1),
                reasm: p.reasm,
                reasm_out: Vec::with_capacity(2048),
                reasm_parsed: Parsed::default(),
                carry_in: p.carry_in,
                chain: Chain::new(),
                spare: Vec::new(),
                head: Vec::with_capacity(DATAGRAM_HEAD),
            },
            published: Arc::new(Mutex::new(counters.clone())),
            counters,
            burst: p.burst.max(1),
            timers,
        })
    }

    /// Run this core's due timers: the flow expiry sweep and the counter
    /// publication, each every [`HOUSEKEEPING_NS`].
    pub fn run_timers(&mut self, now: u64) {
        let mut due = [false; 3];
        self.counters.timers_fired += self.timers.advance(now, 8, |t| due[(t as usize).min(2)] = true) as u64;
        if due[TIMER_EXPIRE as usize] {
            self.expire_idle(now);
            let _ = self.timers.schedule(now, now + HOUSEKEEPING_NS, TIMER_EXPIRE);
        }
        if due[TIMER_PUBLISH as usize] {
            self.publish();
            let _ = self.timers.schedule(now, now + HOUSEKEEPING_NS, TIMER_PUBLISH);
        }
    }

    /// The handle the control thread reads published counters from.
    pub fn published(&self) -> Arc<Mutex<LcoreCounters>> {
        self.published.clone()
    }

    /// True when every receive queue of this core is exhausted.
    pub fn sources_exhausted(&self) -> bool {
        self.rxqs.iter().all(|&q| self.source.exhausted(q))
    }

    /// Sleep in the source until a frame may be ready (at most `timeout`);
    /// false when the source cannot wait. See [`RxSource::wait`].
    pub fn wait_rx(&mut self, timeout: std::time::Duration) -> bool {
        self.source.wait(timeout)
    }

    /// Why this core's source cannot go on. See [`RxSource::failure`].
    pub fn source_failure(&self) -> Option<String> {
        self.source.failure()
    }

    /// Stop the source taking frames in. See [`RxSource::close`].
    pub fn close_source(&mut self) -> std::time::Duration {
        self.source.close()
    }

    /// What the source counted before the engine. See [`RxSource::ingress`].
    pub fn source_ingress(&mut self) -> Option<crate::ingress::Ingress> {
        self.source.ingress()
    }

    /// Poll each receive queue once for up to `max` frames (at most one
    /// burst); returns frames received. A source that
    /// [holds back](RxSource::holds_back) is asked for no more frames than
    /// every hand-off queue of this core has room for (less a reserve for
    /// what the worker side adds: reassembled datagrams, fragments let out
    /// of the holding area), so its frames are never dropped as
    /// `queue_full`. It waits for room for a whole `max` (or as much as the
    /// queues can ever have) rather than taking a few frames at a time.
    pub fn poll_rx(&mut self, max: usize, now: u64) -> usize {
        let max = max.min(self.burst);
        let Lcore { source, rx, work, counters, rxqs, burst, .. } = self;
        let hold = source.holds_back();
        let mut total = 0;
        for &q in rxqs.iter() {
            let want = if hold {
                let (room, most) = rx.room(*burst);
                if room >= max.min(most) {
                    max.min(room)
                } else {
                    0
                }
            } else {
                max
            };
            if want == 0 {
                continue;
            }
            total += source.poll(q, want, &mut |bytes| rx.on_frame(work, counters, bytes, q, now));
            // The packets processed here (direct, hybrid's inline ones)
            // before any staged descriptor leaves for another worker: none
            // may wait here while a later packet of its flow goes there.
            work.run_burst(counters, now);
            if hold {
                // Staged bursts out now: the next queue's room counts them.
                rx.flush_all(counters);
            }
        }
        rx.flush_all(counters);
        total
    }

    /// Drain up to `max` descriptors from each queue addressed to this
    /// worker; returns descriptors processed.
    pub fn poll_rings(&mut self, max: usize, now: u64) -> usize {
        let Lcore { work, rx, counters, .. } = self;
        let mut total = 0;
        for r in 0..work.consumers.len() {
            let want = max.min(work.buf.len());
            let n = work.consumers[r].pop_burst(&mut work.buf[..want]);
            for i in 0..n {
                let d = work.buf[i];
                if d.carry {
                    // The bytes were sent before the descriptor was pushed.
                    match work.carry_in.get(r).and_then(CarryIn::recv) {
                        Some(frame) => {
                            rx.take_fragment_owned(work, counters, frame, d.rxq, now);
                            if let Some(c) = work.carry_in.get(r) {
                                for b in work.spare.drain(..) {
                                    c.give_back(b);
                                }
                            }
                        }
                        None => {
                            counters.frag_taken += 1;
                            counters.drops.count(DropReason::FragBytesMissing);
                        }
                    }
                } else {
                    work.submit(counters, &d, now);
                }
            }
            // Processed before the queue says so: the drain rule lets a
            // flow move on only once its packets here are done.
            work.run_burst(counters, now);
            if n > 0 {
                let head = work.consumers[r].head();
                work.consumers[r].set_processed(head);
                counters.dequeued += n as u64;
                total += n;
            }
        }
        // Datagrams reassembled here may have been queued to their owner.
        rx.flush_all(counters);
        total
    }

    /// Packets waiting in this worker's queues.
    pub fn pending(&self) -> usize {
        self.work.consumers.iter().map(|c| c.len()).sum()
    }

    /// Flow expiry (bounded) and counters published now, whatever the timers
    /// say (the simulation and the final report call this).
    pub fn housekeeping(&mut self, now: u64) {
        self.expire_idle(now);
        self.publish();
    }

    /// End of run: what is due ages out, then whatever is still held is
    /// dropped and counted (the reassembler's pending fragments as
    /// `reasm_pending_at_end`, the holding area's waiting fragments as
    /// `frag_hold_pending_at_end`), and the counters are published. After
    /// this nothing of this core is in flight but its input queues, so a run
    /// that ended adds up as `received = delivered + dropped` (plus what
    /// reassembly merged). Call once, when the core stops: the reassembler
    /// is emptied and frees its tables.
    pub fn finish(&mut self, now: u64) {
        self.expire_idle(now);
        if let Some(r) = self.work.reasm.as_mut() {
            r.flush();
        }
        self.rx.hold.flush();
        self.publish();
    }

    /// Time out reassembly queues and idle flows (the flow table's clock
    /// hand passes every flow 8 times per idle timeout).
    fn expire_idle(&mut self, now: u64) {
        if let Some(r) = self.work.reasm.as_mut() {
            r.expire(now);
        }
        self.rx.hold.expire(now);
        self.collect_hold_drops();
        let budget = self.work.flows.expire_budget(HOUSEKEEPING_NS);
        let expired = self.work.flows.expire(now, budget, |_, _| {});
        self.counters.flows_expired += expired as u64;
    }

    fn collect_hold_drops(&mut self) {
        for (reason, n) in self.rx.hold.take_drops() {
            self.counters.drops.add(reason, n);
        }
        self.counters.frag_held = self.rx.hold.waiting() as u64;
    }

    fn publish(&mut self) {
        self.collect_hold_drops();
        if let Some(r) = &self.work.reasm {
            let st = r.stats();
            self.counters.reasm_absorbed = st.fragments_completed + st.pending;
            self.counters.reasm_pending = st.pending;
            for reason in flowsteer_reasm::DropReason::ALL {
                self.counters.drops.set(DropReason::Reasm(reason), st.dropped(reason));
            }
        }
        self.counters.flows = self.work.flows.len() as u64;
        self.counters.flow_max_probe = self.work.flows.stats().max_probe;
        let st = self.rx.steerer.stats();
        self.counters.steer_moves = st.moves;
        self.counters.held_for_drain = st.held_for_drain;
        if let Ok(mut p) = self.published.lock() {
            p.clone_from(&self.counters);
        }
    }

    /// The flow table (for tests and reports).
    pub fn flow_count(&self) -> usize {
        self.work.flows.len()
    }

    pub fn flow_packets(&mut self, key: &FlowKey) -> Option<u64> {
        self.work.flows.get(key).map(|s| s.packets)
    }
}

impl PacketDesc {
    fn default_desc() -> PacketDesc {
        PacketDesc {
            key: FlowKey {
                src: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                dst: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                proto: 0,
                sport: 0,
                dport: 0,
            },
            hash: 0,
            seq: 0,
            flow_id: NO_FLOW_ID,
            len: 0,
            rxq: QueueId(0),
            fragment: false,
            carry: false,
        }
    }
}

impl RxSide {
    #[inline]
    fn on_frame(&mut self, work: &mut WorkSide, c: &mut LcoreCounters, bytes: &[u8], q: QueueId, now: u64) {
        c.received += 1;
        c.rx_bytes += bytes.len() as u64;
        // The destination first, as a host classifies the frame before IP.
        if let Some(dst) = bytes.first_chunk::<6>() {
            if let Some(r) = self.dest.check_mac(*dst) {
                c.drops.count(r);
                return;
            }
        }
        if let Err(e) = parse_frame_into(bytes, LinkType::Ethernet, &self.opts, &mut self.parsed) {
            c.drops.count(DropReason::Parse(e));
            return;
        }
        let Some(l3) = self.parsed.outer else {
            c.drops.count(DropReason::NotIp);
            return;
        };
        if let Some(r) = self.dest.check_ip(l3.tuple.dst) {
            c.drops.count(r);
            return;
        }
        if let Err(m) = check_lengths(bytes, &l3) {
            c.drops.count(DropReason::Malformed(m));
            return;
        }
        // Every fragment too, as a host checks it before reassembly.
        if let Err(m) = check_ipv4_checksum(bytes, &l3) {
            c.drops.count(DropReason::Malformed(m));
            return;
        }
        if let Some(fi) = l3.frag {
            match self.frag_steer {
                FragSteer::Off => {}
                FragSteer::Local => {
                    // Absorbed here, before steering: never handled.
                    self.reassemble(work, c, bytes, &l3, q, now);
                    return;
                }
                FragSteer::Rehash => {
                    // Where the NIC hash (2-tuple) sends it, bytes and all.
                    let (hash, _) = self.rss.hash_frame(bytes, &l3);
                    self.steer_packet(work, c, bytes, &l3, hash, q, now, true);
                    return;
                }
                FragSteer::Owner => {
                    self.steer_to_owner(work, c, bytes, &l3, fi.offset == 0, q, now);
                    return;
                }
            }
        }
        let (hash, _fields) = self.rss.hash_frame(bytes, &l3);
        self.steer_packet(work, c, bytes, &l3, hash, q, now, false);
    }

    /// Policy `owner`: the first fragment's 4-tuple hash picks the owner and
    /// is remembered under the datagram id; later fragments follow it, and
    /// fragments ahead of their first one wait (bounded).
    #[allow(clippy::too_many_arguments)]
    fn steer_to_owner(
        &mut self,
        work: &mut WorkSide,
        c: &mut LcoreCounters,
        bytes: &[u8],
        l3: &L3Info,
        first: bool,
        q: QueueId,
        now: u64,
    ) {
        let Some(fi) = l3.frag else { return };
        let key = DgramKey { src: l3.tuple.src, dst: l3.tuple.dst, proto: l3.tuple.proto, id: fi.id };
        if first {
            // The flow's hash as a whole datagram would get it (ports included).
            let hash = self.rss.place(&l3.tuple, false).hash;
            let early = self.hold.resolve(key, hash, now);
            self.steer_packet(work, c, bytes, l3, hash, q, now, true);
            for frame in early {
                let ok = parse_frame_into(&frame, LinkType::Ethernet, &self.opts, &mut self.frag_parsed).is_ok();
                match self.frag_parsed.outer.filter(|_| ok) {
                    Some(el3) => self.steer_packet(work, c, &frame, &el3, hash, q, now, true),
                    None => c.drops.count(DropReason::FragUnparsable),
                }
            }
        } else if let Some(hash) = self.hold.owner(&key) {
            self.steer_packet(work, c, bytes, l3, hash, q, now, true);
        } else if let HoldVerdict::Dropped(reason) = self.hold.hold(key, bytes, now) {
            c.drops.count(reason);
        }
        c.frag_held = self.hold.waiting() as u64;
    }

    /// A fragment handed to this core's reassembler (counted in
    /// `frag_taken`); a completed datagram is steered by its own hash.
    fn take_fragment(&mut self, work: &mut WorkSide, c: &mut LcoreCounters, bytes: &[u8], q: QueueId, now: u64) {
        c.frag_taken += 1;
        let ok = parse_frame_into(bytes, LinkType::Ethernet, &self.opts, &mut self.frag_parsed).is_ok();
        let Some(l3) = self.frag_parsed.outer.filter(|_| ok) else {
            c.drops.count(DropReason::FragUnparsable);
            return;
        };
        self.reassemble(work, c, bytes, &l3, q, now);
    }

    /// Pushes a fragment into this core's reassembler; a completed datagram
    /// continues as one packet, steered by its own hash under the hash types
    /// (counted as `reinjected` when its owner is another worker).
    fn reassemble(
        &mut self,
        work: &mut WorkSide,
        c: &mut LcoreCounters,
        bytes: &[u8],
        l3: &L3Info,
        q: QueueId,
        now: u64,
    ) {
        let Some(r) = work.reasm.as_mut() else {
            c.drops.count(DropReason::NoReassembler);
            return;
        };
        match r.push(bytes, l3, now, &mut work.reasm_out) {
            Verdict::Complete { .. } => {}
            // Held or dropped: counted by the reassembler.
            Verdict::Held | Verdict::Dropped(_) => return,
            Verdict::Atomic | Verdict::NotFragment => {
                // Not a fragment after all (cannot happen: the parse said so).
                c.drops.count(DropReason::FragUnparsable);
                return;
            }
        }
        c.reassembled += 1;
        let out = std::mem::take(&mut work.reasm_out);
        self.deliver_datagram(work, c, &out, out.len(), q, now);
        work.reasm_out = out;
    }

    /// A fragment whose buffer was handed over with it (policies `owner` and
    /// `rehash`): reassembled without copying (`push_owned`); the buffers
    /// of a delivered datagram, and any frame the reassembler hands back,
    /// end in `work.spare` for the caller to recycle.
    fn take_fragment_owned(
        &mut self,
        work: &mut WorkSide,
        c: &mut LcoreCounters,
        frame: Vec<u8>,
        q: QueueId,
        now: u64,
    ) {
        c.frag_taken += 1;
        let ok = parse_frame_into(&frame, LinkType::Ethernet, &self.opts, &mut self.frag_parsed).is_ok();
        let Some(l3) = self.frag_parsed.outer.filter(|_| ok) else {
            c.drops.count(DropReason::FragUnparsable);
            work.spare.push(frame);
            return;
        };
        let Some(r) = work.reasm.as_mut() else {
            c.drops.count(DropReason::NoReassembler);
            work.spare.push(frame);
            return;
        };
        match r.push_owned(frame, &l3, now, &mut work.chain, &mut work.spare) {
            Verdict::Complete { .. } => {}
            // Held, or dropped (counted by the reassembler; frame in `spare`).
            Verdict::Held | Verdict::Dropped(_) => return,
            Verdict::Atomic | Verdict::NotFragment => {
                c.drops.count(DropReason::FragUnparsable);
                return;
            }
        }
        c.reassembled += 1;
        // The datagram's first bytes (IP and L4 headers, the generator's
        // stamp) are all the engine reads of it: gather those, not the rest.
        let mut head = std::mem::take(&mut work.head);
        head.clear();
        for piece in work.chain.iter() {
            let take = piece.len().min(DATAGRAM_HEAD - head.len());
            head.extend_from_slice(piece.get(..take).unwrap_or(&[]));
            if head.len() == DATAGRAM_HEAD {
                break;
            }
        }
        let len = work.chain.len();
        work.spare.extend(work.chain.drain_buffers());
        self.deliver_datagram(work, c, &head, len, q, now);
        work.head = head;
    }

    /// A reassembled datagram of `len` bytes (`head`: at least its headers)
    /// continues as one packet, steered by its own hash under the hash types
    /// (counted as `reinjected` when its owner is another worker).
    fn deliver_datagram(
        &mut self,
        work: &mut WorkSide,
        c: &mut LcoreCounters,
        head: &[u8],
        len: usize,
        q: QueueId,
        now: u64,
    ) {
        let parsed = parse_frame_into(head, LinkType::RawIp, &self.opts, &mut work.reasm_parsed);
        match work.reasm_parsed.outer.filter(|_| parsed.is_ok()) {
            Some(dl3) => {
                if let Err(m) = check_lengths_in(head, len, &dl3) {
                    c.drops.count(DropReason::Malformed(m));
                    return;
                }
                let (hash, _) = self.rss.hash_frame(head, &dl3);
                let owner = self.shared.buckets.worker(self.shared.buckets.bucket_for(hash));
                let worker_side = self.frag_steer.carries_bytes();
                let desc = self.describe(c, head, len, &dl3, hash, q, false);
                if worker_side && (owner == work.id || self.dispatch == Dispatch::Direct) {
                    // Reassembled by its owner: deliver here, now, behind the
                    // flow's earlier packets (a hop through our own queue
                    // would let later ones overtake it).
                    c.hdispatched += 1;
                    work.submit(c, &desc, now);
                } else {
                    if owner != work.id && self.dispatch != Dispatch::Direct {
                        c.reinjected += 1;
                    }
                    self.steer_desc(work, c, head, desc, now);
                }
            }
            None => c.drops.count(DropReason::ReasmUnparsable),
        }
    }

    /// Steer one packet (a received frame or a reassembled datagram). With
    /// `carry` the frame is a fragment whose bytes go along to the worker
    /// that reassembles it.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn steer_packet(
        &mut self,
        work: &mut WorkSide,
        c: &mut LcoreCounters,
        bytes: &[u8],
        l3: &L3Info,
        hash: u32,
        q: QueueId,
        now: u64,
        carry: bool,
    ) {
        let desc = self.describe(c, bytes, bytes.len(), l3, hash, q, carry);
        self.steer_desc(work, c, bytes, desc, now);
    }

    /// The descriptor of a packet (`len` bytes, its first bytes in `bytes`)
    /// about to be delivered or steered, order-stamped unless its bytes are
    /// carried, and counted on its bucket (the rebalancer's load).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn describe(
        &self,
        c: &mut LcoreCounters,
        bytes: &[u8],
        len: usize,
        l3: &L3Info,
        hash: u32,
        q: QueueId,
        carry: bool,
    ) -> PacketDesc {
        let (seq, flow_id) =
            if self.order_stamps && !carry { stamp(bytes, l3).unwrap_or((0, NO_FLOW_ID)) } else { (0, NO_FLOW_ID) };
        if let Some(slot) = c.bucket_packets.get_mut(self.shared.buckets.bucket_for(hash)) {
            *slot += 1;
        }
        PacketDesc {
            key: FlowKey::from(l3.tuple),
            hash,
            seq,
            flow_id,
            len: len.min(usize::from(u16::MAX)) as u16,
            rxq: q,
            fragment: l3.frag.is_some(),
            carry,
        }
    }

    /// Steers the packet `desc` describes ([`RxSide::describe`]); `bytes`
    /// holds at least its headers, and the whole fragment when its bytes are
    /// carried (`desc.carry`).
    #[inline]
    fn steer_desc(&mut self, work: &mut WorkSide, c: &mut LcoreCounters, bytes: &[u8], desc: PacketDesc, now: u64) {
        let (hash, q, carry) = (desc.hash, desc.rxq, desc.carry);
        if self.dispatch == Dispatch::Direct {
            c.dispatched += 1;
            if carry {
                self.take_fragment(work, c, bytes, q, now);
            } else {
                work.submit(c, &desc, now);
            }
            return;
        }
        let (target, slot) = self.steerer.target(hash, &Rings(&self.stats));
        match decide(self.dispatch, work.id, target) {
            Action::Inline => {
                c.hdispatched += 1;
                if carry {
                    self.take_fragment(work, c, bytes, q, now);
                } else {
                    work.submit(c, &desc, now);
                }
            }
            Action::Queue(w) => {
                let wi = w.index();
                if wi >= self.producers.len() {
                    // A steering table named a worker that does not exist.
                    c.drops.count(DropReason::NoSuchWorker);
                    return;
                }
                if carry {
                    // Bytes first, then the descriptor, pushed at once (not
                    // staged) so the two queues cannot disagree.
                    work.run_burst(c, now);
                    self.flush(c, wi);
                    let sent =
                        self.producers[wi].free_slots() > 0 && self.carry_out.get(wi).is_some_and(|c| c.send(bytes));
                    if sent && self.producers[wi].push(desc).is_ok() {
                        c.queued_to[wi] += 1;
                        self.steerer.enqueued(slot, self.producers[wi].tail());
                    } else {
                        c.qdrops_to[wi] += 1;
                    }
                    return;
                }
                if self.stage[wi].is_empty() {
                    self.stage_tail[wi] = self.producers[wi].tail();
                }
                self.stage[wi].push(desc);
                // Projected tail: the drain rule must see this packet even
                // before the staged burst is pushed.
                self.steerer.enqueued(slot, self.stage_tail[wi] + self.stage[wi].len() as u64);
                if self.stage[wi].len() >= self.stage[wi].capacity() {
                    work.run_burst(c, now);
                    self.flush(c, wi);
                }
            }
        }
    }

    /// Frames this core may take from a source that holds back, now and at
    /// most: the fewest free slots of its hand-off queues (nothing is
    /// staged between polls) and their smallest capacity, each less a
    /// reserve of a burst per queue (at most half a queue) for what the
    /// worker side pushes besides received frames.
    fn room(&self, burst: usize) -> (usize, usize) {
        let reserve = |p: &Producer<PacketDesc>| (burst * self.producers.len()).min(p.capacity() / 2);
        let now = self.producers.iter().map(|p| p.free_slots().saturating_sub(reserve(p))).min();
        let most = self.producers.iter().map(|p| p.capacity() - reserve(p)).min();
        (now.unwrap_or(usize::MAX), most.unwrap_or(usize::MAX).max(1))
    }

    fn flush(&mut self, c: &mut LcoreCounters, w: usize) {
        let staged = self.stage[w].len();
        if staged == 0 {
            return;
        }
        let n = self.producers[w].push_burst(&self.stage[w]);
        c.queued_to[w] += n as u64;
        c.qdrops_to[w] += (staged - n) as u64;
        self.stage[w].clear();
    }

    fn flush_all(&mut self, c: &mut LcoreCounters) {
        for w in 0..self.stage.len() {
            self.flush(c, w);
        }
    }
}

impl WorkSide {
    /// The first stage of the worker's pipeline: the listener check, then
    /// the packet's flow key hashed and its bucket line, order-book entry
    /// and consumer-map entry requested; the packet waits in `pending`
    /// until [`run_burst`](WorkSide::run_burst), run when [`PIPELINE`]
    /// packets wait and at the end of every poll. By then its lines are
    /// (being) fetched, together with the other packets' lines, instead of
    /// one DRAM miss after another.
    #[inline]
    fn submit(&mut self, c: &mut LcoreCounters, d: &PacketDesc, now: u64) {
        if !self.listener_takes(c, d) {
            return;
        }
        let p = self.flows.prepare(&d.key);
        if !self.pipelined {
            self.process(c, d, &p, now);
            return;
        }
        if d.flow_id != NO_FLOW_ID {
            self.order.prefetch(d.flow_id);
            self.consumer_map.prefetch(d.flow_id);
        }
        self.pending.push((*d, p));
        if self.pending.len() >= PIPELINE {
            self.run_burst(c, now);
        }
    }

    /// The second and third stages: request each waiting packet's flow
    /// entry line (its bucket line has arrived by now), then process the
    /// packets in arrival order.
    fn run_burst(&mut self, c: &mut LcoreCounters, now: u64) {
        if self.pending.is_empty() {
            return;
        }
        for (_, p) in &self.pending {
            self.flows.prefetch_entry(p);
        }
        let mut pending = std::mem::take(&mut self.pending);
        for (d, p) in &pending {
            self.process(c, d, p, now);
        }
        pending.clear();
        self.pending = pending;
    }

    /// With `--listen`, only packets to a listener go on; the others are
    /// dropped and counted (`no_listener`).
    #[inline]
    fn listener_takes(&mut self, c: &mut LcoreCounters, d: &PacketDesc) -> bool {
        if !self.listening {
            return true;
        }
        let bucket = (d.hash & self.bucket_mask) as u16;
        match self.listeners.lookup(d.key.proto, d.key.dport, bucket) {
            Some(Listener::Bucket(_)) => c.listener_bucket += 1,
            Some(Listener::Wildcard) => c.listener_wildcard += 1,
            None => {
                c.drops.count(DropReason::NoListener);
                return false;
            }
        }
        true
    }

    /// The packet's flow state, order check, consumer and RFS record
    /// (its key hashed by [`submit`](WorkSide::submit)).
    #[inline]
    fn process(&mut self, c: &mut LcoreCounters, d: &PacketDesc, p: &Prepared, now: u64) {
        match self.flows.lookup_or_insert_prepared(p, now, FlowState::default) {
            Ok((_, st)) => {
                st.packets += 1;
                st.bytes += u64::from(d.len);
            }
            Err(_) => {
                c.drops.count(DropReason::FlowTableFull);
                return;
            }
        }
        c.handled_bytes += u64::from(d.len);
        let consumer = if d.flow_id == NO_FLOW_ID {
            self.id
        } else {
            if !self.order.deliver(d.flow_id, d.seq) {
                c.order_violations += 1;
            }
            self.consumer_map.consumer(d.flow_id)
        };
        if consumer == self.id {
            c.consumer_local += 1;
        } else {
            c.consumer_remote += 1;
        }
        if let Some(sock) = &self.sock {
            sock.record(d.hash, consumer);
        }
    }
}

/// The generator's (seq, flow id) stamp at the start of the L4 payload.
#[inline]
fn stamp(bytes: &[u8], l3: &flowsteer_wire::L3Info) -> Option<(u64, u32)> {
    let l4 = l3.l4_offset?;
    let payload = match l3.tuple.proto {
        proto::UDP => l4 + 8,
        proto::TCP => l4 + usize::from(bytes.get(l4 + 12)? >> 4) * 4,
        _ => return None,
    };
    flowsteer_gen::read_seq(bytes.get(payload..)?)
}
