//! One module per subcommand.

pub mod analyze;
pub mod bench;
pub mod defrag;
pub mod export;
pub mod hash;
pub mod plan;
pub mod queues;
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
