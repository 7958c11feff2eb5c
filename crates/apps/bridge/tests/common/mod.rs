//! Helpers shared by the bridge's tests (each file says `mod common;`):
//! starting a bridge in a [`Star`]'s hub, kernel UDP flows with sequence
//! numbers received on sockets that report their overflow drops
//! (`SO_RXQ_OVFL`), raw frames from a host, the counters' sums, and the
//! metrics text as a map.
#![allow(dead_code)] // each test file uses its own share

use flowsteer_bridge::api::{BridgeStats, PortStats};
use flowsteer_bridge::{Bridge, BridgeConfig, Control, FdbRow, PortKind, PortSpec, Request, Response};
use flowsteer_netns::{skip_reason, NetnsError, Star};
use nix::sys::socket::{self, sockopt, ControlMessageOwned, MsgFlags};
use prometheus_parse::{Scrape, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::IoSliceMut;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Held for its whole run by each live test of a test binary that bridges
/// traffic: they run one at a time. On a machine of two CPUs, two or three
/// bridges with their senders and receivers at once leave each worker a
/// third of a CPU, in slices far apart enough to overflow its receive
/// rings; one at a time, the figures each test checks (lossless, in order,
/// counters adding up) are those of one bridge. Tests of different
/// binaries never overlap (`cargo test` runs binaries one after another).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// True (and "skipped: why" printed) when live tests cannot run here.
pub fn skip() -> bool {
    match skip_reason() {
        Some(why) => {
            println!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Why `ethtool` (Debian's package; `.ci/run` installs it) cannot be
/// run here, or `None`.
pub fn no_ethtool() -> Option<String> {
    match std::process::Command::new("ethtool").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("ethtool is not installed (apt-get install ethtool)".into()),
    }
}

/// True (and "skipped: why" printed) when live tests cannot run here or
/// `ethtool` is missing.
pub fn skip_without_ethtool() -> bool {
    if skip() {
        return true;
    }
    match no_ethtool() {
        Some(why) => {
            println!("skipped: {why}");
            true
        }
        None => false,
    }
}

/// Runs a command and asserts it succeeded.
pub fn sh(args: &[&str]) {
    let out = std::process::Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `ethtool -K` on host i's veth, in its namespace (`features`: `gro on`, ...).
pub fn host_ethtool(star: &Star, i: usize, features: &[&str]) {
    let dev = star.host_dev(i);
    let mut args = vec!["ip", "netns", "exec", star.host_ns(i), "ethtool", "-K", &dev];
    args.extend_from_slice(features);
    sh(&args);
}

/// Starts a bridge over the hub-side veths of hosts 1..=n, in the hub.
pub fn start(star: &Star, kind: PortKind, n: usize, tweak: impl FnOnce(&mut BridgeConfig)) -> Bridge {
    let mut cfg = BridgeConfig {
        ports: (1..=n).map(|i| PortSpec { kind, iface: star.hub_dev(i).to_string() }).collect(),
        ..BridgeConfig::default()
    };
    tweak(&mut cfg);
    star.run_in(0, move || Bridge::start(cfg)).expect("enter hub").expect("bridge starts")
}

/// One ICMP echo from host `from` to host `to` answered (5 s at most).
pub fn ping(star: &Star, from: usize, to: usize) -> bool {
    let addr = star.v4(to).into();
    star.run_in(from, move || flowsteer_netns::ping(addr, Duration::from_secs(5))).unwrap().unwrap()
}

/// The MAC table through a control handle.
pub fn fdb(ctl: &dyn Control) -> Vec<FdbRow> {
    match ctl.request(Request::FdbShow) {
        Response::Fdb { entries } => entries,
        other => panic!("{other:?}"),
    }
}

/// Sends `req` and expects `Response::Ok`; returns its detail.
pub fn ok(ctl: &dyn Control, req: Request) -> String {
    match ctl.request(req.clone()) {
        Response::Ok { detail } => detail,
        other => panic!("{req:?}: {other:?}"),
    }
}

/// The counters through a control handle.
pub fn stats(ctl: &dyn Control) -> BridgeStats {
    match ctl.request(Request::Stats) {
        Response::Stats { stats } => *stats,
        other => panic!("{other:?}"),
    }
}

/// The counters once `ready` holds of them, or after 2 s (then as they
/// are): the workers copy their sockets' kernel drop counts only every
/// 100 ms, so frames just received may not be in the sums yet.
pub fn stats_when(ctl: &dyn Control, ready: impl Fn(&BridgeStats) -> bool) -> BridgeStats {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let s = stats(ctl);
        if ready(&s) || Instant::now() >= deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The row of `name` (the member one when the port was removed and added back).
pub fn port<'a>(s: &'a BridgeStats, name: &str) -> &'a PortStats {
    s.ports.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no port {name}: {s:?}"))
}

/// Every row's sum holds, and the runtime says so.
pub fn assert_conserved(s: &BridgeStats) {
    assert!(s.conservation_ok, "{}", s.conservation);
    for p in &s.ports {
        assert_eq!(p.received, p.fast_forwarded + p.forwarded + p.flooded + p.dropped.values().sum::<u64>(), "{p:?}");
    }
    for w in &s.workers {
        assert_eq!(w.received, w.forwarded + w.flooded + w.dropped.values().sum::<u64>(), "{w:?}");
    }
}

/// Whether the hub-side veth of host i has an XDP program.
pub fn xdp_attached(star: &Star, i: usize) -> bool {
    let out = std::process::Command::new("ip")
        .args(["-n", star.hub_ns(), "link", "show", "dev", star.hub_dev(i)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}

/// What a receiving socket got: the sequence numbers in arrival order, and
/// the socket's own overflow count (`SO_RXQ_OVFL`): datagrams the kernel
/// dropped at this socket, which are not the bridge's loss.
#[derive(Debug)]
pub struct Received {
    pub seqs: Vec<u32>,
    pub overflow: u32,
}

impl Received {
    /// As [`assert_complete_in_order`](Self::assert_complete_in_order),
    /// with the bridge's counters in the message when it fails.
    pub fn assert_complete_with(&self, count: u32, what: &str, ctl: &dyn Control) {
        if self.overflow != 0 || self.seqs.len() as u32 != count {
            println!("{what}: bridge counters: {:#?}", stats(ctl));
        }
        self.assert_complete_in_order(count, what);
    }

    /// All `count` arrived, in order, and the socket dropped none.
    pub fn assert_complete_in_order(&self, count: u32, what: &str) {
        assert_eq!(self.overflow, 0, "{what}: the receiving socket overflowed (not the bridge's loss)");
        assert_eq!(
            self.seqs.len() as u32,
            count,
            "{what}: lost {}",
            count as usize - self.seqs.len().min(count as usize)
        );
        if let Some(i) = self.seqs.iter().enumerate().position(|(i, s)| *s != i as u32) {
            panic!("{what}: out of order at {i}: {:?}", &self.seqs[i..(i + 5).min(self.seqs.len())]);
        }
    }
}

/// A sequenced UDP flow under way: a paced sender in one host, a receiver
/// in another.
pub struct Flow {
    rx: JoinHandle<Result<Received, NetnsError>>,
    tx: JoinHandle<Result<(), NetnsError>>,
}

impl Flow {
    /// Waits for the sender to finish and the receiver to have everything
    /// (or 3 s of silence).
    pub fn wait(self) -> Received {
        self.tx.join().unwrap().unwrap();
        self.rx.join().unwrap().unwrap()
    }
}

/// Starts `count` datagrams with sequence numbers from host `from` to
/// host `to`'s UDP `port`, about `rate` per second, once the receiver is
/// bound; returns at once.
pub fn udp_flow(star: &Star, from: usize, to: usize, port: u16, count: u32, rate: u32) -> Flow {
    udp_flow_to(star, from, to, star.v4(to).into(), port, count, rate, 32)
}

/// As [`udp_flow`], to host `to`'s address `addr` (IPv4 or IPv6), with
/// datagrams of `len` bytes (at least 4: the sequence number).
#[allow(clippy::too_many_arguments)]
pub fn udp_flow_to(
    star: &Star,
    from: usize,
    to: usize,
    addr: IpAddr,
    port: u16,
    count: u32,
    rate: u32,
    len: usize,
) -> Flow {
    let dst = SocketAddr::new(addr, port);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let rx = star.spawn_in(to, move || {
        let sock = UdpSocket::bind(dst).unwrap();
        socket::setsockopt(&sock, sockopt::RxqOvfl, &1).unwrap();
        // Room for a whole second of the flow: a receiver thread that waits
        // for a CPU does not overflow.
        socket::setsockopt(&sock, sockopt::RcvBufForce, &(8 << 20)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        ready_tx.send(()).unwrap();
        let mut got = Received { seqs: Vec::with_capacity(count as usize), overflow: 0 };
        let mut buf = vec![0u8; 65_536];
        let mut space = nix::cmsg_space!(u32);
        while (got.seqs.len() as u32) < count {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let Ok(msg) = socket::recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::empty()) else {
                break;
            };
            let n = msg.bytes;
            for c in msg.cmsgs().unwrap() {
                if let ControlMessageOwned::RxqOvfl(d) = c {
                    got.overflow = d;
                }
            }
            if n >= 4 {
                got.seqs.push(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
            }
        }
        got
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let tx = star.spawn_in(from, move || {
        let sock = UdpSocket::bind(if dst.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).unwrap();
        let start = Instant::now();
        let mut payload: Vec<u8> = (0..len.max(4)).map(|i| i as u8).collect();
        for seq in 0..count {
            payload[..4].copy_from_slice(&seq.to_be_bytes());
            pace(start, u64::from(seq), rate);
            sock.send_to(&payload, dst).unwrap();
        }
    });
    Flow { rx, tx }
}

/// What one direction of a TCP transfer saw: bytes and a digest of them
/// at each end.
#[derive(Debug, PartialEq, Eq)]
pub struct Transfer {
    pub sent: (u64, u64),
    pub received: (u64, u64),
}

/// FNV-1a, 64 bits, continued from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Starts a TCP transfer of `bytes` pseudo-random bytes from host `from` to
/// host `to` at `addr:port`, each end digesting what it wrote or read;
/// joined within `limit` (the receiver's read times out after it).
pub fn tcp_transfer(
    star: &Star,
    from: usize,
    to: usize,
    addr: IpAddr,
    port: u16,
    bytes: u64,
    limit: Duration,
) -> JoinHandle<Transfer> {
    use std::io::{Read, Write};
    let dst = SocketAddr::new(addr, port);
    let listener = star.run_in(to, move || std::net::TcpListener::bind(dst).unwrap()).unwrap();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(limit)).unwrap();
        let (mut n, mut h) = (0u64, 0xcbf2_9ce4_8422_2325u64);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    n += k as u64;
                    h = fnv(h, &buf[..k]);
                }
                Err(e) => panic!("receiving {dst}: {e} after {n} bytes"),
            }
        }
        (n, h)
    });
    let tx = star.spawn_in(from, move || {
        let mut s = std::net::TcpStream::connect_timeout(&dst, Duration::from_secs(5)).unwrap();
        s.set_write_timeout(Some(limit)).unwrap();
        let (mut n, mut h, mut x) = (0u64, 0xcbf2_9ce4_8422_2325u64, 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(port));
        let mut buf = vec![0u8; 1 << 16];
        while n < bytes {
            let k = (bytes - n).min(buf.len() as u64) as usize;
            for c in buf[..k].chunks_mut(8) {
                // xorshift64: a payload no offload can shortcut.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
            }
            s.write_all(&buf[..k]).unwrap();
            h = fnv(h, &buf[..k]);
            n += k as u64;
        }
        (n, h)
    });
    std::thread::spawn(move || Transfer { sent: tx.join().unwrap().unwrap(), received: rx.join().unwrap() })
}

/// Waits until item `n` of a paced sequence is due (n / rate seconds after `start`).
pub fn pace(start: Instant, n: u64, rate: u32) {
    let due = Duration::from_secs_f64(n as f64 / f64::from(rate));
    while start.elapsed() < due {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// `count` datagrams from `from` to `to`, waited for.
pub fn udp_sequence(star: &Star, from: usize, to: usize, count: u32, rate: u32) -> Received {
    udp_flow(star, from, to, 40_000, count, rate).wait()
}

/// A locally administered unicast MAC, distinct for each `i` < 2^40 and
/// scattered over the address space (an odd multiplier mod 2^40 is a bijection).
pub fn random_mac(salt: u8, i: u64) -> [u8; 6] {
    let x = i.wrapping_mul(0x9e37_79b9_7f4b) & ((1 << 40) - 1);
    let b = x.to_be_bytes();
    [0x02 | (salt << 2), b[3], b[4], b[5], b[6], b[7]]
}

/// Starts sending `count` Ethernet frames (ethertype 0x88b5, local
/// experimental) from host `from`'s veth with source MAC `src(i)` and
/// destination `dst`, about `rate` per second, through an AF_PACKET
/// socket in that host; returns how many the kernel took when joined.
pub fn raw_frames(
    star: &Star,
    from: usize,
    dst: [u8; 6],
    count: u64,
    rate: u32,
    src: impl Fn(u64) -> [u8; 6] + Send + 'static,
) -> JoinHandle<Result<usize, NetnsError>> {
    raw_frames_tagged(star, from, dst, None, count, rate, src)
}

/// As [`raw_frames`], with an 802.1Q tag of VLAN `vid` when given.
pub fn raw_frames_tagged(
    star: &Star,
    from: usize,
    dst: [u8; 6],
    vid: Option<u16>,
    count: u64,
    rate: u32,
    src: impl Fn(u64) -> [u8; 6] + Send + 'static,
) -> JoinHandle<Result<usize, NetnsError>> {
    let dev = star.host_dev(from);
    star.spawn_in(from, move || {
        let mut tx = flowsteer_afpacket::TxSocket::open(&dev, &Default::default()).unwrap();
        let start = Instant::now();
        let mut sent = 0;
        let mut i = 0;
        while i < count {
            let n = 32.min(count - i);
            pace(start, i, rate);
            let frames: Vec<Vec<u8>> = (i..i + n)
                .map(|k| {
                    let mut f = Vec::with_capacity(64);
                    f.extend_from_slice(&dst);
                    f.extend_from_slice(&src(k));
                    if let Some(v) = vid {
                        f.extend_from_slice(&[0x81, 0x00]);
                        f.extend_from_slice(&v.to_be_bytes());
                    }
                    f.extend_from_slice(&0x88b5u16.to_be_bytes());
                    f.extend_from_slice(&k.to_be_bytes());
                    f.resize(f.len() + 38, 0);
                    f
                })
                .collect();
            sent += tx.send_batch(&frames);
            i += n;
        }
        sent
    })
}

/// A field of /proc/self/status in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Resets the process's peak resident size (`VmHWM`) to the current one.
pub fn reset_hwm() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// A metrics sample: family name and label set.
pub type Key = (String, BTreeSet<(String, String)>);

/// The key of family `flowsteer_bridge_<name>` with `labels`.
pub fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    (format!("flowsteer_bridge_{name}"), labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// What the metrics text must hold for `s` (its port names each once):
/// every field, computed here from the struct.
pub fn expected(s: &BridgeStats) -> BTreeMap<Key, f64> {
    let mut m = BTreeMap::new();
    m.insert(key("info", &[("schema", &s.schema)]), 1.0);
    m.insert(key("uptime_seconds", &[]), s.uptime_s);
    m.insert(key("conservation_ok", &[]), if s.conservation_ok { 1.0 } else { 0.0 });
    for p in &s.ports {
        let l = [("port", p.name.as_str())];
        m.insert(key("port_info", &[("port", &p.name), ("kind", &p.kind)]), 1.0);
        let path = flowsteer_bridge::metrics::fast_path_label(&p.fast_path);
        m.insert(key("port_fast_path", &[("port", &p.name), ("path", path)]), 1.0);
        m.insert(key("port_fast_forwarded_total", &l), p.fast_forwarded as f64);
        m.insert(key("port_member", &l), f64::from(u8::from(p.member)));
        m.insert(key("port_up", &l), f64::from(u8::from(p.up)));
        m.insert(key("port_forwarding", &l), f64::from(u8::from(p.state == "forwarding")));
        m.insert(key("port_learned_entries", &l), p.learned_entries as f64);
        m.insert(key("port_received_total", &l), p.received as f64);
        m.insert(key("port_forwarded_total", &l), p.forwarded as f64);
        m.insert(key("port_flooded_total", &l), p.flooded as f64);
        m.insert(key("port_transmitted_total", &l), p.transmitted as f64);
        m.insert(key("port_tx_padded_total", &l), p.tx_padded as f64);
        if let Some(mode) = &p.xdp_mode {
            m.insert(key("port_xdp_mode", &[("port", &p.name), ("mode", mode)]), 1.0);
        }
        for (name, v) in [
            ("port_interface_rx_packets_total", p.if_rx_packets),
            ("port_interface_rx_dropped_total", p.if_rx_dropped),
            ("port_peer_tx_dropped_total", p.peer_tx_dropped),
        ] {
            if let Some(v) = v {
                m.insert(key(name, &l), v as f64);
            }
        }
        for (r, n) in &p.dropped {
            m.insert(key("port_dropped_total", &[("port", &p.name), ("reason", r)]), *n as f64);
        }
        for (r, n) in &p.tx_dropped {
            m.insert(key("port_tx_dropped_total", &[("port", &p.name), ("reason", r)]), *n as f64);
        }
    }
    for w in &s.workers {
        let i = w.worker.to_string();
        let l = [("worker", i.as_str())];
        if let Some(cpu) = w.cpu {
            m.insert(key("worker_cpu", &l), f64::from(cpu));
        }
        m.insert(key("worker_received_total", &l), w.received as f64);
        m.insert(key("worker_forwarded_total", &l), w.forwarded as f64);
        m.insert(key("worker_flooded_total", &l), w.flooded as f64);
        m.insert(key("worker_rx_copied_total", &l), w.rx_copied as f64);
        m.insert(key("worker_csum_completed_total", &l), w.csum_completed as f64);
        m.insert(key("worker_gso_segmented_total", &l), w.gso_segmented as f64);
        for (r, n) in &w.dropped {
            m.insert(key("worker_dropped_total", &[("worker", &i), ("reason", r)]), *n as f64);
        }
    }
    let f = &s.fdb;
    for (name, v) in [
        ("fdb_entries", f.entries),
        ("fdb_learned_entries", f.learned_entries),
        ("fdb_static_entries", f.static_entries),
        ("fdb_max_learned", f.max_learned),
        ("fdb_learned_total", f.learned),
        ("fdb_refreshed_total", f.refreshed),
        ("fdb_moved_total", f.moved),
        ("fdb_not_learned_full_total", f.not_learned_full),
        ("fdb_events_dropped_total", f.events_dropped),
        ("fdb_events_suppressed_total", f.events_suppressed),
        ("fdb_aged_total", f.aged),
        ("fdb_flushed_total", f.flushed),
    ] {
        m.insert(key(name, &[]), v as f64);
    }
    m
}

/// The metrics text parsed by a Prometheus text parser.
pub fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// Every sample of a scrape as key -> value; panics on a sample seen twice
/// or one neither counter nor gauge.
pub fn samples(scrape: &Scrape) -> BTreeMap<Key, f64> {
    let mut got = BTreeMap::new();
    for sample in &scrape.samples {
        let labels = sample.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let v = match sample.value {
            Value::Counter(v) | Value::Gauge(v) => v,
            ref other => panic!("{}: untyped or other {other:?}", sample.metric),
        };
        let k: Key = (sample.metric.clone(), labels);
        assert!(got.insert(k.clone(), v).is_none(), "{k:?} twice");
    }
    got
}

/// A ring of its own on host `i`'s veth that calls `each` with every frame
/// the host receives (not the ones it sends: `PACKET_OUTGOING`), until
/// stopped or dropped.
pub struct Sniffer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<JoinHandle<Result<(), NetnsError>>>,
}

impl Sniffer {
    pub fn start(
        star: &Star,
        i: usize,
        mut each: impl FnMut(&[u8], &flowsteer_afpacket::RxMeta) + Send + 'static,
    ) -> Sniffer {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let (stop, ready) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (st, re) = (stop.clone(), ready.clone());
        let dev = star.host_dev(i);
        let handle = star.spawn_in(i, move || {
            let cfg = flowsteer_afpacket::RxConfig {
                block_size: 1 << 16,
                block_count: 64,
                retire_blk_tov_ms: 1,
                ..Default::default()
            };
            let mut ring = flowsteer_afpacket::RxRing::open(&dev, &cfg).expect("sniffer ring");
            re.store(true, Ordering::Release);
            while !st.load(Ordering::Relaxed) {
                let n = ring.poll_burst(64, &mut |f: &[u8], meta| {
                    if meta.packet_type != 4 {
                        each(f, meta);
                    }
                });
                if n == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        while !ready.load(Ordering::Acquire) {
            assert!(!handle.is_finished(), "the sniffer ring of host {i} did not open");
            std::thread::sleep(Duration::from_millis(1));
        }
        Sniffer { stop, handle: Some(handle) }
    }

    /// Stops after `settle` (for frames still on their way).
    pub fn stop(mut self, settle: Duration) {
        std::thread::sleep(settle);
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Sniffer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Counts the frames host `i` receives from source MAC `src`, of
/// `ethertype` when given (behind the tag of a tagged frame, whose tag the
/// kernel keeps apart): a count of one sender's frames that the kernel's
/// own traffic on the link (IPv6 neighbour discovery and MLD, which flood
/// in a VLAN at times of their choosing) does not disturb, where the
/// interface's rx_packets would.
pub struct FramesFrom {
    seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
    sniffer: Sniffer,
}

impl FramesFrom {
    pub fn start(star: &Star, i: usize, src: [u8; 6], ethertype: Option<u16>) -> FramesFrom {
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let se = seen.clone();
        let sniffer = Sniffer::start(star, i, move |f, _| {
            let kind = f.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
            if f.get(6..12) == Some(&src[..]) && ethertype.is_none_or(|e| kind == Some(e)) {
                se.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        FramesFrom { seen, sniffer }
    }

    /// Frames counted so far.
    pub fn count(&self) -> u64 {
        self.seen.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops counting after `settle` and returns the count.
    pub fn stop(self, settle: Duration) -> u64 {
        self.sniffer.stop(settle);
        self.seen.load(std::sync::atomic::Ordering::Relaxed)
    }
}
