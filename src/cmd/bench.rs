//! `flowsteer bench ...`: the harnesses live in `flowsteer-bench`; each
//! function here maps its arguments to the harness's configuration, runs
//! it, and prints the `--json` document or the text (lines a harness shows
//! while it runs are printed as they come).

use crate::cli::{BenchAnalyzeArgs, BenchHashArgs, BenchReasmArgs, BenchSteerArgs, BenchUdpArgs};
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
