//! The live trial runner: an AF_XDP generator in the topology's generator
//! namespace and an AF_XDP receiver (behind the XDP program, claiming the
//! test's UDP port) in its receiver namespace; or the same over AF_PACKET
//! ([`crate::io`]: `--io afpacket`, or `auto` when AF_XDP cannot be set up).
//!
//! Bidirectional (RFC 2544 section 14): both ends generate and receive at
//! once, each direction at the offered rate, with distinct stream ids
//! (B->A streams follow the A->B ones) and UDP ports (B->A: `dst_port + 2`),
//! so each receiver checks its own direction. An AF_XDP queue takes one
//! socket, so each end has one thread that sends its direction and reads
//! the other's between bursts: end A on `gen_cpu`, end B on `rx_cpu`.
//!
//! Generator: the shared transmit loop of `flowsteer_udp::txloop` (also
//! behind `flowsteer udp-gen --afxdp`). The frames are pre-built in the UMEM. Each transmit frame
//! holds a whole template ([`FrameSet`]) written once; sent again, it gets
//! only its sequence number and time rewritten and its UDP checksum updated
//! incrementally ([`flowsteer_gen::frames::Template::restamp`]), in place
//! ([`XskSocket::tx_prepared`]; a frame's tag says which template it holds).
//! Batches are a whole multiple of the template count, so the frames,
//! coming back round the completion ring in order, meet their own template
//! again. Rate control is a token bucket on `CLOCK_MONOTONIC` (`Instant`),
//! sending bursts of [`LiveConfig::burst`] frames (unthrottled: a whole tx
//! ring, [`GEN_TX_RING`], woken with one sendto of that budget where the
//! kernel allows it); the bucket holds at most 10 ms of frames
//! (at least one burst), so a generator descheduled briefly catches up in
//! bursts while a stalled one does not flood afterwards: its trial shows
//! the shortfall (invalid below 99 %).
//! `sent` counts frames queued to the transmit ring; the trial waits for
//! their completion.
//!
//! Receiver: in wakeup mode (poll(2) when its ring is empty), it counts
//! each frame with an [`RxTracker`]; it keeps reading for
//! [`LiveConfig::wait`] after the generator stopped (RFC 2544's wait), so
//! frames still queued in the DUT count.
//!
//! Learning (RFC 2544 section 23): before each trial the receiver sends
//! one frame from its MAC (so a learning bridge knows where it is) and the
//! generator one frame per flow to the next port (unclaimed at the
//! receiver: its kernel drops them; no address is configured anywhere).
//!
//! Both threads are pinned (`gen_cpu`, `rx_cpu`) when asked.
//! `/proc/net/softnet_stat` is read before and after every trial.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowsteer_udp::txloop::{transmit, TxPace, TxPort};
use flowsteer_xsk::{AttachConfig, Claim, PortConfig, XdpMode, XdpPort, XdpProgram, XskConfig, XskSocket};
use serde::Serialize;

use crate::dut::Ports;
use crate::io::{IoMode, PacketPort, Port};
use crate::search::{TrialOutcome, TrialRunner, TrialSpec};
use crate::spread::SpreadSpec;
use crate::track::{Latency, RxCounts, RxTracker};
use crate::Error;
use flowsteer_gen::frames::{FlowSpec, FrameSet, FrameSize};

/// Live trial parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveConfig {
    /// Frame size.
    pub size: FrameSize,
    /// Flows (default 16).
    pub flows: u32,
    /// IPv6 frames instead of IPv4.
    pub ipv6: bool,
    /// CPU of the generator thread.
    pub gen_cpu: Option<usize>,
    /// CPU of the receiver thread.
    pub rx_cpu: Option<usize>,
    /// Frames per transmit burst (default 32).
    pub burst: usize,
    /// Wait after each trial (RFC 2544: 2 s).
    #[serde(rename = "wait_s", serialize_with = "crate::json::secs")]
    pub wait: Duration,
    /// Time given to learning frames before each trial (default 100 ms).
    #[serde(rename = "learning_s", serialize_with = "crate::json::secs")]
    pub learning: Duration,
    /// XDP mode of the receiver's program.
    #[serde(skip)]
    pub xdp_mode: XdpMode,
    /// UDP destination port of the test frames (the receiver claims it).
    /// The learning frames use the next port; bidirectional, the B->A
    /// frames use `dst_port + 2` and their learning frames `+ 3`.
    pub dst_port: u16,
    /// Socket family (default [`IoMode::Auto`]).
    pub io: IoMode,
    /// Both ends generate and receive at once (RFC 2544 section 14), each
    /// direction at the offered rate.
    pub bidirectional: bool,
    /// Source ports planned so the flows land evenly on N receive queues
    /// (both directions); `None`: ports count up from 1024.
    #[serde(skip)]
    pub spread: Option<Arc<SpreadSpec>>,
}

impl LiveConfig {
    /// Defaults for `size`.
    pub fn new(size: FrameSize) -> LiveConfig {
        LiveConfig {
            size,
            flows: 16,
            ipv6: false,
            gen_cpu: None,
            rx_cpu: None,
            burst: 32,
            wait: Duration::from_secs(2),
            learning: Duration::from_millis(100),
            xdp_mode: XdpMode::Auto,
            dst_port: 25440,
            io: IoMode::Auto,
            bidirectional: false,
            spread: None,
        }
    }
}

/// Per-CPU deltas of `/proc/net/softnet_stat` over one trial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SoftnetDelta {
    /// CPU.
    pub cpu: usize,
    /// Frames processed by the CPU's backlog (column 1).
    pub processed: u64,
    /// Dropped for a full backlog (column 2).
    pub dropped: u64,
    /// NAPI budget or time ran out (column 3).
    pub time_squeeze: u64,
}

/// Per-CPU softnet counters now: (processed, dropped, time_squeeze) in CPU
/// order (the row index; offline CPUs have no row).
pub fn softnet_stat() -> Vec<(u64, u64, u64)> {
    let Ok(text) = std::fs::read_to_string("/proc/net/softnet_stat") else { return Vec::new() };
    text.lines()
        .map(|l| {
            let col = |i: usize| l.split_whitespace().nth(i).and_then(|h| u64::from_str_radix(h, 16).ok()).unwrap_or(0);
            (col(0), col(1), col(2))
        })
        .collect()
}

fn softnet_delta(before: &[(u64, u64, u64)], after: &[(u64, u64, u64)]) -> Vec<SoftnetDelta> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .map(|(cpu, (b, a))| SoftnetDelta {
            cpu,
            processed: a.0.wrapping_sub(b.0) & 0xffff_ffff,
            dropped: a.1.wrapping_sub(b.1) & 0xffff_ffff,
            time_squeeze: a.2.wrapping_sub(b.2) & 0xffff_ffff,
        })
        .collect()
}

/// Transmit ring of the generator's socket, and its frames per transmit
/// wake-up (XDP_MAX_TX_SKB_BUDGET) in copy mode.
pub const GEN_TX_RING: u32 = 2048;

fn gen_socket_config() -> XskConfig {
    // The generator receives nothing (no program on its interface): a small
    // fill ring leaves the UMEM's frames to transmit.
    XskConfig {
        frame_count: 4096,
        rx_ring: 64,
        tx_ring: GEN_TX_RING,
        copy_tx_budget: GEN_TX_RING,
        ..XskConfig::default()
    }
}

/// User and system CPU time of the calling thread so far, ns
/// (`/proc/thread-self/stat` utime and stime, in [`USER_HZ`] ticks; the
/// system part includes the softirq work the kernel ran in the thread's
/// context, such as a veth peer's receive during the thread's sendto).
pub fn thread_user_sys_ns() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/thread-self/stat") else { return (0, 0) };
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |i: usize| rest.split_whitespace().nth(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let tick = 1_000_000_000 / USER_HZ;
    // utime and stime are fields 14 and 15 of stat(5): 12 and 13 after ')'.
    (field(11) * tick, field(12) * tick)
}

/// Clock ticks per second of `/proc/stat` (USER_HZ: 100 on Linux, every
/// architecture it runs on): CPU time is accounted in 10 ms steps per CPU.
pub const USER_HZ: u64 = 100;

/// CPU time of `/proc/stat`'s per-CPU lines accepted by `cpu`, summed
/// over the fields at `fields` (user 0, nice 1, system 2, idle 3, iowait
/// 4, irq 5, softirq 6, steal 7), ns in [`USER_HZ`] steps.
fn proc_stat_ns(cpu: impl Fn(usize) -> bool, fields: &[usize]) -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else { return 0 };
    let ticks: u64 = text
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(' ')?;
            let n: usize = name.strip_prefix("cpu")?.parse().ok()?;
            cpu(n).then_some(rest)
        })
        .map(|rest| {
            let f: Vec<u64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
            fields.iter().map(|&i| f.get(i).copied().unwrap_or(0)).sum::<u64>()
        })
        .sum();
    ticks * (1_000_000_000 / USER_HZ)
}

/// Busy time of every CPU so far, ns: user + nice + system + irq + softirq
/// of `/proc/stat` (idle, iowait and steal excluded; guest time is already
/// in user).
pub fn cpu_busy_ns() -> u64 {
    proc_stat_ns(|_| true, &[0, 1, 2, 5, 6])
}

/// Interrupt and softirq time of `cpus` so far, ns (`/proc/stat`, in
/// [`USER_HZ`] steps): where the kernel's DUTs forward.
pub fn softirq_ns(cpus: &[usize]) -> u64 {
    proc_stat_ns(|c| cpus.contains(&c), &[5, 6])
}

/// CPU time of the calling thread so far, ns (`/proc/thread-self/schedstat`,
/// first field: time on a CPU, ns resolution; softirq work the kernel runs
/// in the thread's context, such as veth forwarding during its sendto,
/// counts here unless the kernel accounts IRQ time apart).
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// What a trial measured beyond the search's counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialDetail {
    /// Offered rate, frames/s.
    pub offered_fps: f64,
    /// Frames queued for transmit.
    pub sent: u64,
    /// Frames of this trial received (below `sent`).
    pub received: u64,
    /// The receiver's counts.
    pub rx: RxCounts,
    /// Latency of the received frames.
    pub latency: Latency,
    /// Frames the generator's socket did not see completed within 1 s.
    pub tx_incomplete: u64,
    /// Transmit wake-ups (sendto) the kernel refused during the trial.
    pub tx_kick_errors: u64,
    /// `/proc/net/softnet_stat` per CPU over the trial.
    pub softnet: Vec<SoftnetDelta>,
    /// Busy time of all CPUs from the generator's start to the receiver's
    /// stop (the wait included), ns, in [`USER_HZ`] steps.
    pub cpu_busy_ns: u64,
    /// CPU time of the generator thread during the trial, ns ([`thread_cpu_ns`]).
    pub gen_thread_ns: u64,
    /// Of which user time, ns ([`thread_user_sys_ns`], [`USER_HZ`] steps).
    pub gen_user_ns: u64,
    /// And system time (softirq work in its context included), ns.
    pub gen_sys_ns: u64,
    /// CPU time of the receiver thread from the generator's start to its
    /// stop, ns (bidirectional: both ends' time not spent generating).
    pub rx_thread_ns: u64,
    /// Frames the kernel refused for transmit (AF_PACKET: ENOBUFS), never
    /// on the wire and not in `sent`.
    pub tx_refused: u64,
    /// Bidirectional: the B->A direction (the fields above are A->B).
    pub reverse: Option<DirectionDetail>,
    /// Bidirectional: both directions together.
    pub aggregate: Option<Aggregate>,
}

/// Sets a flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn pin(cpu: Option<usize>) {
    if let Some(id) = cpu {
        // A CPU that does not exist leaves the thread unpinned.
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

/// One direction of a bidirectional trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionDetail {
    /// Frames the kernel took for transmit.
    pub sent: u64,
    /// Frames of this direction received (sequence numbers below those written).
    pub received: u64,
    /// Rate the direction's generator achieved, frames/s.
    pub achieved_fps: f64,
    /// The receiving end's counts for this direction.
    pub rx: RxCounts,
    /// Latency of this direction's frames.
    pub latency: Latency,
    /// Frames not completed within 1 s (AF_XDP).
    pub tx_incomplete: u64,
    /// Frames the kernel refused (AF_PACKET: ENOBUFS), never on the wire.
    pub tx_refused: u64,
}

/// Both directions of a bidirectional trial together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// Offered rate of both directions, frames/s (twice the per-direction rate).
    pub offered_fps: f64,
    /// Frames sent, both directions.
    pub sent: u64,
    /// Frames received, both directions.
    pub received: u64,
    /// Sum of the directions' achieved rates, frames/s.
    pub achieved_fps: f64,
}

/// The generator and receiver on a topology, one frame size.
///
/// End A is the generator's port, end B the receiver's. One-way: a
/// generator thread on A (`gen_cpu`) and a receiver thread on B
/// (`rx_cpu`). Bidirectional: one thread per end that generates its
/// direction and receives the other's on the same socket (an AF_XDP queue
/// takes one socket): A on `gen_cpu` sends A->B and receives B->A, B on
/// `rx_cpu` the reverse.
pub struct LiveRunner {
    cfg: LiveConfig,
    frames: Arc<FrameSet>,
    learn: Arc<FrameSet>,
    /// Bidirectional: B->A frames and learning frames.
    reverse: Option<(Arc<FrameSet>, Arc<FrameSet>)>,
    a: Option<Port>,
    b: Option<Port>,
    progs: Vec<XdpProgram>,
    fallback: Option<String>,
    epoch: Instant,
    stop: Option<Arc<AtomicBool>>,
    /// Every trial's details, in order.
    pub details: Vec<TrialDetail>,
}

impl std::fmt::Debug for LiveRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveRunner").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

fn flow_spec(ports: &Ports, cfg: &LiveConfig, port: u16) -> FlowSpec {
    let (src, dst): (IpAddr, IpAddr) = if cfg.ipv6 {
        (IpAddr::from([0xfd00, 0x2544, 0, 0, 0, 0, 0, 0x100]), IpAddr::from([0xfd00, 0x2544, 0, 0, 0, 0, 0, 2]))
    } else {
        (IpAddr::from([198, 18, 0, 1]), IpAddr::from([198, 19, 0, 2]))
    };
    FlowSpec {
        src_mac: ports.gen_mac,
        dst_mac: ports.rcv_mac,
        src_ip: src,
        dst_ip: dst,
        src_port: 1024,
        dst_port: port,
        flows: cfg.flows,
        src_ports: Vec::new(),
        stream_base: 0,
        src_addrs: Vec::new(),
    }
}

/// The B->A flows: MACs swapped, from the receiver's side of the address
/// plan to the generator's, stream ids after the A->B ones.
fn reverse_spec(ports: &Ports, cfg: &LiveConfig, port: u16) -> FlowSpec {
    let (src, dst): (IpAddr, IpAddr) = if cfg.ipv6 {
        (IpAddr::from([0xfd00, 0x2544, 0, 0, 0, 0, 1, 0x100]), IpAddr::from([0xfd00, 0x2544, 0, 0, 0, 0, 1, 2]))
    } else {
        (IpAddr::from([198, 19, 0, 1]), IpAddr::from([198, 18, 0, 2]))
    };
    FlowSpec {
        src_mac: ports.rcv_mac,
        dst_mac: ports.gen_mac,
        src_ip: src,
        dst_ip: dst,
        stream_base: cfg.flows as u16,
        ..flow_spec(ports, cfg, port)
    }
}

/// Frames sent and in what time, by one generator.
#[derive(Debug, Clone, Copy, Default)]
struct GenOut {
    /// Frames the kernel took.
    sent: u64,
    /// Frames written (sequence numbers used): `sent` plus the refused.
    written: u64,
    secs: f64,
    incomplete: u64,
}

/// AF_XDP socket of an end that sends and receives (bidirectional).
fn end_socket_config() -> XskConfig {
    XskConfig {
        frame_count: 8192,
        rx_ring: 2048,
        tx_ring: GEN_TX_RING,
        copy_tx_budget: GEN_TX_RING,
        ..XskConfig::default()
    }
}

/// Opens both ends with `io` (AF_XDP or AF_PACKET).
fn open_ends(ports: &Ports, cfg: &LiveConfig, io: IoMode, room: usize) -> Result<(Port, Port, Vec<XdpProgram>), Error> {
    let (fwd, rev) = (cfg.dst_port, cfg.dst_port.wrapping_add(2));
    let (gen_dev, rcv_dev) = (ports.gen_dev.clone(), ports.rcv_dev.clone());
    let bidir = cfg.bidirectional;
    if io == IoMode::Afpacket {
        let a = run_in(ports.gen_ns.as_deref(), move || PacketPort::open(&gen_dev, bidir.then_some(rev), room))??;
        let b = run_in(ports.rcv_ns.as_deref(), move || PacketPort::open(&rcv_dev, Some(fwd), room))??;
        return Ok((Port::Packet(Box::new(a)), Port::Packet(Box::new(b)), Vec::new()));
    }
    let port_cfg = |claim: u16, socket: XskConfig| PortConfig {
        attach: AttachConfig { mode: cfg.xdp_mode, claim: Claim::udp(&[claim]), ..AttachConfig::default() },
        socket,
        allow_mtu_drops: false,
    };
    let mut progs = Vec::new();
    let a = if bidir {
        let pc = port_cfg(rev, end_socket_config());
        let port = run_in(ports.gen_ns.as_deref(), move || XdpPort::open(&gen_dev, &[0], &pc))??;
        let (prog, mut socks) = port.into_parts();
        progs.push(prog);
        socks.pop().ok_or_else(|| Error::Config("the generator's port has no socket".into()))?
    } else {
        run_in(ports.gen_ns.as_deref(), move || XskSocket::open(&gen_dev, 0, &gen_socket_config()))??
    };
    let pc = port_cfg(fwd, if bidir { end_socket_config() } else { XskConfig::default() });
    let port = run_in(ports.rcv_ns.as_deref(), move || XdpPort::open(&rcv_dev, &[0], &pc))??;
    let (prog, mut socks) = port.into_parts();
    // The receiver's program first: [`LiveRunner::program`] reports it.
    progs.insert(0, prog);
    let b = socks.pop().ok_or_else(|| Error::Config("the receiver's port has no socket".into()))?;
    Ok((Port::Xdp(Box::new(a)), Port::Xdp(Box::new(b)), progs))
}

impl LiveRunner {
    /// Opens the generator's and the receiver's sockets with `cfg.io`
    /// (AF_XDP: the receiver's XDP program claims the test's UDP port only;
    /// `auto` falls back to AF_PACKET when AF_XDP cannot be set up, and
    /// [`LiveRunner::fallback`] says why).
    /// `stop` (SIGINT/SIGTERM) makes the next trial fail with
    /// [`Error::Stopped`].
    pub fn new(ports: &Ports, cfg: LiveConfig, stop: Option<Arc<AtomicBool>>) -> Result<LiveRunner, Error> {
        if cfg.burst == 0 || cfg.burst > 256 {
            return Err(Error::Config("burst must be 1..=256".into()));
        }
        if cfg.bidirectional && cfg.flows > 32768 {
            return Err(Error::Config(
                "bidirectional: at most 32768 flows per direction (stream ids are 16 bits)".into(),
            ));
        }
        let mut spec = flow_spec(ports, &cfg, cfg.dst_port);
        let mut rspec = reverse_spec(ports, &cfg, cfg.dst_port.wrapping_add(2));
        if let Some(sp) = &cfg.spread {
            spec.src_ports = sp.ports(&spec)?;
            rspec.src_ports = sp.ports(&rspec)?;
        }
        let frames = FrameSet::new(&spec, cfg.size)?;
        let learn_spec = FlowSpec { dst_port: cfg.dst_port.wrapping_add(1), ..spec.clone() };
        let learn = FrameSet::new(&learn_spec, FrameSize::Fixed(128))?;
        let reverse = if cfg.bidirectional {
            let rl = FlowSpec { dst_port: cfg.dst_port.wrapping_add(3), ..rspec.clone() };
            Some((Arc::new(FrameSet::new(&rspec, cfg.size)?), Arc::new(FrameSet::new(&rl, FrameSize::Fixed(128))?)))
        } else {
            None
        };
        let room = frames.max_len().max(learn.max_len());
        let mut fallback = None;
        let (a, b, progs) = match cfg.io {
            IoMode::Afxdp | IoMode::Afpacket => open_ends(ports, &cfg, cfg.io, room)?,
            IoMode::Auto => match open_ends(ports, &cfg, IoMode::Afxdp, room) {
                Ok(ends) => ends,
                Err(Error::Xsk(e)) => {
                    fallback = Some(format!("AF_XDP could not be set up ({e}); using AF_PACKET"));
                    open_ends(ports, &cfg, IoMode::Afpacket, room)?
                }
                Err(e) => return Err(e),
            },
        };
        Ok(LiveRunner {
            cfg,
            frames: Arc::new(frames),
            learn: Arc::new(learn),
            reverse,
            a: Some(a),
            b: Some(b),
            progs,
            fallback,
            epoch: Instant::now(),
            stop,
            details: Vec::new(),
        })
    }

    /// The receiver's XDP program (its mode, its counters); `None` on AF_PACKET.
    pub fn program(&self) -> Option<&XdpProgram> {
        self.progs.first()
    }

    /// Why native XDP was refused on a port of this runner when
    /// [`XdpMode::Auto`] fell back to generic (skb) mode: the receiver's
    /// first, then the generator's (`None`: every program is native, or
    /// none is attached).
    pub fn xdp_fallback(&self) -> Option<&str> {
        self.progs.iter().find_map(XdpProgram::fallback)
    }

    /// The socket family in use (never `auto`).
    pub fn io(&self) -> IoMode {
        self.a.as_ref().map_or(self.cfg.io, Port::io)
    }

    /// Why `auto` fell back to AF_PACKET (`None`: it did not).
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The generator's bind mode (copy or zero-copy; `None` on AF_PACKET).
    pub fn gen_bind(&self) -> Option<flowsteer_xsk::BindMode> {
        match &self.a {
            Some(Port::Xdp(s)) => Some(s.bind_mode()),
            _ => None,
        }
    }

    /// The source ports of the A->B flows (planned with `spread`, or
    /// counting up from 1024), one per flow.
    pub fn flow_ports(&self) -> Vec<u16> {
        (0..self.frames.flows()).map(|i| self.frames.template(i).sport()).collect()
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn capacity(offered_fps: f64, duration: Duration) -> u32 {
        let secs = duration.as_secs_f64();
        let expect = if offered_fps.is_finite() { offered_fps * secs } else { 50e6 * secs };
        (expect * 1.1 + 4096.0).min(f64::from(1u32 << 31)) as u32
    }

    /// Runs one trial at `offered_fps` (`f64::INFINITY`: as fast as the
    /// generator goes) for `duration`; bidirectional: `offered_fps` in each
    /// direction, and the outcome is the worse direction's (its counts;
    /// `duration_s` such that the achieved rate is the lower of the two),
    /// so a trial passes NDR only if neither direction lost a frame.
    pub fn trial(&mut self, offered_fps: f64, duration: Duration) -> Result<(TrialOutcome, TrialDetail), Error> {
        if self.stopped() {
            return Err(Error::Stopped);
        }
        let (Some(a), Some(b)) = (self.a.take(), self.b.take()) else {
            return Err(Error::Config("a previous trial lost its sockets".into()));
        };
        let r = if self.reverse.is_some() {
            self.trial_bidir(a, b, offered_fps, duration)
        } else {
            self.trial_oneway(a, b, offered_fps, duration)
        };
        if let Ok((_, d)) = &r {
            self.details.push(d.clone());
        }
        r
    }

    fn trial_oneway(
        &mut self,
        mut gen: Port,
        mut rx: Port,
        offered_fps: f64,
        duration: Duration,
    ) -> Result<(TrialOutcome, TrialDetail), Error> {
        let capacity = Self::capacity(offered_fps, duration);
        let (port, flows, epoch, rx_cpu) = (self.cfg.dst_port, self.cfg.flows, self.epoch, self.cfg.rx_cpu);
        let learn = self.learn.clone();
        let rx_stop = Arc::new(AtomicBool::new(false));
        let rx_stop2 = rx_stop.clone();
        let before = softnet_stat();
        let errors_before = gen.tx_errors();
        let receiver = std::thread::Builder::new().name("fs-2544-rx".into()).spawn(move || {
            pin(rx_cpu);
            let mut tracker = RxTracker::new(port, flows, capacity);
            // Learning: one frame from the receiver's MAC, towards the generator.
            let mut buf = vec![0u8; learn.max_len()];
            let t = learn.template(0);
            t.write(&mut buf, 0, 0);
            let mut hello = buf[..t.len()].to_vec();
            hello[0..6].copy_from_slice(&buf[6..12]);
            hello[6..12].copy_from_slice(&buf[0..6]);
            rx.tx_one(&hello);
            let cpu0 = thread_cpu_ns();
            receive(&mut rx, &mut tracker, &rx_stop2, epoch);
            (rx, tracker, thread_cpu_ns().saturating_sub(cpu0))
        });
        let receiver = receiver.map_err(|e| Error::Thread(e.to_string()))?;
        // Should anything below fail, the receiver still stops.
        let _stop_rx = StopOnDrop(rx_stop.clone());
        send_learning(&mut gen, &self.learn);
        std::thread::sleep(self.cfg.learning);
        let busy_before = cpu_busy_ns();
        let frames = self.frames.clone();
        let (burst, gen_cpu) = (self.cfg.burst, self.cfg.gen_cpu);
        let generator = std::thread::Builder::new()
            .name("fs-2544-gen".into())
            .spawn(move || {
                pin(gen_cpu);
                let cpu0 = thread_cpu_ns();
                let (u0, s0) = thread_user_sys_ns();
                let r = generate(&mut gen, &frames, offered_fps, duration, burst, epoch, None);
                let (u1, s1) = thread_user_sys_ns();
                (gen, r, (thread_cpu_ns().saturating_sub(cpu0), u1.saturating_sub(u0), s1.saturating_sub(s0)))
            })
            .map_err(|e| Error::Thread(e.to_string()))?;
        let (gen, g, (gen_thread_ns, gen_user_ns, gen_sys_ns)) =
            generator.join().map_err(|_| Error::Thread("the generator thread panicked".into()))?;
        let errors = gen.tx_errors().saturating_sub(errors_before);
        let is_xdp = gen.io() == IoMode::Afxdp;
        self.a = Some(gen);
        std::thread::sleep(self.cfg.wait);
        rx_stop.store(true, Ordering::Release);
        let (rx, tracker, rx_thread_ns) =
            receiver.join().map_err(|_| Error::Thread("the receiver thread panicked".into()))?;
        let busy = cpu_busy_ns().saturating_sub(busy_before);
        self.b = Some(rx);
        let after = softnet_stat();
        let received = tracker.received_below(g.written);
        let detail = TrialDetail {
            offered_fps,
            sent: g.sent,
            received,
            rx: tracker.counts(),
            latency: tracker.latency(),
            tx_incomplete: g.incomplete,
            tx_kick_errors: if is_xdp { errors } else { 0 },
            softnet: softnet_delta(&before, &after),
            cpu_busy_ns: busy,
            gen_thread_ns,
            gen_user_ns,
            gen_sys_ns,
            rx_thread_ns,
            tx_refused: g.written - g.sent,
            reverse: None,
            aggregate: None,
        };
        Ok((TrialOutcome { sent: g.sent, received, duration_s: g.secs }, detail))
    }

    fn trial_bidir(
        &mut self,
        mut a: Port,
        mut b: Port,
        offered_fps: f64,
        duration: Duration,
    ) -> Result<(TrialOutcome, TrialDetail), Error> {
        let Some((rframes, rlearn)) = self.reverse.clone() else {
            return Err(Error::Config("not a bidirectional runner".into()));
        };
        let capacity = Self::capacity(offered_fps, duration);
        let (port, flows, epoch) = (self.cfg.dst_port, self.cfg.flows, self.epoch);
        let before = softnet_stat();
        let errors_before = (a.tx_errors(), b.tx_errors());
        send_learning(&mut a, &self.learn);
        send_learning(&mut b, &rlearn);
        std::thread::sleep(self.cfg.learning);
        let busy_before = cpu_busy_ns();
        let stop = Arc::new(AtomicBool::new(false));
        let _stop = StopOnDrop(stop.clone());
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let burst = self.cfg.burst;
        let spawn_end = |name: &str, mut port: Port, frames: Arc<FrameSet>, tracker: RxTracker, cpu: Option<usize>| {
            let (stop, done) = (stop.clone(), done_tx.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    pin(cpu);
                    let mut tracker = tracker;
                    let cpu0 = thread_cpu_ns();
                    let (u0, s0) = thread_user_sys_ns();
                    let g = generate(&mut port, &frames, offered_fps, duration, burst, epoch, Some(&mut tracker));
                    let (u1, s1) = thread_user_sys_ns();
                    let gen_ns = thread_cpu_ns().saturating_sub(cpu0);
                    let _ = done.send(());
                    receive(&mut port, &mut tracker, &stop, epoch);
                    let all_ns = thread_cpu_ns().saturating_sub(cpu0);
                    (port, g, tracker, (gen_ns, u1.saturating_sub(u0), s1.saturating_sub(s0), all_ns))
                })
                .map_err(|e| Error::Thread(e.to_string()))
        };
        // A receives B->A: stream ids from `flows`, port + 2.
        let ta = RxTracker::new(port.wrapping_add(2), flows, capacity).with_stream_base(flows as u16);
        let tb = RxTracker::new(port, flows, capacity);
        let end_a = spawn_end("fs-2544-a", a, self.frames.clone(), ta, self.cfg.gen_cpu)?;
        let end_b = spawn_end("fs-2544-b", b, rframes, tb, self.cfg.rx_cpu)?;
        drop(done_tx);
        // Both generators done (or a thread gone), then RFC 2544's wait.
        for _ in 0..2 {
            if done_rx.recv().is_err() {
                break;
            }
        }
        std::thread::sleep(self.cfg.wait);
        stop.store(true, Ordering::Release);
        let ra = end_a.join().map_err(|_| Error::Thread("end A's thread panicked".into()));
        let rb = end_b.join().map_err(|_| Error::Thread("end B's thread panicked".into()));
        let (a, ga, ta, (a_gen_ns, a_user_ns, a_sys_ns, a_all_ns)) = ra?;
        let (b, gb, tb, (_, _, _, b_all_ns)) = rb?;
        let busy = cpu_busy_ns().saturating_sub(busy_before);
        let after = softnet_stat();
        let errors = (a.tx_errors().saturating_sub(errors_before.0), b.tx_errors().saturating_sub(errors_before.1));
        let is_xdp = a.io() == IoMode::Afxdp;
        self.a = Some(a);
        self.b = Some(b);
        let dir = |g: &GenOut, t: &RxTracker| DirectionDetail {
            sent: g.sent,
            received: t.received_below(g.written),
            achieved_fps: if g.secs > 0.0 { g.sent as f64 / g.secs } else { 0.0 },
            rx: t.counts(),
            latency: t.latency(),
            tx_incomplete: g.incomplete,
            tx_refused: g.written - g.sent,
        };
        let (fwd, rev) = (dir(&ga, &tb), dir(&gb, &ta));
        let outcome = bidir_outcome(&fwd, &rev, ga.secs.max(gb.secs));
        let detail = TrialDetail {
            offered_fps,
            sent: fwd.sent,
            received: fwd.received,
            rx: fwd.rx,
            latency: fwd.latency,
            tx_incomplete: fwd.tx_incomplete,
            tx_kick_errors: if is_xdp { errors.0 } else { 0 },
            softnet: softnet_delta(&before, &after),
            cpu_busy_ns: busy,
            gen_thread_ns: a_gen_ns,
            gen_user_ns: a_user_ns,
            gen_sys_ns: a_sys_ns,
            rx_thread_ns: a_all_ns.saturating_sub(a_gen_ns) + b_all_ns,
            tx_refused: fwd.tx_refused,
            aggregate: Some(Aggregate {
                offered_fps: 2.0 * offered_fps,
                sent: fwd.sent + rev.sent,
                received: fwd.received + rev.received,
                achieved_fps: fwd.achieved_fps + rev.achieved_fps,
            }),
            reverse: Some(rev),
        };
        Ok((outcome, detail))
    }

    /// The generator's ceiling: one trial as fast as it goes; returns the
    /// rate achieved (frames/s) and the trial's details.
    pub fn generator_max(&mut self, duration: Duration) -> Result<(f64, TrialDetail), Error> {
        let (out, detail) = self.trial(f64::INFINITY, duration)?;
        let fps = if out.duration_s > 0.0 { out.sent as f64 / out.duration_s } else { 0.0 };
        Ok((fps, detail))
    }
}

/// What the search sees of a bidirectional trial: the worse direction
/// (higher loss ratio; on a tie, the lower achieved rate), its counts, and a
/// `duration_s` that makes `sent / duration_s` the lower of the two achieved
/// rates, so the trial is valid only if both directions reached the
/// offered rate. Neither direction lost a frame iff the outcome lost none.
pub fn bidir_outcome(fwd: &DirectionDetail, rev: &DirectionDetail, secs: f64) -> TrialOutcome {
    let loss = |d: &DirectionDetail| if d.sent == 0 { 1.0 } else { 1.0 - d.received as f64 / d.sent as f64 };
    let worse = match loss(fwd).partial_cmp(&loss(rev)) {
        Some(std::cmp::Ordering::Greater) => fwd,
        Some(std::cmp::Ordering::Less) => rev,
        _ if fwd.achieved_fps <= rev.achieved_fps => fwd,
        _ => rev,
    };
    let slowest = fwd.achieved_fps.min(rev.achieved_fps);
    let duration_s = if slowest > 0.0 && worse.sent > 0 { worse.sent as f64 / slowest } else { secs };
    TrialOutcome { sent: worse.sent, received: worse.received, duration_s }
}

impl TrialRunner for LiveRunner {
    fn run_trial(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.trial(spec.offered_fps, spec.duration).map(|(o, _)| o)?)
    }
}

/// One learning frame per flow to the next port (unclaimed at the far end).
fn send_learning(port: &mut Port, learn: &FrameSet) {
    let mut buf = vec![0u8; learn.max_len()];
    for s in 0..learn.flows() {
        let t = learn.template(s);
        t.write(&mut buf, s, 0);
        port.tx_one(&buf[..t.len()]);
    }
    port.tx_complete();
}

/// Counts received frames until `stop` and the ring is empty.
fn receive(port: &mut Port, tracker: &mut RxTracker, stop: &AtomicBool, epoch: Instant) {
    loop {
        let now = epoch.elapsed().as_nanos() as u64;
        let n = port.rx_burst(64, &mut |f| tracker.on_frame(f, now));
        if n == 0 {
            if stop.load(Ordering::Acquire) {
                break;
            }
            port.wait_rx(Duration::from_millis(5));
        }
    }
    port.tx_complete();
}

/// Reads what is there now, up to `max` frames.
fn drain(port: &mut Port, tracker: &mut RxTracker, epoch: Instant, max: usize) {
    let mut got = 0;
    while got < max {
        let now = epoch.elapsed().as_nanos() as u64;
        let n = port.rx_burst(64, &mut |f| tracker.on_frame(f, now));
        if n == 0 {
            break;
        }
        got += n;
    }
}

/// A port as the shared transmit loop sees it; a bidirectional end also
/// drains its receive ring between bursts and waits for frames (rather
/// than sleeping) when the wait is a millisecond or more (poll's
/// resolution; shorter, its ring holds what arrives).
struct GenPort<'a> {
    port: &'a mut Port,
    rx: Option<&'a mut RxTracker>,
    epoch: Instant,
    ring: usize,
}

impl TxPort for GenPort<'_> {
    fn tx_batch_max(&self, ring: usize) -> usize {
        self.port.tx_batch_max(ring)
    }

    fn tx_prepared(
        &mut self,
        max: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u32) -> Option<usize>,
    ) -> (usize, usize) {
        self.port.tx_prepared(max, fill)
    }

    fn tx_complete(&mut self) -> usize {
        self.port.tx_complete()
    }

    fn tx_in_flight(&self) -> u32 {
        self.port.tx_in_flight()
    }

    fn between(&mut self) {
        if let Some(t) = self.rx.as_deref_mut() {
            drain(self.port, t, self.epoch, self.ring);
        }
    }

    fn pause(&mut self, gap: Duration) {
        if self.rx.is_some() && gap >= Duration::from_millis(1) {
            self.port.wait_rx(gap);
        } else {
            std::thread::sleep(gap);
        }
    }
}

/// One direction's generator: the shared pre-built-frame transmit loop
/// ([`flowsteer_udp::txloop::transmit`]) on `port`, receiving between
/// bursts when `rx` is given.
fn generate(
    port: &mut Port,
    frames: &FrameSet,
    rate: f64,
    duration: Duration,
    burst: usize,
    epoch: Instant,
    rx: Option<&mut RxTracker>,
) -> GenOut {
    let ring = port.tx_batch_max(GEN_TX_RING as usize);
    let mut gp = GenPort { port, rx, epoch, ring };
    let pace = TxPace { rate, duration, count: None, burst, ring: GEN_TX_RING as usize };
    let o = transmit(&mut gp, frames, &pace, epoch, None);
    GenOut { sent: o.sent, written: o.written, secs: o.secs, incomplete: o.incomplete }
}

/// Runs `f` on a thread inside namespace `ns` (`None`: the caller's, which
/// a new thread inherits).
fn run_in<F, R>(ns: Option<&str>, f: F) -> Result<R, Error>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let ns = ns.map(str::to_string);
    std::thread::spawn(move || -> Result<R, Error> {
        if let Some(ns) = ns {
            flowsteer_netns::enter(&ns)?;
        }
        Ok(f())
    })
    .join()
    .map_err(|_| Error::Thread("a thread inside a namespace panicked".into()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(sent: u64, received: u64, achieved_fps: f64) -> DirectionDetail {
        DirectionDetail {
            sent,
            received,
            achieved_fps,
            rx: RxCounts::default(),
            latency: Latency::default(),
            tx_incomplete: 0,
            tx_refused: 0,
        }
    }

    #[test]
    fn a_bidirectional_trial_fails_ndr_when_either_direction_lost_a_frame() {
        // Loss in the reverse direction only: the outcome is that direction's.
        let o = bidir_outcome(&dir(1000, 1000, 1000.0), &dir(1000, 999, 1000.0), 1.0);
        assert_eq!((o.sent, o.received), (1000, 999));
        let o = bidir_outcome(&dir(1000, 990, 1000.0), &dir(1000, 999, 1000.0), 1.0);
        assert_eq!((o.sent, o.received), (1000, 990));
        // No loss: the slower direction sets the achieved rate.
        let o = bidir_outcome(&dir(1000, 1000, 1000.0), &dir(900, 900, 900.0), 1.0);
        assert_eq!((o.sent, o.received), (900, 900));
        assert!((o.sent as f64 / o.duration_s - 900.0).abs() < 1e-6);
        // The slower direction's rate even when the other lost more.
        let o = bidir_outcome(&dir(1000, 900, 1000.0), &dir(500, 500, 500.0), 1.0);
        assert_eq!((o.sent, o.received), (1000, 900));
        assert!((o.sent as f64 / o.duration_s - 500.0).abs() < 1e-6);
        // Nothing sent: no rate, the wall time.
        let o = bidir_outcome(&dir(0, 0, 0.0), &dir(0, 0, 0.0), 2.0);
        assert_eq!((o.sent, o.duration_s), (0, 2.0));
    }
}
