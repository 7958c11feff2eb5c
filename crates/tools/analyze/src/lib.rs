//! flowsteer-analyze: predict what a NIC's RSS does with a capture.
//!
//! Offline companion of the packet's path (source -> parse -> **hash** ->
//! steer -> ...): the same [`flowsteer_wire::parse_frame`] and
//! [`flowsteer_rss::RssConfig::place`] the dataplane uses, applied to every
//! frame of a capture, with the results summed per queue, per flow and per
//! encapsulation. `flowsteer analyze` (the CLI) reads the file and prints
//! the [`Report`]; this crate is sans-IO: no files, clocks or threads.
//!
//! # Algorithm (per frame, [`Analyzer::feed`])
//!
//! 1. Link type: not one [`flowsteer_wire::LinkType`] knows -> dropped,
//!    counted by link type.
//! 2. [`flowsteer_wire::parse_frame`]: an error -> dropped, counted by
//!    [`flowsteer_wire::ParseError::reason`].
//! 3. Placement, as the NIC would do it: the outer IP header is hashed
//!    under the configured hash types (fragments on the 2-tuple unless
//!    `fragments_on_2tuple` is off). Frames the NIC does not hash (non-IP,
//!    PPPoE which has no outer IP header, IP with no enabled hash type) get
//!    hash 0 and the queue of RETA entry 0.
//! 4. Per-queue packets and wire bytes; per-encapsulation counters.
//! 5. The flow table: flow = the outer tuple (protocol, addresses, ports
//!    when visible; for PPPoE the tuple inside). A later fragment carries no
//!    ports: it is keyed by (src, dst, proto, fragment id) in a fragment
//!    table that maps it to the flow its offset-0 fragment named, when that
//!    fragment came first; otherwise it counts as `fragments.unmatched`
//!    under its port-less tuple.
//! 6. With [`AnalyzeOptions::inner`], a second placement on the innermost
//!    IP header (VXLAN, Geneve, VXLAN-GPE, GTP-U, GRE, IP-in-IP, PPPoE) into
//!    a second per-queue table; a packet with no inner header is placed on
//!    its outer one and counted by reason (not tunnelled, a tunnel carrying
//!    non-IP, a malformed tunnel, a tunnel this parser does not open, a
//!    non-first outer fragment).
//!
//! [`Analyzer::finish`] derives the rest: flows per queue (by the queue of
//! their first packet), imbalance (max/mean and coefficient of variation),
//! flows split across queues (a flow whose packets landed on more than one
//! queue: fragments on the 2-tuple, whole packets on the 4-tuple), the
//! connections whose two directions land apart (each flow paired with its
//! reversed tuple), the heaviest flows, and the conservation check
//! `packets_read = analysed + dropped`.
//!
//! # Limits
//!
//! Memory is bounded by [`AnalyzeOptions::max_flows`] (default
//! [`DEFAULT_MAX_FLOWS`], about 128 MB when full) and
//! [`AnalyzeOptions::max_fragments`] (default [`DEFAULT_MAX_FRAGMENTS`]);
//! the overflow policies are in [`flows`]. The tables use rustc's FxHash
//! (the `rustc-hash` crate), a fast unkeyed hasher: fine for a capture the
//! user chose, not for tables fed live from the network. Cost: see `flowsteer bench analyze`.
//!
//! # Merging
//!
//! [`Analyzer::into_state`] gives the [`State`] a report is derived from;
//! states of inputs given in time order merge ([`Merger`], [`merge`]) into
//! the state one analyzer fed the inputs concatenated would have made, so
//! an archive can be analysed file by file, on many cores or hosts, and
//! reported as one. [`state`] says what is exact (everything, unless an
//! input after the first filled its flow table) and the bound otherwise.
//!
//! # Thread safety
//!
//! An [`Analyzer`] is `Send` and used by one thread; run one per input and
//! merge their states.
#![forbid(unsafe_code)]

mod analyzer;
pub mod flows;
mod kinds;
pub mod report;
pub mod state;

pub use analyzer::{AnalyzeOptions, Analyzer, DEFAULT_MAX_FLOWS, DEFAULT_MAX_FRAGMENTS, DEFAULT_TOP};
pub use report::{Report, SCHEMA};
pub use state::{merge, MergeError, Merger, State};

#[cfg(test)]
mod tests;
