//! One module per subcommand.

pub mod analyze;
pub mod bench;
pub mod bridge;
pub mod bridge_ctl;
pub mod defrag;
pub mod export;
pub mod hash;
pub mod plan;
pub mod queues;
pub mod rfc2544;
pub mod run;
pub mod udp_echo;
pub mod udp_gen;

/// A command line that cannot run as given (a value outside its range, flags
/// that contradict each other): `main` exits 2 for it, 1 for other errors.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error (exit 2) with this message.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(msg.into()))
}

/// Whether `e` (or any error in its chain) is a [`Usage`] error.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Usage>())
}

/// A usage error (exit 2) for the first CPU of `cpus` (given with `flag`)
/// this process may not run on (not in its affinity mask: absent, offline
/// or outside its cpuset), naming the ones it may run on. A CPU that is
/// not there would otherwise be skipped silently (a thread left unpinned).
pub fn check_cpus(flag: &str, cpus: &[u32]) -> anyhow::Result<()> {
    let available = flowsteer_live::available_cpus();
    match cpus.iter().find(|c| !available.contains(c)) {
        Some(c) => Err(usage(format!("{flag}: CPU {c} is not available to this process (available: {available:?})"))),
        None => Ok(()),
    }
}

/// Print warnings once, to stderr.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// `--xdp-mode` as the AF_XDP backend takes it (`run` and `udp-echo`).
pub fn xdp_mode(mode: &str) -> anyhow::Result<flowsteer_xsk::XdpMode> {
    use flowsteer_xsk::XdpMode;
    match mode {
        "auto" => Ok(XdpMode::Auto),
        "native" => Ok(XdpMode::Native),
        "skb" => Ok(XdpMode::Skb),
        m => Err(usage(format!("--xdp-mode '{m}': expected auto, native or skb"))),
    }
}

/// `--xdp-claim` (`run` and `udp-echo --mode xdp`): true for `all`, false
/// for `listeners` (the default: only the ports the dataplane serves).
pub fn xdp_claim_all(claim: &str) -> anyhow::Result<bool> {
    match claim {
        "listeners" => Ok(false),
        "all" => Ok(true),
        c => Err(usage(format!("--xdp-claim '{c}': expected listeners or all"))),
    }
}

/// What `--xdp-claim all` cuts off, said at start.
pub fn claim_all_warning(iface: &str) -> String {
    format!(
        "--xdp-claim all: every IPv4/IPv6 packet arriving on {iface} goes to flowsteer, none to the kernel: ping (ICMP), \
         TCP sessions such as SSH, IPv6 neighbour discovery and every other IP protocol the kernel would have handled on \
         {iface} are cut off while this runs; only ARP and other non-IP frames still reach the kernel"
    )
}
