//! flowsteer-rfc2544: an RFC 2544 throughput harness for any Linux
//! forwarding path.
//!
//! | module | what it does | I/O |
//! |---|---|---|
//! | [`search`] | the NDR/PDR binary search (RFC 2544 section 26.1, the MLRsearch practice): which rate to try next, for how long, and when to stop | none (sans-IO: trial results come in as arguments) |
//! | [`frames`] | test frames: templates per flow and size (IMIX included), the per-frame stamp (stream, sequence, transmit time) with its checksum update | none |
//! | [`track`] | the receiver's check of each frame: sent in this trial, duplicate, reordered, foreign; latency percentiles | none (time is an argument) |
//!
//! The search never runs a trial itself: [`search::Search::next_step`]
//! says which trial to run and [`search::Search::record`] takes its result.
//! [`search::run`] drives it through any [`search::TrialRunner`], which the
//! tests implement with a simulated device (a loss curve).
#![forbid(unsafe_code)]

pub mod frames;
pub mod search;
pub mod track;
