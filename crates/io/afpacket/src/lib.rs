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
//! * [`VnetHdr`]: a frame's offload state (partial checksum, GSO), handed
//!   over by a ring and taken by a transmit socket with `PACKET_VNET_HDR`
//!   ([`RxConfig::vnet_hdr`], [`TxConfig::vnet_hdr`]).
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

pub mod cbpf;
mod error;
mod open;
mod rx;
mod sys;
mod tx;
mod vnet;

pub use cbpf::{toeplitz_cbpf, SockFilter};
pub use error::{errno_name, Error};
pub use rx::{
    Fanout, FanoutMode, RxConfig, RxMeta, RxRing, RxStats, VlanTag, DEFAULT_BLOCK_COUNT, DEFAULT_BLOCK_SIZE,
    DEFAULT_FRAME_SIZE, DEFAULT_RETIRE_BLK_TOV_MS, MAX_RETIRE_BLK_TOV_MS, MAX_RING_BYTES,
};
pub use tx::{TxConfig, TxSocket, TxStats, DEFAULT_TX_BATCH, MAX_TX_BATCH};
pub use vnet::{GsoType, VnetHdr, VNET_HDR_LEN};
