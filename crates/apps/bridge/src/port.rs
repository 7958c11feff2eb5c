//! Opening a member port: the sockets each worker will own on it, and what
//! every thread shares about it (counters, MTU, VLANs, the XDP program).
//!
//! * AF_XDP: the program is attached with [`Claim::Frames`] (every frame,
//!   ARP included, goes to the sockets; the kernel sees none), and one
//!   [`XskSocket`] is opened per receive queue: queues 0, 1, ... until the
//!   interface refuses one (at most [`MAX_QUEUES`]). Worker `w` owns the
//!   queues `q` with `q % workers == w`: it receives and transmits on them.
//!   A worker that owns no queue of the port (the port has fewer queues
//!   than there are workers) transmits through an AF_PACKET socket of its
//!   own on the interface (counted `tx_fallback`).
//! * AF_PACKET: one TPACKET_V3 ring per worker, all in one fanout group of
//!   the port (by flow hash, so a flow stays on one worker), and one
//!   transmit socket per worker.

use crate::admit::{self, Admitted, PortLock};
use crate::api::{PortKind, PortSpec};
use crate::counters::PortCounters;
use flowsteer_afpacket::{Fanout, FanoutMode, RxConfig, RxRing, TxConfig, TxSocket};
use flowsteer_fdb::PortId;
use flowsteer_live::link::{LinkInfo, LinkReader};
use flowsteer_xsk::{AttachConfig, Claim, FastPathAttach, XdpMode, XdpProgram, XskConfig, XskSocket};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most receive queues opened per AF_XDP port.
pub const MAX_QUEUES: u32 = 64;
/// An AF_PACKET port's receive ring, per worker: blocks of 72 KiB (a
/// whole GSO frame of the kernel's default 64 KiB limit fits, with its
/// headers) ...
pub const RX_BLOCK_SIZE: usize = 72 << 10;
/// ... 256 of them (18 MiB).
pub const RX_BLOCK_COUNT: usize = 256;
/// How long opening an AF_XDP queue is retried while the kernel still
/// releases the socket that had it (a port removed and added back: the
/// queue is freed by a kernel worker after the close, later under load:
/// 2 s was not enough under two busy loops on 2 CPUs). Below the control
/// request's 10 s, so `port add` answers either way.
const BUSY_RETRY: Duration = Duration::from_secs(8);

/// What one worker owns of one port. Not shared: only that worker uses it.
#[derive(Debug, Default)]
pub(crate) struct WorkerPort {
    /// AF_XDP sockets of the worker's queues, ascending by queue.
    pub xsk: Vec<XskSocket>,
    /// The worker's ring of an AF_PACKET port.
    pub ring: Option<RxRing>,
    /// Transmit socket: of an AF_PACKET port, or of an AF_XDP port on
    /// which the worker owns no queue.
    pub tx: Option<TxSocket>,
    /// The interface's lock ([`crate::admit`]), shared by the workers:
    /// held, never read; released with the last worker's sockets, after
    /// them (declared last).
    pub _lock: Option<Arc<PortLock>>,
}

/// An interface's own counters since its port was opened, beside the
/// bridge's sum: read from the kernel (rtnetlink, by index) when the port
/// opens and again for every `stats`. For a veth, its peer (which may live
/// in another namespace) is read too, for its `tx_dropped`.
///
/// One rule, so a frame is never counted twice: the interface's
/// `rx_dropped` is what the kernel dropped on the port before our sockets
/// (a frame too long for the MTU, a full backlog); a veth peer counts each
/// frame it could not hand over in its `tx_dropped` and the port's
/// `rx_dropped` counts the same frame again, so `peer_tx_dropped` is shown
/// beside `rx_dropped` as a part of it, never added to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkCounts {
    /// `rx_packets`, `rx_dropped` at open and as last read.
    at_open: (u64, u64),
    now: (u64, u64),
    /// A veth's peer: its index, its namespace id (as this namespace
    /// numbers it), its `tx_dropped` at open and as last read.
    peer: Option<(u32, Option<i32>, u64, u64)>,
    /// The interface could be read at open.
    known: bool,
}

impl LinkCounts {
    /// The counters of `ifindex` now, as the base of the port's counts
    /// (unknown, all zero, when it cannot be read).
    pub fn open(links: &mut LinkReader, ifindex: u32) -> LinkCounts {
        let Some(l) = links.read(ifindex, None).ok().flatten() else { return LinkCounts::default() };
        let peer = match (l.kind.as_str(), l.link) {
            ("veth", Some(p)) => {
                let ns = l.link_netnsid;
                links.read(p, ns).ok().flatten().map(|pl| (p, ns, pl.tx_dropped, pl.tx_dropped))
            }
            _ => None,
        };
        LinkCounts { at_open: (l.rx_packets, l.rx_dropped), now: (l.rx_packets, l.rx_dropped), peer, known: true }
    }

    /// Reads the interface (and a veth's peer) again; a failed read keeps
    /// the last counts.
    pub fn refresh(&mut self, links: &mut LinkReader, ifindex: u32) {
        if !self.known {
            return;
        }
        if let Some(LinkInfo { rx_packets, rx_dropped, .. }) = links.read(ifindex, None).ok().flatten() {
            self.now = (rx_packets, rx_dropped);
        }
        if let Some((p, ns, _, now)) = self.peer.as_mut() {
            if let Some(pl) = links.read(*p, *ns).ok().flatten() {
                *now = pl.tx_dropped;
            }
        }
    }

    /// `(rx_packets, rx_dropped, peer tx_dropped)` since open; `None` when
    /// the interface could not be read at open.
    pub fn since_open(&self) -> Option<(u64, u64, Option<u64>)> {
        self.known.then(|| {
            (
                self.now.0.saturating_sub(self.at_open.0),
                self.now.1.saturating_sub(self.at_open.1),
                self.peer.map(|(_, _, base, now)| now.saturating_sub(base)),
            )
        })
    }
}

/// What every thread knows of one member port.
#[derive(Debug)]
pub(crate) struct PortShared {
    pub id: PortId,
    pub spec: PortSpec,
    pub ifindex: u32,
    /// The interface's MTU when opened: frames longer than MTU + 18 are
    /// not sent out of it (`too_big`).
    pub mtu: u32,
    /// One block per worker.
    pub counters: Box<[PortCounters]>,
    /// Each worker's sockets, until the worker takes them.
    pub handoff: Vec<Mutex<Option<WorkerPort>>>,
    /// The XDP program (AF_XDP); taken and dropped (detached) when the
    /// port is removed or the bridge stops.
    pub program: Mutex<Option<XdpProgram>>,
    /// The program's drops when it was detached.
    pub program_dropped: AtomicU64,
    /// The frames its fast path forwarded when it was detached.
    pub program_fast_forwarded: AtomicU64,
    pub member: AtomicBool,
    /// The link works: administratively up with carrier (as last seen;
    /// a port that is not up neither receives nor sends).
    pub up: AtomicBool,
    /// When the port stopped being a member (for how long its counters
    /// stay in `stats`).
    pub removed_at: Mutex<Option<Instant>>,
    /// Why the fast path, attached, does not forward to the port now
    /// (empty when it does).
    pub fast_note: Mutex<String>,
    /// Learned entries on the port (as of the writer's last tick).
    pub learned_entries: AtomicU64,
    /// `xdp` when the port's program forwards learned unicast itself, or
    /// `off (why)`.
    pub fast_path: String,
    /// The interface's own counters since the port opened.
    pub link_counts: Mutex<LinkCounts>,
    /// The mode its XDP program attached in (AF_XDP; `None` for AF_PACKET).
    pub xdp: Option<XdpAttached>,
}

/// The mode a port's XDP program attached in: the bridge asks for native
/// (driver) mode and takes generic (skb) mode when the driver refuses
/// ([`XdpMode::Auto`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpAttached {
    /// `native` or `generic`.
    pub mode: &'static str,
    /// Why native mode was refused, when it fell back to generic.
    pub fallback: Option<String>,
}

impl XdpAttached {
    /// What `prog` attached in.
    pub fn of(prog: &XdpProgram) -> XdpAttached {
        XdpAttached {
            mode: if prog.mode() == XdpMode::Native { "native" } else { "generic" },
            fallback: prog.fallback().map(str::to_string),
        }
    }

    /// The warning for a port that fell back to generic mode (`None`: it
    /// did not).
    pub fn warning(&self, iface: &str) -> Option<String> {
        self.fallback.as_ref().map(|why| {
            format!("{iface}: XDP attached in generic (skb) mode, slower than native: native refused: {why}")
        })
    }
}

impl PortShared {
    /// Longest frame sent out of this port (of a GSO frame: its longest
    /// segment).
    pub fn max_frame(&self) -> usize {
        self.mtu as usize + 18
    }

    /// Whether frames go out with their offload state (AF_PACKET with
    /// `PACKET_VNET_HDR`: a partial checksum or a GSO frame is handed to
    /// the kernel as the sender left it). An AF_XDP egress takes whole
    /// frames only: partial checksums are completed and GSO frames
    /// segmented before they are queued for it.
    pub fn takes_offload(&self) -> bool {
        self.spec.kind == PortKind::Afpacket
    }
}

/// Opens `spec` as port `id` for `workers` workers, in the calling
/// thread's network namespace, its XDP program (AF_XDP) with the kernel
/// fast path when `fast` is given (`Err`: why not, for the port's status).
/// Returns the port and what to tell the user.
pub(crate) fn open(
    id: PortId,
    spec: &PortSpec,
    workers: usize,
    group: u16,
    fast: Result<FastPathAttach, &str>,
) -> Result<(PortShared, Vec<String>), String> {
    let Admitted { lock, mut warnings } = admit::admit(&spec.iface)?;
    let mtu = flowsteer_xsk::interface_mtu(&spec.iface).map_err(|e| e.to_string())?;
    let mut handles: Vec<WorkerPort> =
        (0..workers).map(|_| WorkerPort { _lock: lock.clone(), ..WorkerPort::default() }).collect();
    let mut program = None;
    let mut xdp = None;
    let ifindex;
    match spec.kind {
        PortKind::Afxdp => {
            // One transmit wake-up (sendto) sends a whole batch in copy
            // mode rather than 32 frames of it.
            let base = XskConfig::default();
            let sock_cfg = XskConfig { copy_tx_budget: base.tx_ring, ..base };
            let room = flowsteer_xsk::frame_room(&sock_cfg);
            let attach = AttachConfig {
                claim: Claim::Frames,
                max_queues: MAX_QUEUES,
                max_frame_len: Some(room),
                fast_path: fast.as_ref().ok().cloned(),
                ..AttachConfig::default()
            };
            let prog = XdpProgram::attach(&spec.iface, &attach).map_err(|e| e.to_string())?;
            ifindex = prog.ifindex();
            if let Some(why) = flowsteer_xsk::mtu_mismatch(&spec.iface, mtu, &sock_cfg) {
                warnings.push(why);
            }
            let mut queues = 0u32;
            for q in 0..MAX_QUEUES {
                match open_queue(&spec.iface, q, &sock_cfg) {
                    Ok(s) => {
                        prog.register(&s).map_err(|e| e.to_string())?;
                        handles[q as usize % workers].xsk.push(s);
                        queues += 1;
                    }
                    Err(e) if q == 0 => return Err(e.to_string()),
                    Err(_) => break,
                }
            }
            for (w, h) in handles.iter_mut().enumerate() {
                if h.xsk.is_empty() {
                    h.tx = Some(TxSocket::open(&spec.iface, &TxConfig::default()).map_err(|e| e.to_string())?);
                    if w == queues as usize {
                        warnings.push(format!(
                            "{}: {queues} queue(s) for {workers} workers: workers {queues}.. receive nothing there and \
                             transmit through AF_PACKET (counted tx_fallback)",
                            spec.iface
                        ));
                    }
                }
            }
            let attached = XdpAttached::of(&prog);
            warnings.extend(attached.warning(&spec.iface));
            xdp = Some(attached);
            program = Some(prog);
        }
        PortKind::Afpacket => {
            for h in handles.iter_mut() {
                // A block goes to the worker when full or 1 ms old, so a
                // block is about 1 ms of frames at low rates: 256 blocks
                // ride out a worker descheduled for 256 ms (on a loaded
                // 2-CPU machine, 64 blocks overflowed in the live tests).
                // A block of 72 KiB holds a whole GSO frame (64 KiB, the
                // kernel's default limit) with its offload state
                // (`vnet_hdr`): 18 MiB of ring per worker and port. A
                // longer frame (a device whose gso_max_size was raised)
                // is cut by the kernel and dropped (`truncated`).
                let cfg = RxConfig {
                    block_size: RX_BLOCK_SIZE,
                    block_count: RX_BLOCK_COUNT,
                    retire_blk_tov_ms: 1,
                    fill_rxhash: false,
                    fanout: (workers > 1).then(|| Fanout::new(group, FanoutMode::Hash)),
                    vnet_hdr: true,
                    ..RxConfig::default()
                };
                h.ring = Some(RxRing::open(&spec.iface, &cfg).map_err(|e| e.to_string())?);
                let tx = TxConfig { vnet_hdr: true, ..TxConfig::default() };
                h.tx = Some(TxSocket::open(&spec.iface, &tx).map_err(|e| e.to_string())?);
            }
            ifindex = handles[0].tx.as_ref().map_or(0, TxSocket::ifindex);
        }
    }
    // The base of the interface's own counts: read once the sockets are open.
    let link_counts =
        LinkReader::new().map_or_else(|_| LinkCounts::default(), |mut r| LinkCounts::open(&mut r, ifindex));
    let port = PortShared {
        link_counts: Mutex::new(link_counts),
        xdp,
        id,
        spec: spec.clone(),
        ifindex,
        mtu,
        counters: (0..workers).map(|_| PortCounters::default()).collect(),
        handoff: handles.into_iter().map(|h| Mutex::new(Some(h))).collect(),
        program: Mutex::new(program),
        program_dropped: AtomicU64::new(0),
        program_fast_forwarded: AtomicU64::new(0),
        member: AtomicBool::new(true),
        up: AtomicBool::new(true),
        removed_at: Mutex::new(None),
        fast_note: Mutex::new(String::new()),
        learned_entries: AtomicU64::new(0),
        fast_path: match (&spec.kind, &fast) {
            (PortKind::Afxdp, Ok(_)) => "xdp".to_string(),
            (PortKind::Afpacket, _) => "off (afpacket port: the workers forward)".to_string(),
            (_, Err(why)) => format!("off ({why})"),
        },
    };
    Ok((port, warnings))
}

/// [`XskSocket::open`], retried for [`BUSY_RETRY`] while the queue is busy.
fn open_queue(iface: &str, q: u32, cfg: &XskConfig) -> Result<XskSocket, flowsteer_xsk::Error> {
    let deadline = Instant::now() + BUSY_RETRY;
    loop {
        match XskSocket::open(iface, q, cfg) {
            Err(e) if e.kind() == flowsteer_xsk::ErrorKind::Busy && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}
