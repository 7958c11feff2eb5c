//! flowsteer-bench: the benchmark harnesses behind `flowsteer bench`, and
//! the ones the data-path crates are measured with.
//!
//! | module | what it times | used by |
//! |---|---|---|
//! | [`ring`] | `flowsteer-ring` against `rtrb` and crossbeam's `ArrayQueue` | `bench steer`, example `ring_bench` |
//! | [`flow`] | the flow table under random and colliding keys | `bench steer`, example `collision_bench` |
//!
//! The harnesses measure: they read clocks, spawn and pin threads. None of
//! it is on a packet path.
#![deny(unsafe_code)]

pub mod flow;
pub mod ring;
