//! The load generator: one connected UDP socket per flow, batched
//! `sendmmsg`, a token bucket for `--rate`, and in echo mode a receiver
//! thread that checks every reply byte for byte, measures round-trip time
//! (HdrHistogram) and counts loss, duplicates and reordering per flow.
//!
//! Accounting: every datagram handed to the kernel is `sent` (a send that
//! fails is a `send_errors` entry and not sent). Every reply read is exactly
//! one of `unique` (first copy of a datagram we sent, byte-exact),
//! `duplicates` or `mismatched` (content, length, flow or sequence not what
//! was sent), so `replies = unique + duplicates + mismatched`; after the
//! drain wait `lost = sent - unique`.

use crate::payload::{self, Header, HEADER_LEN, MAX_DATAGRAM};
use crate::rate::TokenBucket;
use crate::server::{MAX_BATCH, SEND_RETRIES};
use crate::spread::{FlowSpec, MAX_FLOWS};
use crate::sys::{self, opt, RecvBatch, SendBatch};
use crate::track::{Arrival, FlowTracker};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest round-trip time the histogram resolves (60 s); longer values are
/// recorded as 60 s.
pub const MAX_RTT_NS: u64 = 60_000_000_000;

/// Generator settings; [`ClientConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// At most [`MAX_FLOWS`].
    pub flows: Vec<FlowSpec>,
    /// Datagram size in bytes, [`HEADER_LEN`]..=[`MAX_DATAGRAM`] (default 64).
    pub size: usize,
    /// Datagrams per second over all flows; 0 = as fast as possible.
    pub rate: u64,
    /// Stop after this many datagrams (over all flows).
    pub count: Option<u64>,
    /// Stop sending after this long. At least one of count and duration is needed.
    pub duration: Option<Duration>,
    /// Wait for replies and check them.
    pub echo: bool,
    /// How long to wait for outstanding replies after the last send (default 1 s).
    pub drain: Duration,
    /// Datagrams per `sendmmsg` (and the token bucket's burst); default 32, at most 1024.
    pub batch: usize,
}

impl ClientConfig {
    pub fn new(flows: Vec<FlowSpec>) -> ClientConfig {
        ClientConfig {
            flows,
            size: 64,
            rate: 0,
            count: None,
            duration: None,
            echo: false,
            drain: Duration::from_secs(1),
            batch: 32,
        }
    }
}

/// Round-trip percentiles in nanoseconds.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    fn from_hist(h: &Histogram<u64>) -> Option<LatencySummary> {
        if h.is_empty() {
            return None;
        }
        Some(LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean() as u64,
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        })
    }
}

/// One flow's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct FlowReport {
    pub id: u32,
    /// The bound local address (with the port actually used).
    pub local: String,
    pub remote: String,
    pub queue: Option<u16>,
    pub cpu: Option<u32>,
    pub hash: Option<String>,
    pub sent: u64,
    pub replies: u64,
    pub unique: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub late: u64,
    pub mismatched: u64,
}

/// Everything the generator measured.
#[derive(Clone, Debug, Serialize)]
pub struct ClientReport {
    pub schema: &'static str,
    pub remote: String,
    pub flows: usize,
    pub size: usize,
    /// Datagrams per second asked for; 0: as fast as possible (`--rate max`).
    pub rate_target: u64,
    pub echo: bool,
    /// Seconds spent sending.
    pub elapsed_s: f64,
    pub sent: u64,
    pub bytes_sent: u64,
    pub send_pps: f64,
    /// Failed sends by errno name.
    pub send_errors: BTreeMap<String, u64>,
    /// Stopped by the stop flag (signal) before the count or duration was reached.
    pub stopped_early: bool,
    pub replies: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub mismatched: u64,
    pub reordered: u64,
    pub late: u64,
    pub lost: u64,
    /// Failed receives by errno name (e.g. ECONNREFUSED when nothing listens).
    pub recv_errors: BTreeMap<String, u64>,
    /// Replies the kernel dropped at our sockets (receive buffer full).
    pub rcvbuf_drops: u64,
    /// `replies = unique + duplicates + mismatched` and `unique <= sent`.
    pub replies_add_up: bool,
    pub rtt: Option<LatencySummary>,
    pub per_flow: Vec<FlowReport>,
}

/// Why the generator could not run. Every message is one line that says
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// [`route_source`]: the kernel has no route to `ip`.
    #[error("no route to {ip}: {error}")]
    NoRoute { ip: IpAddr, error: std::io::Error },
    #[error("socket: {0}")]
    Socket(std::io::Error),
    #[error("setsockopt SO_RXQ_OVFL: {0}")]
    RxqOvfl(std::io::Error),
    /// A flow's local address is not one of this host's.
    #[error("-l {0}: not an address of this host (see `ip addr`; in a namespace run under `ip netns exec NS`)")]
    NotLocal(IpAddr),
    #[error("cannot bind {0}: port in use; free it or widen --sport-range")]
    PortInUse(SocketAddr),
    #[error("cannot bind {0}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)")]
    BindDenied(SocketAddr),
    #[error("cannot bind {local}: {error}")]
    Bind { local: SocketAddr, error: std::io::Error },
    #[error("cannot reach {remote} from {local}: {error} (check the route: `ip route get {}`)", .remote.ip())]
    Unreachable { remote: SocketAddr, local: IpAddr, error: std::io::Error },
    #[error("getsockname: {0}")]
    GetSockName(std::io::Error),
    /// Every candidate source port of flow `flow` was taken (`last`: the
    /// last refusal, `ADDR: error`).
    #[error("no free source port for flow {flow}: {last}")]
    NoFreePort { flow: u32, last: String },
    #[error("no flows to send")]
    NoFlows,
    #[error("{0} flows; at most {MAX_FLOWS}")]
    TooManyFlows(usize),
    #[error("size {0} out of range {HEADER_LEN}..={MAX_DATAGRAM} (the header needs {HEADER_LEN} bytes)")]
    BadSize(usize),
    #[error("batch {0} out of range 1..={MAX_BATCH}")]
    BadBatch(usize),
    #[error("give a datagram count or a duration")]
    NoLimit,
    #[error("histogram: {0}")]
    Histogram(hdrhistogram::CreationError),
    #[error("spawn receiver: {0}")]
    SpawnReceiver(std::io::Error),
    #[error("the receiver thread panicked")]
    ReceiverPanicked,
}

/// The local address routing picks to reach `remote`.
pub fn route_source(remote: SocketAddr) -> Result<IpAddr, ClientError> {
    sys::route_source(&remote).map_err(|error| ClientError::NoRoute { ip: remote.ip(), error })
}

fn open_flow(spec: &FlowSpec) -> Result<(OwnedFd, SocketAddr), ClientError> {
    let ports: Vec<u16> = std::iter::once(spec.local.port()).chain(spec.alt_ports.iter().copied()).collect();
    let mut last = String::new();
    for (k, &port) in ports.iter().enumerate() {
        let fd = sys::udp_socket(spec.remote.is_ipv6()).map_err(ClientError::Socket)?;
        sys::set_int(fd.as_fd(), opt::SOL_SOCKET, opt::SO_RXQ_OVFL, 1).map_err(ClientError::RxqOvfl)?;
        let local = SocketAddr::new(spec.local.ip(), port);
        if let Err(error) = sys::bind(fd.as_fd(), &local) {
            let errno = error.raw_os_error();
            if errno == Some(sys::EADDRINUSE) && k + 1 < ports.len() {
                last = format!("{local}: {error}");
                continue;
            }
            return Err(match errno {
                Some(sys::EADDRNOTAVAIL) => ClientError::NotLocal(local.ip()),
                Some(sys::EADDRINUSE) => ClientError::PortInUse(local),
                Some(sys::EACCES) | Some(sys::EPERM) => ClientError::BindDenied(local),
                _ => ClientError::Bind { local, error },
            });
        }
        sys::connect(fd.as_fd(), &spec.remote).map_err(|error| ClientError::Unreachable {
            remote: spec.remote,
            local: local.ip(),
            error,
        })?;
        let bound = sys::local_addr(fd.as_fd()).map_err(ClientError::GetSockName)?;
        return Ok((fd, bound));
    }
    Err(ClientError::NoFreePort { flow: spec.id, last })
}

fn bump(map: &mut BTreeMap<String, u64>, e: &std::io::Error, n: u64) {
    let name = e.raw_os_error().map_or_else(|| e.to_string(), sys::errno_name);
    *map.entry(name).or_default() += n;
}

/// What the receiver thread hands back.
struct RxResult {
    trackers: Vec<FlowTracker>,
    replies: Vec<u64>,
    mismatched: Vec<u64>,
    hist: Histogram<u64>,
    recv_errors: BTreeMap<String, u64>,
    overflow: Vec<u64>,
}

struct RxShared {
    fds: Vec<OwnedFd>,
    /// Sequence numbers handed out per flow (a reply must carry one below).
    next_seq: Vec<AtomicU64>,
    /// Unique replies so far (for an early end of the drain).
    unique: AtomicU64,
    stop: AtomicBool,
}

fn receive(shared: &RxShared, size: usize, batch: usize, epoch: Instant, hist: Histogram<u64>) -> RxResult {
    let n = shared.fds.len();
    let mut r = RxResult {
        trackers: vec![FlowTracker::default(); n],
        replies: vec![0; n],
        mismatched: vec![0; n],
        hist,
        recv_errors: BTreeMap::new(),
        overflow: vec![0; n],
    };
    let mut rb = RecvBatch::new(batch, size.max(HEADER_LEN) + 1);
    let mut pfds: Vec<sys::PollFd> = shared.fds.iter().map(|f| sys::poll_in(f.as_fd())).collect();
    while !shared.stop.load(Ordering::Acquire) {
        for p in pfds.iter_mut() {
            p.revents = 0;
        }
        match sys::poll(&mut pfds, 20) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) => {
                bump(&mut r.recv_errors, &e, 1);
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        }
        for (f, p) in pfds.iter().enumerate() {
            if !sys::ready(p) {
                continue;
            }
            let fd = shared.fds[f].as_fd();
            // A few batches per socket per round, so one busy flow cannot starve the others.
            for _ in 0..8 {
                let got = match rb.recv(fd, batch) {
                    Ok(0) => break,
                    Ok(k) => k,
                    Err(e) => {
                        bump(&mut r.recv_errors, &e, 1);
                        break;
                    }
                };
                let now = epoch.elapsed().as_nanos() as u64;
                let limit = shared.next_seq[f].load(Ordering::Acquire);
                let mut new_unique = 0;
                for j in 0..got {
                    r.replies[f] += 1;
                    let m = rb.meta(j);
                    if let Some(o) = m.overflow {
                        r.overflow[f] = r.overflow[f].max(u64::from(o));
                    }
                    let ok = match payload::verify(rb.data(j), size) {
                        Ok(h) if !m.truncated && h.flow as usize == f && h.seq < limit => Some(h),
                        _ => None,
                    };
                    let Some(h) = ok else {
                        r.mismatched[f] += 1;
                        continue;
                    };
                    match r.trackers[f].record(h.seq) {
                        Arrival::Duplicate => {}
                        _ => {
                            new_unique += 1;
                            r.hist.saturating_record(now.saturating_sub(h.ts_ns).clamp(1, MAX_RTT_NS));
                        }
                    }
                }
                shared.unique.fetch_add(new_unique, Ordering::Release);
            }
        }
    }
    for (f, fd) in shared.fds.iter().enumerate() {
        if let Ok(d) = sys::socket_drops(fd.as_fd()) {
            r.overflow[f] = r.overflow[f].max(u64::from(d));
        }
    }
    r
}

/// Run the generator until the count or the duration is reached or `stop`
/// is set; in echo mode then wait up to `drain` for the replies.
pub fn run(cfg: &ClientConfig, stop: &AtomicBool) -> Result<ClientReport, ClientError> {
    if cfg.flows.is_empty() {
        return Err(ClientError::NoFlows);
    }
    if cfg.flows.len() > MAX_FLOWS {
        return Err(ClientError::TooManyFlows(cfg.flows.len()));
    }
    if !(HEADER_LEN..=MAX_DATAGRAM).contains(&cfg.size) {
        return Err(ClientError::BadSize(cfg.size));
    }
    if cfg.batch == 0 || cfg.batch > MAX_BATCH {
        return Err(ClientError::BadBatch(cfg.batch));
    }
    if cfg.count.is_none() && cfg.duration.is_none() {
        return Err(ClientError::NoLimit);
    }
    let mut fds = Vec::with_capacity(cfg.flows.len());
    let mut locals = Vec::with_capacity(cfg.flows.len());
    for spec in &cfg.flows {
        let (fd, local) = open_flow(spec)?;
        fds.push(fd);
        locals.push(local);
    }
    let n = fds.len();
    let shared = Arc::new(RxShared {
        fds,
        next_seq: (0..n).map(|_| AtomicU64::new(0)).collect(),
        unique: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let epoch = Instant::now();
    let receiver = if cfg.echo {
        let (sh, size, batch) = (shared.clone(), cfg.size, cfg.batch);
        let hist = Histogram::new_with_bounds(1, MAX_RTT_NS, 3).map_err(ClientError::Histogram)?;
        Some(
            std::thread::Builder::new()
                .name("udp-gen-rx".into())
                .spawn(move || receive(&sh, size, batch, epoch, hist))
                .map_err(ClientError::SpawnReceiver)?,
        )
    } else {
        None
    };

    // Send.
    let mut sent = vec![0u64; n];
    let mut send_errors = BTreeMap::new();
    let mut bucket = TokenBucket::new(cfg.rate, cfg.batch as u64, 0);
    let mut sb = SendBatch::new(cfg.batch, cfg.size);
    let limit = cfg.count.unwrap_or(u64::MAX);
    let mut attempted = 0u64;
    let mut stopped_early = false;
    let mut f = 0usize;
    loop {
        if stop.load(Ordering::Relaxed) {
            stopped_early = true;
            break;
        }
        if attempted >= limit {
            break;
        }
        let now = epoch.elapsed();
        if cfg.duration.is_some_and(|d| now >= d) {
            break;
        }
        let now_ns = now.as_nanos() as u64;
        let want = (cfg.batch as u64).min(limit - attempted);
        let grant = bucket.take(now_ns, want);
        if grant == 0 {
            let wait = bucket.wait_ns(now_ns).clamp(1_000, 1_000_000);
            std::thread::sleep(Duration::from_nanos(wait));
            continue;
        }
        let k = grant as usize;
        let seq0 = shared.next_seq[f].fetch_add(grant, Ordering::AcqRel);
        let ts = epoch.elapsed().as_nanos() as u64;
        for j in 0..k {
            let h = Header { flow: f as u32, seq: seq0 + j as u64, ts_ns: ts, len: cfg.size as u32 };
            payload::encode(sb.slot_mut(j), &h);
        }
        let fd = shared.fds[f].as_fd();
        let mut at = 0;
        let mut retries = 0;
        while at < k {
            match sb.send(fd, at, k) {
                Ok(s) => {
                    sent[f] += s as u64;
                    at += s;
                }
                Err(e) => {
                    let transient =
                        matches!(e.raw_os_error(), Some(sys::EAGAIN) | Some(sys::ENOBUFS) | Some(sys::EINTR));
                    if transient && retries < SEND_RETRIES {
                        retries += 1;
                        let mut p = [sys::poll_out(fd)];
                        let _ = sys::poll(&mut p, 1);
                        continue;
                    }
                    let skip = if transient { k - at } else { 1 };
                    bump(&mut send_errors, &e, skip as u64);
                    at += skip;
                }
            }
        }
        attempted += grant;
        f = (f + 1) % n;
    }
    let elapsed = epoch.elapsed().as_secs_f64();
    let total_sent: u64 = sent.iter().sum();

    // Drain.
    let rx = match receiver {
        Some(h) => {
            let until = Instant::now() + cfg.drain;
            while Instant::now() < until && shared.unique.load(Ordering::Acquire) < total_sent {
                std::thread::sleep(Duration::from_millis(2));
            }
            shared.stop.store(true, Ordering::Release);
            Some(h.join().map_err(|_| ClientError::ReceiverPanicked)?)
        }
        None => None,
    };

    let mut per_flow = Vec::with_capacity(n);
    let (mut replies, mut unique, mut dups, mut mism, mut reord, mut late, mut lost, mut ovfl) =
        (0, 0, 0, 0, 0, 0, 0, 0);
    for (i, spec) in cfg.flows.iter().enumerate() {
        let (fr, t) = match &rx {
            Some(r) => (r.replies[i], Some((&r.trackers[i], r.mismatched[i], r.overflow[i]))),
            None => (0, None),
        };
        let (u, d, ro, la, mm, ov, lo) = match t {
            Some((t, mm, ov)) => (t.unique, t.duplicates, t.reordered, t.late, mm, ov, t.lost(sent[i])),
            None => (0, 0, 0, 0, 0, 0, 0),
        };
        replies += fr;
        unique += u;
        dups += d;
        mism += mm;
        reord += ro;
        late += la;
        lost += lo;
        ovfl += ov;
        per_flow.push(FlowReport {
            id: spec.id,
            local: locals[i].to_string(),
            remote: spec.remote.to_string(),
            queue: spec.queue.map(u16::from),
            cpu: spec.cpu,
            hash: spec.hash.map(|h| format!("0x{h:08x}")),
            sent: sent[i],
            replies: fr,
            unique: u,
            lost: lo,
            reordered: ro,
            duplicates: d,
            late: la,
            mismatched: mm,
        });
    }
    let add_up = replies == unique + dups + mism && per_flow.iter().all(|p| p.unique <= p.sent);
    Ok(ClientReport {
        schema: "flowsteer.udp-gen.v1",
        remote: cfg.flows[0].remote.to_string(),
        flows: n,
        size: cfg.size,
        rate_target: cfg.rate,
        echo: cfg.echo,
        elapsed_s: elapsed,
        sent: total_sent,
        bytes_sent: total_sent * cfg.size as u64,
        send_pps: if elapsed > 0.0 { total_sent as f64 / elapsed } else { 0.0 },
        send_errors,
        stopped_early,
        replies,
        unique,
        duplicates: dups,
        mismatched: mism,
        reordered: reord,
        late,
        lost,
        recv_errors: rx.as_ref().map(|r| r.recv_errors.clone()).unwrap_or_default(),
        rcvbuf_drops: ovfl,
        replies_add_up: add_up,
        rtt: rx.as_ref().and_then(|r| LatencySummary::from_hist(&r.hist)),
        per_flow,
    })
}

/// A human-readable summary and per-flow table.
pub fn format_report(r: &ClientReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "udp-gen -> {}: {} flow(s), {} B datagrams, rate {}",
        r.remote,
        r.flows,
        r.size,
        if r.rate_target == 0 { "max (unpaced)".to_string() } else { format!("{} pps", r.rate_target) }
    );
    let _ = writeln!(
        out,
        "  sent {} in {:.3} s ({:.1} kpps){}",
        r.sent,
        r.elapsed_s,
        r.send_pps / 1e3,
        if r.stopped_early { ", stopped early" } else { "" }
    );
    for (k, v) in &r.send_errors {
        let _ = writeln!(out, "  send errors {k}: {v}");
    }
    if r.echo {
        let _ = writeln!(
            out,
            "  replies {} = unique {} + duplicates {} + mismatched {} ({}); lost {}, reordered {}, late {}, rcvbuf drops {}",
            r.replies,
            r.unique,
            r.duplicates,
            r.mismatched,
            if r.replies_add_up { "ok" } else { "VIOLATED" },
            r.lost,
            r.reordered,
            r.late,
            r.rcvbuf_drops
        );
        for (k, v) in &r.recv_errors {
            let _ = writeln!(out, "  receive errors {k}: {v}");
        }
        if let Some(l) = &r.rtt {
            let us = |ns: u64| ns as f64 / 1e3;
            let _ = writeln!(
                out,
                "  rtt us: min {:.1} p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} (mean {:.1}, n {})",
                us(l.min_ns),
                us(l.p50_ns),
                us(l.p90_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns),
                us(l.mean_ns),
                l.count
            );
        }
    }
    let _ = writeln!(
        out,
        "{:>5} {:<47} {:>5} {:>4} {:>10} {:>10} {:>10} {:>8} {:>9} {:>10}",
        "flow", "local", "queue", "cpu", "sent", "replies", "lost", "reorder", "dup", "mismatch"
    );
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    for p in &r.per_flow {
        let _ = writeln!(
            out,
            "{:>5} {:<47} {:>5} {:>4} {:>10} {:>10} {:>10} {:>8} {:>9} {:>10}",
            p.id,
            p.local,
            opt(p.queue.map(u32::from)),
            opt(p.cpu),
            p.sent,
            p.replies,
            p.lost,
            p.reordered,
            p.duplicates,
            p.mismatched
        );
    }
    out
}
