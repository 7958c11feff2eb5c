//! flowsteer-live: what runs the engine and the applications on a live host.
//!
//! * [`source`]: AF_XDP and AF_PACKET receive queues behind the engine's
//!   `RxSource` seam (`run --source afxdp:IFACE | afpacket:IFACE`).
//! * [`replay`]: a capture read into memory and split over receive queues
//!   by RSS, as a NIC would (`run --source pcap:FILE`).
//! * [`queues`]: an interface's receive and transmit queues, their RPS/XPS
//!   masks and interrupts, from sysfs and procfs.
//! * [`cpus`]: the CPUs this process may run on, and CPU list text.
//! * [`signals`]: a stop flag set by SIGINT/SIGTERM.
//!
//! The library prints nothing: errors are typed ([`LiveError`]), warnings
//! are returned for the caller to show.
#![forbid(unsafe_code)]

pub mod cpus;
pub mod queues;
pub mod replay;
pub mod signals;
pub mod source;

pub use cpus::available_cpus;
pub use signals::stop_on_signals;
pub use source::{open, FanoutChoice, Guard, LiveOptions, LiveSpec};

/// What can go wrong opening a live source or reading the host.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A source spec that does not parse; the text says what was expected.
    #[error("{0}")]
    Spec(String),
    #[error("interface {0} does not exist (see `ip link`)")]
    NoInterface(String),
    #[error("interface {0} reports no receive queues")]
    NoQueues(String),
    /// The RSS fanout program could not be built for this configuration.
    #[error("{0}")]
    Fanout(String),
    /// The backend refused to open (permissions, a missing queue, ...).
    #[error("{0}")]
    Open(String),
    #[error("install signal handler")]
    Signal(#[source] std::io::Error),
}
