//! Live packet sources for the engine: AF_XDP and AF_PACKET receive
//! queues behind its [`RxSource`] seam. Engine receive queue `i`
//! is the backend's queue `i` (an AF_XDP socket on device queue `ids[i]`,
//! or the `i`-th member of an AF_PACKET fanout group); the worker that
//! polls it is `--queue-cpus[i]` (default `i % workers`).
//!
//! Specs:
//! * `afxdp:IFACE` (every receive queue of IFACE) or `afxdp:IFACE:0,1`;
//!   `--xdp-mode auto|native|skb` (auto: native, then generic). The XDP
//!   program claims what [`LiveOptions::xdp_claim`] says and hands the
//!   kernel everything else (see `flowsteer_xsk::Claim`).
//! * `afpacket:IFACE` with `--fanout rss|hash|cpu|qm|lb` (default rss: our
//!   Toeplitz RSS compiled to a classic BPF fanout program, so ring `i`
//!   receives exactly what the RETA sends to queue `i`); one ring per
//!   engine receive queue (`--rx-queues`, default one per worker).
//!
//! Every live source, besides handing frames to the engine:
//! * watches its interface ([`LINK_CHECK_EVERY`], and at once on a socket
//!   error): deleted or set down, it reports a failure that stops the run;
//! * sleeps in poll(2) on its sockets when the engine finds it idle (the
//!   engine's `--busy-poll` spins instead);
//! * at the end stops taking frames in (AF_XDP: its sockets leave the
//!   XSKMAP, so the program passes their frames to the kernel; AF_PACKET:
//!   a filter that accepts nothing) and gives its counts from before the
//!   engine: the kernel's per-socket statistics, the frames left unread in
//!   its rings, and, from the source of engine queue 0 only, the counts
//!   kept per interface (the XDP program's, the interface's own over the
//!   run, a veth peer's transmit drops).

use crate::error::LiveError;
use crate::link::{LinkInfo, LinkReader};
use flowsteer_afpacket::{Fanout, FanoutMode, RxConfig, RxRing};
use flowsteer_engine::source::RxSource;
use flowsteer_engine::{Ingress, InterfaceCounts};
use flowsteer_rss::{QueueId, RssConfig, PUBLIC_KEY_WARNING};
use flowsteer_xsk::{AttachConfig, Claim, ErrorKind, PortConfig, XdpMode, XdpPort, XdpProgram, XskSocket};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a source asks the kernel whether its interface still exists
/// and is up (one netlink request and one `SO_ERROR` per socket). A
/// socket error is looked into at once.
pub const LINK_CHECK_EVERY: Duration = Duration::from_millis(100);

/// How long frames an XDP program already redirected may take to land in a
/// socket's ring after the socket left the XSKMAP.
const XDP_SETTLE: Duration = Duration::from_millis(20);

/// What must stay alive for the run (the XDP program attachment), and
/// what the caller should tell its user about the source it opened.
pub enum Guard {
    None,
    /// An AF_PACKET source: nothing to detach, only warnings.
    Packet {
        warnings: Vec<String>,
    },
    /// Dropping it (after the sources) detaches the program.
    Xdp {
        _program: Arc<XdpProgram>,
        /// What the caller should tell its user (see [`Guard::warnings`]).
        warnings: Vec<String>,
    },
}

impl Guard {
    /// Warnings from opening the backend (an MTU that allows frames longer
    /// than an AF_XDP frame, when the drops were allowed), and
    /// [`PUBLIC_KEY_WARNING`] when live traffic is hashed with a public key.
    pub fn warnings(&self) -> &[String] {
        match self {
            Guard::Xdp { warnings, .. } | Guard::Packet { warnings } => warnings,
            Guard::None => &[],
        }
    }

    /// An AF_XDP source's XDP program: the mode it was attached in, and
    /// why native mode was refused when `auto` fell back to generic mode.
    pub fn xdp(&self) -> Option<(XdpMode, Option<&str>)> {
        match self {
            Guard::Xdp { _program: p, .. } => Some((p.mode(), p.fallback())),
            _ => None,
        }
    }
}

/// A parsed `--source` naming a live backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveSpec {
    Xdp { iface: String, queues: Option<Vec<u32>> },
    Packet { iface: String },
}

impl LiveSpec {
    /// `None` when `spec` is not a live source.
    pub fn parse(spec: &str) -> Result<Option<LiveSpec>, LiveError> {
        if let Some(rest) = spec.strip_prefix("afxdp:") {
            let (iface, queues) = match rest.split_once(':') {
                Some((i, q)) => {
                    let qs = q
                        .split(',')
                        .map(|x| x.trim().parse::<u32>().map_err(|_| LiveError::Spec(format!("bad queue '{x}'"))))
                        .collect::<Result<Vec<_>, _>>()?;
                    (i, Some(qs))
                }
                None => (rest, None),
            };
            if iface.is_empty() {
                return Err(LiveError::Spec("expected afxdp:IFACE[:QUEUE,...]".into()));
            }
            return Ok(Some(LiveSpec::Xdp { iface: iface.to_string(), queues }));
        }
        if let Some(iface) = spec.strip_prefix("afpacket:") {
            if iface.is_empty() || iface.contains(':') {
                return Err(LiveError::Spec("expected afpacket:IFACE".into()));
            }
            return Ok(Some(LiveSpec::Packet { iface: iface.to_string() }));
        }
        Ok(None)
    }

    /// Receive queues the engine will have: the listed AF_XDP queues (or
    /// every device queue), or `default` fanout members.
    pub fn rx_queues(&self, default: u16) -> Result<Vec<u32>, LiveError> {
        match self {
            LiveSpec::Xdp { queues: Some(q), .. } => Ok(q.clone()),
            LiveSpec::Xdp { iface, queues: None } => {
                let q = crate::queues::rx_queues(iface)?;
                if q.is_empty() {
                    return Err(LiveError::NoQueues(iface.clone()));
                }
                Ok(q)
            }
            LiveSpec::Packet { .. } => Ok((0..u32::from(default.max(1))).collect()),
        }
    }
}

/// Watches one source's interface by index: deleted, set down, or an
/// error on one of the source's sockets (the kernel sets ENETDOWN on them
/// when the interface goes away) ends the source.
struct Watch {
    /// `afxdp:IFACE` / `afpacket:IFACE`, the start of every message.
    what: String,
    iface: String,
    ifindex: u32,
    links: LinkReader,
    next: Instant,
    lost: Option<String>,
}

impl Watch {
    fn new(what: String, iface: &str, ifindex: u32) -> Result<Watch, LiveError> {
        let links = LinkReader::new().map_err(|e| LiveError::Open(format!("{what}: netlink socket: {e}")))?;
        Ok(Watch { what, iface: iface.to_string(), ifindex, links, next: Instant::now(), lost: None })
    }

    fn due(&self) -> bool {
        self.lost.is_none() && Instant::now() >= self.next
    }

    /// Asks the kernel now about the interface and about `fds`.
    fn check<'a>(&mut self, fds: impl Iterator<Item = std::os::fd::BorrowedFd<'a>>) {
        if self.lost.is_some() {
            return;
        }
        self.next = Instant::now() + LINK_CHECK_EVERY;
        let (what, iface, index) = (&self.what, &self.iface, self.ifindex);
        self.lost = match self.links.read(index, None) {
            Ok(None) => Some(format!("{what}: interface {iface} (index {index}) was deleted")),
            Ok(Some(l)) if !l.up => Some(format!("{what}: interface {iface} is down")),
            Ok(Some(_)) => None,
            Err(e) => Some(format!("{what}: cannot read the state of interface {iface}: {e}")),
        };
        if self.lost.is_none() {
            for fd in fds {
                if let Ok(Err(e)) = rustix::net::sockopt::socket_error(fd) {
                    self.lost = Some(format!("{what}: interface {iface} went away under its socket ({e})"));
                    break;
                }
            }
        }
    }
}

/// Sleeps in poll(2) until one of `fds` is readable (or in error) or
/// `timeout` passes; true when one is in error.
fn wait_readable<F: AsFd>(fds: &[&F], timeout: Duration) -> bool {
    let mut pfds: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(*f, PollFlags::IN)).collect();
    let ts = Timespec::try_from(timeout).unwrap_or(Timespec { tv_sec: 0, tv_nsec: 1_000_000 });
    // EINTR (a stop signal) and other errors: the caller polls again.
    if poll(&mut pfds, Some(&ts)).is_err() {
        return false;
    }
    pfds.iter().any(|p| p.revents().intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL))
}

/// The interface's own counters at the source's open, to report them over
/// the run; and a veth's peer, which may be in another namespace.
struct PortCounts {
    ifindex: u32,
    links: LinkReader,
    at_open: LinkInfo,
    /// (peer index, its namespace id, its tx_dropped at open).
    peer: Option<(u32, Option<i32>, u64)>,
}

impl PortCounts {
    fn open(ifindex: u32) -> Option<PortCounts> {
        let mut links = LinkReader::new().ok()?;
        let at_open = links.read(ifindex, None).ok()??;
        let peer = match (at_open.kind.as_str(), at_open.link) {
            ("veth", Some(p)) => {
                let ns = at_open.link_netnsid;
                links.read(p, ns).ok().flatten().map(|l| (p, ns, l.tx_dropped))
            }
            _ => None,
        };
        Some(PortCounts { ifindex, links, at_open, peer })
    }

    /// The counters since open; `None` when the interface cannot be read
    /// (deleted).
    fn since_open(&mut self) -> Option<InterfaceCounts> {
        let now = self.links.read(self.ifindex, None).ok()??;
        let peer_tx_dropped = self
            .peer
            .and_then(|(p, ns, base)| self.links.read(p, ns).ok().flatten().map(|l| l.tx_dropped.saturating_sub(base)));
        Some(InterfaceCounts {
            rx_packets: now.rx_packets.saturating_sub(self.at_open.rx_packets),
            rx_dropped: now.rx_dropped.saturating_sub(self.at_open.rx_dropped),
            peer_tx_dropped,
        })
    }
}

/// What differs between the live backends: how a queue is read, how the
/// backend stops taking frames in, and what it counted before the engine.
trait Backend: Send {
    /// An engine receive queue's socket or ring.
    type Queue: AsFd + Send;
    /// Hands up to `max` frames of `q` to `sink`; returns how many.
    fn burst(q: &mut Self::Queue, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize;
    /// Stops taking frames in; returns how long frames in transit may take to land.
    fn close(&mut self, queues: &[(QueueId, Self::Queue)]) -> Duration;
    /// The counts from the interface to the engine (`port`: the interface's
    /// own counters, on the source of engine queue 0 only).
    fn ingress(&mut self, queues: &mut [(QueueId, Self::Queue)], port: Option<&mut PortCounts>) -> Ingress;
}

/// One worker's queues of one backend: each engine receive queue with its
/// socket or ring, the watch on the interface, and (on the source of engine
/// queue 0) the interface's own counters.
struct LiveSource<B: Backend> {
    queues: Vec<(QueueId, B::Queue)>,
    backend: B,
    watch: Watch,
    port: Option<PortCounts>,
}

impl<B: Backend> LiveSource<B> {
    fn new(backend: B, watch: Watch) -> Self {
        LiveSource { queues: Vec::new(), backend, watch, port: None }
    }

    fn look(&mut self) {
        self.watch.check(self.queues.iter().map(|(_, q)| q.as_fd()));
    }
}

impl<B: Backend> RxSource for LiveSource<B> {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let n = match self.queues.iter_mut().find(|(i, _)| *i == q) {
            Some((_, s)) => B::burst(s, max, sink),
            None => 0,
        };
        if n == 0 && self.watch.due() {
            self.look();
        }
        n
    }

    fn exhausted(&self, _q: QueueId) -> bool {
        false
    }

    fn wait(&mut self, timeout: Duration) -> bool {
        let fds: Vec<&B::Queue> = self.queues.iter().map(|(_, q)| q).collect();
        if wait_readable(&fds, timeout) || self.watch.due() {
            self.look();
        }
        true
    }

    fn failure(&self) -> Option<String> {
        self.watch.lost.clone()
    }

    fn close(&mut self) -> Duration {
        self.backend.close(&self.queues)
    }

    fn ingress(&mut self) -> Option<Ingress> {
        Some(self.backend.ingress(&mut self.queues, self.port.as_mut()))
    }
}

/// AF_XDP: one socket per engine receive queue, behind the shared XDP program.
struct Xsk {
    program: Arc<XdpProgram>,
}

impl Backend for Xsk {
    type Queue = XskSocket;

    fn burst(q: &mut XskSocket, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        q.rx_burst(max, sink)
    }

    fn close(&mut self, queues: &[(QueueId, XskSocket)]) -> Duration {
        // The program passes the frames of a queue without a socket.
        for (_, s) in queues {
            let _ = self.program.unregister(s.queue());
        }
        XDP_SETTLE
    }

    fn ingress(&mut self, queues: &mut [(QueueId, XskSocket)], port: Option<&mut PortCounts>) -> Ingress {
        let mut i = Ingress::default();
        let mut sockets = 0u64;
        for (_, s) in queues.iter() {
            let st = s.stats().unwrap_or_default();
            let unread = u64::from(s.frame_account().rx_ring);
            i.delivered += st.rx_packets;
            i.socket_drops.rx_dropped += st.kernel.rx_dropped;
            i.socket_drops.ring_full += st.kernel.rx_ring_full;
            i.socket_drops.bad_descriptor += st.rx_bad_descs;
            i.fill_ring_empty += st.kernel.rx_fill_ring_empty_descs;
            i.unread += unread;
            sockets += st.rx_packets + st.kernel.rx_dropped + st.kernel.rx_ring_full + st.rx_bad_descs + unread;
        }
        match self.program.counters() {
            // The program counts for every socket: its numbers come once,
            // from the source of queue 0.
            Ok(c) => {
                if let Some(port) = port {
                    i.seen = c.passed + c.dropped + c.redirected;
                    i.passed = c.passed;
                    i.hook_dropped = c.dropped;
                    i.redirected = c.redirected;
                    i.interface = port.since_open();
                }
            }
            // Without them the sum starts at the sockets.
            Err(_) => {
                i.seen = sockets;
                i.redirected = sockets;
                i.interface = port.and_then(PortCounts::since_open);
            }
        }
        i
    }
}

/// AF_PACKET: one ring per engine receive queue, members of one fanout group.
struct Packet;

impl Backend for Packet {
    type Queue = RxRing;

    fn burst(q: &mut RxRing, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        q.poll_burst(max, &mut |bytes, _meta| sink(bytes))
    }

    fn close(&mut self, queues: &[(QueueId, RxRing)]) -> Duration {
        let mut settle = Duration::ZERO;
        for (_, r) in queues {
            let _ = r.stop_receiving();
            settle = settle.max(r.retire_timeout() * 2 + Duration::from_millis(5));
        }
        settle
    }

    fn ingress(&mut self, queues: &mut [(QueueId, RxRing)], port: Option<&mut PortCounts>) -> Ingress {
        let mut i = Ingress::default();
        for (_, r) in queues.iter_mut() {
            let st = r.stats().unwrap_or_else(|_| r.counters());
            i.seen += st.kernel_packets;
            i.redirected += st.kernel_packets;
            i.delivered += st.frames;
            i.socket_drops.ring_full += st.kernel_drops;
            i.socket_drops.bad_descriptor += st.bad_frames;
            i.unread += r.unread();
        }
        i.interface = port.and_then(PortCounts::since_open);
        i
    }
}

/// How AF_PACKET spreads frames over the rings of its fanout group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanoutChoice {
    /// Our Toeplitz RSS compiled to a classic BPF fanout program: ring `i`
    /// receives exactly what the RETA sends to queue `i`.
    Rss,
    Hash,
    Cpu,
    QueueMapping,
    LoadBalance,
}

/// Options of the live backends.
pub struct LiveOptions<'a> {
    pub xdp_mode: XdpMode,
    /// AF_XDP: what the XDP program takes from the kernel (the CLI passes
    /// its `--listen` ports, or [`Claim::All`] for `--xdp-claim all`).
    pub xdp_claim: Claim,
    /// AF_XDP: open even when the interface's MTU allows frames longer than
    /// an AF_XDP frame (they are dropped and counted); otherwise refuse
    /// with [`LiveError::Mtu`].
    pub allow_mtu_drops: bool,
    pub fanout: FanoutChoice,
    pub rss: &'a RssConfig,
}

/// Opens the backend and returns one source per worker (engine queue `i`
/// goes to worker `worker_of[i]`) plus what must stay alive. The engine
/// hashes every frame of a live source with `opts.rss`'s key (and AF_PACKET's
/// `rss` fanout steers with it), so a public key is warned about here, once.
pub fn open(
    spec: &LiveSpec,
    queues: &[u32],
    worker_of: &[usize],
    workers: usize,
    opts: &LiveOptions<'_>,
) -> Result<(Vec<Box<dyn RxSource>>, Guard), LiveError> {
    match spec {
        LiveSpec::Xdp { iface, .. } => {
            let cfg = PortConfig {
                attach: AttachConfig { mode: opts.xdp_mode, claim: opts.xdp_claim.clone(), ..AttachConfig::default() },
                allow_mtu_drops: opts.allow_mtu_drops,
                ..PortConfig::default()
            };
            let port = XdpPort::open(iface, queues, &cfg).map_err(|e| match e.kind() {
                ErrorKind::MtuTooLarge => LiveError::Mtu(format!("afxdp:{iface}: {e}")),
                _ => LiveError::Open(format!("afxdp:{iface}: {e}")),
            })?;
            let mut warnings = port.warnings().to_vec();
            warnings.extend(key_warning(opts.rss));
            let (program, sockets) = port.into_parts();
            let program = Arc::new(program);
            let ifindex = program.ifindex();
            let what = format!("afxdp:{iface}");
            let mut per = (0..workers)
                .map(|_| {
                    Ok(LiveSource::new(Xsk { program: program.clone() }, Watch::new(what.clone(), iface, ifindex)?))
                })
                .collect::<Result<Vec<_>, LiveError>>()?;
            for (i, s) in sockets.into_iter().enumerate() {
                let w = worker_of.get(i).copied().unwrap_or(i % workers.max(1));
                if i == 0 {
                    per[w].port = PortCounts::open(ifindex);
                }
                per[w].queues.push((QueueId(i as u16), s));
            }
            Ok((
                per.into_iter().map(|s| Box::new(s) as Box<dyn RxSource>).collect(),
                Guard::Xdp { _program: program, warnings },
            ))
        }
        LiveSpec::Packet { iface } => {
            let group = (std::process::id() & 0xffff) as u16;
            let fanout = match opts.fanout {
                FanoutChoice::Rss => Fanout::toeplitz(group, opts.rss).map_err(|e| LiveError::Fanout(e.to_string()))?,
                FanoutChoice::Hash => Fanout::new(group, FanoutMode::Hash),
                FanoutChoice::Cpu => Fanout::new(group, FanoutMode::Cpu),
                FanoutChoice::QueueMapping => Fanout::new(group, FanoutMode::QueueMapping),
                FanoutChoice::LoadBalance => Fanout::new(group, FanoutMode::LoadBalance),
            };
            let mut rings = Vec::with_capacity(queues.len());
            // Join in queue order: the kernel picks member `ret % n` in join order.
            for _ in 0..queues.len() {
                let cfg = RxConfig { fanout: Some(fanout.clone()), ..RxConfig::default() };
                rings.push(RxRing::open(iface, &cfg).map_err(|e| LiveError::Open(format!("afpacket:{iface}: {e}")))?);
            }
            let ifindex = rings.first().map_or(0, RxRing::ifindex);
            let what = format!("afpacket:{iface}");
            let mut per = (0..workers)
                .map(|_| Ok(LiveSource::new(Packet, Watch::new(what.clone(), iface, ifindex)?)))
                .collect::<Result<Vec<_>, LiveError>>()?;
            for (i, ring) in rings.into_iter().enumerate() {
                let w = worker_of.get(i).copied().unwrap_or(i % workers.max(1));
                if i == 0 {
                    per[w].port = PortCounts::open(ifindex);
                }
                per[w].queues.push((QueueId(i as u16), ring));
            }
            let warnings = key_warning(opts.rss).into_iter().collect();
            Ok((per.into_iter().map(|s| Box::new(s) as Box<dyn RxSource>).collect(), Guard::Packet { warnings }))
        }
    }
}

/// [`PUBLIC_KEY_WARNING`] when `rss`'s key is public.
fn key_warning(rss: &RssConfig) -> Option<String> {
    rss.key().is_public().then(|| PUBLIC_KEY_WARNING.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(LiveSpec::parse("gen").unwrap(), None);
        assert_eq!(
            LiveSpec::parse("afxdp:veth0:0,2").unwrap(),
            Some(LiveSpec::Xdp { iface: "veth0".into(), queues: Some(vec![0, 2]) })
        );
        assert_eq!(
            LiveSpec::parse("afxdp:veth0").unwrap(),
            Some(LiveSpec::Xdp { iface: "veth0".into(), queues: None })
        );
        assert_eq!(LiveSpec::parse("afpacket:eth1").unwrap(), Some(LiveSpec::Packet { iface: "eth1".into() }));
        assert!(LiveSpec::parse("afxdp:").is_err());
        assert!(LiveSpec::parse("afxdp:x:a").is_err());
        assert!(LiveSpec::parse("afpacket:").is_err());
    }

    #[test]
    fn only_a_public_key_is_warned_about() {
        let public = RssConfig::default_for_queues(2).unwrap();
        assert_eq!(key_warning(&public).as_deref(), Some(PUBLIC_KEY_WARNING));
        let own = RssConfig::new(
            flowsteer_rss::RssKey::from_seed(52, 1).unwrap(),
            flowsteer_rss::HashTypes::default(),
            flowsteer_rss::Reta::round_robin(128, 2).unwrap(),
        );
        assert_eq!(key_warning(&own), None);
        let g = Guard::Packet { warnings: key_warning(&public).into_iter().collect() };
        assert_eq!(g.warnings(), [PUBLIC_KEY_WARNING]);
        assert!(Guard::None.warnings().is_empty());
    }
}
