//! The baseline before RSS: one receive queue behind a lock, which every
//! worker polls, and one flow table behind a lock shared by all workers
//! (flows are not affine to workers). `burst` packets are taken per queue
//! lock: 1 is the classic `IF_DEQUEUE` shape, 32 the stronger, batched
//! one. The flow table lock is taken per packet, as a global PCB lock was.
//! Each worker parses, hashes (RSS, one queue) and looks the flow up, the
//! work `per-core` does without the locks.

use flowsteer_engine::source::{GenSource, RxSource};
use flowsteer_flow::{FlowKey, FlowTable, FlowTableConfig};
use flowsteer_gen::{GenConfig, Spread};
use flowsteer_rss::{Fields, RssConfig};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Million packets per second through the shared-queue design with
/// `workers` pinned threads (the first CPUs this process may use) for
/// `seconds`, traffic of `flows` flows from the built-in generator; 0.0
/// when the generator or the table cannot be built.
pub fn run(gen_cfg: &GenConfig, workers: usize, seconds: f64, burst: usize) -> f64 {
    struct Shared {
        gen: GenSource,
        queue: std::collections::VecDeque<Vec<u8>>,
    }
    let Ok(gen) = GenSource::new(gen_cfg, Spread::Single, 32) else { return 0.0 };
    let shared = Arc::new(Mutex::new(Shared { gen, queue: std::collections::VecDeque::with_capacity(1024) }));
    let cap = (gen_cfg.flows as usize).next_power_of_two().max(1024);
    let Ok(table) = FlowTable::<u64>::new(FlowTableConfig { capacity: cap, ..FlowTableConfig::default() }) else {
        return 0.0;
    };
    let table = Arc::new(Mutex::new(table));
    let rss = RssConfig::default_for_queues(1).ok();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let cpus = flowsteer_live::available_cpus();
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let (shared, table, rss) = (shared.clone(), table.clone(), rss.clone());
            let cpu = cpus.get(i).copied().unwrap_or(0);
            std::thread::spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize });
                let Some(rss) = rss else { return 0u64 };
                let opts = ParseOptions::default();
                let mut local: Vec<Vec<u8>> = Vec::with_capacity(32);
                let mut done = 0u64;
                let mut spare: Vec<Vec<u8>> = Vec::new();
                while Instant::now() < deadline {
                    for _ in 0..64 {
                        {
                            let Ok(mut s) = shared.lock() else { return done };
                            if s.queue.len() < 32 {
                                // Poll the one receive queue (under the lock).
                                let Shared { gen, queue } = &mut *s;
                                gen.poll(flowsteer_rss::QueueId(0), 32, &mut |b| {
                                    let mut v = spare.pop().unwrap_or_default();
                                    v.clear();
                                    v.extend_from_slice(b);
                                    queue.push_back(v);
                                });
                            }
                            for _ in 0..burst {
                                match s.queue.pop_front() {
                                    Some(f) => local.push(f),
                                    None => break,
                                }
                            }
                        }
                        for f in local.drain(..) {
                            if let Ok(p) = parse_frame(&f, LinkType::Ethernet, &opts) {
                                if let Some(l3) = p.outer {
                                    let input = rss.input_for(&l3.tuple, l3.frag.is_some());
                                    let h = if input.fields() == Fields::None {
                                        0
                                    } else {
                                        rss.hasher().hash(input.as_bytes())
                                    };
                                    let key = FlowKey::from(l3.tuple);
                                    if let Ok(mut t) = table.lock() {
                                        if let Ok((_, v)) = t.lookup_or_insert(&key, done, || 0) {
                                            *v += u64::from(h & 1) + 1;
                                        }
                                    }
                                }
                            }
                            done += 1;
                            spare.push(f);
                        }
                    }
                }
                done
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    total as f64 / start.elapsed().as_secs_f64() / 1e6
}
