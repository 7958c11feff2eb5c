//! `flowsteer bench ...`: the harnesses live in `flowsteer-bench`; each
//! function here maps its arguments to the harness's configuration, runs
//! it, and prints the `--json` document or the text (lines a harness shows
//! while it runs are printed as they come). `bench tcp`'s harness is
//! `flowsteer_rfc2544::tcp` (it builds the same DUTs as `rfc2544`).

use crate::cli::{
    BenchAnalyzeArgs, BenchFlowsArgs, BenchHashArgs, BenchOffloadArgs, BenchReasmArgs, BenchSteerArgs, BenchTcpArgs,
    BenchUdpArgs,
};
use anyhow::{Context, Result};
use flowsteer_bench as bench;

/// Prints a `--json` document as every command does.
fn print_json(doc: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(doc)?);
    Ok(())
}

pub fn hash(args: &BenchHashArgs) -> Result<i32> {
    let report = bench::hash::run(&bench::hash::Config { seconds: args.seconds, reps: args.reps })?;
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
        println!("{}", crate::legend::footer(crate::legend::BENCH_HASH));
    }
    Ok(0)
}

pub fn offload(args: &BenchOffloadArgs) -> Result<i32> {
    let report = bench::offload::run(&bench::offload::Config { seconds: args.seconds, reps: args.reps })?;
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
        println!("{}", crate::legend::footer(crate::legend::BENCH_OFFLOAD));
    }
    Ok(0)
}

pub fn steer(args: &BenchSteerArgs) -> Result<i32> {
    let cfg = bench::steer::Config {
        seconds: args.seconds,
        flows: args.flows.clone(),
        reps: args.reps,
        ring_items: args.ring_items,
    };
    let report = bench::steer::run(&cfg)?;
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
        println!("{}", crate::legend::footer(crate::legend::BENCH_STEER));
    }
    Ok(0)
}

pub fn flows(args: &BenchFlowsArgs) -> Result<i32> {
    use bench::flows::{Config, Part};
    if let Some(p) = &args.plot {
        crate::plot::ChartFormat::from_path(p).map_err(|e| super::usage(format!("--plot: {e}")))?;
    }
    if let Some(d) = args.dpdk.as_ref().filter(|d| !d.is_file()) {
        return Err(super::usage(format!(
            "--dpdk {}: no such file (`make -C bench/dpdk flowtable-dpdk` builds bench/dpdk/flowtable-dpdk)",
            d.display()
        )));
    }
    let cfg = Config {
        flows: args.flows.clone(),
        dists: args.dist.clone(),
        seconds: args.seconds,
        reps: args.reps,
        burst: args.burst,
        cpu: args.cpu,
        only: args.only.as_deref().map(|o| if o == "engine" { Part::Engine } else { Part::Table }),
        dpdk: args.dpdk.clone(),
    };
    let report = bench::flows::run(&cfg, &mut |case| eprintln!("measuring: {case}"))?;
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
        println!("{}", crate::legend::footer(crate::legend::BENCH_FLOWS));
    }
    if let Some(path) = &args.plot {
        flows_plot(path, &report)?;
        if !args.json {
            println!("chart: {}", path.display());
        }
    }
    Ok(0)
}

/// The engine's Mpps per flow count, one bar per distribution.
fn flows_plot(path: &std::path::Path, r: &bench::flows::Report) -> Result<()> {
    use crate::plot::{category_chart, RateSeries};
    let engine: Vec<&bench::flows::Row> = r.rows.iter().filter(|row| row.part == "engine").collect();
    let mut counts: Vec<u32> = engine.iter().map(|row| row.flows).collect();
    counts.sort_unstable();
    counts.dedup();
    let categories: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
    let named: Vec<(String, Vec<Option<f64>>)> = r
        .config
        .dists
        .iter()
        .map(|d| {
            let label = d.label();
            let values: Vec<Option<f64>> = counts
                .iter()
                .map(|c| engine.iter().find(|row| row.flows == *c && row.dist == label).map(|row| row.mpps))
                .collect();
            (label, values)
        })
        .collect();
    let series: Vec<RateSeries<'_>> = named.iter().map(|(n, v)| RateSeries { name: n, values: v }).collect();
    let title = format!("flowsteer engine, one worker, direct dispatch, 64-byte frames (cpu {})", r.cpu);
    category_chart(path, &title, "flows", &categories, "Mpps", &series)
}

pub fn reasm(args: &BenchReasmArgs) -> Result<i32> {
    let cfg = bench::reasm::Config {
        seconds: args.seconds,
        set: args.set.clone(),
        delivery: args.delivery.clone(),
        family: args.family.clone(),
        in_flight: args.in_flight.clone(),
        order: args.order.clone(),
        cpu: args.cpu,
        dpdk: args.dpdk.clone(),
        max_dist: args.max_dist,
        rounds: args.rounds,
    };
    let report = bench::reasm::run(&cfg, &mut |left_out| eprintln!("{left_out}"))?;
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
        println!("{}", crate::legend::footer(crate::legend::BENCH_REASM));
    }
    Ok(0)
}

pub fn udp(args: &BenchUdpArgs) -> Result<i32> {
    let cfg = bench::udp::Config {
        exe: std::env::current_exe().context("find this executable")?,
        seconds: args.seconds,
        size: args.size,
        flows: args.flows,
        max_flows: args.max_flows,
        modes: args.modes.clone(),
        xdp_mode: args.xdp_mode.clone(),
    };
    let rows = bench::udp::run(&cfg, &mut |row| {
        if !args.json {
            println!("{}", bench::udp::row_line(row));
        }
    })?;
    if args.json {
        print_json(&bench::udp::json(&rows))?;
    } else {
        print!("{}", bench::udp::summary(&rows));
    }
    Ok(0)
}

/// `bench tcp`: exit 0 when every run measured, 1 when a run or a DUT
/// failed (after the whole report) or the machine cannot run it.
pub fn tcp(args: &BenchTcpArgs) -> Result<i32> {
    use flowsteer_rfc2544::dut::DutKind;
    use flowsteer_rfc2544::tcp::{self, Event, TcpConfig};
    let mut duts: Vec<DutKind> = Vec::new();
    // Checked by the flag's parser already; a DUT given twice runs once.
    for d in args.dut.iter().filter_map(|d| DutKind::parse(d)) {
        if !duts.contains(&d) {
            duts.push(d);
        }
    }
    let mut streams: Vec<u16> = Vec::new();
    for s in &args.streams {
        if !streams.contains(s) {
            streams.push(*s);
        }
    }
    let cfg = TcpConfig { duts, streams, seconds: args.seconds, repeat: args.repeat };
    if let Some(why) = tcp::skip_reason() {
        anyhow::bail!("bench tcp builds network namespaces and runs iperf3: {why}");
    }
    if !args.json {
        eprintln!("estimate: about {} s", cfg.estimate().as_secs());
    }
    let stop = flowsteer_live::stop_on_signals()?;
    let report = tcp::run(&cfg, Some(stop), &mut |ev| {
        if args.json {
            return;
        }
        match ev {
            Event::Setup(s) => match &s.error {
                Some(e) => eprintln!("{}: failed: {e}", s.dut.name()),
                None => eprintln!("{}: up, ping answered in {:.0} ms", s.dut.name(), s.ping_s.unwrap_or(0.0) * 1e3),
            },
            Event::Run { dut, streams, record } => {
                let what = match (record.bits_per_second, &record.error) {
                    (Some(b), _) => {
                        format!("{:.2} Gbit/s, {} retransmits", b / 1e9, record.retransmits.unwrap_or(0))
                    }
                    (None, Some(e)) => format!("failed: {e}"),
                    (None, None) => "failed".into(),
                };
                eprintln!("{} {streams} stream(s) run {}/{}: {what}", dut.name(), record.run, args.repeat);
            }
        }
    })?;
    if args.json {
        print_json(&serde_json::to_value(&report)?)?;
    } else {
        print!("{}", report.text());
        println!("{}", crate::legend::footer(crate::legend::BENCH_TCP));
    }
    let failed = report.failed_cells();
    if failed > 0 {
        eprintln!("error: {failed} of {} cells had a failed run (see the report)", report.results.len());
        return Ok(1);
    }
    Ok(0)
}

pub fn analyze(args: &BenchAnalyzeArgs) -> Result<i32> {
    let cfg = bench::analyze::Config { packets: args.packets, flows: args.flows, keep: args.keep.clone() };
    let report = bench::analyze::run(&cfg)?;
    if args.json {
        print_json(&report.json())?;
    } else {
        print!("{}", report.text());
    }
    Ok(0)
}
