//! One module per subcommand.

pub mod analyze;
pub mod bench;
pub mod defrag;
pub mod export;
pub mod hash;
pub mod plan;
pub mod queues;
pub mod rfc2544;
pub mod run;
pub mod udp_echo;
pub mod udp_gen;

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
        m => anyhow::bail!("--xdp-mode '{m}': expected auto, native or skb"),
    }
}

/// `--xdp-claim` (`run` and `udp-echo --mode xdp`): true for `all`, false
/// for `listeners` (the default: only the ports the dataplane serves).
pub fn xdp_claim_all(claim: &str) -> anyhow::Result<bool> {
    match claim {
        "listeners" => Ok(false),
        "all" => Ok(true),
        c => anyhow::bail!("--xdp-claim '{c}': expected listeners or all"),
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
