//! `flowsteer udp-gen`: UDP load generator over kernel sockets. Flows are
//! connected sockets from the local addresses; `--spread N` plans them onto
//! N receive queues of the receiver's RSS configuration (the shared RSS
//! flags). With `--echo` every reply is checked byte for byte and the
//! round-trip time, loss and reordering are reported. SIGINT/SIGTERM stop
//! sending early and still print the report.
//!
//! Safe by default: `--rate` is 10,000 datagrams/s unless given (`--rate
//! max` floods on purpose), and a remote the kernel routes through a
//! gateway or a default route is refused (exit 2) unless `--allow-routed`:
//! only this host and directly connected networks are sent to.

use crate::cli::UdpGenArgs;
use crate::cmd::usage;
use crate::rssopts::{resolve, warn_public_key, Resolved};
use anyhow::Result;
use flowsteer_live::{stop_on_signals, LiveError};
use flowsteer_udp::afxdp::{self, AfxdpConfig};
use flowsteer_udp::client::{self, format_report};
use flowsteer_udp::{plain_flows, route_source, spread_flows, ClientConfig, PortRange};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Sending time when neither --count nor --duration is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(3);

/// What `--spread N` cannot know and says: the plan is against a model of
/// the receiver unless `--ethtool-x` gives its real table; when the remote
/// address is on this host, the model is checked against the interface
/// that holds it (its receive queues) and this machine's CPUs.
fn spread_warnings(args: &UdpGenArgs, config: &flowsteer_rss::RssConfig, remote: SocketAddr, n: u16) -> Vec<String> {
    let mut w = Vec::new();
    if args.rss.ethtool_x.is_none() {
        w.push(format!(
            "--spread {n} plans against a modelled receiver ({} queues round robin in a {}-entry table, the --key given), \
             not its real table: the flows land on {n} distinct queues only if the receiver is configured so \
             (--ethtool-x FILE, the output of `ethtool -x IFACE` there, plans against the real one)",
            config.queue_count(),
            config.reta.len()
        ));
    }
    let Some(iface) = flowsteer_live::queues::iface_with_addr(remote.ip()) else {
        return w;
    };
    if let Ok(queues) = flowsteer_live::queues::rx_queues(&iface) {
        if usize::from(n) > queues.len() {
            w.push(format!(
                "--spread {n}: {} is on this host's {iface}, which has {} receive queue(s): at most {} of the {n} planned queues exist",
                remote.ip(),
                queues.len(),
                queues.len()
            ));
        }
    }
    let available = flowsteer_live::available_cpus();
    let missing: Vec<String> = args.rss.cpus.iter().filter(|c| !available.contains(c)).map(u32::to_string).collect();
    if !missing.is_empty() {
        w.push(format!(
            "--cpus names CPU(s) {} that this host (where {} is) does not have (available: {available:?})",
            missing.join(", "),
            remote.ip()
        ));
    }
    w
}

/// What `--spread` says when it plans against the public key: the advice of
/// the generic warning (`--key random`) would not fit a generator.
const SPREAD_PUBLIC_KEY_WARNING: &str =
    "the Microsoft default key is public: if the receiver's NIC uses it, as --spread \
     assumes here, anyone can aim traffic at one of its queues (in production put a random key on that NIC and plan \
     with it: --key HEX or --ethtool-x FILE)";

/// Refuses (usage error, exit 2) a remote the kernel routes through a
/// gateway or a default route, unless `--allow-routed`: udp-gen would load
/// links and routers beyond this host's networks. This host (loopback, its
/// own addresses) and directly connected networks are fine. The kernel's
/// answer decides (`RTM_GETROUTE`, from each `-l` address that is one of
/// this host's, as the flows' sockets will be routed), and a remote it has
/// no route to is refused too, with its reason.
fn check_route(args: &UdpGenArgs, remote: IpAddr, locals: &[IpAddr]) -> Result<()> {
    let mut froms: Vec<Option<IpAddr>> = locals
        .iter()
        .filter(|ip| flowsteer_live::queues::iface_with_addr(**ip).is_some())
        .map(|ip| Some(*ip))
        .collect();
    froms.sort_unstable();
    froms.dedup();
    if froms.is_empty() {
        froms.push(None);
    }
    for from in froms {
        match flowsteer_live::route::get(remote, from) {
            Ok(route) if route.is_routed() && !args.allow_routed => {
                return Err(usage(format!(
                    "--remote {remote} is not on a directly connected network: its route is `{route}`{}; give --allow-routed \
                     to send there anyway (at --rate {})",
                    if route.is_default() { " (the default route)" } else { "" },
                    args.rate
                )));
            }
            Ok(_) => {}
            Err(LiveError::NoRoute { error, .. }) => {
                let why = error.to_string();
                let why = why.split(" (os error").next().unwrap_or(&why);
                return Err(usage(format!(
                    "--remote {remote}: the kernel has no route to it ({why}; see `ip route get {remote}`): nothing could be sent"
                )));
            }
            // Could not ask; --allow-routed takes any route.
            Err(_) if args.allow_routed => {}
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "cannot ask the kernel for the route to {remote} (--allow-routed sends anyway)"
                )));
            }
        }
    }
    Ok(())
}

pub fn run(args: &UdpGenArgs) -> Result<i32> {
    let remote_ip: IpAddr =
        args.remote.parse().map_err(|_| usage(format!("--remote '{}' is not an IP address", args.remote)))?;
    let remote = SocketAddr::new(remote_ip, args.port);
    let mut locals = Vec::new();
    for l in &args.local {
        let ip: IpAddr = l.parse().map_err(|_| usage(format!("--local '{l}' is not an IP address")))?;
        locals.push(ip);
    }
    if args.afxdp.is_none() && args.size < 32 {
        return Err(usage(format!(
            "--size {}: out of range 32..=65507 (the header needs 32 bytes; with --afxdp 16..=65507)",
            args.size
        )));
    }
    let duration = match args.duration {
        Some(d) => Some(Duration::from_secs_f64(d)),
        None if args.count.is_none() => Some(DEFAULT_DURATION),
        None => None,
    };

    if args.spread.is_none() {
        let rss_only = [
            ("--queues", args.rss.queues.is_some()),
            ("--cpus", !args.rss.cpus.is_empty()),
            ("--ethtool-x", args.rss.ethtool_x.is_some()),
            ("--seed", args.rss.seed.is_some()),
        ];
        if let Some((flag, _)) = rss_only.iter().find(|(_, given)| *given) {
            return Err(usage(format!(
                "{flag} describes the receiver's RSS configuration, which only --spread N uses; give --spread or drop {flag}"
            )));
        }
    }
    check_route(args, remote_ip, &locals)?;
    let mut key = None;
    // Every warning printed, also carried by the --json document.
    let mut all_warnings = Vec::new();
    let flows = match args.spread {
        Some(n) => {
            let Resolved { config, mut warnings } = resolve(&args.rss, Some(usize::from(n)))?;
            // The plan models the receiver NIC's RSS.
            warn_public_key(&mut warnings, config.key(), SPREAD_PUBLIC_KEY_WARNING);
            crate::cmd::warn_all(&warnings);
            all_warnings.extend(warnings);
            if let Some(line) = crate::rssopts::drawn_key_line(config.key()) {
                eprintln!("{line}");
            }
            key = Some(config.key().clone());
            let sports: PortRange = args.sport_range.parse().map_err(|e| usage(format!("--sport-range: {e}")))?;
            if locals.is_empty() {
                locals.push(route_source(remote)?);
            }
            let count = args.flows.unwrap_or(usize::from(n));
            let receiver = spread_warnings(args, &config, remote, n);
            crate::cmd::warn_all(&receiver);
            all_warnings.extend(receiver);
            let mut flows = spread_flows(&config, &locals, remote, n, count, sports)?;
            if args.rss.cpus.is_empty() {
                // Without --cpus the model's queue i -> CPU i says nothing
                // about the receiver's CPUs: claim none.
                for f in &mut flows {
                    f.cpu = None;
                }
            }
            flows
        }
        None => {
            if locals.is_empty() && args.afxdp.is_some() {
                locals.push(route_source(remote)?);
            }
            plain_flows(&locals, remote, args.flows.unwrap_or(1))?
        }
    };

    if let Some(iface) = &args.afxdp {
        return run_afxdp(args, iface, &flows, duration, key.as_ref(), &all_warnings);
    }
    let mut cfg = ClientConfig::new(flows);
    cfg.size = args.size;
    cfg.rate = args.rate.pps_or_zero();
    cfg.count = args.count;
    cfg.duration = duration;
    cfg.echo = args.echo;
    cfg.drain = Duration::from_secs_f64(args.drain);
    cfg.batch = args.batch;

    let stop = stop_on_signals()?;
    let report = client::run(&cfg, &stop)?;
    if args.json {
        let mut doc = serde_json::to_value(&report)?;
        if let Some(key) = &key {
            crate::rssopts::add_drawn_key(&mut doc, key);
        }
        doc["warnings"] = serde_json::to_value(&all_warnings)?;
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", format_report(&report));
        println!("{}", crate::legend::footer(crate::legend::UDP_GEN));
        if report.echo {
            let reasons = [("rcvbuf_drops (replies the kernel dropped at our sockets)", report.rcvbuf_drops)];
            for line in crate::report::loss_lines(report.lost, report.sent, "sent datagrams got no reply", reasons) {
                println!("{line}");
            }
        }
    }
    if report.sent == 0 && !report.stopped_early {
        eprintln!("error: not one datagram could be sent to {remote} (see the send errors above)");
        return Ok(1);
    }
    if report.echo && report.sent > 0 && report.replies == 0 {
        eprintln!(
            "error: no reply to any of {} datagrams: is `flowsteer udp-echo {remote}` running there, and does a firewall let UDP port {} through both ways?",
            report.sent,
            remote.port()
        );
        return Ok(1);
    }
    if !report.replies_add_up {
        eprintln!("error: reply counters do not add up (replies != unique + duplicates + mismatched): this is a bug");
        return Ok(1);
    }
    Ok(0)
}

/// `--afxdp IFACE`: the same flows as pre-built frames from an AF_XDP socket.
fn run_afxdp(
    args: &UdpGenArgs,
    iface: &str,
    flows: &[flowsteer_udp::FlowSpec],
    duration: Option<Duration>,
    key: Option<&flowsteer_rss::RssKey>,
    warnings: &[String],
) -> Result<i32> {
    let dst_mac = match &args.dst_mac {
        Some(m) => Some(
            afxdp::parse_mac(m)
                .ok_or_else(|| usage(format!("--dst-mac '{m}' is not a MAC address (aa:bb:cc:dd:ee:ff)")))?,
        ),
        None => None,
    };
    let cfg = AfxdpConfig { iface: iface.to_string(), queue: args.afxdp_queue, dst_mac };
    let stop = stop_on_signals()?;
    let (report, counts) = afxdp::run(&cfg, flows, args.size, args.rate.pps_or_zero(), args.count, duration, &stop)?;
    if args.json {
        let mut doc = serde_json::to_value(&report)?;
        if let Some(key) = key {
            crate::rssopts::add_drawn_key(&mut doc, key);
        }
        doc["afxdp"] = serde_json::to_value(counts)?;
        doc["warnings"] = serde_json::to_value(warnings)?;
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", format_report(&report));
        println!(
            "  afxdp {iface} queue {}: sent {} = completed {} + in flight {} ({}); ring-full retries {}, kick errors {}, invalid descriptors {}",
            args.afxdp_queue,
            counts.sent,
            counts.completed,
            counts.in_flight,
            if counts.add_up { "ok" } else { "VIOLATED" },
            counts.ring_full_retries,
            counts.kick_errors,
            counts.invalid_descs
        );
        println!("{}", crate::legend::footer(crate::legend::UDP_GEN));
    }
    if report.sent == 0 && !report.stopped_early {
        eprintln!("error: not one frame could be sent from {iface}");
        return Ok(1);
    }
    if !counts.add_up {
        eprintln!("error: AF_XDP counters do not add up (sent != completed + in flight): this is a bug");
        return Ok(1);
    }
    if counts.stalled {
        eprintln!(
            "error: {iface} queue {} took no frame for {} s ({} sent): is the link down, or the queue gone?",
            args.afxdp_queue,
            flowsteer_udp::txloop::STALL.as_secs(),
            counts.sent
        );
        return Ok(1);
    }
    Ok(0)
}
