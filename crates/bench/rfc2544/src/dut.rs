//! Devices under test, built by the harness in namespaces of its own and
//! removed when the [`Topology`] drops (also on a panic, and when the
//! caller stops on SIGTERM and unwinds); [`cleanup`] removes what a killed
//! run left behind.
//!
//! ```text
//!  ns G                 ns D (not for `none`)            ns R
//!  gen0  <-- veth -->  dut0  [bridge | tc patch | flowsteer | ovs]  dut1  <-- veth -->  rcv0
//!  (generator: AF_XDP tx)                          (receiver: XDP + AF_XDP rx)
//! ```
//!
//! `none` joins `gen0` and `rcv0` directly. Names: namespaces
//! `fs2544-PID-N-{g,d,r}` (unique per process and topology), interfaces the
//! same fixed names in each namespace (they are created straight into their
//! namespaces, so they never meet in the caller's).
//!
//! Every veth gets the same MTU (1500) and the kernel's default offloads,
//! no IP address and no IPv6 link-local address (`addrgenmode none`: no
//! router solicitations or MLD reports cross the DUT), and RPS off
//! (`rps_cpus` 0): the kernel's DUTs forward in the sender's softirq, their
//! fastest here. [`Topology::start`] pins the flowsteer bridge's worker to
//! the DUT CPUs, and steers the kernel DUTs' receive work there (RPS) only
//! when asked (`kernel_rps`). Traffic never leaves these namespaces.
//!
//! `ovs` ([`crate::ovs`]) runs daemons of the harness's own, with a
//! directory per topology; they are stopped and the directory removed
//! before the namespaces go. A DUT this machine cannot build (`ovs`
//! without Open vSwitch installed) says why in [`DutKind::skip_reason`];
//! the sweep skips it and reports the reason.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Why the harness cannot build namespaces here (not root, no `ip`), or `None`.
pub use flowsteer_netns::skip_reason;
use flowsteer_netns::{ip, NetnsError};
use serde::Serialize;

use crate::bridge::BridgeDut;
use crate::ovs::OvsDut;

use crate::names::owner_gone;
pub use crate::names::NS_PREFIX;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The generator's interface (in its namespace).
pub const GEN_DEV: &str = "gen0";
/// The receiver's interface (in its namespace).
pub const RCV_DEV: &str = "rcv0";

/// A device under test the harness builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DutKind {
    /// Generator to receiver directly: the generator's own ceiling.
    None,
    /// A tc mirred redirect between two ports (`u32 match u32 0 0`: this
    /// kernel has no matchall or flower): the cheapest forwarding.
    Patch,
    /// The Linux bridge, tuned to be the kernel's fastest: netfilter calls
    /// off in its namespace, STP and multicast snooping off, no VLAN
    /// filtering, no address.
    LinuxBridge,
    /// Two existing interfaces of the caller's namespace (`--tx`, `--rx`)
    /// with a real device between them; the harness builds nothing.
    External,
    /// `flowsteer bridge` with AF_XDP ports on `dut0` and `dut1`, started
    /// in-process ([`crate::bridge`]), one worker on the DUT's CPU, every
    /// frame forwarded by the worker (`--fast-path off`).
    FlowsteerBridge,
    /// The same with AF_PACKET ports.
    FlowsteerBridgeAfpacket,
    /// The same with AF_XDP ports and the kernel fast path
    /// (`--fast-path xdp`): learned unicast forwarded by the XDP program.
    FlowsteerBridgeXdp,
    /// Open vSwitch's userspace datapath (`datapath_type=netdev`, no
    /// kernel module) with AF_XDP ports (native XDP) on `dut0` and `dut1`
    /// and the NORMAL (learning) action, its PMD thread pinned to the DUT's
    /// CPU; daemons of the harness's own ([`crate::ovs`]). Skipped when
    /// Open vSwitch is not installed.
    Ovs,
}

impl DutKind {
    /// Parses `none`, `patch`, `linux-bridge`, `flowsteer-bridge`,
    /// `flowsteer-bridge-afpacket`, `flowsteer-bridge-xdp`, `ovs`.
    pub fn parse(s: &str) -> Option<DutKind> {
        match s {
            "none" => Some(DutKind::None),
            "patch" => Some(DutKind::Patch),
            "linux-bridge" => Some(DutKind::LinuxBridge),
            "flowsteer-bridge" => Some(DutKind::FlowsteerBridge),
            "flowsteer-bridge-afpacket" => Some(DutKind::FlowsteerBridgeAfpacket),
            "flowsteer-bridge-xdp" => Some(DutKind::FlowsteerBridgeXdp),
            "ovs" => Some(DutKind::Ovs),
            _ => None,
        }
    }

    /// The name `parse` takes.
    pub fn name(&self) -> &'static str {
        match self {
            DutKind::None => "none",
            DutKind::Patch => "patch",
            DutKind::LinuxBridge => "linux-bridge",
            DutKind::External => "external",
            DutKind::FlowsteerBridge => "flowsteer-bridge",
            DutKind::FlowsteerBridgeAfpacket => "flowsteer-bridge-afpacket",
            DutKind::FlowsteerBridgeXdp => "flowsteer-bridge-xdp",
            DutKind::Ovs => "ovs",
        }
    }

    /// Why this machine cannot build this DUT although it can build the
    /// others (`ovs`: Open vSwitch not installed), or `None`.
    pub fn skip_reason(&self) -> Option<String> {
        match self {
            DutKind::Ovs => crate::ovs::skip_reason(),
            _ => None,
        }
    }

    /// Forwarded by the kernel (`patch`, `linux-bridge`): RPS applies.
    fn in_kernel(&self) -> bool {
        matches!(self, DutKind::Patch | DutKind::LinuxBridge)
    }

    /// The flowsteer bridge's port kind, for the flowsteer DUTs.
    pub fn bridge_ports(&self) -> Option<flowsteer_bridge::PortKind> {
        match self {
            DutKind::FlowsteerBridge | DutKind::FlowsteerBridgeXdp => Some(flowsteer_bridge::PortKind::Afxdp),
            DutKind::FlowsteerBridgeAfpacket => Some(flowsteer_bridge::PortKind::Afpacket),
            _ => None,
        }
    }

    /// The flowsteer bridge's `--fast-path`, for the flowsteer DUTs.
    pub fn bridge_fast_path(&self) -> flowsteer_bridge::FastPath {
        match self {
            DutKind::FlowsteerBridgeXdp => flowsteer_bridge::FastPath::Xdp,
            _ => flowsteer_bridge::FastPath::Off,
        }
    }
}

/// The hex CPU mask of `cpus` (for `rps_cpus`).
fn cpu_mask(cpus: &[usize]) -> String {
    let mut words = vec![0u32; cpus.iter().max().map_or(1, |m| m / 32 + 1)];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    words.iter().rev().map(|w| format!("{w:08x}")).collect::<Vec<_>>().join(",")
}

/// Runs a command inside a namespace (`ip netns exec NS ...`).
fn exec_in(ns: &str, args: &[&str]) -> Result<(), NetnsError> {
    let mut all = vec!["netns", "exec", ns];
    all.extend_from_slice(args);
    ip(&all)
}

/// Makes `br0` in namespace `ns`, a Linux bridge over `ports` (interfaces
/// already there), tuned to be the kernel's fastest: netfilter calls off
/// in `ns` only (the `bridge-nf-call-*` sysctls exist when br_netfilter
/// is loaded; without it the bridge makes no netfilter calls anyway), STP
/// and multicast snooping off, no VLAN filtering (the default: `vlan_filtering 0`
/// is refused by kernels built without it), no address. The ports' offloads
/// are left as they are.
pub fn linux_bridge(ns: &str, ports: &[&str]) -> Result<(), NetnsError> {
    for table in ["iptables", "ip6tables", "arptables"] {
        let path = format!("/proc/sys/net/bridge/bridge-nf-call-{table}");
        exec_in(ns, &["sh", "-c", &format!("[ ! -e {path} ] || echo 0 > {path}")])?;
    }
    ip(&["-n", ns, "link", "add", "br0", "type", "bridge", "stp_state", "0", "mcast_snooping", "0"])?;
    ip(&["-n", ns, "link", "set", "br0", "addrgenmode", "none"])?;
    for port in ports {
        ip(&["-n", ns, "link", "set", port, "master", "br0"])?;
    }
    ip(&["-n", ns, "link", "set", "br0", "up"])
}

/// Where the generator sends and the receiver listens: an interface and
/// its MAC each, in a namespace (`None`: the caller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports {
    /// Namespace of the generator's interface.
    pub gen_ns: Option<String>,
    /// The generator's interface.
    pub gen_dev: String,
    /// Its MAC: the frames' source.
    pub gen_mac: [u8; 6],
    /// Namespace of the receiver's interface.
    pub rcv_ns: Option<String>,
    /// The receiver's interface.
    pub rcv_dev: String,
    /// Its MAC: the frames' destination.
    pub rcv_mac: [u8; 6],
}

/// The MAC of `dev` in the calling thread's namespace (`ip -o link show`:
/// sysfs would show the namespace it was mounted in).
fn read_mac(dev: &str) -> Option<[u8; 6]> {
    let out = Command::new("ip").args(["-o", "link", "show", "dev", dev]).stderr(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mac = text.split_whitespace().skip_while(|w| *w != "link/ether").nth(1)?;
    let bytes: Vec<u8> = mac.split(':').filter_map(|h| u8::from_str_radix(h, 16).ok()).collect();
    bytes.try_into().ok()
}

impl Ports {
    /// Two existing interfaces of the caller's namespace: frames leave `tx`
    /// addressed to `rx`'s MAC.
    pub fn external(tx: &str, rx: &str) -> Result<Ports, crate::Error> {
        let mac = |dev: &str| {
            read_mac(dev)
                .ok_or_else(|| crate::Error::Config(format!("interface {dev}: no MAC address (does it exist?)")))
        };
        Ok(Ports {
            gen_ns: None,
            gen_dev: tx.into(),
            gen_mac: mac(tx)?,
            rcv_ns: None,
            rcv_dev: rx.into(),
            rcv_mac: mac(rx)?,
        })
    }
}

/// A built topology; dropping it stops the flowsteer bridge (its XDP
/// programs detached) and Open vSwitch (its daemons, their directory) and
/// removes its namespaces (and with them every veth, the Linux bridge, the
/// tc filters and any XDP program).
#[derive(Debug)]
pub struct Topology {
    kind: DutKind,
    /// `fs2544-PID-N`: the namespaces' and the OVS directory's prefix.
    base: String,
    bridge: Option<BridgeDut>,
    ovs: Option<OvsDut>,
    gen_ns: String,
    dut_ns: Option<String>,
    rcv_ns: String,
    created: Vec<String>,
    gen_mac: [u8; 6],
    rcv_mac: [u8; 6],
}

fn mac_text(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

impl Topology {
    /// Builds `kind` with its forwarding on `dut_cpus` and starts it: for
    /// the flowsteer bridge its worker is pinned to the first of them, for
    /// `ovs` its PMD thread; for
    /// the kernel's DUTs (`patch`, `linux-bridge`) with `kernel_rps`, RPS
    /// on `dut0` and `dut1` sends their receive processing, hence the
    /// forwarding, to these CPUs (without it, or with no CPUs: RPS off, the
    /// forwarding runs in the sender's softirq). On an error, what was built is removed.
    pub fn start(kind: DutKind, dut_cpus: &[usize], kernel_rps: bool) -> Result<Topology, crate::Error> {
        let mut t = Topology::new(kind)?;
        if let Some(d) = t.dut_ns.clone() {
            if kind.in_kernel() && kernel_rps && !dut_cpus.is_empty() {
                let mask = cpu_mask(dut_cpus);
                for dev in ["dut0", "dut1"] {
                    exec_in(&d, &["sh", "-c", &format!("echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus")])?;
                }
            }
            if let Some(ports) = kind.bridge_ports() {
                t.bridge = Some(BridgeDut::start(&d, ports, kind.bridge_fast_path(), dut_cpus)?);
            }
            if kind == DutKind::Ovs {
                t.ovs = Some(OvsDut::start(&t.base, &d, &["dut0", "dut1"], dut_cpus)?);
            }
        }
        Ok(t)
    }

    /// Builds `kind`'s namespaces, veths and, for the kernel's DUTs, the
    /// forwarding; the flowsteer bridge and `ovs` are started by
    /// [`Topology::start`] only. On an error, what was built is removed.
    pub fn new(kind: DutKind) -> Result<Topology, NetnsError> {
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let base = format!("{NS_PREFIX}{pid}-{n}");
        let k = (pid.wrapping_mul(31).wrapping_add(n)) as u16;
        let [k1, k2] = k.to_be_bytes();
        let mut t = Topology {
            kind,
            base: base.clone(),
            bridge: None,
            ovs: None,
            gen_ns: format!("{base}-g"),
            dut_ns: (kind != DutKind::None).then(|| format!("{base}-d")),
            rcv_ns: format!("{base}-r"),
            created: Vec::new(),
            gen_mac: [0x02, 0x25, 0x44, k1, k2, 0x01],
            rcv_mac: [0x02, 0x25, 0x44, k1, k2, 0x02],
        };
        t.build()?;
        Ok(t)
    }

    fn add_ns(&mut self, ns: &str) -> Result<(), NetnsError> {
        ip(&["netns", "add", ns])?;
        self.created.push(ns.to_string());
        ip(&["-n", ns, "link", "set", "lo", "up"])
    }

    fn veth(&self, a: (&str, &str, Option<[u8; 6]>), b: (&str, &str, Option<[u8; 6]>)) -> Result<(), NetnsError> {
        let (ma, mb) = (a.2.map(mac_text), b.2.map(mac_text));
        let mut args = vec!["link", "add", a.1, "netns", a.0];
        if let Some(m) = &ma {
            args.extend(["address", m.as_str()]);
        }
        args.extend(["mtu", "1500", "type", "veth", "peer", "name", b.1, "netns", b.0]);
        if let Some(m) = &mb {
            args.extend(["address", m.as_str()]);
        }
        args.extend(["mtu", "1500"]);
        ip(&args)?;
        for (ns, dev) in [(a.0, a.1), (b.0, b.1)] {
            ip(&["-n", ns, "link", "set", dev, "addrgenmode", "none"])?;
            // RPS off: the baseline forwards in the sender's softirq.
            exec_in(ns, &["sh", "-c", &format!("echo 0 > /sys/class/net/{dev}/queues/rx-0/rps_cpus")])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    fn build(&mut self) -> Result<(), NetnsError> {
        let (g, r) = (self.gen_ns.clone(), self.rcv_ns.clone());
        self.add_ns(&g)?;
        self.add_ns(&r)?;
        let (gm, rm) = (Some(self.gen_mac), Some(self.rcv_mac));
        let Some(d) = self.dut_ns.clone() else {
            return self.veth((&g, GEN_DEV, gm), (&r, RCV_DEV, rm));
        };
        self.add_ns(&d)?;
        self.veth((&g, GEN_DEV, gm), (&d, "dut0", None))?;
        self.veth((&d, "dut1", None), (&r, RCV_DEV, rm))?;
        match self.kind {
            DutKind::Patch => {
                for (from, to) in [("dut0", "dut1"), ("dut1", "dut0")] {
                    exec_in(&d, &["tc", "qdisc", "add", "dev", from, "ingress"])?;
                    exec_in(
                        &d,
                        &[
                            "tc", "filter", "add", "dev", from, "parent", "ffff:", "protocol", "all", "u32", "match",
                            "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", to,
                        ],
                    )?;
                }
            }
            DutKind::LinuxBridge => linux_bridge(&d, &["dut0", "dut1"])?,
            DutKind::None
            | DutKind::External
            | DutKind::FlowsteerBridge
            | DutKind::FlowsteerBridgeAfpacket
            | DutKind::FlowsteerBridgeXdp
            | DutKind::Ovs => {}
        }
        Ok(())
    }

    /// The generator's and the receiver's ports.
    pub fn ports(&self) -> Ports {
        Ports {
            gen_ns: Some(self.gen_ns.clone()),
            gen_dev: GEN_DEV.into(),
            gen_mac: self.gen_mac,
            rcv_ns: Some(self.rcv_ns.clone()),
            rcv_dev: RCV_DEV.into(),
            rcv_mac: self.rcv_mac,
        }
    }

    /// The device under test.
    pub fn kind(&self) -> DutKind {
        self.kind
    }

    /// The generator's namespace.
    pub fn gen_ns(&self) -> &str {
        &self.gen_ns
    }

    /// The receiver's namespace.
    pub fn rcv_ns(&self) -> &str {
        &self.rcv_ns
    }

    /// The DUT's namespace (`None` for `none`).
    pub fn dut_ns(&self) -> Option<&str> {
        self.dut_ns.as_deref()
    }

    /// The generator's MAC.
    pub fn gen_mac(&self) -> [u8; 6] {
        self.gen_mac
    }

    /// The receiver's MAC.
    pub fn rcv_mac(&self) -> [u8; 6] {
        self.rcv_mac
    }

    /// The flowsteer bridge's counters now (`None` for other DUTs).
    pub fn bridge_stats(&self) -> Option<flowsteer_bridge::BridgeStats> {
        self.bridge.as_ref().and_then(BridgeDut::stats)
    }

    /// Stops the flowsteer bridge now (workers joined, XDP programs
    /// detached), leaving the namespaces; returns its final counters
    /// (`None` for other DUTs, or when already stopped).
    pub fn stop_bridge(&mut self) -> Option<flowsteer_bridge::BridgeStats> {
        self.bridge.take().and_then(|mut b| b.stop())
    }

    /// Open vSwitch while it runs (`ovs` only).
    pub fn ovs(&self) -> Option<&OvsDut> {
        self.ovs.as_ref()
    }

    /// CPU time of a userspace DUT's own threads so far, ns: the flowsteer
    /// bridge's workers, or `ovs-vswitchd`'s threads; `None` for the
    /// kernel's DUTs.
    pub fn dut_cpu_ns(&self) -> Option<u64> {
        if self.bridge.is_some() {
            return Some(crate::bridge::worker_cpu_ns());
        }
        self.ovs.as_ref().map(OvsDut::cpu_ns)
    }

    /// Namespaces that exist now.
    pub fn namespaces(&self) -> &[String] {
        &self.created
    }

    /// Removes everything now (also done on drop); errors are ignored.
    pub fn remove(&mut self) {
        // The bridge first: its workers hold sockets on the veths, and its
        // XDP programs are detached before the interfaces go. The same for
        // Open vSwitch, whose ovs-vswitchd also keeps the DUT namespace
        // alive while it runs.
        drop(self.bridge.take());
        drop(self.ovs.take());
        for ns in self.created.drain(..).rev() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Harness namespaces that exist now (`fs2544-*`).
pub fn leftovers() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else { return Vec::new() };
    let mut v: Vec<String> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(NS_PREFIX))
        .collect();
    v.sort();
    v
}

/// Removes the harness namespaces whose process is gone (a run killed
/// before it could clean up); returns their names. Namespaces of a run
/// still going are left alone. Open vSwitch daemons such a run left are
/// stopped first ([`crate::ovs::cleanup`]; an `ovs-vswitchd` keeps its
/// namespace alive).
pub fn cleanup() -> Result<Vec<String>, NetnsError> {
    crate::ovs::cleanup();
    let mut removed = Vec::new();
    for ns in leftovers() {
        if !owner_gone(&ns) {
            continue;
        }
        ip(&["netns", "del", &ns])?;
        removed.push(ns);
    }
    Ok(removed)
}
