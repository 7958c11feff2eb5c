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

use crate::error::LiveError;
use flowsteer_afpacket::{Fanout, FanoutMode, RxConfig, RxRing};
use flowsteer_engine::source::RxSource;
use flowsteer_rss::{QueueId, RssConfig};
use flowsteer_xsk::{AttachConfig, Claim, ErrorKind, PortConfig, XdpMode, XdpPort, XdpProgram, XskSocket};

/// What must stay alive for the run (the XDP program attachment).
pub enum Guard {
    None,
    /// Dropping it detaches the program.
    Xdp {
        _program: XdpProgram,
        /// What the caller should tell its user (see [`Guard::warnings`]).
        warnings: Vec<String>,
    },
}

impl Guard {
    /// Warnings from opening the backend (an MTU that allows frames longer
    /// than an AF_XDP frame, when the drops were allowed).
    pub fn warnings(&self) -> &[String] {
        match self {
            Guard::Xdp { warnings, .. } => warnings,
            Guard::None => &[],
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

/// One worker's queues: each engine receive queue with its socket.
struct XskSource {
    socks: Vec<(QueueId, XskSocket)>,
}

impl RxSource for XskSource {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        match self.socks.iter_mut().find(|(i, _)| *i == q) {
            Some((_, s)) => s.rx_burst(max, sink),
            None => 0,
        }
    }

    fn exhausted(&self, _q: QueueId) -> bool {
        false
    }
}

/// One worker's fanout members: each engine receive queue with its ring.
struct PacketSource {
    rings: Vec<(QueueId, RxRing)>,
}

impl RxSource for PacketSource {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        match self.rings.iter_mut().find(|(i, _)| *i == q) {
            Some((_, r)) => r.poll_burst(max, &mut |bytes, _meta| sink(bytes)),
            None => 0,
        }
    }

    fn exhausted(&self, _q: QueueId) -> bool {
        false
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
/// goes to worker `worker_of[i]`) plus what must stay alive.
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
            let warnings = port.warnings().to_vec();
            let (program, sockets) = port.into_parts();
            let mut per: Vec<XskSource> = (0..workers).map(|_| XskSource { socks: Vec::new() }).collect();
            for (i, s) in sockets.into_iter().enumerate() {
                let w = worker_of.get(i).copied().unwrap_or(i % workers.max(1));
                per[w].socks.push((QueueId(i as u16), s));
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
            let mut per: Vec<PacketSource> = (0..workers).map(|_| PacketSource { rings: Vec::new() }).collect();
            // Join in queue order: the kernel picks member `ret % n` in join order.
            for i in 0..queues.len() {
                let cfg = RxConfig { fanout: Some(fanout.clone()), ..RxConfig::default() };
                let ring = RxRing::open(iface, &cfg).map_err(|e| LiveError::Open(format!("afpacket:{iface}: {e}")))?;
                let w = worker_of.get(i).copied().unwrap_or(i % workers.max(1));
                per[w].rings.push((QueueId(i as u16), ring));
            }
            Ok((per.into_iter().map(|s| Box::new(s) as Box<dyn RxSource>).collect(), Guard::None))
        }
    }
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
}
