//! Building an engine: workers, the full mesh of hand-off queues, the shared
//! steering tables, and one [`Lcore`] per worker.

use crate::counters::{snapshot, LcoreCounters, Snapshot};
use crate::desc::PacketDesc;
use crate::dest::DestFilter;
pub use crate::error::EngineError;
use crate::fraghold::FragHoldConfig;
pub use crate::fragsteer::FragSteer;
use crate::lcore::{FlowState, Lcore, LcoreParts};
pub use crate::limits::{DEFAULT_BUCKETS, DEFAULT_BURST, DEFAULT_RING_CAPACITY, MAX_RX_QUEUES};
use crate::order::{ConsumerMap, OrderBook};
use crate::source::RxSource;
use flowsteer_flow::{FlowTable, FlowTableConfig};
use flowsteer_ring::{channel, RingStats};
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_steer::cpuset::CpuSet;
use flowsteer_steer::dispatch::Dispatch;
use flowsteer_steer::steer::{
    rps_workers, BucketMap, Policy, SharedTables, SockFlowTable, Steerer, DEFAULT_FLOW_CNT, DEFAULT_SOCK_FLOW_ENTRIES,
};
use flowsteer_steer::{WorkerId, MAX_WORKERS};
use std::sync::{Arc, Mutex};

/// How to build the engine. Every capacity is bounded; see the constants.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// One worker per entry, pinned to that CPU.
    pub cpus: Vec<u32>,
    /// Number of receive queues (queues `0..rx_queues`).
    pub rx_queues: u16,
    /// Receive queue (by [`QueueId::index`]) -> worker that polls it;
    /// default `q % workers`.
    pub rxq_worker: Option<Vec<WorkerId>>,
    pub policy: Policy,
    pub dispatch: Dispatch,
    /// RPS CPU set per receive queue (one entry: the same for all). Empty:
    /// RPS off (a queue's packets stay on its poller).
    pub rps_cpus: Vec<CpuSet>,
    pub ring_capacity: usize,
    pub burst: usize,
    /// Software buckets (the RSS bucket -> worker map), power of two.
    pub buckets: usize,
    pub sock_flow_entries: usize,
    pub flow_cnt: usize,
    pub flow_table: FlowTableConfig,
    /// The drain rule (never off outside tests and demonstrations).
    pub drain_rule: bool,
    pub rss: RssConfig,
    /// Flows the order book and consumer map track (the generator's count).
    pub tracked_flows: usize,
    /// Read the generator's (sequence, flow id) stamp from each packet and
    /// check per-flow order. Off for captures, whose payloads carry no stamp.
    pub order_stamps: bool,
    /// Seed for the flow tables' keyed hashes (`None`: OS randomness).
    pub seed: Option<u64>,
    /// What to do with IP fragments (see [`FragSteer`]).
    pub frag_steer: FragSteer,
    /// Holding area of the `owner` policy (its timeouts are the reassembly
    /// timeouts of each family, `reasm.timeout_v4_ns` and `timeout_v6_ns`).
    pub frag_hold: FragHoldConfig,
    /// Limits of each core's reassembler (`FragSteer::Rehash`).
    pub reasm: flowsteer_reasm::ReasmConfig,
    /// `(protocol, port)` the built-in application listens on, with one
    /// listener per bucket on the bucket's core and a wildcard on every
    /// core. Empty (the default): every packet is accepted.
    pub listen: Vec<(u8, u16)>,
    /// The destinations the application takes besides unicast to this
    /// host (see [`crate::dest`]); the default takes unicast only.
    pub dest: DestFilter,
}

impl EngineConfig {
    pub fn new(cpus: Vec<u32>, rss: RssConfig) -> EngineConfig {
        EngineConfig {
            rx_queues: cpus.len() as u16,
            cpus,
            rxq_worker: None,
            policy: Policy::Rss,
            dispatch: Dispatch::Hybrid,
            rps_cpus: Vec::new(),
            ring_capacity: DEFAULT_RING_CAPACITY,
            burst: DEFAULT_BURST,
            buckets: DEFAULT_BUCKETS,
            sock_flow_entries: DEFAULT_SOCK_FLOW_ENTRIES,
            flow_cnt: DEFAULT_FLOW_CNT,
            flow_table: FlowTableConfig::default(),
            drain_rule: true,
            rss,
            tracked_flows: 1024,
            order_stamps: true,
            frag_steer: FragSteer::Off,
            frag_hold: FragHoldConfig::default(),
            reasm: flowsteer_reasm::ReasmConfig::default(),
            seed: None,
            listen: Vec::new(),
            dest: DestFilter::default(),
        }
    }

    pub fn workers(&self) -> usize {
        self.cpus.len()
    }

    /// Worker polling receive queue `q`.
    pub fn worker_of_rxq(&self, q: QueueId) -> WorkerId {
        match &self.rxq_worker {
            Some(m) => m[q.index()],
            None => WorkerId((q.index() % self.workers().max(1)) as u16),
        }
    }
}

/// A built engine, not yet running.
pub struct Engine {
    pub cfg: EngineConfig,
    pub lcores: Vec<Lcore>,
    pub shared: SharedTables,
    pub consumers: Arc<ConsumerMap>,
    /// `ring_stats[r][w]`: the queue from core `r` to worker `w`.
    pub ring_stats: Vec<Vec<RingStats>>,
    pub published: Vec<Arc<Mutex<LcoreCounters>>>,
}

impl Engine {
    /// Build with one source per worker (it serves that worker's receive queues).
    pub fn build(cfg: EngineConfig, mut sources: Vec<Box<dyn RxSource>>) -> Result<Engine, EngineError> {
        let n = cfg.workers();
        if n == 0 {
            return Err(EngineError::NoWorkers);
        }
        if n > MAX_WORKERS {
            return Err(EngineError::TooManyWorkers(n));
        }
        let rxq = usize::from(cfg.rx_queues);
        if rxq == 0 || rxq > MAX_RX_QUEUES {
            return Err(EngineError::BadRxQueues(rxq));
        }
        if let Some(m) = &cfg.rxq_worker {
            if m.len() != rxq {
                return Err(EngineError::RxqMapLen { entries: m.len(), queues: rxq });
            }
            if let Some(&worker) = m.iter().find(|w| w.index() >= n) {
                return Err(EngineError::RxqMapWorker { worker, workers: n });
            }
        }
        if sources.len() != n {
            return Err(EngineError::Sources { given: sources.len(), workers: n });
        }
        let shared = SharedTables {
            buckets: Arc::new(BucketMap::round_robin(cfg.buckets, n)),
            sock: (cfg.policy == Policy::Rfs).then(|| Arc::new(SockFlowTable::new(cfg.sock_flow_entries))),
        };
        let order = Arc::new(OrderBook::new(cfg.tracked_flows));
        let consumers = Arc::new(ConsumerMap::new(cfg.tracked_flows, n));
        // Full mesh of queues: producers[r][w], consumers[w][r].
        let mut producers: Vec<Vec<_>> = (0..n).map(|_| Vec::with_capacity(n)).collect();
        let mut cons: Vec<Vec<_>> = (0..n).map(|_| Vec::with_capacity(n)).collect();
        for prod in producers.iter_mut() {
            for c in cons.iter_mut() {
                let (p, q) = channel::<PacketDesc>(cfg.ring_capacity).map_err(EngineError::Ring)?;
                prod.push(p);
                c.push(q);
            }
        }
        // Fragment bytes beside the descriptor queues (policies that carry
        // them): carry_out[r][w] pairs with producers[r][w], same capacity.
        let (mut carry_out, mut carry_in): (Vec<Vec<_>>, Vec<Vec<_>>) = if cfg.frag_steer.carries_bytes() {
            let mut outs: Vec<Vec<_>> = (0..n).map(|_| Vec::with_capacity(n)).collect();
            let mut ins: Vec<Vec<_>> = (0..n).map(|_| Vec::with_capacity(n)).collect();
            for o in outs.iter_mut() {
                for i in ins.iter_mut() {
                    let (a, b) = crate::carry::link(cfg.ring_capacity);
                    o.push(a);
                    i.push(b);
                }
            }
            (outs, ins)
        } else {
            (Vec::new(), Vec::new())
        };
        let ring_stats = producers.iter().map(|ps| ps.iter().map(|p| p.stats()).collect()).collect();
        let mut lcores = Vec::with_capacity(n);
        let mut seed = cfg.seed;
        for (i, (prods, cs)) in producers.into_iter().zip(cons).enumerate().rev() {
            let id = WorkerId(i as u16);
            let rxqs: Vec<QueueId> = QueueId::all(cfg.rx_queues).filter(|&q| cfg.worker_of_rxq(q) == id).collect();
            // RPS set of this core's (first) queue.
            let rps = match cfg.rps_cpus.len() {
                0 => Vec::new(),
                1 => rps_workers(&cfg.rps_cpus[0], &cfg.cpus).map_err(EngineError::Rps)?,
                _ => {
                    let q = rxqs.first().copied().unwrap_or(QueueId(0));
                    let set = cfg
                        .rps_cpus
                        .get(q.index())
                        .ok_or(EngineError::RpsMasks { masks: cfg.rps_cpus.len(), queues: cfg.rx_queues })?;
                    rps_workers(set, &cfg.cpus).map_err(EngineError::Rps)?
                }
            };
            let mut steerer = Steerer::new(cfg.policy, id, rps, shared.clone(), cfg.flow_cnt);
            if !cfg.drain_rule {
                steerer = steerer.without_drain_rule();
            }
            let flows = match seed.as_mut() {
                Some(s) => {
                    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    FlowTable::with_seed(cfg.flow_table, (*s, s.rotate_left(17)))
                }
                None => FlowTable::new(cfg.flow_table),
            }
            .map_err(EngineError::FlowTable)?;
            let flows: FlowTable<FlowState> = flows;
            let reasm = match cfg.frag_steer {
                FragSteer::Off => None,
                _ => Some(flowsteer_reasm::Reassembler::new(cfg.reasm).map_err(EngineError::Reasm)?),
            };
            let (carry_out, carry_in) = carry_out.pop().zip(carry_in.pop()).unwrap_or_default();
            let source = sources.pop().ok_or(EngineError::Sources { given: 0, workers: n })?;
            lcores.push(Lcore::new(LcoreParts {
                id,
                rxqs,
                source,
                dispatch: cfg.dispatch,
                rss: cfg.rss.clone(),
                steerer,
                shared: shared.clone(),
                producers: prods,
                consumers: cs,
                flows,
                order: order.clone(),
                consumer_map: consumers.clone(),
                burst: cfg.burst,
                buckets: shared.buckets.len(),
                listen: cfg.listen.clone(),
                dest: cfg.dest,
                order_stamps: cfg.order_stamps,
                reasm,
                frag_steer: cfg.frag_steer,
                frag_hold: FragHoldConfig {
                    timeout_v4_ns: cfg.reasm.timeout_v4_ns,
                    timeout_v6_ns: cfg.reasm.timeout_v6_ns,
                    ..cfg.frag_hold
                },
                carry_out,
                carry_in,
            })?);
        }
        lcores.reverse();
        let published = lcores.iter().map(|l| l.published()).collect();
        Ok(Engine { cfg, lcores, shared, consumers, ring_stats, published })
    }

    /// Sum the published counters.
    pub fn snapshot(
        ring_stats: &[Vec<RingStats>],
        published: &[Arc<Mutex<LcoreCounters>>],
        cpus: &[u32],
        elapsed_s: f64,
        rebalance_moves: u64,
    ) -> Snapshot {
        let counters: Vec<LcoreCounters> =
            published.iter().map(|p| p.lock().map(|c| c.clone()).unwrap_or_default()).collect();
        let len: Vec<Vec<u64>> = ring_stats.iter().map(|r| r.iter().map(|s| s.len() as u64).collect()).collect();
        let wm: Vec<Vec<u64>> =
            ring_stats.iter().map(|r| r.iter().map(|s| s.high_watermark() as u64).collect()).collect();
        snapshot(&counters, cpus, &len, &wm, elapsed_s, rebalance_moves)
    }
}
