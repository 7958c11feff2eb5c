//! `flowsteer udp-echo`: the per-core UDP echo/sink server over kernel
//! sockets. Runs the loopback self-test first and refuses to serve when the
//! sockets are not steered by CPU. SIGINT/SIGTERM (or --duration) stop every
//! thread; the final counters are printed and the exit code is 0 when they
//! add up.

use crate::cli::UdpEchoArgs;
use crate::cmd::usage;
use anyhow::Result;
use flowsteer_live::queues::rx_queues;
use flowsteer_live::stop_on_signals;
use flowsteer_udp::server::format_table;
use flowsteer_udp::xdp::{XdpCoreCounters, XdpEcho, XdpEchoError, XdpEchoOptions};
use flowsteer_udp::{allowed_cpus, BindMode, Counters, Reply, Server, ServerConfig, ServerStats};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Parse `ADDR:PORT` with a message that shows the expected form.
pub fn parse_socket_addr(s: &str) -> Result<SocketAddr> {
    s.parse().map_err(|_| usage(format!("'{s}' is not ADDR:PORT (e.g. 10.0.0.2:9000 or [fd00::2]:9000)")))
}

pub fn run(args: &UdpEchoArgs) -> Result<i32> {
    crate::cmd::check_cpus("--cpus", &args.cpus)?;
    match args.mode.as_str() {
        "kernel" => {
            let xdp_only = [
                ("--iface", args.iface.is_some()),
                ("--queues", !args.queues.is_empty()),
                ("--allow-mtu-drops", args.allow_mtu_drops),
            ];
            if let Some((flag, _)) = xdp_only.iter().find(|(_, given)| *given) {
                return Err(usage(format!("{flag} applies to --mode xdp; --mode kernel serves every CPU's socket")));
            }
        }
        "xdp" if args.rcvbuf.is_some() => {
            return Err(usage("--rcvbuf sizes a kernel socket's buffer; --mode xdp has none (its rings are fixed)"))
        }
        "xdp" => return run_xdp(args),
        other => return Err(usage(format!("unknown --mode '{other}' (expected kernel or xdp)"))),
    }
    let addr = parse_socket_addr(&args.addr)?;
    let bind: BindMode = args.bind.parse().map_err(|e| usage(format!("--bind: {e}")))?;
    let cpus = if args.cpus.is_empty() { allowed_cpus()? } else { args.cpus.clone() };
    let mut cfg = ServerConfig::new(addr, cpus);
    cfg.bind = bind;
    cfg.reply = if args.sink { Reply::Sink } else { Reply::Echo };
    cfg.batch = args.batch;
    cfg.slot = args.max_size;
    cfg.rcvbuf = args.rcvbuf;
    let duration = args.duration.map(Duration::from_secs_f64);
    let interval = args.interval.map(Duration::from_secs_f64);

    let stop = stop_on_signals()?;
    let server = Server::start(&cfg, stop.clone())?;
    let cpu_list: Vec<String> = cfg.cpus.iter().map(u32::to_string).collect();
    let per = server.self_test_report().map_or(0, |r| r.per_cpu);
    eprintln!(
        "udp-echo: serving {} ({}) on CPUs {} with --bind {}; self-test passed (each socket got exactly its CPU's {per} loopback datagrams)",
        server.local_addr(),
        if cfg.reply == Reply::Echo { "echo" } else { "sink" },
        cpu_list.join(","),
        cfg.bind
    );

    let started = Instant::now();
    let mut next_print = interval.map(|i| started + i);
    // The previous interval report's totals and time: each report shows
    // its own interval's counts and rates, not averages since the start.
    let mut prev = (Counters::default(), 0.0);
    while !stop.load(Ordering::Relaxed) {
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let (Some(at), Some(every)) = (next_print, interval) {
            if Instant::now() >= at {
                let snap = server.snapshot();
                let iv = Interval::between(&prev.0, prev.1, &snap.total, snap.elapsed_s);
                emit_interval(&snap, &iv, args.json)?;
                prev = (snap.total.clone(), snap.elapsed_s);
                next_print = Some(at + every);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let stats = server.join();
    emit(&stats, args.json, interval.is_some())?;
    for e in &stats.errors {
        eprintln!("error: {e}");
    }
    if !stats.errors.is_empty() {
        return Ok(1);
    }
    if !stats.conservation_ok {
        eprintln!("error: counters do not add up (received != delivered + dropped): this is a bug");
        return Ok(1);
    }
    Ok(0)
}

/// One `--interval` report: that interval's own counts and rates.
#[derive(serde::Serialize)]
struct Interval {
    from_s: f64,
    to_s: f64,
    received: u64,
    delivered: u64,
    sent: u64,
    dropped: u64,
    received_pps: f64,
    sent_pps: f64,
}

impl Interval {
    fn between(prev: &Counters, from_s: f64, now: &Counters, to_s: f64) -> Interval {
        use flowsteer_engine::counters::interval_rate;
        let dt = to_s - from_s;
        let (received, received_pps) = interval_rate(prev.received, now.received, dt);
        let (sent, sent_pps) = interval_rate(prev.sent, now.sent, dt);
        Interval {
            from_s,
            to_s,
            received,
            delivered: interval_rate(prev.delivered, now.delivered, dt).0,
            sent,
            dropped: interval_rate(prev.dropped, now.dropped, dt).0,
            received_pps,
            sent_pps,
        }
    }
}

/// An interval report: text, one line as iperf3 prints it; JSON, the
/// cumulative counters (as at the end) plus `interval`, on one line.
fn emit_interval(stats: &ServerStats, iv: &Interval, json: bool) -> Result<()> {
    if json {
        let mut v = serde_json::to_value(stats)?;
        v["interval"] = serde_json::to_value(iv)?;
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!(
            "{} received {} ({:.1} kpps), sent {} ({:.1} kpps), dropped {}",
            crate::report::interval_label(iv.from_s, iv.to_s),
            iv.received,
            iv.received_pps / 1e3,
            iv.sent,
            iv.sent_pps / 1e3,
            iv.dropped
        );
    }
    Ok(())
}

fn emit(stats: &ServerStats, json: bool, line: bool) -> Result<()> {
    if json {
        if line {
            println!("{}", serde_json::to_string(stats)?);
        } else {
            println!("{}", serde_json::to_string_pretty(stats)?);
        }
    } else {
        print!("{}", format_table(stats));
        println!("{}", crate::legend::footer(crate::legend::UDP_ECHO));
        let t = &stats.total;
        let reasons = [("truncated", t.drop_truncated), ("send_error", t.drop_send_error)];
        for line in crate::report::loss_lines(t.dropped, t.received, "received datagrams dropped", reasons) {
            println!("{line}");
        }
        if t.rcvbuf_drops > 0 {
            println!(
                "  and {} datagrams the kernel dropped before our sockets (receive buffer full: raise --rcvbuf)",
                t.rcvbuf_drops
            );
        }
        println!();
    }
    Ok(())
}

/// `--mode xdp`: see [`flowsteer_udp::xdp`].
fn run_xdp(args: &UdpEchoArgs) -> Result<i32> {
    let addr = parse_socket_addr(&args.addr)?;
    let Some(iface) = args.iface.clone() else {
        return Err(usage("udp-echo --mode xdp needs --iface IFACE (the interface whose receive queues to serve)"));
    };
    if addr.ip().is_unspecified() || addr.port() == 0 {
        return Err(usage(
            "udp-echo --mode xdp needs a specific address and port (the XDP dataplane answers only those)",
        ));
    }
    let mode = crate::cmd::xdp_mode(&args.xdp_mode)?;
    let queues = if args.queues.is_empty() { rx_queues(&iface)? } else { args.queues.clone() };
    let cpus = if args.cpus.is_empty() { allowed_cpus()? } else { args.cpus.clone() };
    let duration = args.duration.map(Duration::from_secs_f64);
    let stop = stop_on_signals()?;
    if let Some(d) = duration {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while t.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
    let claim_all = crate::cmd::xdp_claim_all(&args.xdp_claim)?;
    let allow_mtu_drops = args.allow_mtu_drops;
    let opts = XdpEchoOptions { iface, addr, echo: !args.sink, cpus, queues, mode, claim_all, allow_mtu_drops };
    let server = XdpEcho::open(&opts).map_err(|e| match e {
        XdpEchoError::Mtu { .. } => anyhow::anyhow!("{e}; --allow-mtu-drops serves anyway"),
        e => e.into(),
    })?;
    let mut warnings = Vec::new();
    if claim_all {
        warnings.push(crate::cmd::claim_all_warning(&opts.iface));
    }
    warnings.extend(server.warnings().iter().cloned());
    let xdp_mode = if server.mode() == flowsteer_xsk::XdpMode::Native { "native" } else { "generic" };
    let fallback = server.fallback().map(str::to_string);
    if let Some(why) = &fallback {
        warnings.push(format!(
            "--xdp-mode {}: XDP attached in generic (skb) mode, slower than native: {why}",
            args.xdp_mode
        ));
    }
    crate::cmd::warn_all(&warnings);
    eprintln!(
        "udp-echo: serving {} ({}) from AF_XDP on {} queues {:?} ({} XDP); claimed: {}",
        opts.addr,
        if opts.echo { "echo" } else { "sink" },
        opts.iface,
        opts.queues,
        xdp_mode,
        opts.claim().describe()
    );
    let rows = server.run(stop)?;
    let mut total = XdpCoreCounters { queue: u32::MAX, cpu: u32::MAX, ..Default::default() };
    for r in &rows {
        total += r;
    }
    let echo = !args.sink;
    let ok = rows.iter().all(|c| c.adds_up(echo)) && total.adds_up(echo);
    if args.json {
        let v = serde_json::json!({
            "schema": "flowsteer.udp-echo-xdp.v1",
            "mode": "xdp",
            "xdp": {"mode": xdp_mode, "fallback": fallback},
            "cores": rows,
            "total": total,
            "conservation_ok": ok,
            "warnings": warnings,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{:>5} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "Queue", "CPU", "Received", "Delivered", "Sent", "TxFull", "NotForUs", "Malformed", "BadCsum", "KernDrops"
        );
        for r in &rows {
            println!(
                "{:>5} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
                r.queue,
                r.cpu,
                r.received,
                r.delivered,
                r.sent,
                r.dropped_tx_full,
                r.not_for_us,
                r.malformed,
                r.bad_checksum,
                r.kernel_drops
            );
        }
        println!(
            "{:>5} {:>4} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "total",
            "",
            total.received,
            total.delivered,
            total.sent,
            total.dropped_tx_full,
            total.not_for_us,
            total.malformed,
            total.bad_checksum,
            total.kernel_drops
        );
        println!("{}", crate::legend::footer(crate::legend::UDP_ECHO_XDP));
        println!(
            "conservation: received = delivered + not for us + malformed + bad checksum, delivered = sent + tx full: {}",
            if ok { "OK" } else { "FAILED" }
        );
    }
    if !ok {
        eprintln!("error: counters do not add up: this is a bug");
        return Ok(1);
    }
    Ok(0)
}
