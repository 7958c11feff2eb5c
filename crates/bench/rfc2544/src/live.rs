//! The live trial runner: an AF_XDP generator in the topology's generator
//! namespace and an AF_XDP receiver (behind the XDP program, claiming the
//! test's UDP port) in its receiver namespace.
//!
//! Generator: the frames are pre-built in the UMEM. Each transmit frame
//! holds a whole template ([`FrameSet`]) written once; sent again, it gets
//! only its sequence number and time rewritten and its UDP checksum updated
//! incrementally ([`crate::frames::Template::restamp`]), in place
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

use flowsteer_xsk::{AttachConfig, Claim, PortConfig, XdpMode, XdpPort, XdpProgram, XskConfig, XskSocket};
use serde::Serialize;

use crate::dut::Ports;
use crate::frames::{FlowSpec, FrameSet, FrameSize};
use crate::search::{TrialOutcome, TrialRunner, TrialSpec};
use crate::track::{Latency, RxCounts, RxTracker};
use crate::Error;

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
    pub wait: Duration,
    /// Time given to learning frames before each trial (default 100 ms).
    pub learning: Duration,
    /// XDP mode of the receiver's program.
    #[serde(skip)]
    pub xdp_mode: XdpMode,
    /// UDP destination port of the test frames (the receiver claims it).
    pub dst_port: u16,
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

/// Busy time of every CPU so far, ns: user + nice + system + irq + softirq
/// of `/proc/stat` (idle, iowait and steal excluded; guest time is already
/// in user).
pub fn cpu_busy_ns() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else { return 0 };
    let ticks: u64 = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let f: Vec<u64> = l.split_whitespace().skip(1).map(|v| v.parse().unwrap_or(0)).collect();
            // user nice system idle iowait irq softirq steal
            [0usize, 1, 2, 5, 6].iter().map(|&i| f.get(i).copied().unwrap_or(0)).sum::<u64>()
        })
        .sum();
    ticks * (1_000_000_000 / USER_HZ)
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
    /// CPU time of the receiver thread from the generator's start to its stop, ns.
    pub rx_thread_ns: u64,
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

/// The generator and receiver on a topology, one frame size.
pub struct LiveRunner {
    cfg: LiveConfig,
    frames: Arc<FrameSet>,
    learn: Arc<FrameSet>,
    gen: Option<XskSocket>,
    rx: Option<XskSocket>,
    prog: XdpProgram,
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
    }
}

impl LiveRunner {
    /// Opens the generator's socket and the receiver's port (the receiver's
    /// XDP program claims the test's UDP port only).
    /// `stop` (SIGINT/SIGTERM) makes the next trial fail with
    /// [`Error::Stopped`].
    pub fn new(ports: &Ports, cfg: LiveConfig, stop: Option<Arc<AtomicBool>>) -> Result<LiveRunner, Error> {
        if cfg.burst == 0 || cfg.burst > 256 {
            return Err(Error::Config("burst must be 1..=256".into()));
        }
        let frames = FrameSet::new(&flow_spec(ports, &cfg, cfg.dst_port), cfg.size)?;
        let learn = FrameSet::new(&flow_spec(ports, &cfg, cfg.dst_port.wrapping_add(1)), FrameSize::Fixed(128))?;
        let gen_dev = ports.gen_dev.clone();
        let gen = run_in(ports.gen_ns.as_deref(), move || XskSocket::open(&gen_dev, 0, &gen_socket_config()))??;
        let port_cfg = PortConfig {
            attach: AttachConfig { mode: cfg.xdp_mode, claim: Claim::udp(&[cfg.dst_port]), ..AttachConfig::default() },
            socket: XskConfig::default(),
            allow_mtu_drops: false,
        };
        let rcv_dev = ports.rcv_dev.clone();
        let port = run_in(ports.rcv_ns.as_deref(), move || XdpPort::open(&rcv_dev, &[0], &port_cfg))??;
        let (prog, mut socks) = port.into_parts();
        let rx = socks.pop();
        Ok(LiveRunner {
            cfg,
            frames: Arc::new(frames),
            learn: Arc::new(learn),
            gen: Some(gen),
            rx,
            prog,
            epoch: Instant::now(),
            stop,
            details: Vec::new(),
        })
    }

    /// The receiver's XDP program (its mode, its counters).
    pub fn program(&self) -> &XdpProgram {
        &self.prog
    }

    /// The generator's bind mode (copy or zero-copy).
    pub fn gen_bind(&self) -> Option<flowsteer_xsk::BindMode> {
        self.gen.as_ref().map(XskSocket::bind_mode)
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Runs one trial at `offered_fps` (`f64::INFINITY`: as fast as the
    /// generator goes) for `duration`.
    pub fn trial(&mut self, offered_fps: f64, duration: Duration) -> Result<(TrialOutcome, TrialDetail), Error> {
        if self.stopped() {
            return Err(Error::Stopped);
        }
        let (Some(mut gen), Some(mut rx)) = (self.gen.take(), self.rx.take()) else {
            return Err(Error::Config("a previous trial lost its sockets".into()));
        };
        let secs = duration.as_secs_f64();
        let expect = if offered_fps.is_finite() { offered_fps * secs } else { 50e6 * secs };
        let capacity = (expect * 1.1 + 4096.0).min(f64::from(1u32 << 31)) as u32;
        let (port, flows, epoch, rx_cpu) = (self.cfg.dst_port, self.cfg.flows, self.epoch, self.cfg.rx_cpu);
        let learn = self.learn.clone();
        let rx_stop = Arc::new(AtomicBool::new(false));
        let rx_stop2 = rx_stop.clone();
        let before = softnet_stat();
        let kicks_before = gen.stats().map(|s| s.tx_kick_errors).unwrap_or(0);
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
            rx.tx_burst(&[&hello]);
            let cpu0 = thread_cpu_ns();
            loop {
                let now = epoch.elapsed().as_nanos() as u64;
                let n = rx.rx_burst(64, &mut |f| tracker.on_frame(f, now));
                if n == 0 {
                    if rx_stop2.load(Ordering::Acquire) {
                        break;
                    }
                    let _ = rx.wait_rx(Duration::from_millis(5));
                }
            }
            rx.tx_complete();
            (rx, tracker, thread_cpu_ns().saturating_sub(cpu0))
        });
        let receiver = receiver.map_err(|e| Error::Thread(e.to_string()))?;
        // Should anything below fail, the receiver still stops.
        let _stop_rx = StopOnDrop(rx_stop.clone());
        // Learning frames from the generator, then their time.
        let learn = self.learn.clone();
        let mut lbuf = vec![0u8; learn.max_len()];
        for s in 0..learn.flows() {
            let t = learn.template(s);
            t.write(&mut lbuf, s, 0);
            gen.tx_burst(&[&lbuf[..t.len()]]);
        }
        gen.tx_complete();
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
                let r = generate(&mut gen, &frames, offered_fps, duration, burst, epoch);
                let (u1, s1) = thread_user_sys_ns();
                (gen, r, (thread_cpu_ns().saturating_sub(cpu0), u1.saturating_sub(u0), s1.saturating_sub(s0)))
            })
            .map_err(|e| Error::Thread(e.to_string()))?;
        let (gen, (sent, duration_s, tx_incomplete), (gen_thread_ns, gen_user_ns, gen_sys_ns)) =
            generator.join().map_err(|_| Error::Thread("the generator thread panicked".into()))?;
        let kicks = gen.stats().map(|s| s.tx_kick_errors).unwrap_or(0);
        self.gen = Some(gen);
        std::thread::sleep(self.cfg.wait);
        rx_stop.store(true, Ordering::Release);
        let (rx, tracker, rx_thread_ns) =
            receiver.join().map_err(|_| Error::Thread("the receiver thread panicked".into()))?;
        let busy = cpu_busy_ns().saturating_sub(busy_before);
        self.rx = Some(rx);
        let after = softnet_stat();
        let received = tracker.received_below(sent);
        let detail = TrialDetail {
            offered_fps,
            sent,
            received,
            rx: tracker.counts(),
            latency: tracker.latency(),
            tx_incomplete,
            tx_kick_errors: kicks.saturating_sub(kicks_before),
            softnet: softnet_delta(&before, &after),
            cpu_busy_ns: busy,
            gen_thread_ns,
            gen_user_ns,
            gen_sys_ns,
            rx_thread_ns,
        };
        self.details.push(detail.clone());
        Ok((TrialOutcome { sent, received, duration_s }, detail))
    }

    /// The generator's ceiling: one trial as fast as it goes; returns the
    /// rate achieved (frames/s) and the trial's details.
    pub fn generator_max(&mut self, duration: Duration) -> Result<(f64, TrialDetail), Error> {
        let (out, detail) = self.trial(f64::INFINITY, duration)?;
        let fps = if out.duration_s > 0.0 { out.sent as f64 / out.duration_s } else { 0.0 };
        Ok((fps, detail))
    }
}

impl TrialRunner for LiveRunner {
    fn run_trial(&mut self, spec: &TrialSpec) -> Result<TrialOutcome, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.trial(spec.offered_fps, spec.duration).map(|(o, _)| o)?)
    }
}

/// Depth of the token bucket, seconds of frames: a generator descheduled
/// for up to this long (other work on its CPU) catches up in bursts; a
/// longer stall shows as a shortfall.
const BUCKET_SECS: f64 = 0.01;

/// The transmit loop; returns (frames queued, seconds, frames not completed).
fn generate(
    sock: &mut XskSocket,
    frames: &FrameSet,
    rate: f64,
    duration: Duration,
    burst: usize,
    epoch: Instant,
) -> (u64, f64, u64) {
    // Unthrottled: as many frames per batch as the ring takes, rounded down
    // to a whole number of template rounds so each frame meets its own
    // template again when it comes back.
    let ring = GEN_TX_RING as usize;
    let period = frames.len().max(1);
    let batch = if rate.is_finite() {
        burst
    } else if period <= ring {
        ring / period * period
    } else {
        ring
    };
    let depth = if rate.is_finite() { (rate * BUCKET_SECS).max(batch as f64) } else { batch as f64 };
    // Wait for at least this many tokens: a whole burst, or 200 us of
    // frames at low rates, asleep (wakeup mode: below saturation the
    // thread sleeps between bursts rather than spinning).
    let want = if rate.is_finite() { (rate * 200e-6).clamp(1.0, batch as f64) } else { batch as f64 };
    let start = Instant::now();
    let end = start + duration;
    let mut last = start;
    let mut tokens = 0.0f64;
    let mut seq: u32 = 0;
    let mut sent: u64 = 0;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let n = if rate.is_finite() {
            tokens = (tokens + rate * (now - last).as_secs_f64()).min(depth);
            last = now;
            if tokens < want {
                let gap = (want - tokens) / rate;
                if gap > 100e-6 {
                    // Asleep when the wait is long against a sleep's own
                    // cost (below burst / 100 us frames/s: 320k for 32);
                    // oversleeping (timer slack: 50 us) only fills the
                    // bucket further.
                    std::thread::sleep(Duration::from_secs_f64(gap));
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            (tokens as usize).min(batch)
        } else {
            batch
        };
        let ts = epoch.elapsed().as_nanos() as u64;
        let mut s = seq;
        let k = sock.tx_prepared(n, &mut |buf, tag| {
            let index = frames.index(s);
            let t = frames.by_index(index)?;
            if *tag == index as u32 {
                t.restamp(buf, s, ts);
            } else {
                t.write(buf, s, ts);
                *tag = index as u32;
            }
            s = s.wrapping_add(1);
            Some(t.len())
        });
        seq = seq.wrapping_add(k as u32);
        sent += k as u64;
        tokens -= k as f64;
        if k == 0 {
            sock.tx_complete();
            std::thread::yield_now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let drain_end = Instant::now() + Duration::from_secs(1);
    while sock.tx_in_flight() > 0 && Instant::now() < drain_end {
        if sock.tx_complete() == 0 {
            std::thread::yield_now();
        }
    }
    (sent, secs, u64::from(sock.tx_in_flight()))
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
