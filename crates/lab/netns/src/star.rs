//! A star: one hub namespace and N host namespaces, host i joined to the
//! hub by a veth pair (`h<i>` on the host, with 10.K.0.i/24 and a fixed
//! MAC; a unique name without address on the hub). IPv6 is disabled in
//! every namespace of the star, so no neighbour discovery, router
//! solicitation or MLD frame crosses the hub unasked; IPv4 neighbours are
//! resolved with ARP (nothing static). Transmit checksum offload is off
//! on the hosts' veths (needs `ethtool`). For a bridge (or anything else)
//! run inside the hub over the hub-side veths. Everything is removed on
//! drop, also when a test panics.

use crate::{enter, ip, NetnsError, COUNTER};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

/// A hub namespace and `n` host namespaces around it.
#[derive(Debug)]
pub struct Star {
    hub: String,
    hosts: Vec<String>,
    hub_devs: Vec<String>,
    k: u8,
    created: bool,
}

impl Star {
    /// Creates a star of `n` hosts (1..=200). `tag` (a few letters) appears
    /// in every name.
    pub fn new(tag: &str, n: usize) -> Result<Star, NetnsError> {
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
            no_ipv6(ns)?;
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
            ip(&["-n", &host, "link", "set", &dev, "up"])?;
            // Full checksums on the hosts' frames, as on a wire: a veth
            // otherwise sends partly computed ones, which a bridge outside
            // the kernel forwards as they are and the receiver rejects.
            ip(&["netns", "exec", &host, "ethtool", "-K", &dev, "tx", "off"])?;
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
        let ns = if i == 0 { self.hub.clone() } else { self.hosts[i - 1].clone() };
        std::thread::spawn(move || {
            enter(&ns)?;
            Ok(f())
        })
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
