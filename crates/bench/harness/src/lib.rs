//! flowsteer-bench: the benchmark harnesses behind `flowsteer bench`, and
//! the ones the data-path crates are measured with.
//!
//! | module | what it times | used by |
//! |---|---|---|
//! | [`hash`] | ns per Toeplitz hash, every implementation | `bench hash` |
//! | [`steer`] | the engine against the shared-queue baseline ([`steer::shared_queue`]), the ring alone, each stage | `bench steer` |
//! | [`reasm`] | reassembly on one core; DPDK side by side ([`reasm::dpdk`]) | `bench reasm` |
//! | [`udp`] | UDP echo in network namespaces it builds | `bench udp` |
//! | [`analyze`] | `analyze` on a generated capture | `bench analyze` |
//! | [`ring`] | `flowsteer-ring` against `rtrb` and crossbeam's `ArrayQueue` | `bench steer`, example `ring_bench` |
//! | [`fdb`] | the bridge's MAC table read side against `RwLock`/`Mutex<HashMap>` | example `fdb_bench` |
//! | [`flow`] | the flow table under random and colliding keys; DPDK's `rte_hash` beside it ([`flow::dpdk`]) | `bench steer`, `bench flows`, example `collision_bench` |
//! | [`flows`] | the engine and the flow table from a thousand to ten million flows | `bench flows` |
//! | [`offload`] | the bridge's per-frame cost of carrying transmit offloads (checksum completion, software GSO) against its frame copy | `bench offload` |
//!
//! Each harness takes a plain configuration struct and returns its rows
//! (`Serialize`) or a typed error; the library prints nothing. A report
//! gives its `--json` document (`json()`) and its text table (`text()`) for
//! the caller to print, and lines a harness has to show while it runs are
//! handed to a callback the caller supplies. Error texts name the CLI's
//! flags, which the configuration fields mirror one for one.
//!
//! The harnesses measure: they read clocks, spawn and pin threads, and
//! `udp` runs the flowsteer binary. None of it is on a packet path.
#![forbid(unsafe_code)]

pub mod analyze;
pub mod fdb;
pub mod flow;
pub mod flows;
pub mod hash;
pub mod offload;
pub mod reasm;
pub mod ring;
pub mod steer;
pub mod udp;

/// The CPU model line from /proc/cpuinfo, for the record ("unknown" when
/// it cannot be read).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}
