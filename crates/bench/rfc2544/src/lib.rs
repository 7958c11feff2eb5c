//! flowsteer-rfc2544: an RFC 2544 throughput harness for any Linux
//! forwarding path.
//!
//! | module | what it does | I/O |
//! |---|---|---|
//! | [`search`] | the NDR/PDR binary search (RFC 2544 section 26.1, the MLRsearch practice): which rate to try next, for how long, and when to stop | none (sans-IO: trial results come in as arguments) |
//! | [`frames`] | test frames: templates per flow and size (IMIX included), the per-frame stamp (stream, sequence, transmit time) with its checksum update; re-exported from `flowsteer_gen::frames` | none |
//! | [`dut`] | devices under test in namespaces of their own (`none`, `patch`, `linux-bridge`, `flowsteer-bridge`, `flowsteer-bridge-afpacket`, `flowsteer-bridge-xdp`, `ovs`), removed on drop; [`dut::cleanup`] for what a killed run left | `ip`, `tc` |
//! | [`ovs`] | Open vSwitch as a DUT (userspace datapath, AF_XDP ports, NORMAL action): daemons of its own with a private directory, stopped and removed on drop; skipped when not installed | `ovsdb-server`, `ovs-vswitchd`, `ovs-vsctl`, `ovs-appctl` (run, not linked) |
//! | [`io`] | the sockets a trial drives: AF_XDP or AF_PACKET behind one `Port` | AF_XDP, AF_PACKET |
//! | [`bridge`] | the flowsteer bridge as a DUT, started in-process in the DUT namespace; its own counts per trial | AF_XDP, AF_PACKET, threads |
//! | [`live`] | the AF_XDP generator (token bucket, bursts, stamped frames) and receiver; a [`search::TrialRunner`] | AF_XDP, threads |
//! | [`sweep`] | DUTs x frame sizes x repeats, the generator's ceiling, the machine, the report (`flowsteer.rfc2544.v2`) | all of the above |
//! | [`spread`] | source ports per flow from the GF(2) planner, so the flows land evenly on N receive queues of an RSS configuration | none |
//! | [`tcp`] | TCP throughput between two hosts through the same bridges (`flowsteer bench tcp`): iperf3 in namespaces of a [`flowsteer_netns::Star`], the kernel's default offloads, median per DUT x streams | namespaces, iperf3 (run, not linked), threads |
//! | [`track`] | the receiver's check of each frame: sent in this trial, duplicate, reordered, foreign; latency percentiles | none (time is an argument) |
//!
//! The search never runs a trial itself: [`search::Search::next_step`]
//! says which trial to run and [`search::Search::record`] takes its result.
//! [`search::run`] drives it through any [`search::TrialRunner`], which the
//! tests implement with a simulated device (a loss curve).
#![forbid(unsafe_code)]

pub mod bridge;
pub mod dut;
/// The test frames live in `flowsteer-gen` (shared with `flowsteer udp-gen --afxdp`).
pub use flowsteer_gen::frames;
pub mod io;
mod json;
pub mod live;
mod names;
pub mod ovs;
pub mod search;
pub mod spread;
pub mod sweep;
pub mod tcp;
pub mod track;

/// What can go wrong in a live run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A namespace, veth, bridge or tc step failed.
    #[error(transparent)]
    Netns(#[from] flowsteer_netns::NetnsError),
    /// An AF_XDP socket or the XDP program failed.
    #[error(transparent)]
    Xsk(#[from] flowsteer_xsk::Error),
    /// Bad frame parameters.
    #[error(transparent)]
    Frame(#[from] frames::FrameError),
    /// The search failed (its configuration, or a trial).
    #[error(transparent)]
    Search(#[from] search::SearchError),
    /// A harness thread could not start or panicked.
    #[error("thread: {0}")]
    Thread(String),
    /// The flows could not be spread over the receive queues.
    #[error(transparent)]
    Spread(#[from] spread::SpreadError),
    /// An AF_PACKET socket failed.
    #[error("AF_PACKET: {0}")]
    Packet(#[from] flowsteer_afpacket::Error),
    /// The flowsteer bridge could not start as a DUT.
    #[error("flowsteer bridge: {0}")]
    Dut(String),
    /// Open vSwitch could not start as a DUT (the command or daemon that
    /// failed, and its log's last lines).
    #[error("Open vSwitch: {0}")]
    Ovs(String),
    /// A configuration value is out of range.
    #[error("{0}")]
    Config(String),
    /// This machine cannot run it (not root, no `ip`, no iperf3).
    #[error("{0}")]
    Unavailable(String),
    /// SIGINT or SIGTERM arrived.
    #[error("stopped by a signal")]
    Stopped,
}
