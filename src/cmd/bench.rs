//! `flowsteer bench ...`: the harnesses live in `flowsteer-bench`; each
//! function here maps its arguments to the harness's configuration, runs
//! it, and prints the `--json` document or the text.

use crate::cli::{BenchHashArgs, BenchSteerArgs};
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
