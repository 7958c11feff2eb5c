//! flowsteer-afpacket: the AF_PACKET packet I/O backend.
//!
//! * [`RxRing`]: one `SOCK_RAW` packet socket bound to one interface with a
//!   TPACKET_V3 block ring mapped into user space, read without system calls
//!   by [`RxRing::poll_burst`] (and [`RxRing::wait`] to sleep in `poll(2)`).
//! * [`Fanout`]: several rings share an interface through `PACKET_FANOUT`
//!   (hash, lb, cpu, rollover, random, queue-mapping, or a classic BPF
//!   program), so each worker core reads its own ring.
//! * [`cbpf::toeplitz_cbpf`]: compiles an [`flowsteer_rss::RssConfig`] into
//!   a fanout program that computes flowsteer's Toeplitz hash and RETA in
//!   the kernel, so ring `i` receives exactly the packets software RSS puts
//!   on queue `i`, on any NIC (veth included) and without ethtool.
//! * [`TxSocket`]: batched transmit of whole Ethernet frames (`sendmmsg`).
//!
//! Accounting: every frame taken out of a ring is either delivered to the
//! sink ([`RxStats::frames`], of which [`RxStats::truncated`] were cut by the
//! ring) or skipped because its descriptor was inconsistent
//! ([`RxStats::bad_frames`], never expected). Frames the kernel could not
//! store are in [`RxStats::kernel_drops`]. Every frame given to
//! [`TxSocket::send_batch`] is either sent or counted as failed by errno.
//!
//! Needs Linux, and root or CAP_NET_RAW. All `unsafe` is in the private
//! `sys` module.

use std::fmt;

pub mod cbpf;
mod rx;
mod sys;
mod tx;

pub use cbpf::{toeplitz_cbpf, SockFilter};
pub use rx::{
    Fanout, FanoutMode, RxConfig, RxMeta, RxRing, RxStats, VlanTag, DEFAULT_BLOCK_COUNT, DEFAULT_BLOCK_SIZE,
    DEFAULT_FRAME_SIZE, DEFAULT_RETIRE_BLK_TOV_MS, MAX_RETIRE_BLK_TOV_MS, MAX_RING_BYTES,
};
pub use tx::{errno_name, TxConfig, TxSocket, TxStats, DEFAULT_TX_BATCH, MAX_TX_BATCH};

/// What went wrong; `Display` is one line that says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A configuration value is out of range (the message names it).
    Config(String),
    /// No interface of this name in the calling thread's network namespace.
    NoSuchInterface(String),
    /// Creating a packet socket was refused.
    Permission,
    /// A system call failed.
    Os { what: String, errno: i32 },
    /// A classic BPF program could not be built.
    Program(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) | Error::Program(m) => write!(f, "{m}"),
            Error::NoSuchInterface(name) => {
                write!(f, "interface {name} does not exist (in this network namespace; see `ip link`)")
            }
            Error::Permission => write!(f, "AF_PACKET needs root or CAP_NET_RAW"),
            Error::Os { what, errno } => {
                write!(f, "{what}: {} ({})", std::io::Error::from_raw_os_error(*errno), errno_name(*errno))
            }
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    fn os(what: impl Into<String>, errno: i32) -> Error {
        Error::Os { what: what.into(), errno }
    }
}

/// A packet socket, with the refusal reported as [`Error::Permission`].
fn open_packet_socket() -> Result<std::os::fd::OwnedFd, Error> {
    sys::packet_socket().map_err(|e| match e {
        libc::EPERM | libc::EACCES => Error::Permission,
        e => Error::os("socket(AF_PACKET)", e),
    })
}

/// The interface index of `name`, with the errors every opener reports.
fn lookup_ifindex(name: &str) -> Result<u32, Error> {
    if name.is_empty()
        || name.len() >= libc::IFNAMSIZ
        || name.contains(['\0', '/'])
        || name.contains(char::is_whitespace)
    {
        return Err(Error::Config(format!("{name:?} is not a valid interface name")));
    }
    match sys::ifindex(name) {
        0 => Err(Error::NoSuchInterface(name.to_string())),
        i => Ok(i),
    }
}
