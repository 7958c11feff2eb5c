//! One iperf3 measurement between two namespaces: `iperf3 -s -1` in the
//! server's, `iperf3 -c ... -J` in the client's, each started with
//! `ip netns exec` (which execs iperf3: the child's pid is iperf3's), each
//! bounded by a deadline after which it is killed, both killed when the
//! caller's stop flag is set. [`parse_client`] reads the client's `-J`
//! document; [`listening`] the server namespace's `/proc/PID/net/tcp`.
//!
//! iperf3 is not linked, only run: absent, [`version`] says so and the
//! harness refuses to start.

use std::io::Read;
use std::net::Ipv4Addr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The executable run (looked up in `PATH`).
pub const IPERF3: &str = "iperf3";
/// iperf3's `--connect-timeout`, ms: a path that drops the SYN fails in
/// this long rather than after the kernel's two minutes of retries.
pub const CONNECT_TIMEOUT_MS: u32 = 3000;
/// How long the server may take to listen after it was started.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the client may run beyond `--connect-timeout` and `-t` (its
/// end-of-test exchange, JSON output) before it is killed.
pub const CLIENT_SLACK: Duration = Duration::from_secs(15);
/// How long the one-off server may take to exit after its client did.
pub const SERVER_EXIT: Duration = Duration::from_secs(5);

/// What one client run measured (its `end` section).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// `end.sum_received.bits_per_second`: TCP payload the server received.
    pub received_bps: f64,
    /// `end.sum_sent.bits_per_second`.
    pub sent_bps: f64,
    /// `end.sum_sent.retransmits` (Linux senders report it).
    pub retransmits: Option<u64>,
}

/// Why a run gave no measurement.
#[derive(Debug, thiserror::Error)]
pub enum IperfError {
    /// iperf3 could not be started.
    #[error("could not start iperf3: {0}")]
    Spawn(std::io::Error),
    /// The server exited, or did not listen in time.
    #[error("iperf3 server did not listen on port {port} within {LISTEN_TIMEOUT:?}{}", detail(.output))]
    NotListening {
        /// The TCP port.
        port: u16,
        /// What it printed.
        output: String,
    },
    /// The client said why it failed (its `error` field, or stderr).
    #[error("{0}")]
    Client(String),
    /// The client ran past its deadline and was killed.
    #[error("iperf3 client did not finish within {after:?} and was killed{}", detail(.output))]
    Timeout {
        /// Its deadline.
        after: Duration,
        /// What it printed.
        output: String,
    },
    /// The client printed no document this module can read.
    #[error("iperf3 printed no result ({why}){}", detail(.output))]
    Output {
        /// What was wrong with it.
        why: String,
        /// What it printed.
        output: String,
    },
    /// The caller's stop flag was set.
    #[error("stopped by a signal")]
    Stopped,
}

/// Longest excerpt of a child's output an error carries.
const EXCERPT: usize = 300;

/// `text` on one line (whitespace runs as one space), cut at [`EXCERPT`] characters.
fn one_line(text: &str) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one.chars().take(EXCERPT).collect();
    if cut.len() < one.len() {
        format!("{cut} ...")
    } else {
        cut
    }
}

/// `": " + one_line(output)`, or nothing when it printed nothing.
fn detail(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", one_line(output))
    }
}

/// iperf3's version line (`iperf 3.12 (cJSON 1.7.15)`), or why it cannot run.
pub fn version() -> Result<String, String> {
    let out = Command::new(IPERF3)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("iperf3 is not installed or not in PATH ({e}); Debian: apt-get install iperf3"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next().map(str::trim).filter(|l| l.starts_with("iperf")) {
        Some(line) if out.status.success() => Ok(line.to_string()),
        _ => Err(format!("`iperf3 --version` did not answer as iperf3 does ({})", out.status)),
    }
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    end: Option<End>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct End {
    sum_received: Option<Sum>,
    sum_sent: Option<Sum>,
}

#[derive(Deserialize)]
struct Sum {
    bits_per_second: f64,
    #[serde(default)]
    retransmits: Option<u64>,
}

/// Reads the client's `-J` document: its measurement, or its `error`
/// text (iperf3 3.12 exits 0 with an `error` field when it cannot connect).
pub fn parse_client(json: &str) -> Result<Measured, IperfError> {
    let doc: Doc = serde_json::from_str(json)
        .map_err(|e| IperfError::Output { why: format!("not JSON: {e}"), output: json.to_string() })?;
    if let Some(e) = doc.error {
        return Err(IperfError::Client(e));
    }
    let end = doc.end.ok_or_else(|| IperfError::Output { why: "no `end`".into(), output: String::new() })?;
    let (Some(rx), Some(tx)) = (end.sum_received, end.sum_sent) else {
        return Err(IperfError::Output {
            why: "no `end.sum_received` or `end.sum_sent`".into(),
            output: String::new(),
        });
    };
    Ok(Measured { received_bps: rx.bits_per_second, sent_bps: tx.bits_per_second, retransmits: tx.retransmits })
}

/// Whether a `/proc/net/tcp` (or `tcp6`) table has a socket listening on `port`.
pub fn listening(table: &str, port: u16) -> bool {
    let want = format!("{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // sl local_address rem_address st ...; st 0A is TCP_LISTEN.
        f.len() > 3 && f[1].rsplit(':').next() == Some(want.as_str()) && f[3] == "0A"
    })
}

/// A child with its stdout and stderr collected; killed on drop.
struct Running {
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// How waiting for a [`Running`] ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    Stopped,
}

fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

fn stopped(stop: Option<&AtomicBool>) -> bool {
    stop.is_some_and(|s| s.load(Ordering::Relaxed))
}

impl Running {
    /// `ip netns exec NS iperf3 ARGS`.
    fn spawn(ns: &str, args: &[String]) -> Result<Running, IperfError> {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, IPERF3])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(IperfError::Spawn)?;
        let out = child.stdout.take().map(collect);
        let err = child.stderr.take().map(collect);
        Ok(Running { child, out, err })
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until it exits, `until` passes or `stop` is set (then kills it).
    fn wait(&mut self, until: Instant, stop: Option<&AtomicBool>) -> Ended {
        loop {
            if let Some(st) = self.exited() {
                return Ended::Exited(st);
            }
            if stopped(stop) {
                self.kill();
                return Ended::Stopped;
            }
            if Instant::now() >= until {
                self.kill();
                return Ended::TimedOut;
            }
            std::thread::sleep(POLL);
        }
    }

    fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Kills it if still running; what it printed, stderr then stdout.
    fn output(mut self) -> (String, String) {
        self.kill();
        let take = |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        let out = take(self.out.take());
        (take(self.err.take()), out)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// One test: what runs where and for how long.
#[derive(Debug, Clone)]
pub struct Test<'a> {
    /// The server's namespace.
    pub server_ns: &'a str,
    /// The client's namespace.
    pub client_ns: &'a str,
    /// The server's address (it binds to it; the client connects to it).
    pub addr: Ipv4Addr,
    /// The TCP port.
    pub port: u16,
    /// `-t`.
    pub seconds: u32,
    /// `-P`.
    pub streams: u16,
}

impl Test<'_> {
    /// The client's deadline: `-t`, the connect timeout and [`CLIENT_SLACK`].
    pub fn client_limit(&self) -> Duration {
        Duration::from_secs(u64::from(self.seconds)) + Duration::from_millis(CONNECT_TIMEOUT_MS.into()) + CLIENT_SLACK
    }
}

/// Runs one test: the server, then (once it listens) the client; each
/// child killed at its deadline, both on `stop`. Both are gone when it
/// returns.
pub fn run(t: &Test<'_>, stop: Option<&AtomicBool>) -> Result<Measured, IperfError> {
    let (addr, port) = (t.addr.to_string(), t.port.to_string());
    let server_args = ["-s", "-1", "-B", &addr, "-p", &port].map(String::from);
    let mut server = Running::spawn(t.server_ns, &server_args)?;
    if let Err(e) = wait_listening(&mut server, t.port, stop) {
        let (err, out) = server.output();
        return Err(match e {
            IperfError::NotListening { port, .. } => IperfError::NotListening { port, output: format!("{err} {out}") },
            e => e,
        });
    }
    let seconds = t.seconds.to_string();
    let streams = t.streams.to_string();
    let connect = CONNECT_TIMEOUT_MS.to_string();
    let client_args = ["-c", &addr, "-p", &port, "-t", &seconds, "-P", &streams, "-J", "--connect-timeout", &connect]
        .map(String::from);
    let mut client = Running::spawn(t.client_ns, &client_args)?;
    let limit = t.client_limit();
    let ended = client.wait(Instant::now() + limit, stop);
    let (err, out) = client.output();
    let result = match ended {
        Ended::Stopped => Err(IperfError::Stopped),
        Ended::TimedOut => Err(IperfError::Timeout { after: limit, output: format!("{err} {out}") }),
        Ended::Exited(status) if out.trim().is_empty() => Err(IperfError::Client(if err.trim().is_empty() {
            format!("iperf3 client exited ({status}) and printed nothing")
        } else {
            one_line(&err)
        })),
        Ended::Exited(_) => parse_client(&out),
    };
    if result.is_ok() {
        // The one-off server ends with its test.
        let _ = server.wait(Instant::now() + SERVER_EXIT, stop);
    }
    drop(server.output());
    result
}

/// Waits until the server's namespace has a listener on `port` (read in
/// `/proc/PID/net/tcp*`, which shows the network namespace of process
/// PID: `ip netns exec` execs iperf3, so PID is the server's).
fn wait_listening(server: &mut Running, port: u16, stop: Option<&AtomicBool>) -> Result<(), IperfError> {
    let until = Instant::now() + LISTEN_TIMEOUT;
    let pid = server.child.id();
    loop {
        let up = ["tcp", "tcp6"].iter().any(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).is_ok_and(|table| listening(&table, port))
        });
        if up {
            return Ok(());
        }
        if stopped(stop) {
            return Err(IperfError::Stopped);
        }
        if server.exited().is_some() || Instant::now() >= until {
            return Err(IperfError::NotListening { port, output: String::new() });
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of `iperf3 -c ... -P 1 -J` (iperf 3.12, Debian 12), cut to
    /// the fields read, with the figures of a run through a Linux bridge.
    const OK: &str = r#"{
        "start": {"version": "iperf 3.12"},
        "intervals": [],
        "end": {
            "streams": [],
            "sum_sent": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 2570046464,
                         "bits_per_second": 10280185772.8, "retransmits": 1393, "sender": true},
            "sum_received": {"start": 0, "end": 2.0, "seconds": 2.0, "bytes": 2570046000,
                             "bits_per_second": 10279000000.5, "sender": true},
            "cpu_utilization_percent": {}
        }
    }"#;

    /// What iperf 3.12 prints (exit 0) when the SYN gets no answer within `--connect-timeout`.
    const NO_CONNECT: &str = r#"{
        "start": {"connected": [], "version": "iperf 3.12"},
        "intervals": [],
        "end": {},
        "error": "unable to connect to server: Connection timed out"
    }"#;

    #[test]
    fn a_report_gives_received_rate_sent_rate_and_retransmits() {
        let m = parse_client(OK).unwrap();
        assert_eq!(m.received_bps, 10279000000.5);
        assert_eq!(m.sent_bps, 10280185772.8);
        assert_eq!(m.retransmits, Some(1393));
    }

    #[test]
    fn iperf3s_error_text_is_the_error() {
        let e = parse_client(NO_CONNECT).unwrap_err();
        assert!(matches!(&e, IperfError::Client(t) if t == "unable to connect to server: Connection timed out"), "{e}");
    }

    #[test]
    fn output_that_is_no_report_is_an_output_error_with_an_excerpt() {
        let e = parse_client("iperf3: error - something\n").unwrap_err();
        assert!(e.to_string().starts_with("iperf3 printed no result (not JSON"), "{e}");
        assert!(e.to_string().ends_with(": iperf3: error - something"), "{e}");
        let e = parse_client(r#"{"end": {}}"#).unwrap_err();
        assert!(e.to_string().contains("no `end.sum_received`"), "{e}");
    }

    #[test]
    fn excerpts_are_one_line_and_bounded() {
        assert_eq!(one_line("a\n  b\tc\n"), "a b c");
        let long = "x ".repeat(400);
        let cut = one_line(&long);
        assert!(cut.ends_with(" ...") && cut.len() <= EXCERPT + 4, "{}", cut.len());
        assert_eq!(detail("  \n"), "");
    }

    #[test]
    fn a_listener_is_found_by_port_and_state() {
        // /proc/net/tcp: 10.99.0.2:5201 listening, then a connection to 5201 (state 01).
        let table =
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0200630A:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 13794 1\n\
            1: 0100630A:A2F0 0200630A:1451 01 00000000:00000000 00:00000000 00000000     0        0 13795 1\n";
        assert!(listening(table, 5201));
        assert!(!listening(table, 41712)); // 0xA2F0: a connection, not a listener
        assert!(!listening(table.lines().next().unwrap(), 5201));
        // tcp6 addresses are longer; the port is after the last colon.
        let v6 =
            "sl local rem st\n 0: 00000000000000000000000000000000:1451 00000000000000000000000000000000:0000 0A x\n";
        assert!(listening(v6, 5201));
    }
}
