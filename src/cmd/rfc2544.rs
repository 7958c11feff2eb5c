//! `flowsteer rfc2544`: maps the flags to a `flowsteer_rfc2544::sweep`
//! configuration, prints the plan and its time estimate before anything is
//! built (stderr; `--dry-run`: only that, on stdout, and exit), a progress
//! line while it runs (stderr, on a terminal), then the table or the JSON
//! report. SIGINT/SIGTERM end the sweep after the current trial: the
//! namespaces are removed and what finished is printed (exit 0).

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use flowsteer_rfc2544::dut::{self, DutKind};
use flowsteer_rfc2544::frames::FrameSize;
use flowsteer_rfc2544::sweep::{self, Event, Plan, Report, SizeLabel, SweepConfig};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Rfc2544Args, RssArgs};
use crate::cmd::usage;
use crate::rssopts::{resolve, Resolved};
use flowsteer_plan::plan::PortRange;
use flowsteer_rfc2544::frames::MIN_FRAME_IPV6;
use flowsteer_rfc2544::io::IoMode;
use flowsteer_rfc2544::spread::SpreadSpec;

fn config(args: &Rfc2544Args) -> Result<SweepConfig> {
    let duts: Vec<DutKind> = args.dut.iter().filter_map(|d| DutKind::parse(d)).collect();
    let mut cfg = SweepConfig::new(duts);
    // Checked by the flag's parser already.
    cfg.sizes = args.sizes.iter().map(|s| FrameSize::parse(s)).collect::<Result<_, _>>().context("--sizes")?;
    if args.ipv6 && cfg.sizes.iter().any(|s| matches!(s, FrameSize::Fixed(n) if *n < MIN_FRAME_IPV6)) {
        return Err(usage(format!("--ipv6: every frame size must be at least {MIN_FRAME_IPV6} bytes (imix has 64)")));
    }
    if args.ipv6 && cfg.sizes.contains(&FrameSize::Imix) {
        return Err(usage(format!("--ipv6: imix has 64-byte frames, below the {MIN_FRAME_IPV6} bytes IPv6 needs")));
    }
    cfg.external = args.tx.clone().zip(args.rx.clone());
    cfg.trial = Duration::from_secs_f64(args.trial);
    cfg.short_trial = Duration::from_secs_f64(args.short_trial).min(cfg.trial);
    cfg.wait = Duration::from_secs_f64(args.wait);
    cfg.gen_max_trial = cfg.trial.min(Duration::from_secs(5));
    cfg.resolution = args.resolution;
    cfg.cost_rate = args.cost_rate.map(|r| r as f64);
    cfg.repeat = args.repeat;
    cfg.flows = args.flows;
    cfg.ipv6 = args.ipv6;
    if args.gen_cpus.len() > 2 {
        return Err(usage("--gen-cpus: one CPU (generator and receiver) or two (generator, receiver)"));
    }
    crate::cmd::check_cpus("--gen-cpus", &args.gen_cpus)?;
    crate::cmd::check_cpus("--dut-cpus", &args.dut_cpus)?;
    let gen: Vec<usize> = if args.gen_cpus.is_empty() {
        flowsteer_live::available_cpus().into_iter().take(1).map(|c| c as usize).collect()
    } else {
        args.gen_cpus.iter().map(|&c| c as usize).collect()
    };
    cfg.gen_cpu = gen.first().copied();
    cfg.rx_cpu = gen.get(1).or(gen.first()).copied();
    cfg.bidirectional = args.bidirectional;
    cfg.kernel_rps = args.kernel_rps;
    if args.bidirectional && args.flows > 32768 {
        return Err(usage("--bidirectional: at most 32768 --flows (each direction has its own stream ids)"));
    }
    // Checked by the flag's parser already.
    cfg.io = IoMode::parse(&args.io).unwrap_or(IoMode::Auto);
    if let Some(n) = args.spread_queues {
        let rss = RssArgs {
            key: args.key.clone(),
            seed: None,
            key_len: 52,
            reta_size: args.reta_size,
            queues: None,
            cpus: Vec::new(),
            hash_types: args.hash_types.clone(),
            frag_4tuple: false,
            ethtool_x: args.ethtool_x.clone(),
            mapping: "reta".into(),
            imp: "auto".into(),
        };
        let Resolved { config, warnings } = resolve(&rss, Some(usize::from(n)))?;
        crate::cmd::warn_all(&warnings);
        let sports: PortRange = args.sport_range.parse().map_err(|e| usage(format!("--sport-range: {e}")))?;
        cfg.spread = Some(SpreadSpec { config, queues: n, sports });
    }
    cfg.dut_cpus = if args.dut_cpus.is_empty() {
        flowsteer_live::available_cpus().into_iter().map(|c| c as usize).filter(|c| !gen.contains(c)).take(1).collect()
    } else {
        args.dut_cpus.iter().map(|&c| c as usize).collect()
    };
    Ok(cfg)
}

/// A duration in seconds, rounded up: `45 s`, `9 min`, `2 h 08 min`.
fn span(secs: f64) -> String {
    let s = secs.max(0.0).ceil() as u64;
    let m = s.div_ceil(60);
    if s < 120 {
        format!("{s} s")
    } else if m < 120 {
        format!("{m} min")
    } else {
        format!("{} h {:02} min", m / 60, m % 60)
    }
}

/// A trial length: `60 s`, `0.3 s`.
fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// `1 search`, `4 searches`.
fn count(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The plan and its estimate: printed before anything is built, and all
/// `--dry-run` prints.
pub fn plan_text(p: &Plan) -> String {
    let c = &p.config;
    let mut out = String::new();
    for s in &p.skipped {
        out += &format!("skipped: {}: {}\n", s.dut, s.reason);
    }
    let sizes: Vec<String> = c.sizes.iter().map(FrameSize::label).collect();
    let sizes = format!("{} ({})", count(sizes.len() as u32, "frame size", "frame sizes"), sizes.join(", "));
    if p.duts.is_empty() {
        out += &format!("plan: no DUT, only the generator's ceiling at {sizes}\n");
    } else {
        out += &format!(
            "plan: {} ({}) x {sizes} x {}: {}\n",
            count(p.duts.len() as u32, "DUT", "DUTs"),
            p.duts.join(", "),
            count(c.repeat, "repeat", "repeats"),
            count(p.searches, "search", "searches"),
        );
    }
    if p.searches > 0 {
        out += &format!(
            "trials: {} full-length, {} short; each after {} of learning frames, then a {} wait\n",
            secs(c.trial),
            secs(c.short_trial.min(c.trial)),
            secs(c.learning),
            secs(c.wait)
        );
        let usual = &p.search_usual_trials;
        out += &format!(
            "each search: at most {} trials, usually about {} short and {} full-length\n",
            p.search_max_trials, usual.short, usual.full
        );
    }
    let mut also = vec![format!(
        "{} of {}",
        count(p.ceiling_trials, "generator-ceiling trial", "generator-ceiling trials"),
        secs(c.gen_max_trial)
    )];
    if p.latency_trials > 0 {
        let shares: Vec<String> = c.latency_shares.iter().map(|s| format!("{:.0}", s * 100.0)).collect();
        also.push(format!(
            "up to {} (at {} % of NDR)",
            count(p.latency_trials, "latency trial", "latency trials"),
            shares.join(", ")
        ));
    }
    if let Some(rate) = c.cost_rate {
        also.push(format!("{} at {rate:.0} frames/s", count(p.cost_trials, "CPU-cost trial", "CPU-cost trials")));
    }
    if p.searches == 0 {
        out += &format!("trials: {}\nestimate: at most {}\n", also.join(", "), span(p.max_s));
        return out;
    }
    out += &format!("also: {}\ntrials in all: at most {}\n", also.join(", "), p.max_trials);
    out += &format!(
        "estimate: usually under {}; at most {} (an upper bound: every search stops at {} trials)\n",
        span(p.estimate_s),
        span(p.max_s),
        p.search_max_trials
    );
    out
}

fn mfps(v: Option<f64>) -> String {
    v.map_or("-".into(), |f| format!("{:.3}", f / 1e6))
}

fn size_text(s: &SizeLabel) -> String {
    match s {
        SizeLabel::Bytes(n) => n.to_string(),
        SizeLabel::Mix(m) => m.clone(),
    }
}

/// The table: one row per (DUT, size).
pub fn text(r: &Report) -> String {
    let m = &r.machine;
    let mut out = format!(
        "machine: {} ({} CPUs), kernel {}, driver {}, io {}, XDP {}, AF_XDP {}, {} queue(s)\n",
        m.cpu_model, m.cpus, m.kernel, m.driver, m.io, m.xdp_mode, m.xsk_bind, m.queues
    );
    if let Some(why) = &m.io_fallback {
        out += &format!("io fallback: {why}\n");
    }
    if let Some(why) = &m.xdp_fallback {
        out += &format!("xdp fallback: generic (skb) mode, native refused: {why}\n");
    }
    let c = &r.config;
    out += &format!(
        "trials {:.1} s (short {:.1} s), wait {:.1} s, resolution {} %, {} flow(s), {}, repeat {}\n",
        c.trial.as_secs_f64(),
        c.short_trial.as_secs_f64(),
        c.wait.as_secs_f64(),
        c.resolution * 100.0,
        c.flows,
        if c.ipv6 { "IPv6" } else { "IPv4" },
        c.repeat
    );
    if c.bidirectional {
        out += "bidirectional: both ends send and receive; rates are per direction (aggregate: twice), NDR: neither direction lost a frame\n";
    }
    if let Some(sp) = &c.spread {
        out += &format!(
            "flows spread over receive queues 0..{} (hash types {}, {}-entry table, source ports {}-{})\n",
            sp.queues,
            sp.config.types,
            sp.config.reta.len(),
            sp.sports.lo,
            sp.sports.hi
        );
    }
    let cpu = |c: Option<usize>| c.map_or("any".to_string(), |c| c.to_string());
    let dut_cpus: Vec<String> = c.dut_cpus.iter().map(usize::to_string).collect();
    out += &format!(
        "CPUs: generator {}, receiver {}, DUT {}\n",
        cpu(c.gen_cpu),
        cpu(c.rx_cpu),
        if dut_cpus.is_empty() { "none".to_string() } else { dut_cpus.join(",") }
    );
    out += if c.kernel_rps {
        "kernel DUTs: RPS to the DUT CPUs\n"
    } else {
        "kernel DUTs: RPS off, they forward in the sender's softirq (the generator's CPU)\n"
    };
    let gen: Vec<String> = r
        .generator
        .iter()
        .map(|g| {
            let size = match &g.frame_size {
                SizeLabel::Bytes(n) => format!("{n} B"),
                SizeLabel::Mix(m) => m.clone(),
            };
            format!("{size} {:.3}", g.generator_max_fps / 1e6)
        })
        .collect();
    out += &format!("generator ceiling (--dut none, Mfps): {}\n", gen.join(", "));
    for s in &r.skipped {
        out += &format!("skipped: {}: {}\n", s.dut, s.reason);
    }
    if r.results.is_empty() {
        if !r.complete {
            out += "stopped by a signal\n";
        }
        out += &format!("elapsed {:.0} s\n", r.elapsed_s);
        return out;
    }
    out.push('\n');
    let header = [
        "dut",
        "size",
        "NDR Mfps",
        "PDR Mfps",
        "NDR Gb/s",
        "NDR min..max",
        "gen max",
        "limited",
        "ns/frame",
        "thread ns/frame",
        "DUT ns/frame",
        "trials",
    ];
    let mut rows: Vec<[String; 12]> = vec![header.map(String::from)];
    for row in &r.results {
        let spread = row.ndr_spread.map_or("-".into(), |s| format!("{:.3}..{:.3}", s.min / 1e6, s.max / 1e6));
        rows.push([
            row.dut.clone(),
            size_text(&row.frame_size),
            mfps(row.ndr_fps),
            mfps(row.pdr_fps),
            row.ndr_bps.map_or("-".into(), |b| format!("{:.3}", b / 1e9)),
            spread,
            format!("{:.3}", row.generator_max_fps / 1e6),
            if row.generator_limited { "yes".into() } else { "no".into() },
            row.cpu_ns_per_frame.map_or("-".into(), |c| format!("{c:.0}")),
            row.thread_ns_per_frame.map_or("-".into(), |c| format!("{c:.0}")),
            row.dut_ns_per_frame.map_or("-".into(), |c| format!("{c:.0}")),
            row.trials.len().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..12).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| if i < 2 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    if let Some(rate) = r.config.cost_rate {
        out += &format!(
            "ns/frame: busy time of all CPUs (/proc/stat: user, nice, system, irq, softirq; steal excluded; 10 ms steps \
             per CPU) per frame received at {rate:.0} frames/s, minus --dut none's at the same rate; thread ns/frame: the \
             same from the generator's and receiver's own CPU time (schedstat, ns); DUT ns/frame: the DUT's alone, the \
             flowsteer bridge's worker threads (schedstat) or the kernel's softirq on the DUT CPUs (/proc/stat)\n"
        );
    }
    out += &crate::legend::footer(crate::legend::RFC2544);
    out.push('\n');
    let lat: Vec<String> = r
        .results
        .iter()
        .filter(|row| !row.latency.is_empty())
        .map(|row| {
            let parts: Vec<String> = row
                .latency
                .iter()
                .map(|l| {
                    let us = |ns: u64| ns as f64 / 1e3;
                    format!(
                        "{:.0} %: {:.1}/{:.1}/{:.1}",
                        l.share_of_ndr * 100.0,
                        us(l.detail.latency.p50_ns),
                        us(l.detail.latency.p99_ns),
                        us(l.detail.latency.p999_ns)
                    )
                })
                .collect();
            format!("  {} {}: {}\n", row.dut, size_text(&row.frame_size), parts.join(", "))
        })
        .collect();
    if !lat.is_empty() {
        out += "\nlatency at shares of NDR, p50/p99/p99.9 us:\n";
        out += &lat.concat();
    }
    if !r.complete {
        out += "stopped by a signal: the rows above are the ones that finished\n";
    }
    out += &format!("elapsed {:.0} s\n", r.elapsed_s);
    out
}

pub fn run(args: &Rfc2544Args) -> Result<i32> {
    let cfg = config(args)?;
    if let Some(path) = &args.plot {
        crate::plot::ChartFormat::from_path(path).map_err(|e| usage(format!("--plot: {e}")))?;
    }
    if args.dry_run {
        let plan = Plan::new(&cfg)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&plan)?);
        } else {
            print!("{}", plan_text(&plan));
        }
        if let Some(why) = dut::skip_reason() {
            eprintln!("note: the run itself builds network namespaces and AF_XDP sockets: {why}");
        }
        return Ok(0);
    }
    if let Some(why) = dut::skip_reason() {
        bail!("rfc2544 builds network namespaces and AF_XDP sockets: {why}");
    }
    if args.cleanup {
        // Open vSwitch first: its ovs-vswitchd keeps a namespace alive.
        let ovs = flowsteer_rfc2544::ovs::cleanup();
        for dir in &ovs {
            println!("removed {} (Open vSwitch of a killed run, its daemons stopped)", dir.display());
        }
        let removed = dut::cleanup().context("removing leftover namespaces")?;
        if removed.is_empty() && ovs.is_empty() {
            eprintln!("nothing to clean up");
        }
        for ns in removed {
            println!("removed namespace {ns}");
        }
        return Ok(0);
    }
    eprint!("{}", plan_text(&Plan::new(&cfg)?));
    let stop = flowsteer_live::stop_on_signals()?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut trials = 0u32;
    let report = sweep::run(&cfg, Some(stop), &mut |ev| {
        let note = match &ev {
            Event::IoFallback { reason } => Some(format!("note: {reason}")),
            Event::XdpFallback { reason } => Some(xdp_fallback_warning(reason)),
            Event::Skipped { dut, reason } => Some(format!("skipped: {}: {reason}", dut.name())),
            _ => None,
        };
        if let Some(note) = note {
            match &bar {
                Some(bar) => bar.println(note),
                None => eprintln!("{note}"),
            }
            return;
        }
        let Some(bar) = &bar else { return };
        match ev {
            Event::IoFallback { .. } | Event::XdpFallback { .. } | Event::Skipped { .. } => {}
            Event::Cost { dut, size } => bar.set_message(format!("{} {} B: CPU cost trial", dut.name(), size.label())),
            Event::Latency { dut, size, share } => {
                bar.set_message(format!("{} {} B: latency at {:.0} % of NDR", dut.name(), size.label(), share * 100.0))
            }
            Event::Ceiling { size } => bar.set_message(format!("generator ceiling, {} B", size.label())),
            Event::Search { dut, size, repeat } => {
                trials = 0;
                bar.set_message(format!("{} {} B, search {}", dut.name(), size.label(), repeat + 1));
            }
            Event::Trial { dut, size, record, interval } => {
                trials += 1;
                let at = match interval {
                    Some((goal, lo, hi)) => format!("{goal} in [{:.3}, {:.3}] Mfps", lo / 1e6, hi / 1e6),
                    None => "done".into(),
                };
                bar.set_message(format!(
                    "{} {} B: trial {trials} at {:.3} Mfps lost {:.3} %{}; {at}",
                    dut.name(),
                    size.label(),
                    record.offered_fps / 1e6,
                    record.loss_ratio * 100.0,
                    if record.valid { "" } else { " (invalid)" },
                ));
            }
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    if let Some(path) = &args.plot {
        plot(path, &report)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(0)
}

/// The warning when an XDP program of the sweep attached in generic mode.
fn xdp_fallback_warning(why: &str) -> String {
    format!("warning: XDP attached in generic (skb) mode, slower than native: native refused: {why}")
}

/// NDR per DUT over the frame sizes, and the generator's ceiling.
fn plot(path: &std::path::Path, r: &Report) -> Result<()> {
    use crate::plot::{category_chart, RateSeries};
    let sizes: Vec<String> = r.config.sizes.iter().map(FrameSize::label).collect();
    let mut named: Vec<(String, Vec<Option<f64>>)> =
        vec![("generator ceiling".into(), r.generator.iter().map(|g| Some(g.generator_max_fps)).collect())];
    for dut in r.config.duts.iter().filter(|d| !r.skipped.iter().any(|s| s.dut == d.name())) {
        let values = r
            .config
            .sizes
            .iter()
            .map(|s| {
                let label: SizeLabel = (*s).into();
                r.results
                    .iter()
                    .find(|row| row.dut == dut.name() && row.frame_size == label)
                    .and_then(|row| row.ndr_fps)
            })
            .collect();
        named.push((format!("{} NDR", dut.name()), values));
    }
    let series: Vec<RateSeries<'_>> = named.iter().map(|(n, v)| RateSeries { name: n, values: v }).collect();
    let title = format!("RFC 2544 throughput, {}, {:.0} s trials", r.machine.driver, r.config.trial.as_secs_f64());
    category_chart(path, &title, "frame size (bytes)", &sizes, "frames/s", &series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_rfc2544::sweep::{Machine, SCHEMA};

    fn report(xdp_fallback: Option<&str>) -> Report {
        Report {
            schema: SCHEMA,
            machine: Machine {
                cpu_model: "Some CPU".into(),
                cpus: 2,
                kernel: "6.18.0".into(),
                driver: "veth".into(),
                xdp_mode: "skb".into(),
                xsk_bind: "copy".into(),
                queues: 1,
                io: "afxdp".into(),
                io_fallback: None,
                xdp_fallback: xdp_fallback.map(str::to_string),
            },
            config: SweepConfig::new(vec![DutKind::Patch]),
            generator: Vec::new(),
            results: Vec::new(),
            skipped: Vec::new(),
            complete: true,
            elapsed_s: 1.0,
        }
    }

    /// The machine header says why native XDP was refused, when it was; the
    /// JSON carries the same in `machine.xdp_fallback` (null otherwise).
    #[test]
    fn the_header_and_the_json_say_why_xdp_fell_back_to_generic() {
        let why = "interface mv0 has no native XDP support";
        let text = text(&report(Some(why)));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("machine: Some CPU (2 CPUs), kernel 6.18.0, driver veth, io afxdp, XDP skb"));
        assert_eq!(lines[1], format!("xdp fallback: generic (skb) mode, native refused: {why}"), "{text}");
        assert!(!super::text(&report(None)).contains("xdp fallback"));
        let v = serde_json::to_value(report(Some(why))).unwrap();
        assert_eq!(v["machine"]["xdp_fallback"], why);
        assert!(serde_json::to_value(report(None)).unwrap()["machine"]["xdp_fallback"].is_null());
        assert_eq!(
            xdp_fallback_warning(why),
            format!("warning: XDP attached in generic (skb) mode, slower than native: native refused: {why}")
        );
    }
}
