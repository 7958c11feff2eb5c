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
//! | [`FlowTable<V>`] | key -> `V`, idle expiry by a clock hand, bounded, burst lookups | one worker; `Send`, not `Sync` |
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
//! * **Two cache lines per packet, and a burst's misses overlapped.** A
//!   bucket is one 64-byte line of eight 16-bit tags and slab indices; an
//!   entry is one line holding key, last-seen stamp and value. A hit reads
//!   the home bucket and the one entry its tag points at, and writes only
//!   that entry: no LRU list to relink. [`FlowTable::prepare`] and
//!   [`FlowTable::prefetch_entry`] request a burst's lines before
//!   [`FlowTable::lookup_or_insert_prepared`] needs them, so at a million
//!   flows, where every line is a DRAM miss, the misses of a burst are in
//!   flight together instead of one after another (DPDK's bulk lookup,
//!   VPP's vectors, Cuckoo++'s tags). `std`'s `HashMap` has neither the
//!   fixed memory nor the split lookup.
//! * **Expiry off the packet path.** A clock hand walks the slab
//!   sequentially, a budget of slots per call ([`FlowTable::expire`]),
//!   removing flows whose stamp is older than the timeout; a full table
//!   evicts the first idle flow the hand finds. A packet only writes its
//!   entry's stamp.
//! * **Hostile traffic.** Buckets and tags come from SipHash-1-3 under a
//!   per-table random 128-bit key, independent of the RSS Toeplitz hash
//!   (which is public and linear, so a sender can craft 2^24 tuples with
//!   equal low hash bits, see [`hostile`]). Linear probing over bucket lines
//!   at load <= 1/2, an overflow count per bucket so a miss stops at the
//!   first bucket nothing passed, no tombstones, and the lines read
//!   exported in [`FlowStats`] (`probes`, `max_probe`) so the
//!   hostile-traffic test (`tests/hostile.rs`) can show they stay short.
//!
//! Measured: `flowsteer bench flow` (BENCHMARKS.md, "Flow table at scale").
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
