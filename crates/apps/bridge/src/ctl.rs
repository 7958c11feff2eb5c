//! The control socket: a Unix stream socket (mode 0600) carrying one JSON
//! [`Request`] per line and one JSON
//! [`Response`] per line back.
//!
//! # Server ([`serve`], or [`bind`] then [`CtlSocket::serve`])
//!
//! * **One bridge per path.** [`bind`] takes the path before the bridge
//!   opens any port: a second bridge given the same path is refused
//!   ([`BridgeError::AlreadyServing`]) while the first is still starting.
//! * **Who may talk to it.** The socket is mode 0600: only the bridge's
//!   user (and root) can connect. It is bound inside a fresh directory of
//!   mode 0700 next to the final path, set to 0600 there, then hard-linked
//!   to the final path, so it is never reachable with a wider mode, and a
//!   socket another bridge put there in the meantime is never replaced.
//! * **Threads.** One accept thread, plus one thread per connected client,
//!   at most [`MAX_CLIENTS`] at once. A client beyond that bound is answered
//!   one [`Response::Error`] ("busy") and closed; the bridge never queues
//!   it. A client idle for [`IDLE_TIMEOUT`] is closed.
//! * **Lines.** Several requests per connection, answered in order. A line
//!   longer than [`MAX_LINE`] bytes, or one that is not a JSON request, is
//!   answered one [`Response::Error`] and the connection is closed.
//! * **Stop.** Dropping the [`CtlServer`] stops its threads (each checks a
//!   stop flag every [`POLL`]; a request being answered is finished first,
//!   and a client that does not take its answer holds it at most
//!   [`WRITE_TIMEOUT`]) and removes the socket file if it is still the one it created.
//!
//! # Client ([`request`])
//!
//! One connection per request, [`REQUEST_TIMEOUT`] for the answer, an
//! answer of at most [`MAX_RESPONSE`] bytes; the errors say what to do (no
//! socket: is the bridge running?; permission denied: the socket is 0600).
//!
//! # What `bridge-ctl` prints
//!
//! [`FdbRow::to_line`] (the shape of iproute2's `bridge fdb show`) and
//! [`stats_table`] are pure formatting, here so the bridge and the CLI
//! print the same thing.

use crate::api::{BridgeStats, Control, FdbRow, LinkRow, PortStats, Request, Response, VlanRow};
use crate::error::BridgeError;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where `flowsteer bridge` serves and `flowsteer bridge-ctl` connects by default.
pub const DEFAULT_CTL_PATH: &str = "/run/flowsteer-bridge.sock";
/// Longest request line (bytes, without its newline); longer: answered an error, closed.
pub const MAX_LINE: usize = 64 * 1024;
/// Clients served at once; one more is answered "busy" and closed.
pub const MAX_CLIENTS: usize = 8;
/// A connection with no request for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the server's threads look at their stop flag (and so, at most, how long a drop waits for an idle thread).
pub const POLL: Duration = Duration::from_millis(20);
/// How long the server waits for a client to take an answer before it closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`request`] waits to send and for the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest answer [`request`] reads (bytes): a full MAC table is a few MB.
pub const MAX_RESPONSE: u64 = 64 << 20;

/// A serving control socket; dropping it stops its threads and removes the socket file.
pub struct CtlServer {
    path: PathBuf,
    /// (device, inode) of the socket file it created: only that file is removed.
    file: (u64, u64),
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl CtlServer {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        remove_if_same(&self.path, self.file);
    }
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> BridgeError {
    move |source| BridgeError::Io { what, source }
}

/// A control socket bound at its path (mode 0600) that answers nobody
/// yet: it holds the path, so a second bridge given the same path is
/// refused before it opens anything. A client connecting meanwhile waits
/// (in the listen backlog) until [`CtlSocket::serve`]. Dropping it removes
/// the socket file if it is still the one it created.
pub struct CtlSocket {
    path: PathBuf,
    /// (device, inode) of the socket file it created: only that file is removed.
    file: (u64, u64),
    listener: Option<UnixListener>,
}

impl CtlSocket {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts answering requests with `control` until the returned
    /// [`CtlServer`] is dropped.
    pub fn serve(mut self, control: Arc<dyn Control>) -> Result<CtlServer, BridgeError> {
        let path = self.path.clone();
        // Always there: `serve` consumes the socket, and only it takes the listener.
        let listener = self.listener.take().ok_or_else(|| BridgeError::Io {
            what: format!("control socket {}", path.display()),
            source: std::io::Error::other("served twice"),
        })?;
        let started = listener
            .set_nonblocking(true)
            .map_err(io_err(format!("control socket {}: set nonblocking", path.display())))
            .and_then(|()| {
                let stop = Arc::new(AtomicBool::new(false));
                let thread_stop = stop.clone();
                std::thread::Builder::new()
                    .name("bridge-ctl".into())
                    .spawn(move || accept_loop(listener, control, thread_stop))
                    .map(|h| (stop, h))
                    .map_err(io_err("control socket: spawn its thread".into()))
            });
        match started {
            Ok((stop, accept)) => Ok(CtlServer { path, file: self.file, stop, accept: Some(accept) }),
            Err(e) => {
                remove_if_same(&path, self.file);
                Err(e)
            }
        }
    }
}

impl Drop for CtlSocket {
    fn drop(&mut self) {
        if self.listener.take().is_some() {
            remove_if_same(&self.path, self.file);
        }
    }
}

/// Removes `path` if it is still the file `file` (device, inode).
fn remove_if_same(path: &Path, file: (u64, u64)) {
    if let Ok(m) = fs::symlink_metadata(path) {
        if (m.dev(), m.ino()) == file {
            let _ = fs::remove_file(path);
        }
    }
}

/// Binds a control socket at `path` (mode 0600) without answering yet:
/// the path is taken from here on (see [`CtlSocket`]).
///
/// Refuses ([`BridgeError::AlreadyServing`]) when a bridge already holds
/// `path` (serving, or bound and starting); removes a stale socket file
/// (nothing listening); refuses ([`BridgeError::NotASocket`]) to remove
/// anything at `path` that is not a socket; refuses
/// ([`BridgeError::NoDirectory`]) a path whose directory does not exist.
pub fn bind(path: &Path) -> Result<CtlSocket, BridgeError> {
    remove_stale(path)?;
    let (listener, file) = bind_private(path)?;
    Ok(CtlSocket { path: path.to_path_buf(), file, listener: Some(listener) })
}

/// Serves `control` on a Unix socket at `path` (mode 0600) until the
/// returned [`CtlServer`] is dropped: [`bind`] then [`CtlSocket::serve`],
/// with the same refusals.
pub fn serve(path: &Path, control: Arc<dyn Control>) -> Result<CtlServer, BridgeError> {
    bind(path)?.serve(control)
}

/// Clears `path` for a new socket: nothing there, or a socket nobody listens on (removed).
fn remove_stale(path: &Path) -> Result<(), BridgeError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(format!("control socket {}", path.display()))(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(BridgeError::NotASocket(path.to_path_buf()));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(BridgeError::AlreadyServing(path.to_path_buf())),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => match fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(format!("remove stale control socket {}", path.display()))(e)),
        },
        Err(e) => Err(io_err(format!("check control socket {}", path.display()))(e)),
    }
}

/// Binds a listener reachable at `path` with mode 0600 and never wider:
/// bound in a fresh 0700 directory beside `path`, chmod 0600, hard-linked to
/// `path` (fails if something appeared there), temporary name removed.
fn bind_private(path: &Path) -> Result<(UnixListener, (u64, u64)), BridgeError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| BridgeError::Io {
        what: format!("control socket {}", path.display()),
        source: std::io::Error::new(ErrorKind::InvalidInput, "the path names no file"),
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = parent.join(format!(
        ".{}.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| match e.kind() {
        ErrorKind::NotFound => BridgeError::NoDirectory(parent.clone()),
        _ => io_err(format!("control socket {}: create {}", path.display(), dir.display()))(e),
    })?;
    let tmp = dir.join("sock");
    let result = (|| {
        let listener = UnixListener::bind(&tmp).map_err(io_err(format!("bind control socket {}", path.display())))?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))
            .map_err(io_err(format!("control socket {}: chmod 0600", path.display())))?;
        match fs::hard_link(&tmp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(BridgeError::AlreadyServing(path.to_path_buf()));
            }
            Err(e) => return Err(io_err(format!("create control socket {}", path.display()))(e)),
        }
        let meta = fs::symlink_metadata(path).map_err(io_err(format!("control socket {}", path.display())))?;
        Ok((listener, (meta.dev(), meta.ino())))
    })();
    let _ = fs::remove_file(&tmp);
    let _ = fs::remove_dir(&dir);
    result
}

fn accept_loop(listener: UnixListener, control: Arc<dyn Control>, stop: Arc<AtomicBool>) {
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let (done, live): (Vec<_>, Vec<_>) = clients.drain(..).partition(|h| h.is_finished());
                for h in done {
                    let _ = h.join();
                }
                clients = live;
                if clients.len() >= MAX_CLIENTS {
                    refuse(&stream, &format!("busy: {MAX_CLIENTS} clients already connected, try again"));
                    continue;
                }
                let (control, stop) = (control.clone(), stop.clone());
                let spawned = std::thread::Builder::new().name("bridge-ctl-client".into()).spawn({
                    let stream = stream.try_clone();
                    move || {
                        if let Ok(stream) = stream {
                            client(stream, control.as_ref(), &stop);
                        }
                    }
                });
                match spawned {
                    Ok(h) => clients.push(h),
                    Err(e) => refuse(&stream, &format!("busy: cannot start a thread for this client: {e}")),
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // WouldBlock: nobody waiting. Anything else (EMFILE, ...): do not spin.
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for h in clients {
        let _ = h.join();
    }
}

/// Answers one error line and closes (the stream is dropped by the caller).
fn refuse(stream: &UnixStream, message: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(POLL * 10));
    let _ = send(stream, &Response::Error { message: message.to_string() });
}

fn send(mut stream: &UnixStream, resp: &Response) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(resp).map_err(std::io::Error::other)?;
    text.push(b'\n');
    stream.write_all(&text)
}

/// What reading one request line gave.
#[derive(Debug, PartialEq)]
enum Line {
    /// A line (without its newline) is in the buffer.
    Got,
    /// The client closed its side.
    Eof,
    /// Longer than [`MAX_LINE`].
    TooLong,
    /// The server is stopping, or the client was idle too long, or the read failed.
    Close,
}

/// Reads one line of at most [`MAX_LINE`] bytes into `line`, looking at
/// `stop` between reads (the stream has a read timeout of [`POLL`]).
fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>, stop: &AtomicBool, deadline: Instant) -> Line {
    line.clear();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Line::Close;
        }
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                if Instant::now() >= deadline {
                    return Line::Close;
                }
                continue;
            }
            Err(_) => return Line::Close,
        };
        if chunk.is_empty() {
            // A last request without its newline still counts.
            return if line.is_empty() { Line::Eof } else { Line::Got };
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let body = if end { take - 1 } else { take };
        if line.len() + body > MAX_LINE {
            return Line::TooLong;
        }
        line.extend_from_slice(&chunk[..body]);
        r.consume(take);
        if end {
            return Line::Got;
        }
    }
}

/// Serves one client: request lines in, answer lines out, until it closes,
/// errs, idles out or the server stops.
fn client(stream: UnixStream, control: &dyn Control, stop: &AtomicBool) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(POLL)).is_err()
        || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err()
    {
        return;
    }
    let mut reader = BufReader::new(&stream);
    let mut line = Vec::new();
    loop {
        match read_line(&mut reader, &mut line, stop, Instant::now() + IDLE_TIMEOUT) {
            Line::Got => {}
            Line::Eof | Line::Close => return,
            Line::TooLong => {
                let message = format!("request line longer than {MAX_LINE} bytes; closing");
                let _ = send(&stream, &Response::Error { message });
                return;
            }
        }
        let text = line.strip_suffix(b"\r").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let answer = match serde_json::from_slice::<Request>(text) {
            Ok(req) => control.request(req),
            Err(e) => {
                let _ = send(&stream, &Response::Error { message: format!("bad request: {e}; closing") });
                return;
            }
        };
        if send(&stream, &answer).is_err() {
            return;
        }
    }
}

/// Sends `req` to the bridge serving at `path` and returns its answer
/// (waits at most [`REQUEST_TIMEOUT`]).
pub fn request(path: &Path, req: &Request) -> Result<Response, BridgeError> {
    request_within(path, req, REQUEST_TIMEOUT)
}

/// [`request`] with another timeout.
pub fn request_within(path: &Path, req: &Request, timeout: Duration) -> Result<Response, BridgeError> {
    let p = || path.to_path_buf();
    let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => BridgeError::NoSocket(p()),
        ErrorKind::PermissionDenied => BridgeError::PermissionDenied(p()),
        ErrorKind::ConnectionRefused => BridgeError::NotListening(p()),
        _ => BridgeError::Io { what: format!("connect to control socket {}", path.display()), source: e },
    })?;
    let timed_out = |e: std::io::Error, what: &str| {
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            BridgeError::Timeout { path: p(), after: timeout }
        } else {
            BridgeError::Io { what: format!("{what} control socket {}", path.display()), source: e }
        }
    };
    let timeout = timeout.max(Duration::from_millis(1));
    stream.set_read_timeout(Some(timeout)).map_err(|e| timed_out(e, "set up"))?;
    stream.set_write_timeout(Some(timeout)).map_err(|e| timed_out(e, "set up"))?;
    let mut text = serde_json::to_vec(req).map_err(|e| BridgeError::Protocol(e.to_string()))?;
    text.push(b'\n');
    (&stream).write_all(&text).map_err(|e| timed_out(e, "write to"))?;
    let mut answer = Vec::new();
    BufReader::new((&stream).take(MAX_RESPONSE))
        .read_until(b'\n', &mut answer)
        .map_err(|e| timed_out(e, "read from"))?;
    if answer.last() != Some(&b'\n') {
        return Err(BridgeError::Protocol(if answer.is_empty() {
            "the bridge closed the connection without an answer".into()
        } else {
            format!("the answer was cut off after {} bytes", answer.len())
        }));
    }
    serde_json::from_slice(&answer).map_err(|e| BridgeError::Protocol(format!("bad answer: {e}")))
}

impl FdbRow {
    /// The entry as iproute2's `bridge fdb show` prints one:
    /// `MAC dev IFACE [vlan VID] [age Ns] master flowsteer [static|sticky|extern_learn]`.
    ///
    /// As in iproute2, `vlan` is left out for untagged entries (VLAN 0) and
    /// the entry's type ends the line: `static`, `sticky` or
    /// `extern_learn` for entries added with `fdb add`, nothing for learned
    /// ones. Where `bridge -s fdb show` prints `used U/UPD`, an entry that
    /// ages shows `age Ns`: seconds since its source was last seen
    /// (iproute2's UPD).
    pub fn to_line(&self) -> String {
        let mut s = format!("{} dev {}", self.mac, self.port);
        if self.vlan != 0 {
            let _ = write!(s, " vlan {}", self.vlan);
        }
        let word = match self.kind.as_str() {
            "" if self.is_static => "static",
            "" | "learned" => "",
            k => k,
        };
        if word != "static" {
            let _ = write!(s, " age {}s", self.age_s);
        }
        s.push_str(" master flowsteer");
        if !word.is_empty() {
            s.push(' ');
            s.push_str(word);
        }
        s
    }
}

/// `bridge-ctl link show`: one line per member port, as iproute2's
/// `bridge -d link show` words them:
/// `IFACE KIND link up|down state S learning on flood on mcast_flood on
/// bcast_flood on isolated off max_learned N learned N fast_path ...`.
pub fn links_text(links: &[LinkRow]) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    let mut out = String::new();
    for l in links {
        let _ = writeln!(
            out,
            "{} {} link {} state {} learning {} flood {} mcast_flood {} bcast_flood {} isolated {} \
             max_learned {} learned {} fast_path {}",
            l.name,
            l.kind,
            if l.up { "up" } else { "down" },
            l.state,
            on(l.learning),
            on(l.flood),
            on(l.mcast_flood),
            on(l.bcast_flood),
            on(l.isolated),
            l.max_learned,
            l.learned_entries,
            l.fast_path
        );
    }
    out
}

/// `bridge-ctl vlan show`: iproute2's `bridge vlan show` layout (a port
/// column, then one VLAN per line with `PVID` and `Egress Untagged`),
/// after a line saying whether filtering is on and with which protocol.
pub fn vlans_text(filtering: bool, protocol: &str, ports: &[VlanRow]) -> String {
    let mut out = format!(
        "vlan_filtering {} vlan_protocol {protocol}{}\n",
        if filtering { "on" } else { "off" },
        if filtering { "" } else { " (the VLANs below are kept and apply when filtering is switched on)" }
    );
    let width = ports.iter().map(|p| p.name.chars().count()).max().unwrap_or(0).max(4);
    let _ = writeln!(out, "{:<width$}  vlan-id", "port");
    for p in ports {
        if p.vlans.is_empty() {
            let _ = writeln!(out, "{:<width$}  (none)", p.name);
        }
        for (i, v) in p.vlans.iter().enumerate() {
            let name = if i == 0 { p.name.as_str() } else { "" };
            let mut line = format!("{name:<width$}  {}", v.vid);
            if p.pvid == Some(v.vid) {
                line.push_str(" PVID");
            }
            if v.untagged {
                line.push_str(" Egress Untagged");
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Columns of text: the first `left` columns left-aligned, the rest right-aligned.
fn table(rows: &[Vec<String>], left: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            if c < left {
                let _ = write!(line, "{cell:<w$}", w = width[c]);
            } else {
                let _ = write!(line, "{cell:>w$}", w = width[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn by_reason(m: &BTreeMap<String, u64>) -> String {
    m.iter().filter(|(_, n)| **n > 0).map(|(r, n)| format!("{r} {n}")).collect::<Vec<_>>().join(", ")
}

/// An `afxdp` port's XDP mode, e.g. `veth0 native` or `veth0 generic
/// (native refused: ...)`; `None` for other ports.
pub fn xdp_text(p: &PortStats) -> Option<String> {
    let mode = p.xdp_mode.as_ref()?;
    Some(match &p.xdp_fallback {
        Some(why) => format!("{} {mode} (native refused: {why})", p.name),
        None => format!("{} {mode}", p.name),
    })
}

/// `bridge-ctl stats`: a per-port table, a per-worker table, the drops by
/// reason, the MAC table's line and the conservation line.
pub fn stats_table(s: &BridgeStats) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let sum = |m: &BTreeMap<String, u64>| m.values().fold(0u64, |a, n| a.saturating_add(*n)).to_string();
    let mut ports = vec![[
        "port",
        "kind",
        "member",
        "up",
        "state",
        "learned",
        "received",
        "fast_fwd",
        "forwarded",
        "flooded",
        "dropped",
        "transmitted",
        "tx_dropped",
        "tx_padded",
        "if_rx_dropped",
        "peer_tx_dropped",
    ]
    .map(String::from)
    .to_vec()];
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
    for p in &s.ports {
        ports.push(vec![
            p.name.clone(),
            p.kind.clone(),
            yes(p.member),
            yes(p.up),
            if p.state.is_empty() { "-".to_string() } else { p.state.clone() },
            p.learned_entries.to_string(),
            p.received.to_string(),
            p.fast_forwarded.to_string(),
            p.forwarded.to_string(),
            p.flooded.to_string(),
            sum(&p.dropped),
            p.transmitted.to_string(),
            sum(&p.tx_dropped),
            p.tx_padded.to_string(),
            opt(p.if_rx_dropped),
            opt(p.peer_tx_dropped),
        ]);
    }
    let mut workers = vec![[
        "worker",
        "cpu",
        "received",
        "forwarded",
        "flooded",
        "dropped",
        "rx_copied",
        "csum_completed",
        "gso_segmented",
    ]
    .map(String::from)
    .to_vec()];
    for w in &s.workers {
        workers.push(vec![
            w.worker.to_string(),
            w.cpu.map_or("-".to_string(), |c| c.to_string()),
            w.received.to_string(),
            w.forwarded.to_string(),
            w.flooded.to_string(),
            sum(&w.dropped),
            w.rx_copied.to_string(),
            w.csum_completed.to_string(),
            w.gso_segmented.to_string(),
        ]);
    }
    let mut out = format!("uptime: {:.1}s\n", s.uptime_s);
    out.push_str(&table(&ports, 5));
    let fast: Vec<String> =
        s.ports.iter().filter(|p| p.member).map(|p| format!("{} {}", p.name, p.fast_path)).collect();
    if !fast.is_empty() {
        let _ = writeln!(out, "fast path: {}", fast.join("; "));
    }
    let xdp: Vec<String> = s.ports.iter().filter(|p| p.member).filter_map(xdp_text).collect();
    if !xdp.is_empty() {
        let _ = writeln!(out, "xdp: {}", xdp.join("; "));
    }
    out.push('\n');
    out.push_str(&table(&workers, 1));
    let mut reasons = Vec::new();
    for p in &s.ports {
        let (rx, tx) = (by_reason(&p.dropped), by_reason(&p.tx_dropped));
        if !rx.is_empty() {
            reasons.push(format!("port {}: {rx}", p.name));
        }
        if !tx.is_empty() {
            reasons.push(format!("port {} tx: {tx}", p.name));
        }
    }
    for w in &s.workers {
        let rx = by_reason(&w.dropped);
        if !rx.is_empty() {
            reasons.push(format!("worker {}: {rx}", w.worker));
        }
    }
    if !reasons.is_empty() {
        let _ = writeln!(out, "\ndropped by reason: {}", reasons.join("; "));
    } else {
        out.push('\n');
    }
    let f = &s.fdb;
    let _ = writeln!(
        out,
        "fdb: {} entries ({} learned of at most {}, {} static); learned {}, refreshed {}, moved {}, \
         not learned (full) {}, events dropped {}, events suppressed {}, aged {}, flushed {}",
        f.entries,
        f.learned_entries,
        f.max_learned,
        f.static_entries,
        f.learned,
        f.refreshed,
        f.moved,
        f.not_learned_full,
        f.events_dropped,
        f.events_suppressed,
        f.aged,
        f.flushed
    );
    let verdict = if s.conservation_ok { "ok" } else { "BROKEN" };
    if s.conservation.is_empty() {
        let _ = writeln!(out, "conservation: {verdict}");
    } else {
        let _ = writeln!(out, "conservation: {verdict}: {}", s.conservation);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{FdbCounters, WorkerStats};
    use std::io::Cursor;

    #[test]
    fn fdb_rows_print_as_iproute2_does() {
        let mut row = FdbRow {
            mac: "02:00:00:00:00:01".into(),
            port: "veth0".into(),
            vlan: 10,
            is_static: true,
            kind: "static".into(),
            age_s: 0,
        };
        assert_eq!(row.to_line(), "02:00:00:00:00:01 dev veth0 vlan 10 master flowsteer static");
        row.vlan = 0;
        row.is_static = false;
        row.kind = "learned".into();
        row.age_s = 12;
        assert_eq!(row.to_line(), "02:00:00:00:00:01 dev veth0 age 12s master flowsteer");
        row.kind = "sticky".into();
        assert_eq!(row.to_line(), "02:00:00:00:00:01 dev veth0 age 12s master flowsteer sticky");
        row.kind = "extern_learn".into();
        assert_eq!(row.to_line(), "02:00:00:00:00:01 dev veth0 age 12s master flowsteer extern_learn");
    }

    #[test]
    fn lines_are_bounded_and_split_on_newlines() {
        let stop = AtomicBool::new(false);
        let far = Instant::now() + Duration::from_secs(60);
        let mut line = Vec::new();
        let mut r = BufReader::with_capacity(7, Cursor::new(b"{\"a\":1}\r\nsecond\nlast".to_vec()));
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::Got);
        assert_eq!(line, b"{\"a\":1}\r");
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::Got);
        assert_eq!(line, b"second");
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::Got);
        assert_eq!(line, b"last");
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::Eof);

        let mut exact = vec![b'x'; MAX_LINE];
        exact.push(b'\n');
        let mut r = BufReader::new(Cursor::new(exact));
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::Got);
        assert_eq!(line.len(), MAX_LINE);
        let mut r = BufReader::new(Cursor::new(vec![b'x'; MAX_LINE + 1]));
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::TooLong);

        stop.store(true, Ordering::Relaxed);
        let mut r = BufReader::new(Cursor::new(b"x\n".to_vec()));
        assert_eq!(read_line(&mut r, &mut line, &stop, far), Line::Close);
    }

    #[test]
    fn the_stats_table_has_every_row_and_the_sums() {
        let s = BridgeStats {
            schema: crate::api::STATS_SCHEMA.into(),
            uptime_s: 3.0,
            ports: vec![PortStats {
                name: "veth0".into(),
                kind: "afxdp".into(),
                member: true,
                up: true,
                state: "forwarding".into(),
                learned_entries: 7,
                received: 100,
                fast_forwarded: 0,
                fast_path: "xdp".into(),
                forwarded: 90,
                flooded: 5,
                dropped: BTreeMap::from([("vlan".into(), 3), ("reserved".into(), 2)]),
                transmitted: 77,
                tx_dropped: BTreeMap::new(),
                tx_padded: 4,
                xdp_mode: Some("generic".into()),
                xdp_fallback: Some("no native XDP".into()),
                if_rx_packets: Some(120),
                if_rx_dropped: Some(20),
                peer_tx_dropped: Some(12),
            }],
            workers: vec![WorkerStats {
                worker: 0,
                cpu: Some(2),
                received: 100,
                forwarded: 90,
                flooded: 5,
                dropped: BTreeMap::from([("vlan".into(), 5)]),
                rx_copied: 40,
                csum_completed: 3,
                gso_segmented: 1,
            }],
            fdb: FdbCounters {
                entries: 12,
                learned_entries: 10,
                static_entries: 2,
                max_learned: 65536,
                ..Default::default()
            },
            conservation_ok: true,
            conservation: "received 100 = forwarded 90 + flooded 5 + dropped 5".into(),
        };
        let text = stats_table(&s);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("port ") && lines[1].ends_with("peer_tx_dropped"), "{text}");
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            cells,
            ["veth0", "afxdp", "yes", "yes", "forwarding", "7", "100", "0", "90", "5", "5", "77", "0", "4", "20", "12"],
            "{text}"
        );
        assert_eq!(lines[3], "fast path: veth0 xdp", "{text}");
        assert_eq!(lines[4], "xdp: veth0 generic (native refused: no native XDP)", "{text}");
        assert_eq!(lines[1].len(), lines[2].len(), "aligned:\n{text}");
        let cells: Vec<&str> = lines[7].split_whitespace().collect();
        assert_eq!(cells, ["0", "2", "100", "90", "5", "5", "40", "3", "1"], "{text}");
        assert!(text.contains("dropped by reason: port veth0: reserved 2, vlan 3; worker 0: vlan 5"), "{text}");
        assert!(text.contains("fdb: 12 entries (10 learned of at most 65536, 2 static)"), "{text}");
        assert!(text.ends_with("conservation: ok: received 100 = forwarded 90 + flooded 5 + dropped 5\n"), "{text}");
    }
}
