//! flowsteer-flow: the per-core flow table, timers and listeners (the
//! PCB-group idea: per-bucket listeners, per-core timers, bounded expiry).
//!
//! Stage 5 of the packet's path (source -> parse -> hash -> steer ->
//! hand-off -> **worker**). RSS sends every packet of a flow to one core;
//! that core keeps the flow's state in its own [`FlowTable`], runs the
//! flow's timers on its own [`TimerWheel`] and finds the application on its
//! own [`Listeners`], so nothing here is shared or locked (FreeBSD's
//! `in_pcbgroup`: one connection table per RSS bucket).
//!
//! | type | what | owner / thread safety |
//! |---|---|---|
//! | [`FlowKey`] | 5-tuple, from [`flowsteer_wire::FlowTuple`] | value |
//! | [`FlowTable<V>`] | key -> `V`, LRU idle expiry, bounded | one worker; `Send`, not `Sync` |
//! | [`TimerWheel`] | hashed timing wheel, token callbacks | one worker; `Send`, not `Sync` |
//! | [`Listeners<L>`] | `(proto, port, bucket or wildcard)` -> `L` | one worker; `Send`, not `Sync` |
//!
//! Pure: no threads, no clocks (time is the `now: u64` nanoseconds argument,
//! from any monotonic origin), no I/O, no printing, no panics on any key or
//! time value. The table is timed by `flowsteer_bench::flow`, in the
//! `flowsteer-bench` crate.
//!
//! # Why the table is written by hand
//!
//! * **Bounded memory, allocated once.** [`FlowTable::new`] reserves the
//!   bucket array and the entry slab for `capacity` flows; inserts never
//!   rehash, resize or allocate, so the worst packet costs what the average
//!   one does, and a flood of new tuples cannot grow memory. A full table
//!   evicts an idle flow or refuses the new one (drop and count), see
//!   [`FlowTable`].
//! * **O(1) expiry.** The entries form an intrusive LRU list (u32 prev/next
//!   indices in the slab); the least recently seen flow is always at the
//!   tail, so [`FlowTable::expire`] pops idle flows from there, at most a
//!   budget per call, and stops at the first fresh one: no table walk per
//!   tick. `std::collections::HashMap` has no such order.
//! * **Hostile traffic.** Buckets are chosen by SipHash-1-3 under a per-table
//!   random 128-bit key, independent of the RSS Toeplitz hash (which is
//!   public and linear, so a sender can craft 2^24 tuples with equal low
//!   hash bits, see [`hostile`]). Open addressing with linear probing at load
//!   factor <= 1/2, backward-shift deletion (no tombstones), and the probe
//!   lengths exported in [`FlowStats`] (`probes`, `max_probe`) so the
//!   hostile-traffic test (`tests/hostile.rs`) can show they stay short.
//!
//! Measured (release, shared 2-core VM under load, 100 000 IPv4 UDP flows,
//! `flowsteer_bench::flow::collision_bench`): 35-43 ns per operation
//! (insert or lookup) for random keys and for keys colliding in the low 16
//! Toeplitz bits alike (ratio 0.99-1.04); max probe 17 vs 16, mean 1.31
//! buckets.
#![forbid(unsafe_code)]

pub mod hostile;
mod key;
pub mod listen;
pub mod table;
pub mod timer;

pub use key::FlowKey;
pub use listen::{BindError, Listeners};
pub use table::{FlowError, FlowId, FlowStats, FlowTable, FlowTableConfig};
pub use timer::{TimerError, TimerId, TimerStats, TimerWheel, TimerWheelConfig};
