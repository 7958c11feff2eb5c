//! A throw-away lab: two network namespaces joined by a veth pair, with
//! addresses, static neighbours (no ARP/ND needed, which matters once an
//! XDP program owns a queue) and a chosen number of queues. Names are
//! unique per process and per lab, so tests can run in parallel; everything
//! is removed when the [`Lab`] is dropped, also when a test panics.
//!
//! Code runs inside a namespace on a thread of its own ([`Lab::spawn_in`],
//! [`Lab::run_in`]): `setns(2)` changes the calling thread's namespace only,
//! and sockets keep the namespace they were created in.
//!
//! Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and the `ip` command;
//! [`skip_reason`] says why a live test cannot run here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod error;
mod sys;

pub use error::NetnsError;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The effective user is root.
pub fn is_root() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .is_some_and(|uid| uid == "0")
}

/// Why a live test cannot run on this machine, or `None` when it can.
pub fn skip_reason() -> Option<String> {
    if !is_root() {
        return Some("not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)".into());
    }
    let ok = Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !ok.is_ok_and(|s| s.success()) {
        return Some("the `ip` command (iproute2) is not installed".into());
    }
    None
}

/// Runs `ip ARGS`; the error carries the command and its stderr.
pub fn ip(args: &[&str]) -> Result<(), NetnsError> {
    let out =
        Command::new("ip").args(args).output().map_err(|error| NetnsError::IpSpawn { args: args.join(" "), error })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError::IpFailed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Pings `to` from the calling thread's namespace (ICMP or ICMPv6 echo over
/// a raw socket, so root, no `ping` binary): one request every 100 ms until
/// a reply with our identifier comes back (true) or `timeout` passes (false).
pub fn ping(to: IpAddr, timeout: Duration) -> std::io::Result<bool> {
    let sock = sys::raw_icmp_socket(to.is_ipv6())?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let id = (std::process::id() as u16) ^ (COUNTER.fetch_add(1, Ordering::Relaxed) as u16).rotate_left(8);
    let (request, reply) = if to.is_ipv6() { (128u8, 129u8) } else { (8, 0) };
    let end = Instant::now() + timeout;
    let mut seq = 0u16;
    let mut buf = [0u8; 1500];
    while Instant::now() < end {
        seq = seq.wrapping_add(1);
        let mut msg = vec![request, 0, 0, 0];
        msg.extend_from_slice(&id.to_be_bytes());
        msg.extend_from_slice(&seq.to_be_bytes());
        msg.extend_from_slice(b"flowsteer lab ping");
        if to.is_ipv4() {
            // ICMPv6 checksums are the kernel's; ICMP ones are ours.
            let sum = internet_checksum(&msg);
            msg[2..4].copy_from_slice(&sum.to_be_bytes());
        }
        sock.send_to(&msg, SocketAddr::new(to, 0))?;
        let wait = Instant::now() + Duration::from_millis(100);
        while Instant::now() < wait {
            let Ok((n, from)) = sock.recv_from(&mut buf) else { break };
            // IPv4 raw sockets hand over the IP header too.
            let at = if to.is_ipv4() { usize::from(buf[0] & 0x0f) * 4 } else { 0 };
            let icmp = &buf[at.min(n)..n];
            if from.ip() == to && icmp.len() >= 8 && icmp[0] == reply && icmp[4..6] == id.to_be_bytes() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Moves the calling thread into the named namespace (`/run/netns/NAME`).
pub fn enter(ns: &str) -> Result<(), NetnsError> {
    sys::setns_by_name(ns)
}

/// Spawns a thread that enters namespace `ns`, then runs `f`. The closure
/// runs only after the thread entered the namespace; a failure to enter
/// is returned by `join` as `Err`.
pub fn spawn_in_ns<F, R>(ns: &str, f: F) -> std::thread::JoinHandle<Result<R, NetnsError>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns)?;
        Ok(f())
    })
}

/// Runs `f` inside namespace `ns` (on a fresh thread) and waits.
pub fn run_in_ns<F, R>(ns: &str, f: F) -> Result<R, NetnsError>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    spawn_in_ns(ns, f).join().map_err(|_| NetnsError::Panicked)?
}

/// Shape of a lab.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// Receive and transmit queues on each veth end (veth allows up to 4096 here; 1 = default veth).
    pub queues: u16,
    /// MTU of both ends.
    pub mtu: u32,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig { queues: 1, mtu: 1500 }
    }
}

/// One side of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    fn host(self) -> u8 {
        match self {
            Side::A => 1,
            Side::B => 2,
        }
    }

    fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Two namespaces, a veth pair between them, addresses and static neighbours.
#[derive(Debug)]
pub struct Lab {
    ns: [String; 2],
    dev: [String; 2],
    k: u32,
    created: bool,
}

impl Lab {
    /// Creates the lab. `tag` (a few letters) appears in every name, so a
    /// leftover after a crash tells which test made it.
    pub fn new(tag: &str, cfg: &LabConfig) -> Result<Lab, NetnsError> {
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let k = (pid.wrapping_mul(31).wrapping_add(n.wrapping_mul(7))) % 250 + 1;
        let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric()).take(4).collect();
        // Interface names: at most 15 bytes.
        let id = format!("{}{}", pid % 100_000, n % 100);
        let mut lab = Lab {
            ns: [format!("fs-{tag}-a-{pid}-{n}"), format!("fs-{tag}-b-{pid}-{n}")],
            dev: [format!("{tag}a{id}"), format!("{tag}b{id}")],
            k,
            created: false,
        };
        for d in &mut lab.dev {
            d.truncate(15);
        }
        lab.setup(cfg)?;
        Ok(lab)
    }

    fn idx(side: Side) -> usize {
        match side {
            Side::A => 0,
            Side::B => 1,
        }
    }

    /// Namespace name of a side.
    pub fn ns(&self, side: Side) -> &str {
        &self.ns[Lab::idx(side)]
    }

    /// Interface name of a side (inside its namespace).
    pub fn dev(&self, side: Side) -> &str {
        &self.dev[Lab::idx(side)]
    }

    /// MAC address of a side (locally administered, unique per lab).
    pub fn mac(&self, side: Side) -> [u8; 6] {
        [0x02, 0x00, 0xc9, (self.k >> 8) as u8, self.k as u8, side.host()]
    }

    /// IPv4 address of a side (10.201.K.1 / .2, a /24).
    pub fn v4(&self, side: Side) -> Ipv4Addr {
        Ipv4Addr::new(10, 201, self.k as u8, side.host())
    }

    /// IPv6 address of a side (fd00:201:K::1 / ::2, a /64).
    pub fn v6(&self, side: Side) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0x201, self.k as u16, 0, 0, 0, 0, u16::from(side.host()))
    }

    fn mac_text(&self, side: Side) -> String {
        let m = self.mac(side);
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }

    fn setup(&mut self, cfg: &LabConfig) -> Result<(), NetnsError> {
        let [ns_a, ns_b] = self.ns.clone();
        let [dev_a, dev_b] = self.dev.clone();
        let q = cfg.queues.max(1).to_string();
        let mtu = cfg.mtu.to_string();
        ip(&["netns", "add", &ns_a])?;
        self.created = true;
        ip(&["netns", "add", &ns_b])?;
        let (mac_a, mac_b) = (self.mac_text(Side::A), self.mac_text(Side::B));
        ip(&[
            "link",
            "add",
            &dev_a,
            "address",
            &mac_a,
            "mtu",
            &mtu,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &dev_b,
            "address",
            &mac_b,
            "mtu",
            &mtu,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ])?;
        ip(&["link", "set", &dev_a, "netns", &ns_a])?;
        ip(&["link", "set", &dev_b, "netns", &ns_b])?;
        for side in [Side::A, Side::B] {
            let (ns, dev) = (self.ns(side).to_string(), self.dev(side).to_string());
            let peer = side.peer();
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", self.v4(side)), "dev", &dev])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/64", self.v6(side)), "dev", &dev, "nodad"])?;
            ip(&["-n", &ns, "link", "set", &dev, "up"])?;
            let lladdr = self.mac_text(peer);
            for addr in [self.v4(peer).to_string(), self.v6(peer).to_string()] {
                ip(&["-n", &ns, "neigh", "replace", &addr, "lladdr", &lladdr, "dev", &dev, "nud", "permanent"])?;
            }
        }
        Ok(())
    }

    /// Runs `ip -n NS ARGS` on a side.
    pub fn ip_in(&self, side: Side, args: &[&str]) -> Result<(), NetnsError> {
        let mut all = vec!["-n", self.ns(side)];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Interface index of a side's veth, read inside its namespace.
    pub fn ifindex(&self, side: Side) -> Result<u32, NetnsError> {
        let dev = self.dev(side).to_string();
        self.run_in(side, move || sys::ifindex(&dev))?
    }

    /// Spawns a thread inside a side's namespace and returns its handle.
    /// The closure runs only after the thread entered the namespace; a
    /// failure to enter is returned by `join` as `Err`.
    pub fn spawn_in<F, R>(&self, side: Side, f: F) -> std::thread::JoinHandle<Result<R, NetnsError>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        spawn_in_ns(self.ns(side), f)
    }

    /// Runs a closure inside a side's namespace (on a fresh thread) and waits.
    pub fn run_in<F, R>(&self, side: Side, f: F) -> Result<R, NetnsError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        run_in_ns(self.ns(side), f)
    }

    /// Pings `to` from inside a side's namespace (see [`ping`]).
    pub fn ping(&self, from: Side, to: IpAddr, timeout: Duration) -> std::io::Result<bool> {
        self.run_in(from, move || ping(to, timeout)).map_err(std::io::Error::other)?
    }

    /// Removes everything now (also done on drop); errors are ignored.
    pub fn remove(&mut self) {
        if !self.created {
            return;
        }
        self.created = false;
        let quiet = |args: &[&str]| {
            let _ = Command::new("ip").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status();
        };
        // Deleting a namespace destroys its veth end and with it the pair.
        quiet(&["-n", &self.ns[0], "link", "del", &self.dev[0]]);
        quiet(&["netns", "del", &self.ns[0]]);
        quiet(&["netns", "del", &self.ns[1]]);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.remove();
    }
}

// A star: one hub namespace and N host namespaces, host i joined to the
// hub by a veth pair (`h<i>` on the host, with 10.K.0.i/24 and a fixed
// MAC; a unique name without address on the hub). By default IPv6 is
// disabled in every namespace of the star, so no neighbour discovery,
// router solicitation or MLD frame crosses the hub unasked; with
// [`Star::with_ipv6`] each host also has fd00:K::i/64 (no duplicate
// address detection) and resolves IPv6 neighbours with neighbour
// discovery. IPv4 neighbours are resolved with ARP (nothing static). The
// veths keep the kernel's default offloads (transmit checksum offload,
// TSO/GSO), as a container runtime leaves them: a host's TCP and UDP
// frames carry partial checksums and may be 64 KB GSO segments. For a
// bridge (or anything else) run inside the hub over the hub-side veths.
// Everything is removed on drop, also when a test panics.

/// A hub namespace and `n` host namespaces around it.
#[derive(Debug)]
pub struct Star {
    hub: String,
    hosts: Vec<String>,
    hub_devs: Vec<String>,
    k: u8,
    ipv6: bool,
    created: bool,
}

impl Star {
    /// Creates a star of `n` hosts (1..=200). `tag` (a few letters) appears
    /// in every name.
    pub fn new(tag: &str, n: usize) -> Result<Star, NetnsError> {
        Star::build(tag, n, false)
    }

    /// As [`Star::new`], with IPv6 on: host i also has [`Star::v6`]`(i)`.
    pub fn with_ipv6(tag: &str, n: usize) -> Result<Star, NetnsError> {
        Star::build(tag, n, true)
    }

    fn build(tag: &str, n: usize, ipv6: bool) -> Result<Star, NetnsError> {
        let pid = std::process::id();
        let c = COUNTER.fetch_add(1, Ordering::Relaxed);
        let k = ((pid.wrapping_mul(31).wrapping_add(c.wrapping_mul(7))) % 250 + 1) as u8;
        let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric()).take(4).collect();
        let id = format!("{}{}", pid % 100_000, c % 100);
        let mut star = Star {
            hub: format!("fs-{tag}-hub-{pid}-{c}"),
            hosts: (1..=n).map(|i| format!("fs-{tag}-h{i}-{pid}-{c}")).collect(),
            hub_devs: (1..=n)
                .map(|i| {
                    let mut d = format!("{tag}{id}p{i}");
                    if d.len() > 15 {
                        d = format!("s{}p{i}", &id[id.len().saturating_sub(15 - 2 - i.to_string().len())..]);
                    }
                    d
                })
                .collect(),
            k,
            ipv6,
            created: false,
        };
        star.setup()?;
        Ok(star)
    }

    /// The hub's namespace.
    pub fn hub_ns(&self) -> &str {
        &self.hub
    }

    /// Host i's namespace (1-based).
    pub fn host_ns(&self, i: usize) -> &str {
        &self.hosts[i - 1]
    }

    /// The hub-side veth of host i (1-based).
    pub fn hub_dev(&self, i: usize) -> &str {
        &self.hub_devs[i - 1]
    }

    /// Host i's veth name (in its namespace): `h<i>`.
    pub fn host_dev(&self, i: usize) -> String {
        format!("h{i}")
    }

    /// Host i's address: 10.K.0.i.
    pub fn v4(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.k, 0, i as u8)
    }

    /// Host i's IPv6 address: fd00:K::i (only with [`Star::with_ipv6`]).
    pub fn v6(&self, i: usize) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, u16::from(self.k), 0, 0, 0, 0, 0, i as u16)
    }

    /// Host i's MAC: 02:00:ca:K:00:i.
    pub fn mac(&self, i: usize) -> [u8; 6] {
        [0x02, 0x00, 0xca, self.k, 0x00, i as u8]
    }

    /// Host i's MAC as text.
    pub fn mac_text(&self, i: usize) -> String {
        let m = self.mac(i);
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }

    fn setup(&mut self) -> Result<(), NetnsError> {
        ip(&["netns", "add", &self.hub])?;
        self.created = true;
        for h in &self.hosts {
            ip(&["netns", "add", h])?;
        }
        for ns in std::iter::once(&self.hub).chain(&self.hosts) {
            // The hub never speaks IPv6 itself, also when its hosts do.
            if !self.ipv6 || *ns == self.hub {
                no_ipv6(ns)?;
            }
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        for i in 1..=self.hosts.len() {
            let (host, hub) = (self.hosts[i - 1].clone(), self.hub.clone());
            let dev = self.host_dev(i);
            let hub_dev = self.hub_devs[i - 1].clone();
            let mac = self.mac_text(i);
            let hub_mac = format!("02:00:cb:{:02x}:00:{:02x}", self.k, i);
            ip(&[
                "link", "add", "name", &dev, "netns", &host, "address", &mac, "type", "veth", "peer", "name", &hub_dev,
                "netns", &hub, "address", &hub_mac,
            ])?;
            ip(&["-n", &host, "addr", "add", &format!("{}/24", self.v4(i)), "dev", &dev])?;
            if self.ipv6 {
                ip(&["-n", &host, "addr", "add", &format!("{}/64", self.v6(i)), "dev", &dev, "nodad"])?;
            }
            ip(&["-n", &host, "link", "set", &dev, "up"])?;
            ip(&["-n", &hub, "link", "set", &hub_dev, "up"])?;
        }
        Ok(())
    }

    /// Spawns a thread inside host i's namespace (0: the hub).
    pub fn spawn_in<F, R>(&self, i: usize, f: F) -> std::thread::JoinHandle<Result<R, NetnsError>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        spawn_in_ns(if i == 0 { &self.hub } else { &self.hosts[i - 1] }, f)
    }

    /// Runs a closure inside host i's namespace (0: the hub) and waits.
    pub fn run_in<F, R>(&self, i: usize, f: F) -> Result<R, NetnsError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawn_in(i, f).join().map_err(|_| NetnsError::Panicked)?
    }

    /// Frames received on host i's veth (`rx_packets`).
    pub fn rx_packets(&self, i: usize) -> Result<u64, NetnsError> {
        let dev = self.host_dev(i);
        let args = ["-n", self.host_ns(i), "-s", "link", "show", "dev", &dev];
        let out = Command::new("ip")
            .args(args)
            .output()
            .map_err(|error| NetnsError::IpSpawn { args: args.join(" "), error })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            if l.trim_start().starts_with("RX:") {
                let n = lines.next().and_then(|v| v.split_whitespace().nth(1)).and_then(|v| v.parse().ok());
                if let Some(n) = n {
                    return Ok(n);
                }
            }
        }
        Err(NetnsError::IpFailed { args: args.join(" "), stderr: format!("no RX counters in {text:?}") })
    }

    /// Removes everything now (also done on drop); errors are ignored.
    pub fn remove(&mut self) {
        if !self.created {
            return;
        }
        self.created = false;
        let quiet = |args: &[&str]| {
            let _ = Command::new("ip").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status();
        };
        for ns in std::iter::once(&self.hub).chain(&self.hosts) {
            quiet(&["netns", "del", ns]);
        }
    }
}

impl Drop for Star {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Disables IPv6 in namespace `ns` (for interfaces there and to come).
fn no_ipv6(ns: &str) -> Result<(), NetnsError> {
    let ns2 = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns2)?;
        for which in ["all", "default"] {
            let path = format!("/proc/sys/net/ipv6/conf/{which}/disable_ipv6");
            std::fs::write(&path, "1").map_err(|error| NetnsError::OpenNamespace {
                ns: ns2.clone(),
                path: path.clone(),
                error,
            })?;
        }
        Ok(())
    })
    .join()
    .map_err(|_| NetnsError::Panicked)?
}
