//! `flowsteer bench ...`: the harnesses live in `flowsteer-bench`; each
//! function here maps its arguments to the harness's configuration, runs
//! it, and prints the `--json` document or the text (lines a harness shows
//! while it runs are printed as they come).

use crate::cli::{BenchHashArgs, BenchReasmArgs, BenchSteerArgs};
use anyhow::Result;
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
    }
    Ok(0)
}
