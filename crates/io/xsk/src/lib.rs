//! AF_XDP packet I/O for flowsteer, in pure Rust over the kernel ABI: no
//! libbpf, no libxdp, no clang.
//!
//! * [`XdpProgram`]: a hand-assembled XDP program (loaded with the raw
//!   bpf(2) syscall, attached through a bpf_link so it detaches when dropped
//!   or when the process dies) that sends the frames it claims ([`Claim`]:
//!   UDP/TCP destination ports, or every IP packet) to the XSK of their rx
//!   queue through an XSKMAP and passes everything else to the kernel, so
//!   ping, ARP and SSH keep working; it counts every frame by outcome
//!   ([`XdpCounters`]). The claim policy is described on [`Claim`] (and in
//!   the README).
//! * [`XskSocket`]: one AF_XDP socket per (interface, queue) with its UMEM
//!   and its fill / completion / rx / tx rings; [`XskSocket::rx_burst`],
//!   [`XskSocket::tx_burst`], [`XskSocket::tx_prepared`] (frames written in
//!   place in the UMEM and sent again without a copy), completion recycling, counters plus the
//!   kernel's XDP_STATISTICS, and a per-frame [`FrameAccount`].
//! * [`XdpPort`]: the program plus one registered socket per queue.
//! * [`fastpath`]: the bridge's kernel fast path for learned unicast, an
//!   option of the same program ([`AttachConfig::fast_path`]): the bridge
//!   mirrors its MAC table into BPF maps ([`FastPathMaps`]) and the program
//!   forwards learned unicast itself with `XDP_REDIRECT` through a device
//!   map, handing everything else to the sockets as before.
//!   [`program_listing`] renders a program as text (`src/fastpath.listing`
//!   is the bridge's, checked by a unit test).
//!
//! Everything needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW) and works on
//! the interface of the calling thread's network namespace.
//!
//! The rings are written by hand over mmap (in the private `sys` module, the
//! only place with `unsafe`) rather than through the `xdp` crate: its API
//! hands out UMEM packets through `unsafe` functions and keeps frame
//! bookkeeping to itself, while this crate needs every frame accounted for
//! (see [`FrameAccount`]) and already needs raw bpf(2) calls for the program.
//!
//! ```no_run
//! use flowsteer_xsk::{PortConfig, XdpPort};
//! let mut port = XdpPort::open("eth0", &[0], &PortConfig::default())?;
//! let sock = &mut port.sockets_mut()[0];
//! let mut frames = 0;
//! sock.rx_burst(64, &mut |frame: &[u8]| frames += frame.len());
//! # Ok::<(), flowsteer_xsk::Error>(())
//! ```

mod asm;
mod error;
pub mod fastpath;
mod port;
mod prog;
mod socket;
mod sys;
mod xdp;

pub use error::{Error, ErrorKind, NEED_ROOT};
pub use fastpath::{now_s, FastFdbEntry, FastPathAttach, FastPathMaps, FastPort};
pub use port::{frame_room, interface_mtu, mtu_mismatch, PortConfig, XdpPort, LINK_OVERHEAD};
pub use prog::{
    program_listing, AttachConfig, Claim, Fragments, XdpCounters, XdpMode, XdpProgram, XdpReasons, MAX_IPV6_EXT_HEADERS,
};
pub use socket::{
    BindMode, FrameAccount, KernelStats, XskConfig, XskSocket, XskStats, TX_TAG_NONE, XDP_PACKET_HEADROOM,
};
