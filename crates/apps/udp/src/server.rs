//! The per-core UDP echo/sink server: one socket per chosen CPU, all bound to
//! the same address and port with `SO_REUSEPORT`, each tied to its CPU so
//! the kernel hands a datagram to the socket of the CPU that received it
//! (the software twin of a NIC queue per core). One thread per socket,
//! pinned to that CPU, reads with `recvmmsg` and answers with `sendmmsg`
//! from the same socket and thread, so a flow's whole round trip stays on
//! one core.
//!
//! Two ways to tie a socket to a CPU ([`BindMode`]):
//! * `SO_INCOMING_CPU` set on each socket: since Linux 6.1 reuseport
//!   selection prefers the socket whose incoming CPU equals the receiving
//!   CPU. No BPF at all.
//! * a classic BPF reuseport program (`SO_ATTACH_REUSEPORT_CBPF`) that
//!   loads the receiving CPU (`ld [SKF_AD_OFF+SKF_AD_CPU]`) and returns the
//!   index of that CPU's socket; CPUs without a socket fall back to the
//!   kernel's hash.
//!
//! Either only works as far as the kernel says, so [`self_test`] proves it on
//! loopback before serving: a sender pinned to each CPU in turn sends k
//! datagrams, and socket i must get exactly those from CPU i.
//!
//! Accounting per core (`netstat -s -p udp` style): every datagram read is
//! `received`; each is then `delivered` (echoed, or counted in sink mode)
//! or `dropped` by reason (`drop_truncated`: larger than the receive slot;
//! `drop_send_error`: the echo failed, by errno), so `received = delivered
//! + dropped` always. Datagrams the kernel dropped before we could read them
//! (socket buffer full) are `rcvbuf_drops`, from `SO_RXQ_OVFL` and
//! `SO_MEMINFO`; they never reach `received`.

use crate::sys::{self, opt, RecvBatch};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest batch per `recvmmsg`/`sendmmsg` (the kernel caps `vlen` at
/// `UIO_MAXIOV` = 1024).
pub const MAX_BATCH: usize = 1024;
/// Default datagrams per batch.
pub const DEFAULT_BATCH: usize = 32;
/// Default receive slot: the largest UDP payload, so nothing is truncated.
/// Memory per core = batch * slot (2 MiB with the defaults).
pub const DEFAULT_SLOT: usize = 65_535;
/// Most sockets (CPUs) in one group.
pub const MAX_SOCKETS: usize = 1024;
/// Datagrams each CPU sends in the self-test.
pub const SELF_TEST_PER_CPU: u64 = 16;
/// How long the self-test waits for its datagrams.
pub const SELF_TEST_WAIT: Duration = Duration::from_secs(2);
/// How often the echo retries a batch the kernel refused with EAGAIN or
/// ENOBUFS (waiting up to 1 ms each) before counting the rest as send
/// errors.
pub const SEND_RETRIES: usize = 20;

/// How each socket is tied to its CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BindMode {
    /// `setsockopt(SO_INCOMING_CPU, cpu)` on each socket (Linux >= 6.1).
    IncomingCpu,
    /// A classic BPF reuseport program mapping the receiving CPU to its socket.
    Cbpf,
}

impl FromStr for BindMode {
    type Err = ServerError;
    fn from_str(s: &str) -> Result<Self, ServerError> {
        match s {
            "incoming-cpu" => Ok(BindMode::IncomingCpu),
            "cbpf" => Ok(BindMode::Cbpf),
            other => Err(ServerError::UnknownBindMode(other.to_string())),
        }
    }
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindMode::IncomingCpu => "incoming-cpu",
            BindMode::Cbpf => "cbpf",
        })
    }
}

/// What to do with each datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reply {
    /// Send the same bytes back to the sender, from the receiving socket.
    Echo,
    /// Count only.
    Sink,
}

/// Server settings; [`ServerConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    /// One socket and one pinned thread per CPU, in this order (socket i on
    /// `cpus[i]`). At most [`MAX_SOCKETS`], no repeats.
    pub cpus: Vec<u32>,
    pub bind: BindMode,
    pub reply: Reply,
    /// Datagrams per `recvmmsg`/`sendmmsg` (default [`DEFAULT_BATCH`], at
    /// most [`MAX_BATCH`]).
    pub batch: usize,
    /// Receive slot per datagram in bytes (default [`DEFAULT_SLOT`]);
    /// longer datagrams are truncated by the kernel and counted as
    /// `drop_truncated`.
    pub slot: usize,
    /// Socket receive buffer in bytes (the kernel doubles it): set with
    /// `SO_RCVBUFFORCE` when the process has CAP_NET_ADMIN, else with
    /// `SO_RCVBUF`, which the kernel caps at `net.core.rmem_max`. `None`
    /// keeps the system default (about 208 KiB: a few hundred datagrams).
    pub rcvbuf: Option<usize>,
    /// How long an idle thread waits before looking at the stop flag again
    /// (default 50 ms): the bound on how late a stop is noticed.
    pub poll_interval: Duration,
    /// Run [`self_test`] before serving (default true).
    pub self_test: bool,
}

impl ServerConfig {
    pub fn new(addr: SocketAddr, cpus: Vec<u32>) -> ServerConfig {
        ServerConfig {
            addr,
            cpus,
            bind: BindMode::IncomingCpu,
            reply: Reply::Echo,
            batch: DEFAULT_BATCH,
            slot: DEFAULT_SLOT,
            rcvbuf: None,
            poll_interval: Duration::from_millis(50),
            self_test: true,
        }
    }

    fn validate(&self) -> Result<(), ServerError> {
        if self.cpus.is_empty() {
            return Err(ServerError::NoCpus);
        }
        if self.cpus.len() > MAX_SOCKETS {
            return Err(ServerError::TooManyCpus(self.cpus.len()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for &c in &self.cpus {
            if !seen.insert(c) {
                return Err(ServerError::CpuTwice(c));
            }
        }
        let allowed = sys::allowed_cpus().map_err(ServerError::Affinity)?;
        if let Some(&cpu) = self.cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(ServerError::CpuNotAllowed { cpu, allowed });
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(ServerError::BadBatch(self.batch));
        }
        if self.slot == 0 || self.slot > DEFAULT_SLOT {
            return Err(ServerError::BadSlot(self.slot));
        }
        Ok(())
    }
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Counters of one core or of all (plain numbers; see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub received: u64,
    pub bytes_received: u64,
    pub delivered: u64,
    pub sent: u64,
    pub bytes_sent: u64,
    /// `drop_truncated + drop_send_error`.
    pub dropped: u64,
    pub drop_truncated: u64,
    pub drop_send_error: u64,
    /// Failed sends by errno name (`ECONNREFUSED`, `ENOBUFS`, ...).
    pub send_errors: BTreeMap<String, u64>,
    /// Failed `recvmmsg` calls by errno name (no datagram is lost by these).
    pub recv_errors: BTreeMap<String, u64>,
    /// Datagrams the kernel dropped at this socket before they were read
    /// (receive buffer full); not part of `received`.
    pub rcvbuf_drops: u64,
    /// Datagrams read while the thread ran on another CPU than its socket's
    /// (`sched_getcpu` after each batch); 0 while pinning holds.
    pub cpu_mismatch: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub batches: u64,
}

/// Sums another core's counters into these (errno maps by name).
impl std::ops::AddAssign<&Counters> for Counters {
    fn add_assign(&mut self, o: &Counters) {
        self.received += o.received;
        self.bytes_received += o.bytes_received;
        self.delivered += o.delivered;
        self.sent += o.sent;
        self.bytes_sent += o.bytes_sent;
        self.dropped += o.dropped;
        self.drop_truncated += o.drop_truncated;
        self.drop_send_error += o.drop_send_error;
        for (k, v) in &o.send_errors {
            *self.send_errors.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.recv_errors {
            *self.recv_errors.entry(k.clone()).or_default() += v;
        }
        self.rcvbuf_drops += o.rcvbuf_drops;
        self.cpu_mismatch += o.cpu_mismatch;
        self.batches += o.batches;
    }
}

impl Counters {
    /// `received == delivered + dropped`.
    pub fn adds_up(&self) -> bool {
        self.received == self.delivered + self.dropped && self.dropped == self.drop_truncated + self.drop_send_error
    }
}

/// One socket's counters.
#[derive(Clone, Debug, Serialize)]
pub struct CoreStats {
    pub socket: usize,
    pub cpu: u32,
    #[serde(flatten)]
    pub counters: Counters,
}

/// Everything the server counted.
#[derive(Clone, Debug, Serialize)]
pub struct ServerStats {
    pub schema: &'static str,
    pub addr: String,
    pub bind: BindMode,
    pub reply: Reply,
    pub elapsed_s: f64,
    pub cores: Vec<CoreStats>,
    pub total: Counters,
    /// `received = delivered + dropped` on every core and in total.
    pub conservation_ok: bool,
    /// Thread failures (pinning lost, unexpected errors); empty normally.
    pub errors: Vec<String>,
    pub self_test: Option<SelfTestReport>,
}

/// The self-test's evidence: `matrix[socket][sender]` datagrams.
#[derive(Clone, Debug, Serialize)]
pub struct SelfTestReport {
    pub cpus: Vec<u32>,
    pub per_cpu: u64,
    pub matrix: Vec<Vec<u64>>,
}

struct Shared {
    fds: Vec<OwnedFd>,
    cpus: Vec<u32>,
    counters: Vec<Mutex<Counters>>,
    errors: Mutex<Vec<String>>,
    /// Set when start-up fails, to end the threads already running.
    abort: AtomicBool,
}

/// A running server; stop it by setting the flag given to [`Server::start`],
/// then [`Server::join`].
pub struct Server {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    local: SocketAddr,
    cfg: ServerConfig,
    started: Instant,
    self_test: Option<SelfTestReport>,
}

/// Why the server could not start (or its self-test failed). Every message
/// is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// [`BindMode`] parsing: not incoming-cpu or cbpf.
    #[error("unknown bind mode '{0}' (expected incoming-cpu or cbpf)")]
    UnknownBindMode(String),
    #[error("no CPUs to serve on")]
    NoCpus,
    #[error("{0} CPUs given; at most {MAX_SOCKETS} sockets per group")]
    TooManyCpus(usize),
    #[error("CPU {0} is listed twice")]
    CpuTwice(u32),
    /// The process's affinity mask could not be read.
    #[error("sched_getaffinity: {0}")]
    Affinity(std::io::Error),
    #[error("CPU {cpu} is not available to this process (allowed: {})", join(.allowed))]
    CpuNotAllowed { cpu: u32, allowed: Vec<u32> },
    #[error("batch {0} out of range 1..={MAX_BATCH}")]
    BadBatch(usize),
    #[error("receive slot {0} out of range 1..={DEFAULT_SLOT}")]
    BadSlot(usize),
    #[error("socket: {0}")]
    Socket(std::io::Error),
    #[error("setsockopt {option} on socket {socket}: {error}")]
    SetSockOpt { option: &'static str, socket: usize, error: std::io::Error },
    /// `bind(2)` failed; the message names the usual causes by errno.
    #[error("{}", bind_msg(.addr, .error))]
    Bind { addr: SocketAddr, error: std::io::Error },
    #[error("getsockname: {0}")]
    GetSockName(std::io::Error),
    #[error("SO_ATTACH_REUSEPORT_CBPF: {0}")]
    AttachCbpf(std::io::Error),
    /// Self-test: socket `socket` got datagrams sent from another CPU.
    #[error(
        "{}: socket {socket} (CPU {cpu}) got {got} datagram(s) sent from CPU {from_cpu}; {}",
        not_steered(.bind),
        self_test_hint(.bind)
    )]
    Misrouted { bind: BindMode, socket: usize, cpu: u32, got: u64, from_cpu: u32 },
    /// Self-test: socket `socket` got fewer than `per_cpu` datagrams from its CPU.
    #[error(
        "self-test: socket {socket} (CPU {cpu}) got {got} of the {per_cpu} loopback datagrams sent from its CPU \
         within {SELF_TEST_WAIT:?}; is lo up (`ip link set lo up`)?"
    )]
    SelfTestShort { socket: usize, cpu: u32, got: u64, per_cpu: u64 },
    /// Self-test: opening the loopback socket group failed.
    #[error("self-test: {0}")]
    SelfTestOpen(Box<ServerError>),
    #[error("self-test: pin to CPU {cpu}: {error}")]
    SelfTestPin { cpu: u32, error: std::io::Error },
    #[error("self-test: pinned to CPU {0} but running elsewhere")]
    SelfTestElsewhere(u32),
    #[error("self-test: socket: {0}")]
    SelfTestSocket(std::io::Error),
    #[error("self-test: send to {target}: {error}; is lo up (`ip link set lo up`)?")]
    SelfTestSend { target: SocketAddr, error: std::io::Error },
    #[error("self-test sender panicked")]
    SelfTestPanicked,
    #[error("self-test: poll: {0}")]
    SelfTestPoll(std::io::Error),
    #[error("self-test: recv: {0}")]
    SelfTestRecv(std::io::Error),
    /// A server thread could not be created.
    #[error("spawn thread: {0}")]
    Spawn(std::io::Error),
    #[error("socket {socket}: cannot pin its thread to CPU {cpu}: {error}")]
    Pin { socket: usize, cpu: u32, error: std::io::Error },
    #[error("socket {socket}: pinned to CPU {cpu} but running elsewhere")]
    Elsewhere { socket: usize, cpu: u32 },
    #[error("a server thread did not start within 5 s")]
    StartTimeout,
}

fn not_steered(bind: &BindMode) -> &'static str {
    match bind {
        BindMode::IncomingCpu => "SO_INCOMING_CPU did not steer",
        BindMode::Cbpf => "the reuseport CPU program did not steer",
    }
}

fn self_test_hint(bind: &BindMode) -> &'static str {
    match bind {
        BindMode::IncomingCpu => "kernel too old (SO_INCOMING_CPU steering needs Linux >= 6.1)? try --bind cbpf",
        BindMode::Cbpf => "is RPS enabled on lo, or another program attached? try --bind incoming-cpu",
    }
}

fn bind_msg(addr: &SocketAddr, e: &std::io::Error) -> String {
    let what = "cannot bind";
    match e.raw_os_error() {
        Some(sys::EADDRNOTAVAIL) => format!(
            "{what} {addr}: {} is not an address of this host (see `ip addr`; in a namespace run under `ip netns exec NS`)",
            addr.ip()
        ),
        Some(sys::EADDRINUSE) => format!(
            "{what} {addr}: port {} is in use by a socket without SO_REUSEPORT or of another user; pick another port",
            addr.port()
        ),
        Some(sys::EACCES) | Some(sys::EPERM) => {
            format!("{what} {addr}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)")
        }
        _ => format!("{what} {addr}: {e}"),
    }
}

/// The reuseport program for `cpus` (socket i serves `cpus[i]`): the
/// two-instruction `ld cpu; ret a` when CPU i is socket i, else a compare
/// chain returning the socket index, and an out-of-range index (kernel hash
/// fallback) for any other CPU.
pub(crate) fn cbpf_program(cpus: &[u32]) -> Vec<sys::Insn> {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const RET_A: u16 = 0x16; // BPF_RET | BPF_A
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    let ld = sys::Insn { code: LD_W_ABS, jt: 0, jf: 0, k: (SKF_AD_OFF + SKF_AD_CPU) as u32 };
    if cpus.iter().enumerate().all(|(i, &c)| c as usize == i) {
        return vec![ld, sys::Insn { code: RET_A, jt: 0, jf: 0, k: 0 }];
    }
    let mut p = vec![ld];
    for (i, &c) in cpus.iter().enumerate() {
        p.push(sys::Insn { code: JEQ_K, jt: 0, jf: 1, k: c });
        p.push(sys::Insn { code: RET_K, jt: 0, jf: 0, k: i as u32 });
    }
    p.push(sys::Insn { code: RET_K, jt: 0, jf: 0, k: u32::MAX });
    p
}

/// Ancillary-data base offset and the "current CPU" field of classic BPF.
const SKF_AD_OFF: i32 = -0x1000;
const SKF_AD_CPU: i32 = 36;

/// Open the socket group: socket i bound to `addr` with SO_REUSEPORT and tied
/// to `cpus[i]`. Returns the sockets and the bound address (the real port
/// when `addr` asked for port 0).
fn open_group(cfg: &ServerConfig, addr: SocketAddr) -> Result<(Vec<OwnedFd>, SocketAddr), ServerError> {
    let v6 = addr.is_ipv6();
    let wildcard = addr.ip().is_unspecified();
    let mut fds = Vec::with_capacity(cfg.cpus.len());
    let mut bound = addr;
    for (i, &cpu) in cfg.cpus.iter().enumerate() {
        let fd = sys::udp_socket(v6).map_err(ServerError::Socket)?;
        let s = fd.as_fd();
        let set = |level, name, v, option: &'static str| {
            sys::set_int(s, level, name, v).map_err(|error| ServerError::SetSockOpt { option, socket: i, error })
        };
        set(opt::SOL_SOCKET, opt::SO_REUSEPORT, 1, "SO_REUSEPORT")?;
        set(opt::SOL_SOCKET, opt::SO_RXQ_OVFL, 1, "SO_RXQ_OVFL")?;
        if v6 {
            set(opt::IPPROTO_IPV6, opt::IPV6_V6ONLY, 1, "IPV6_V6ONLY")?;
        }
        if wildcard {
            if v6 {
                set(opt::IPPROTO_IPV6, opt::IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO")?;
            } else {
                set(opt::IPPROTO_IP, opt::IP_PKTINFO, 1, "IP_PKTINFO")?;
            }
        }
        if let Some(b) = cfg.rcvbuf {
            let b = i32::try_from(b).unwrap_or(i32::MAX);
            // SO_RCVBUFFORCE passes net.core.rmem_max with CAP_NET_ADMIN; without it, the capped SO_RCVBUF.
            if sys::set_int(s, opt::SOL_SOCKET, opt::SO_RCVBUFFORCE, b).is_err() {
                set(opt::SOL_SOCKET, opt::SO_RCVBUF, b, "SO_RCVBUF")?;
            }
        }
        if cfg.bind == BindMode::IncomingCpu {
            set(opt::SOL_SOCKET, opt::SO_INCOMING_CPU, cpu as i32, "SO_INCOMING_CPU")?;
        }
        sys::bind(s, &bound).map_err(|error| ServerError::Bind { addr: bound, error })?;
        if i == 0 {
            bound = sys::local_addr(s).map_err(ServerError::GetSockName)?;
        }
        fds.push(fd);
    }
    if cfg.bind == BindMode::Cbpf {
        sys::attach_reuseport_cbpf(fds[0].as_fd(), &cbpf_program(&cfg.cpus)).map_err(ServerError::AttachCbpf)?;
    }
    Ok((fds, bound))
}

/// Judge a self-test matrix (`matrix[socket][sender]`): `Ok` when socket i
/// got exactly the `per_cpu` datagrams sent from CPU i and nothing else.
pub fn judge_self_test(cpus: &[u32], per_cpu: u64, matrix: &[Vec<u64>], bind: BindMode) -> Result<(), ServerError> {
    for (s, row) in matrix.iter().enumerate() {
        for (from, &n) in row.iter().enumerate() {
            if from != s && n > 0 {
                return Err(ServerError::Misrouted { bind, socket: s, cpu: cpus[s], got: n, from_cpu: cpus[from] });
            }
        }
    }
    for (s, row) in matrix.iter().enumerate() {
        let got = row.get(s).copied().unwrap_or(0);
        if got != per_cpu {
            return Err(ServerError::SelfTestShort { socket: s, cpu: cpus[s], got, per_cpu });
        }
    }
    Ok(())
}

/// Prove on loopback that the binding steers by CPU: the same options on an
/// ephemeral port of 127.0.0.1 (or ::1), a sender pinned to each CPU in
/// turn, socket i must receive exactly what CPU i sent.
pub fn self_test(cfg: &ServerConfig) -> Result<SelfTestReport, ServerError> {
    cfg.validate()?;
    let lo: IpAddr = if cfg.addr.is_ipv6() { Ipv6Addr::LOCALHOST.into() } else { Ipv4Addr::LOCALHOST.into() };
    let (fds, target) = open_group(cfg, SocketAddr::new(lo, 0)).map_err(|e| ServerError::SelfTestOpen(Box::new(e)))?;
    let n = cfg.cpus.len();
    for (i, &cpu) in cfg.cpus.iter().enumerate() {
        let sent = std::thread::scope(|sc| {
            sc.spawn(move || -> Result<(), ServerError> {
                sys::pin_to_cpu(cpu).map_err(|error| ServerError::SelfTestPin { cpu, error })?;
                if sys::current_cpu() != Some(cpu) {
                    return Err(ServerError::SelfTestElsewhere(cpu));
                }
                let s = sys::udp_socket(target.is_ipv6()).map_err(ServerError::SelfTestSocket)?;
                for k in 0..SELF_TEST_PER_CPU {
                    let mut msg = [0u8; 12];
                    msg[..4].copy_from_slice(b"FSST");
                    msg[4..8].copy_from_slice(&(i as u32).to_be_bytes());
                    msg[8..].copy_from_slice(&(k as u32).to_be_bytes());
                    sys::send_to(s.as_fd(), &msg, &target)
                        .map_err(|error| ServerError::SelfTestSend { target, error })?;
                }
                Ok(())
            })
            .join()
            .unwrap_or(Err(ServerError::SelfTestPanicked))
        });
        sent?;
    }
    let mut matrix = vec![vec![0u64; n]; n];
    let expected = SELF_TEST_PER_CPU * n as u64;
    let mut got = 0u64;
    let deadline = Instant::now() + SELF_TEST_WAIT;
    let mut batch = RecvBatch::new(64, 64);
    while got < expected && Instant::now() < deadline {
        let mut pfds: Vec<sys::PollFd> = fds.iter().map(|f| sys::poll_in(f.as_fd())).collect();
        sys::poll(&mut pfds, 20).map_err(ServerError::SelfTestPoll)?;
        for (s, fd) in fds.iter().enumerate() {
            loop {
                let k = batch.recv(fd.as_fd(), 64).map_err(ServerError::SelfTestRecv)?;
                if k == 0 {
                    break;
                }
                for j in 0..k {
                    let d = batch.data(j);
                    if d.len() == 12 && &d[..4] == b"FSST" {
                        let from = u32::from_be_bytes([d[4], d[5], d[6], d[7]]) as usize;
                        if from < n {
                            matrix[s][from] += 1;
                            got += 1;
                        }
                    }
                }
            }
        }
    }
    judge_self_test(&cfg.cpus, SELF_TEST_PER_CPU, &matrix, cfg.bind)?;
    Ok(SelfTestReport { cpus: cfg.cpus.clone(), per_cpu: SELF_TEST_PER_CPU, matrix })
}

impl Server {
    /// Validate, run the self-test (unless disabled), open the socket group
    /// and start one pinned thread per socket. The threads run until `stop`
    /// is set.
    pub fn start(cfg: &ServerConfig, stop: Arc<AtomicBool>) -> Result<Server, ServerError> {
        cfg.validate()?;
        let report = if cfg.self_test { Some(self_test(cfg)?) } else { None };
        let (fds, local) = open_group(cfg, cfg.addr)?;
        let shared = Arc::new(Shared {
            fds,
            cpus: cfg.cpus.clone(),
            counters: cfg.cpus.iter().map(|_| Mutex::new(Counters::default())).collect(),
            errors: Mutex::new(Vec::new()),
            abort: AtomicBool::new(false),
        });
        let mut threads = Vec::with_capacity(cfg.cpus.len());
        let (tx, rx) = channel();
        let mut failure = None;
        for i in 0..cfg.cpus.len() {
            let (shared, stop, cfg2, tx) = (shared.clone(), stop.clone(), cfg.clone(), tx.clone());
            match std::thread::Builder::new()
                .name(format!("udp-echo-{}", cfg.cpus[i]))
                .spawn(move || serve(i, &shared, &cfg2, &stop, tx))
            {
                Ok(h) => threads.push(h),
                Err(e) => {
                    failure = Some(ServerError::Spawn(e));
                    break;
                }
            }
        }
        // Serve only when every thread runs on its CPU.
        for _ in 0..threads.len() {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(_) => failure = failure.or(Some(ServerError::StartTimeout)),
            }
        }
        if let Some(e) = failure {
            shared.abort.store(true, Ordering::Relaxed);
            for h in threads {
                let _ = h.join();
            }
            return Err(e);
        }
        Ok(Server { shared, threads, local, cfg: cfg.clone(), started: Instant::now(), self_test: report })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The self-test's evidence, when it ran.
    pub fn self_test_report(&self) -> Option<&SelfTestReport> {
        self.self_test.as_ref()
    }

    /// Counters now (consistent per core: each thread publishes whole batches).
    pub fn snapshot(&self) -> ServerStats {
        let mut cores = Vec::new();
        let mut total = Counters::default();
        let mut ok = true;
        for (i, m) in self.shared.counters.iter().enumerate() {
            let mut c = m.lock().map(|g| g.clone()).unwrap_or_default();
            if let Ok(d) = sys::socket_drops(self.shared.fds[i].as_fd()) {
                c.rcvbuf_drops = c.rcvbuf_drops.max(u64::from(d));
            }
            ok &= c.adds_up();
            total += &c;
            cores.push(CoreStats { socket: i, cpu: self.shared.cpus[i], counters: c });
        }
        ok &= total.adds_up();
        ServerStats {
            schema: "flowsteer.udp-echo.v1",
            addr: self.local.to_string(),
            bind: self.cfg.bind,
            reply: self.cfg.reply,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            cores,
            total,
            conservation_ok: ok,
            errors: self.shared.errors.lock().map(|e| e.clone()).unwrap_or_default(),
            self_test: self.self_test.clone(),
        }
    }

    /// Wait for every thread (set the stop flag first) and return the final
    /// counters.
    pub fn join(mut self) -> ServerStats {
        for h in self.threads.drain(..) {
            if h.join().is_err() {
                if let Ok(mut e) = self.shared.errors.lock() {
                    e.push("a server thread panicked".into());
                }
            }
        }
        self.snapshot()
    }
}

fn bump(map: &mut BTreeMap<String, u64>, e: &std::io::Error, n: u64) {
    let name = e.raw_os_error().map_or_else(|| e.to_string(), sys::errno_name);
    *map.entry(name).or_default() += n;
}

/// One socket's loop: poll (bounded wait), `recvmmsg`, echo or count,
/// publish the batch's counters.
fn serve(i: usize, shared: &Shared, cfg: &ServerConfig, stop: &AtomicBool, ready: Sender<Result<(), ServerError>>) {
    let cpu = shared.cpus[i];
    let fd = shared.fds[i].as_fd();
    let fail = |msg: String| {
        if let Ok(mut e) = shared.errors.lock() {
            e.push(msg);
        }
    };
    let pinned = match sys::pin_to_cpu(cpu) {
        Err(error) => Err(ServerError::Pin { socket: i, cpu, error }),
        Ok(()) if sys::current_cpu() != Some(cpu) => Err(ServerError::Elsewhere { socket: i, cpu }),
        Ok(()) => Ok(()),
    };
    let ok = pinned.is_ok();
    let _ = ready.send(pinned);
    if !ok {
        return;
    }
    let mut batch = RecvBatch::new(cfg.batch, cfg.slot);
    let mut c = Counters::default();
    let mut echo_idx: Vec<usize> = Vec::with_capacity(cfg.batch);
    let wait_ms = cfg.poll_interval.as_millis().clamp(1, i32::MAX as u128) as i32;
    while !stop.load(Ordering::Relaxed) && !shared.abort.load(Ordering::Relaxed) {
        let mut p = [sys::poll_in(fd)];
        match sys::poll(&mut p, wait_ms) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) => {
                fail(format!("socket {i}: poll: {e}"));
                return;
            }
        }
        let n = match batch.recv(fd, cfg.batch) {
            Ok(0) => continue,
            Ok(n) => n,
            Err(e) => {
                bump(&mut c.recv_errors, &e, 1);
                publish(shared, i, &c);
                continue;
            }
        };
        c.received += n as u64;
        c.batches += 1;
        if sys::current_cpu() != Some(cpu) {
            c.cpu_mismatch += n as u64;
        }
        echo_idx.clear();
        for j in 0..n {
            let m = batch.meta(j);
            c.bytes_received += m.len as u64;
            if let Some(o) = m.overflow {
                c.rcvbuf_drops = c.rcvbuf_drops.max(u64::from(o));
            }
            if m.truncated {
                c.drop_truncated += 1;
                c.dropped += 1;
            } else {
                echo_idx.push(j);
            }
        }
        match cfg.reply {
            Reply::Sink => c.delivered += echo_idx.len() as u64,
            Reply::Echo => echo(&mut batch, fd, &echo_idx, &mut c),
        }
        publish(shared, i, &c);
    }
    publish(shared, i, &c);
}

/// Send the prepared replies, retrying briefly when the kernel is out of
/// room; every reply ends as sent (delivered) or as a send error (dropped).
fn echo(batch: &mut RecvBatch, fd: std::os::fd::BorrowedFd<'_>, which: &[usize], c: &mut Counters) {
    let k = batch.prepare_echo(which);
    let mut at = 0;
    let mut retries = 0;
    while at < k {
        match batch.send_prepared(fd, at) {
            Ok(sent) => {
                for &j in &which[at..at + sent] {
                    c.bytes_sent += batch.meta(j).len as u64;
                }
                c.sent += sent as u64;
                c.delivered += sent as u64;
                at += sent;
            }
            Err(e) => {
                let transient = matches!(e.raw_os_error(), Some(sys::EAGAIN) | Some(sys::ENOBUFS) | Some(sys::EINTR));
                if transient && retries < SEND_RETRIES {
                    retries += 1;
                    let mut p = [sys::poll_out(fd)];
                    let _ = sys::poll(&mut p, 1);
                    continue;
                }
                if transient {
                    // Out of retries: the rest of the batch is dropped.
                    let rest = (k - at) as u64;
                    bump(&mut c.send_errors, &e, rest);
                    c.drop_send_error += rest;
                    c.dropped += rest;
                    at = k;
                } else {
                    // This reply failed (e.g. ICMP error reported on the socket); go on with the next.
                    bump(&mut c.send_errors, &e, 1);
                    c.drop_send_error += 1;
                    c.dropped += 1;
                    at += 1;
                }
            }
        }
    }
}

fn publish(shared: &Shared, i: usize, c: &Counters) {
    if let Ok(mut g) = shared.counters[i].lock() {
        g.clone_from(c);
    }
}

/// The per-core table, `netstat -s -p udp` style, with a total row and the
/// send errors by errno below.
pub fn format_table(s: &ServerStats) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>11} {:>8}",
        "socket", "cpu", "received", "delivered", "sent", "dropped", "truncated", "send_err", "rcvbuf_err", "cpu_miss"
    );
    let row = |out: &mut String, sock: &str, cpu: &str, c: &Counters| {
        let _ = writeln!(
            out,
            "{:>6} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>11} {:>8}",
            sock,
            cpu,
            c.received,
            c.delivered,
            c.sent,
            c.dropped,
            c.drop_truncated,
            c.drop_send_error,
            c.rcvbuf_drops,
            c.cpu_mismatch
        );
    };
    for core in &s.cores {
        row(&mut out, &core.socket.to_string(), &core.cpu.to_string(), &core.counters);
    }
    row(&mut out, "total", "-", &s.total);
    for (name, n) in &s.total.send_errors {
        let _ = writeln!(out, "  send errors {name}: {n}");
    }
    for (name, n) in &s.total.recv_errors {
        let _ = writeln!(out, "  receive errors {name}: {n}");
    }
    let _ = writeln!(
        out,
        "  {:.2} s, {} datagrams received ({}), received = delivered + dropped: {}",
        s.elapsed_s,
        s.total.received,
        rate(s.total.received, s.elapsed_s),
        if s.conservation_ok { "ok" } else { "VIOLATED" }
    );
    out
}

fn rate(n: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "-".into();
    }
    format!("{:.1} kpps", n as f64 / secs / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_accepts_a_diagonal_and_explains_a_miss() {
        let cpus = [0, 1];
        assert!(judge_self_test(&cpus, 4, &[vec![4, 0], vec![0, 4]], BindMode::IncomingCpu).is_ok());
        let e = judge_self_test(&cpus, 4, &[vec![4, 1], vec![0, 3]], BindMode::IncomingCpu).unwrap_err().to_string();
        assert!(e.contains("SO_INCOMING_CPU did not steer: socket 0 (CPU 0) got 1 datagram(s) sent from CPU 1"), "{e}");
        assert!(e.contains("--bind cbpf"), "{e}");
        let e = judge_self_test(&cpus, 4, &[vec![4, 0], vec![0, 2]], BindMode::Cbpf).unwrap_err().to_string();
        assert_eq!(
            e,
            "self-test: socket 1 (CPU 1) got 2 of the 4 loopback datagrams sent from its CPU within 2s; \
             is lo up (`ip link set lo up`)?"
        );
        assert!(e.contains("got 2 of the 4"), "{e}");
    }

    #[test]
    fn cbpf_program_maps_cpus_to_socket_indices() {
        // Identity: the two-instruction program.
        let p = cbpf_program(&[0, 1, 2]);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].k, (-0x1000i32 + 36) as u32);
        // Sparse CPUs: a compare chain, then an out-of-range index.
        let p = cbpf_program(&[3, 1]);
        assert_eq!(p.len(), 1 + 4 + 1);
        assert_eq!((p[1].k, p[2].k), (3, 0));
        assert_eq!((p[3].k, p[4].k), (1, 1));
        assert_eq!(p[5].k, u32::MAX);
    }

    #[test]
    fn counters_add_up_by_construction() {
        let mut c = Counters {
            received: 10,
            delivered: 7,
            dropped: 3,
            drop_truncated: 1,
            drop_send_error: 2,
            ..Default::default()
        };
        assert!(c.adds_up());
        c.delivered = 8;
        assert!(!c.adds_up());
    }
}
