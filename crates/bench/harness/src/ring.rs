//! Throughput of `flowsteer-ring` against `rtrb` and crossbeam's
//! `ArrayQueue`, in one run, same shape ([`run`]; `bench steer` and the
//! `ring_bench` example call it).
//!
//! Shape (after DPDK's `ring_perf_autotest`): one producer thread and one
//! consumer thread, each pinned when a CPU is given, move `items` `u64`
//! values (pointer-sized, like `rte_ring`'s `void *`) through a ring of
//! [`BENCH_CAPACITY`] slots in bursts of `burst`. The clock runs on the
//! consumer from a common start barrier until it has received every item;
//! it checks the sum, so no value is lost or invented. A side that finds
//! the ring full or empty spins (`spin_loop`) and yields to the scheduler
//! after [`SPINS_BEFORE_YIELD`] failed tries, which matters only when both
//! threads share one CPU.
//!
//! Per design, a burst is:
//! * `flowsteer-ring`: `push_burst` / `pop_burst` (`push` / `pop` for 1);
//! * `rtrb`: `push_partial_slice` / `pop_partial_slice`, its `Copy` burst
//!   calls built on the chunk API (`write_chunk_uninit` / `read_chunk`)
//!   (`push` / `pop` for 1);
//! * `crossbeam-arrayqueue`: no burst API, so `burst` single `push` / `pop`
//!   calls (it is an MPMC queue: the baseline for "several receive threads
//!   feed one worker").
//!
//! This module spawns and pins threads, and reads
//! `/sys/devices/system/cpu/cpuN/cache` to describe the placement; the ring
//! itself does neither. Measured numbers are in `flowsteer-ring`'s crate
//! doc ("Measured cost"); no test asserts any of them.

use std::sync::Barrier;
use std::time::Instant;

/// Ring size used for every design (`ring_perf_autotest` uses 4096 too).
pub const BENCH_CAPACITY: usize = 4096;

/// Failed tries before a waiting side calls `thread::yield_now`.
pub const SPINS_BEFORE_YIELD: u32 = 1024;

/// One design's result.
#[derive(Debug, Clone, PartialEq)]
pub struct RingBenchResult {
    /// `"flowsteer-ring"`, `"rtrb"` or `"crossbeam-arrayqueue"`.
    pub design: &'static str,
    /// Items per burst (after clamping to `1..=BENCH_CAPACITY`).
    pub burst: usize,
    /// Items moved.
    pub items: u64,
    /// Wall time on the consumer, start barrier to last item.
    pub seconds: f64,
    /// `items / seconds / 1e6`.
    pub mitems_per_s: f64,
    /// Where the two threads ran, e.g.
    /// `"producer cpu0, consumer cpu1 (separate L2, shared L3)"`.
    pub placement: String,
}

/// Runs the three designs one after the other with the same parameters and
/// returns one result each, ours first.
///
/// `burst` is clamped to `1..=BENCH_CAPACITY`. A CPU that cannot be pinned
/// (out of range, not in the affinity mask) leaves that thread unpinned and
/// says so in `placement`. Panics only if the transfer itself is wrong (an
/// item lost or duplicated), which would be a bug in a ring.
pub fn run(items: u64, burst: usize, producer_cpu: Option<usize>, consumer_cpu: Option<usize>) -> Vec<RingBenchResult> {
    let burst = burst.clamp(1, BENCH_CAPACITY);
    let placement = describe_placement(producer_cpu, consumer_cpu);
    let designs: [(&'static str, DesignFn); 3] =
        [("flowsteer-ring", run_ours), ("rtrb", run_rtrb), ("crossbeam-arrayqueue", run_arrayqueue)];
    designs
        .iter()
        .map(|&(design, f)| {
            let seconds = f(items, burst, producer_cpu, consumer_cpu);
            RingBenchResult {
                design,
                burst,
                items,
                seconds,
                mitems_per_s: if seconds > 0.0 { items as f64 / seconds / 1e6 } else { 0.0 },
                placement: placement.clone(),
            }
        })
        .collect()
}

/// Moves `items` in bursts between two threads; returns the seconds taken.
type DesignFn = fn(items: u64, burst: usize, producer_cpu: Option<usize>, consumer_cpu: Option<usize>) -> f64;

/// Spin, then yield, while the other side catches up.
struct Backoff(u32);

impl Backoff {
    #[inline]
    fn snooze(&mut self) {
        if self.0 < SPINS_BEFORE_YIELD {
            self.0 += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    #[inline]
    fn reset(&mut self) {
        self.0 = 0;
    }
}

/// Runs `produce` and `consume` on two (optionally pinned) threads, starts
/// them together and returns the consumer's elapsed seconds. `consume`
/// returns the wrapping sum of what it received, checked here.
fn two_threads<P, C>(
    items: u64,
    producer_cpu: Option<usize>,
    consumer_cpu: Option<usize>,
    produce: P,
    consume: C,
) -> f64
where
    P: FnOnce() + Send,
    C: FnOnce() -> u64 + Send,
{
    let barrier = Barrier::new(2);
    let (seconds, sum) = std::thread::scope(|s| {
        s.spawn(|| {
            pin(producer_cpu);
            barrier.wait();
            produce();
        });
        let consumer = s.spawn(|| {
            pin(consumer_cpu);
            barrier.wait();
            let start = Instant::now();
            let sum = consume();
            (start.elapsed().as_secs_f64(), sum)
        });
        consumer.join().expect("consumer thread panicked")
    });
    let expected = (0..items).fold(0u64, u64::wrapping_add);
    assert_eq!(sum, expected, "ring benchmark: items lost or duplicated");
    seconds
}

fn pin(cpu: Option<usize>) {
    if let Some(id) = cpu {
        // Failure leaves the thread unpinned; `describe_placement` reports it.
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

/// Fills `buf` with `next, next + 1, ...`.
#[inline]
fn fill(buf: &mut [u64], next: u64) {
    for (i, v) in buf.iter_mut().enumerate() {
        *v = next + i as u64;
    }
}

#[inline]
fn sum(buf: &[u64]) -> u64 {
    buf.iter().fold(0u64, |a, &v| a.wrapping_add(v))
}

fn run_ours(items: u64, burst: usize, pcpu: Option<usize>, ccpu: Option<usize>) -> f64 {
    let (mut p, mut c) = flowsteer_ring::channel::<u64>(BENCH_CAPACITY).expect("BENCH_CAPACITY is valid");
    let produce = move || {
        let mut b = Backoff(0);
        if burst == 1 {
            for v in 0..items {
                while p.push(v).is_err() {
                    b.snooze();
                }
                b.reset();
            }
            return;
        }
        let mut buf = vec![0u64; burst];
        let mut next = 0u64;
        while next < items {
            let k = (items - next).min(burst as u64) as usize;
            fill(&mut buf[..k], next);
            let mut off = 0;
            while off < k {
                let n = p.push_burst(&buf[off..k]);
                if n == 0 {
                    b.snooze();
                } else {
                    b.reset();
                }
                off += n;
            }
            next += k as u64;
        }
    };
    let consume = move || {
        let mut b = Backoff(0);
        let mut acc = 0u64;
        let mut got = 0u64;
        if burst == 1 {
            while got < items {
                match c.pop() {
                    Some(v) => {
                        acc = acc.wrapping_add(v);
                        got += 1;
                        b.reset();
                    }
                    None => b.snooze(),
                }
            }
            return acc;
        }
        let mut out = vec![0u64; burst];
        while got < items {
            let n = c.pop_burst(&mut out);
            if n == 0 {
                b.snooze();
                continue;
            }
            b.reset();
            acc = acc.wrapping_add(sum(&out[..n]));
            got += n as u64;
        }
        acc
    };
    two_threads(items, pcpu, ccpu, produce, consume)
}

fn run_rtrb(items: u64, burst: usize, pcpu: Option<usize>, ccpu: Option<usize>) -> f64 {
    let (mut p, mut c) = rtrb::RingBuffer::<u64>::new(BENCH_CAPACITY);
    let produce = move || {
        let mut b = Backoff(0);
        if burst == 1 {
            for v in 0..items {
                while p.push(v).is_err() {
                    b.snooze();
                }
                b.reset();
            }
            return;
        }
        let mut buf = vec![0u64; burst];
        let mut next = 0u64;
        while next < items {
            let k = (items - next).min(burst as u64) as usize;
            fill(&mut buf[..k], next);
            let mut rest = &buf[..k];
            while !rest.is_empty() {
                let (pushed, remainder) = p.push_partial_slice(rest);
                if pushed.is_empty() {
                    b.snooze();
                } else {
                    b.reset();
                }
                rest = remainder;
            }
            next += k as u64;
        }
    };
    let consume = move || {
        let mut b = Backoff(0);
        let mut acc = 0u64;
        let mut got = 0u64;
        if burst == 1 {
            while got < items {
                match c.pop() {
                    Ok(v) => {
                        acc = acc.wrapping_add(v);
                        got += 1;
                        b.reset();
                    }
                    Err(_) => b.snooze(),
                }
            }
            return acc;
        }
        let mut out = vec![0u64; burst];
        while got < items {
            let (popped, _) = c.pop_partial_slice(&mut out);
            if popped.is_empty() {
                b.snooze();
                continue;
            }
            b.reset();
            acc = acc.wrapping_add(sum(popped));
            got += popped.len() as u64;
        }
        acc
    };
    two_threads(items, pcpu, ccpu, produce, consume)
}

fn run_arrayqueue(items: u64, burst: usize, pcpu: Option<usize>, ccpu: Option<usize>) -> f64 {
    let q = crossbeam_queue::ArrayQueue::<u64>::new(BENCH_CAPACITY);
    let q = &q;
    let produce = move || {
        let mut b = Backoff(0);
        let mut buf = vec![0u64; burst];
        let mut next = 0u64;
        while next < items {
            let k = (items - next).min(burst as u64) as usize;
            fill(&mut buf[..k], next);
            for &v in &buf[..k] {
                while q.push(v).is_err() {
                    b.snooze();
                }
                b.reset();
            }
            next += k as u64;
        }
    };
    let consume = move || {
        let mut b = Backoff(0);
        let mut acc = 0u64;
        let mut got = 0u64;
        let mut out = vec![0u64; burst];
        while got < items {
            let mut n = 0;
            while n < burst {
                match q.pop() {
                    Some(v) => {
                        out[n] = v;
                        n += 1;
                    }
                    None => break,
                }
            }
            if n == 0 {
                b.snooze();
                continue;
            }
            b.reset();
            acc = acc.wrapping_add(sum(&out[..n]));
            got += n as u64;
        }
        acc
    };
    two_threads(items, pcpu, ccpu, produce, consume)
}

/// E.g. `"producer cpu0, consumer cpu1 (separate L2, shared L3)"`.
pub fn describe_placement(producer_cpu: Option<usize>, consumer_cpu: Option<usize>) -> String {
    let online = flowsteer_live::available_cpus();
    let name = |cpu: Option<usize>| match cpu {
        Some(id) if online.iter().any(|&c| c as usize == id) => format!("cpu{id}"),
        Some(id) => format!("cpu{id} (not available, unpinned)"),
        None => "unpinned".to_string(),
    };
    match (producer_cpu, consumer_cpu) {
        (Some(a), Some(b)) if a == b => {
            format!("producer and consumer both on cpu{a} (time-shared)")
        }
        (Some(a), Some(b)) => {
            let shared = |level: u32| -> Option<bool> {
                let list = cache_shared_list(a, level)?;
                Some(list.iter().any(|&c| c as usize == b))
            };
            let word = |s: Option<bool>| match s {
                Some(true) => "shared",
                Some(false) => "separate",
                None => "unknown",
            };
            format!(
                "producer {}, consumer {} ({} L2, {} L3)",
                name(producer_cpu),
                name(consumer_cpu),
                word(shared(2)),
                word(shared(3))
            )
        }
        _ => format!("producer {}, consumer {}", name(producer_cpu), name(consumer_cpu)),
    }
}

/// CPUs sharing `cpu`'s unified or data cache of `level`, from sysfs.
fn cache_shared_list(cpu: usize, level: u32) -> Option<Vec<u32>> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).ok().map(|s| s.trim().to_string());
        // Skip `uevent` and anything else that is not an `indexN` directory.
        let (Some(l), Some(kind)) = (read("level"), read("type")) else { continue };
        if l.parse::<u32>().ok() != Some(level) || kind == "Instruction" {
            continue;
        }
        return Some(flowsteer_live::cpus::parse_list(&read("shared_cpu_list")?));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_moves_everything() {
        for burst in [1, 7, 32] {
            let r = run(10_000, burst, None, None);
            assert_eq!(r.len(), 3);
            assert_eq!(r[0].design, "flowsteer-ring");
            assert!(r.iter().all(|x| x.items == 10_000 && x.burst == burst));
        }
    }
}
