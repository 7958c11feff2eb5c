//! flowsteer-live: what runs the engine and the applications on a live host.
//!
//! * [`source`]: AF_XDP and AF_PACKET receive queues behind the engine's
//!   `RxSource` seam (`run --source afxdp:IFACE | afpacket:IFACE`).
//! * [`replay`]: a capture read into memory and split over receive queues
//!   by RSS, as a NIC would (`run --source pcap:FILE`).
//! * [`queues`]: an interface's receive and transmit queues, their RPS/XPS
//!   masks and interrupts, from sysfs and procfs.
//! * [`cpus`]: the CPUs this process may run on, and CPU list text.
//! * [`signals`]: a stop flag set by SIGINT/SIGTERM (or a stop flag and,
//!   on the second signal, an abort flag); a report flag set by SIGUSR1,
//!   SIGHUP and SIGUSR2 caught (not fatal).
//! * [`link`]: an interface's state and counters (and a veth peer's) over
//!   rtnetlink, by index (or by name: its index, link type and flags).
//! * [`route`]: the kernel's route to an address over rtnetlink, as
//!   `ip route get` (local, through a gateway, a default route, or none).
//! * [`netdev`]: an interface's XDP features (whether it takes frames
//!   XDP redirects to it) over generic netlink's "netdev" family, by index.
//!
//! The library prints nothing: errors are typed ([`LiveError`]), warnings
//! are returned for the caller to show.
#![forbid(unsafe_code)]

pub mod cpus;
mod error;
pub mod link;
pub mod netdev;
mod nl;
pub mod queues;
pub mod replay;
pub mod route;
pub mod signals;
pub mod source;

pub use cpus::available_cpus;
pub use error::LiveError;
pub use signals::{report_on_sigusr1, stop_on_signals, stop_then_abort_on_signals, StopSignals};
pub use source::{open, FanoutChoice, Guard, LiveOptions, LiveSpec};
