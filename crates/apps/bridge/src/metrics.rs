//! Counters in the Prometheus text exposition format (version 0.0.4),
//! served over HTTP.
//!
//! [`render`] turns a [`BridgeStats`] into the text: every family has its
//! `# HELP` and `# TYPE`; counters end in `_total`; labels are `port`,
//! `kind`, `worker` and `reason`, never a MAC address (the series count
//! stays bounded by ports x reasons + workers x reasons). Every figure is
//! one field of [`BridgeStats`], so a scrape agrees with `stats --json`.
//! Two rows of one port name (a port removed and added again) are summed
//! into one series (its counters stay monotonic); its gauges are those of
//! the first row (the current port: removed ones come last).
//!
//! [`serve`] is a tiny HTTP/1.1 server: one thread running one poll(2)
//! loop over non-blocking sockets, so no client ever waits for another
//! one's bytes. `GET /metrics` is answered 200 with the text; another path
//! 404, another method 405, a request head over [`MAX_REQUEST`] bytes 431.
//! One request per connection (`Connection: close`). Off unless the bridge
//! is given an address.
//!
//! Every capacity is bounded, and a slow or idle client cannot delay
//! another client's scrape (a scrape waits at most for the scrapes being
//! answered before it: each asks the bridge for its counters on the
//! server's thread):
//!
//! * **Connections:** at most [`MAX_CONNECTIONS`] (64) held at once. One
//!   more is accepted all the same, and the held connection idle longest
//!   (no byte in or out for the longest time, which is the oldest when all
//!   are idle) is closed unanswered to make room. A request already sent
//!   when its connection is accepted is answered at once, so a scraper gets
//!   in even while 64 idle clients are connected. At most
//!   [`MAX_CONNECTIONS`] connections are accepted per round of the loop,
//!   so a flood of new ones does not starve those held.
//! * **Request size:** a request head (request line and headers) of at
//!   most [`MAX_REQUEST`] (8 KiB) bytes; more is answered 431 and closed.
//!   A connection buffers at most [`MAX_REQUEST`] + 1 KiB.
//! * **Deadlines:** the whole head must arrive within [`READ_TIMEOUT`]
//!   (2 s) of the connection being accepted, however it trickles in (a
//!   deadline for the request, not a timeout per read), else the
//!   connection is closed unanswered; the whole answer must be taken within
//!   [`WRITE_TIMEOUT`] (5 s) of it being ready, else the connection is
//!   closed.
//! * **Stop:** dropping the [`MetricsServer`] stops its thread within
//!   [`POLL`] (20 ms; after the scrape being answered, if any) and closes
//!   every connection it holds.

use crate::api::{BridgeStats, Control, PortStats, Request, Response, WorkerStats};
use crate::error::BridgeError;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest request head (request line and headers) read, in bytes; longer: answered 431.
pub const MAX_REQUEST: usize = 8 * 1024;
/// Connections held at once; one more closes the one idle longest.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client has, from its connection being accepted, to send its whole request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client has, from the answer being ready, to take all of it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server's thread waits for the sockets at most (and so, at most, how long a drop waits for it).
pub const POLL: Duration = Duration::from_millis(20);
/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Bytes read from a socket at once (so a connection buffers at most
/// [`MAX_REQUEST`] + this).
const READ_CHUNK: usize = 1024;

/// The address of a metrics flag: `ADDR:PORT` as given, or a bare `PORT`
/// on loopback (`127.0.0.1:PORT`), so the counters are not exposed to the
/// network unless asked for.
pub fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| format!("{s:?}: expected PORT (on loopback) or ADDR:PORT, e.g. 9101 or 0.0.0.0:9101"))
}

/// A serving metrics endpoint; dropping it stops its thread and closes its connections.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

/// Serves `GET /metrics` on `addr` with `control`'s [`Request::Stats`]
/// rendered by [`render`], until the returned server is dropped.
pub fn serve(addr: SocketAddr, control: Arc<dyn Control>) -> Result<MetricsServer, BridgeError> {
    let io = |what: &str| {
        let what = format!("metrics endpoint {addr}: {what}");
        move |source| BridgeError::Io { what, source }
    };
    let listener = TcpListener::bind(addr).map_err(io("bind"))?;
    let addr = listener.local_addr().map_err(io("local address"))?;
    listener.set_nonblocking(true).map_err(io("set nonblocking"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let thread_stop = stop.clone();
    let thread = std::thread::Builder::new()
        .name("bridge-metrics".into())
        .spawn(move || event_loop(&listener, control.as_ref(), &thread_stop))
        .map_err(io("spawn its thread"))?;
    Ok(MetricsServer { addr, stop, thread: Some(thread) })
}

/// Where a connection is.
enum State {
    /// Reading the request head (what came so far).
    Reading(Vec<u8>),
    /// Sending the answer (all of it, and how much is sent).
    Writing { answer: Vec<u8>, sent: usize },
}

/// One client's connection (non-blocking).
struct Conn {
    stream: TcpStream,
    state: State,
    /// When it is closed whatever it is doing: [`READ_TIMEOUT`] after it was
    /// accepted, then [`WRITE_TIMEOUT`] after its answer was ready.
    deadline: Instant,
    /// The last time a byte came in or went out (or it was accepted): when
    /// [`MAX_CONNECTIONS`] are held, the earliest goes first.
    active: Instant,
}

/// What a step of a connection left.
#[derive(Debug, PartialEq)]
enum Step {
    /// It waits for its socket (to read or to write).
    Wait,
    /// It is done (answered, closed by the client, or failed): drop it.
    Done,
}

impl Conn {
    fn new(stream: TcpStream) -> Option<Conn> {
        stream.set_nonblocking(true).ok()?;
        let now = Instant::now();
        Some(Conn { stream, state: State::Reading(Vec::new()), deadline: now + READ_TIMEOUT, active: now })
    }

    /// What it waits for.
    fn interest(&self) -> PollFlags {
        match self.state {
            State::Reading(_) => PollFlags::IN,
            State::Writing { .. } => PollFlags::OUT,
        }
    }

    /// Reads what there is, answers a complete head, sends what the socket
    /// takes; never blocks.
    fn step(&mut self, control: &dyn Control) -> Step {
        if let State::Reading(head) = &mut self.state {
            let mut buf = [0u8; READ_CHUNK];
            let too_large = || (431, "request head too large\n".to_string());
            let (status, body) = loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => return Step::Done,
                    Ok(n) => {
                        let from = head.len();
                        head.extend_from_slice(&buf[..n]);
                        self.active = Instant::now();
                        match head_end(head, from) {
                            Some(end) if end <= MAX_REQUEST => break route(&head[..end], control),
                            Some(_) => break too_large(),
                            None if head.len() > MAX_REQUEST => break too_large(),
                            None => {}
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                    Err(_) => return Step::Done,
                }
            };
            let now = Instant::now();
            self.state = State::Writing { answer: http_answer(status, &body), sent: 0 };
            self.deadline = now + WRITE_TIMEOUT;
            self.active = now;
        }
        let State::Writing { answer, sent } = &mut self.state else { return Step::Wait };
        while let Some(rest) = answer.get(*sent..).filter(|r| !r.is_empty()) {
            match self.stream.write(rest) {
                Ok(0) => return Step::Done,
                Ok(n) => {
                    *sent += n;
                    self.active = Instant::now();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                Err(_) => return Step::Done,
            }
        }
        Step::Done
    }
}

/// The server's thread: waits on the listener and every connection at
/// once, until `stop`.
fn event_loop(listener: &TcpListener, control: &dyn Control, stop: &AtomicBool) {
    let mut conns: Vec<Conn> = Vec::with_capacity(MAX_CONNECTIONS);
    // After an accept failed (out of file descriptors, ...): when to try again, without spinning.
    let mut accept_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        conns.retain(|c| c.deadline > now);
        let wait = conns.iter().map(|c| c.deadline - now).fold(POLL, Duration::min);
        let listening = now >= accept_at;
        let (accept, ready) = {
            let mut fds = Vec::with_capacity(conns.len() + 1);
            if listening {
                fds.push(PollFd::new(listener, PollFlags::IN));
            }
            fds.extend(conns.iter().map(|c| PollFd::new(&c.stream, c.interest())));
            let timeout =
                Timespec { tv_sec: wait.as_secs().try_into().unwrap_or(0), tv_nsec: wait.subsec_nanos().into() };
            if poll(&mut fds, Some(&timeout)).is_err() {
                // EINTR; or ENOMEM, then wait a little rather than spin.
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
            let (accept, ready) = ready.split_at(usize::from(listening));
            (accept.first().copied().unwrap_or(false), ready.to_vec())
        };
        let mut ready = ready.into_iter();
        conns.retain_mut(|c| !ready.next().unwrap_or(false) || c.step(control) == Step::Wait);
        if !accept {
            continue;
        }
        for _ in 0..MAX_CONNECTIONS {
            match listener.accept() {
                Ok((stream, _)) => {
                    let Some(mut c) = Conn::new(stream) else { continue };
                    // A request already there is answered before anyone is closed for room.
                    if c.step(control) == Step::Done {
                        continue;
                    }
                    if conns.len() >= MAX_CONNECTIONS {
                        if let Some(i) = conns.iter().enumerate().min_by_key(|(_, c)| c.active).map(|(i, _)| i) {
                            conns.remove(i);
                        }
                    }
                    conns.push(c);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    accept_at = Instant::now() + POLL;
                    break;
                }
            }
        }
    }
}

/// The length of the request head through its blank line (`\r\n\r\n` or
/// `\n\n`), if it is all there; looks only at the bytes from `from` on
/// (the ones just read), so a head that trickles in is read in linear time.
fn head_end(head: &[u8], from: usize) -> Option<usize> {
    (from..head.len())
        .find(|&i| head.get(i) == Some(&b'\n') && (head[..i].ends_with(b"\n") || head[..i].ends_with(b"\n\r")))
        .map(|i| i + 1)
}

/// The whole HTTP answer: status line, headers, body.
fn http_answer(status: u16, body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    };
    let content_type = if status == 200 { CONTENT_TYPE } else { "text/plain; charset=utf-8" };
    let allow = if status == 405 { "Allow: GET\r\n" } else { "" };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The status and body for one request head.
fn route(head: &[u8], control: &dyn Control) -> (u16, String) {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next()) else {
        return (400, "bad request line\n".into());
    };
    if !version.starts_with("HTTP/1.") {
        return (400, "HTTP/1.x only\n".into());
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != "/metrics" {
        return (404, "not found: the counters are at /metrics\n".into());
    }
    if method != "GET" {
        return (405, "GET only\n".into());
    }
    match control.request(Request::Stats) {
        Response::Stats { stats } => (200, render(&stats)),
        Response::Error { message } => (503, format!("the bridge answered: {message}\n")),
        other => (500, format!("the bridge answered something else than counters: {other:?}\n")),
    }
}

/// A label value as the text format wants it: `\`, `"` and newline escaped.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value: integers as such, floats in Go's spelling of NaN and infinities.
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The text being built: one family at a time.
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// Rows of one port name summed into one (counters), first row's gauges kept.
fn ports_by_name(ports: &[PortStats]) -> Vec<PortStats> {
    let mut out: Vec<PortStats> = Vec::new();
    for p in ports {
        let Some(acc) = out.iter_mut().find(|q| q.name == p.name) else {
            out.push(p.clone());
            continue;
        };
        acc.received = acc.received.saturating_add(p.received);
        acc.forwarded = acc.forwarded.saturating_add(p.forwarded);
        acc.flooded = acc.flooded.saturating_add(p.flooded);
        acc.transmitted = acc.transmitted.saturating_add(p.transmitted);
        acc.tx_padded = acc.tx_padded.saturating_add(p.tx_padded);
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.saturating_add(y)),
            (x, y) => x.or(y),
        };
        acc.if_rx_packets = add(acc.if_rx_packets, p.if_rx_packets);
        acc.if_rx_dropped = add(acc.if_rx_dropped, p.if_rx_dropped);
        acc.peer_tx_dropped = add(acc.peer_tx_dropped, p.peer_tx_dropped);
        for (into, from) in [(&mut acc.dropped, &p.dropped), (&mut acc.tx_dropped, &p.tx_dropped)] {
            for (reason, n) in from {
                let slot = into.entry(reason.clone()).or_default();
                *slot = slot.saturating_add(*n);
            }
        }
    }
    out
}

const P: &str = "flowsteer_bridge_";

/// A family of one sample per row: name (after the prefix), help, the row's figure.
type PerRow<T> = (&'static str, &'static str, fn(&T) -> u64);
/// A family of one sample per row that has the figure.
type PerRowIfKnown<T> = (&'static str, &'static str, fn(&T) -> Option<u64>);
/// A family of one sample per row and reason.
type PerReason<T> = (&'static str, &'static str, fn(&T) -> &BTreeMap<String, u64>);

/// `stats` in the Prometheus text exposition format (0.0.4).
pub fn render(stats: &BridgeStats) -> String {
    let mut t = Text(String::new());
    let ports = ports_by_name(&stats.ports);
    let workers = &stats.workers;

    t.family(&format!("{P}info"), "gauge", "The bridge's counter schema (always 1).");
    t.sample(&format!("{P}info"), &[("schema", &stats.schema)], 1);
    t.family(&format!("{P}uptime_seconds"), "gauge", "Seconds since the bridge started.");
    t.sample(&format!("{P}uptime_seconds"), &[], float(stats.uptime_s));
    t.family(
        &format!("{P}conservation_ok"),
        "gauge",
        "1 when every port's and worker's received = fast-forwarded + forwarded + flooded + dropped, else 0.",
    );
    t.sample(&format!("{P}conservation_ok"), &[], u8::from(stats.conservation_ok));

    let port_gauges: [PerRow<PortStats>; 4] = [
        ("port_member", "1 while the port is a member, 0 once removed.", |p| u64::from(p.member)),
        ("port_up", "1 when the port's link was last seen up (administratively up, with carrier).", |p| {
            u64::from(p.up)
        }),
        ("port_forwarding", "1 while the port's 802.1D state is forwarding.", |p| u64::from(p.state == "forwarding")),
        ("port_learned_entries", "Learned MAC entries on the port now.", |p| p.learned_entries),
    ];
    t.family(&format!("{P}port_info"), "gauge", "A member port and how it reaches its interface (always 1).");
    for p in &ports {
        t.sample(&format!("{P}port_info"), &[("port", &p.name), ("kind", &p.kind)], 1);
    }
    t.family(
        &format!("{P}port_fast_path"),
        "gauge",
        "The port's kernel fast path for learned unicast: path xdp, or off (always 1).",
    );
    for p in &ports {
        t.sample(&format!("{P}port_fast_path"), &[("port", &p.name), ("path", fast_path_label(&p.fast_path))], 1);
    }
    t.family(
        &format!("{P}port_xdp_mode"),
        "gauge",
        "An afxdp port's XDP attach mode: native, or generic when the driver refused native (always 1; the reason is in stats --json, xdp_fallback).",
    );
    for p in &ports {
        if let Some(mode) = &p.xdp_mode {
            t.sample(&format!("{P}port_xdp_mode"), &[("port", &p.name), ("mode", mode)], 1);
        }
    }
    for (name, help, value) in port_gauges {
        t.family(&format!("{P}{name}"), "gauge", help);
        for p in &ports {
            t.sample(&format!("{P}{name}"), &[("port", &p.name)], value(p));
        }
    }
    let port_counters: [PerRow<PortStats>; 6] = [
        (
            "port_received_total",
            "Frames in from the port (including the kernel's drops before our socket and the frames its fast path forwarded).",
            |p| p.received,
        ),
        ("port_fast_forwarded_total", "Frames in from the port forwarded by the kernel fast path (XDP).", |p| {
            p.fast_forwarded
        }),
        ("port_forwarded_total", "Frames in from the port sent out of one other port (known unicast).", |p| {
            p.forwarded
        }),
        ("port_flooded_total", "Frames in from the port flooded to every other member.", |p| p.flooded),
        ("port_transmitted_total", "Frames sent out of the port (a flooded frame counts once per port).", |p| {
            p.transmitted
        }),
        (
            "port_tx_padded_total",
            "Frames shorter than 60 bytes padded with zeros to 60 before being sent out of the port.",
            |p| p.tx_padded,
        ),
    ];
    for (name, help, value) in port_counters {
        t.family(&format!("{P}{name}"), "counter", help);
        for p in &ports {
            t.sample(&format!("{P}{name}"), &[("port", &p.name)], value(p));
        }
    }
    let port_reasons: [PerReason<PortStats>; 2] = [
        ("port_dropped_total", "Frames in from the port dropped, by reason.", |p| &p.dropped),
        ("port_tx_dropped_total", "Frames that could not be sent out of the port, by reason.", |p| &p.tx_dropped),
    ];
    let port_interface: [PerRowIfKnown<PortStats>; 3] = [
        ("port_interface_rx_packets_total", "The interface's own rx_packets since the port was added.", |p| {
            p.if_rx_packets
        }),
        (
            "port_interface_rx_dropped_total",
            "The interface's own rx_dropped since the port was added: frames the kernel dropped on the port before our sockets (not in port_received_total; on a veth it holds port_peer_tx_dropped_total).",
            |p| p.if_rx_dropped,
        ),
        (
            "port_peer_tx_dropped_total",
            "A veth port: its peer's tx_dropped since the port was added, frames the peer could not hand over (a part of port_interface_rx_dropped_total, never to be added to it).",
            |p| p.peer_tx_dropped,
        ),
    ];
    for (name, help, value) in port_interface {
        t.family(&format!("{P}{name}"), "counter", help);
        for p in &ports {
            if let Some(v) = value(p) {
                t.sample(&format!("{P}{name}"), &[("port", &p.name)], v);
            }
        }
    }
    for (name, help, map) in port_reasons {
        t.family(&format!("{P}{name}"), "counter", help);
        for p in &ports {
            for (reason, n) in map(p) {
                t.sample(&format!("{P}{name}"), &[("port", &p.name), ("reason", reason)], n);
            }
        }
    }

    t.family(&format!("{P}worker_cpu"), "gauge", "The CPU a worker thread is pinned to (absent: not pinned).");
    for w in workers {
        if let Some(cpu) = w.cpu {
            t.sample(&format!("{P}worker_cpu"), &[("worker", &w.worker.to_string())], cpu);
        }
    }
    let worker_counters: [PerRow<WorkerStats>; 6] = [
        ("worker_received_total", "Frames a worker took in.", |w| w.received),
        ("worker_forwarded_total", "Frames a worker forwarded (known unicast).", |w| w.forwarded),
        ("worker_flooded_total", "Frames a worker flooded.", |w| w.flooded),
        ("worker_rx_copied_total", "Small frames a worker copied out so their receive buffer returned at once.", |w| {
            w.rx_copied
        }),
        (
            "worker_csum_completed_total",
            "Frames whose partial TCP/UDP checksum (a local sender's transmit offload) a worker completed.",
            |w| w.csum_completed,
        ),
        ("worker_gso_segmented_total", "GSO super-frames a worker cut into segments in software.", |w| w.gso_segmented),
    ];
    for (name, help, value) in worker_counters {
        t.family(&format!("{P}{name}"), "counter", help);
        for w in workers {
            t.sample(&format!("{P}{name}"), &[("worker", &w.worker.to_string())], value(w));
        }
    }
    t.family(&format!("{P}worker_dropped_total"), "counter", "Frames a worker dropped, by reason.");
    for w in workers {
        for (reason, n) in &w.dropped {
            t.sample(&format!("{P}worker_dropped_total"), &[("worker", &w.worker.to_string()), ("reason", reason)], n);
        }
    }

    let f = &stats.fdb;
    for (name, help, v) in [
        ("fdb_entries", "Entries in the MAC table now (learned + static).", f.entries),
        ("fdb_learned_entries", "Learned entries in the MAC table now.", f.learned_entries),
        ("fdb_static_entries", "Static entries in the MAC table now.", f.static_entries),
        ("fdb_max_learned", "The limit of learned entries.", f.max_learned),
    ] {
        t.family(&format!("{P}{name}"), "gauge", help);
        t.sample(&format!("{P}{name}"), &[], v);
    }
    for (name, help, v) in [
        ("fdb_learned_total", "New entries learned.", f.learned),
        ("fdb_refreshed_total", "Entries refreshed.", f.refreshed),
        ("fdb_moved_total", "Sources seen on another port than their entry's.", f.moved),
        (
            "fdb_not_learned_full_total",
            "Sources not learned because the table (or the port's share) was full.",
            f.not_learned_full,
        ),
        ("fdb_events_dropped_total", "Learning events a full per-worker queue dropped.", f.events_dropped),
        (
            "fdb_events_suppressed_total",
            "Learning events not posted because a worker's per-second filter was full.",
            f.events_suppressed,
        ),
        ("fdb_aged_total", "Entries removed by aging.", f.aged),
        ("fdb_flushed_total", "Entries removed by a flush (port down, port removed, fdb flush).", f.flushed),
    ] {
        t.family(&format!("{P}{name}"), "counter", help);
        t.sample(&format!("{P}{name}"), &[], v);
    }
    t.0
}

/// The `path` label of `port_fast_path`: the status's first word.
pub fn fast_path_label(status: &str) -> &str {
    status.split_whitespace().next().unwrap_or("off")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_floats_are_spelled_as_the_format_wants() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label("a\nb"), r"a\nb");
        assert_eq!(
            (float(1.5), float(f64::NAN), float(f64::INFINITY), float(3.0)),
            ("1.5".into(), "NaN".into(), "+Inf".into(), "3".into())
        );
        let stats = BridgeStats {
            ports: vec![PortStats { name: "we\"ird".into(), ..Default::default() }],
            ..Default::default()
        };
        assert!(render(&stats).contains(r#"flowsteer_bridge_port_received_total{port="we\"ird"} 0"#));
    }

    #[test]
    fn a_bare_port_listens_on_loopback() {
        assert_eq!(listen_addr("9101"), Ok("127.0.0.1:9101".parse().unwrap()));
        assert_eq!(listen_addr("0.0.0.0:9101"), Ok("0.0.0.0:9101".parse().unwrap()));
        assert_eq!(listen_addr("[::1]:9101"), Ok("[::1]:9101".parse().unwrap()));
        assert!(listen_addr("65536").is_err() && listen_addr("host:1").is_err());
    }

    #[test]
    fn a_port_seen_twice_is_one_series_with_the_sums() {
        let row = |member, received, vlan| PortStats {
            name: "veth0".into(),
            member,
            received,
            dropped: BTreeMap::from([("vlan".to_string(), vlan)]),
            ..Default::default()
        };
        let merged = ports_by_name(&[row(true, 10, 1), row(false, 5, 2)]);
        assert_eq!(merged.len(), 1);
        assert_eq!((merged[0].member, merged[0].received, merged[0].dropped["vlan"]), (true, 15, 3));
    }

    #[test]
    fn the_head_ends_at_its_blank_line_however_it_trickles_in() {
        for head in
            [&b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"[..], b"GET /metrics HTTP/1.0\n\n", b"GET / HTTP/1.1\r\n\n"]
        {
            let mut sent = head.to_vec();
            sent.extend_from_slice(b"more");
            assert_eq!(head_end(&sent, 0), Some(head.len()), "{head:?}");
            // One byte at a time: found when its last byte comes, looking only at that byte.
            for n in 1..=head.len() {
                let want = if n == head.len() { Some(n) } else { None };
                assert_eq!(head_end(&sent[..n], n - 1), want, "{head:?} after {n} bytes");
            }
        }
        assert_eq!(head_end(b"GET /metrics HTTP/1.1\r\nHost: x\r\n", 0), None);
        assert_eq!(head_end(b"", 0), None);
    }

    #[test]
    fn only_get_metrics_is_served() {
        struct Fixed;
        impl Control for Fixed {
            fn request(&self, _: Request) -> Response {
                Response::Stats { stats: Box::default() }
            }
        }
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\n\r\n", &Fixed).0, 200);
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", &Fixed).0, 200);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n", &Fixed).0, 404);
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n", &Fixed).0, 405);
        assert_eq!(route(b"GET /metrics\r\n\r\n", &Fixed).0, 400);
        assert_eq!(route(b"\xff\xfe\r\n\r\n", &Fixed).0, 400);
    }
}
