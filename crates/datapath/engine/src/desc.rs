//! The descriptor handed from a receive thread to a worker.
//!
//! The receive stage parses each frame once and hands the worker a small
//! descriptor (like an mbuf's metadata: RSS hash, flow key, lengths) instead
//! of the frame. The frame buffer is recycled at once: the "copy small
//! frames out, recycle the big receive buffer" idea (small-packet copy on
//! receive, as drivers do for short frames) taken to its end for the
//! built-in application, which needs only the headers and the sequence stamp.

use flowsteer_flow::FlowKey;
use flowsteer_rss::QueueId;

/// Flow id used when a packet carries no generator stamp (captures).
pub const NO_FLOW_ID: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketDesc {
    pub key: FlowKey,
    /// The RSS (Toeplitz) hash the packet was steered by.
    pub hash: u32,
    /// Per-flow sequence number stamped by the generator (0 when none).
    pub seq: u64,
    /// Generator flow id, or [`NO_FLOW_ID`].
    pub flow_id: u32,
    /// Frame length in bytes.
    pub len: u16,
    /// Receive queue it arrived on.
    pub rxq: QueueId,
    /// The packet is an IP fragment (no order stamp unless the first one).
    pub fragment: bool,
    /// The frame's bytes follow in the fragment channel beside this queue
    /// (fragment policies `rehash` and `owner`: the worker reassembles).
    pub carry: bool,
}
