//! `flowsteer export IFACE`: the commands that put an RSS configuration, and
//! with `--steer rps|rfs` the RPS/RFS tables, on a Linux interface, printed
//! as a shell script (comments say what a NIC cannot follow). It takes the
//! RSS flags the other commands take, so a configuration tried with `hash`,
//! `plan`, `analyze` or `run` is exported by repeating its flags. Nothing is
//! run; the text comes from `flowsteer_plan::export::nic_script`.
//!
//! Exit codes: 0 the script was printed; 1 a flag is invalid.

use crate::cli::ExportArgs;
use crate::cmd::usage;
use crate::rssopts::{add_drawn_key, resolve, warn_public_key, Resolved};
use anyhow::{Context, Result};
use flowsteer_plan::export::{nic_script, Line, RfsTables, SoftSteering};
use flowsteer_steer::cpuset::CpuSet;
use flowsteer_steer::steer::{table_size, Policy};

pub fn run(args: &ExportArgs) -> Result<i32> {
    let Resolved { config, mut warnings } = resolve(&args.rss, None)?;
    // The script puts the key on a NIC.
    warn_public_key(&mut warnings, config.key(), flowsteer_rss::PUBLIC_KEY_WARNING);
    crate::cmd::warn_all(&warnings);
    let policy = Policy::parse(&args.steer).map_err(|e| usage(format!("--steer: {e}")))?;
    let rps_cpus = args
        .rps_cpus
        .iter()
        .map(|m| CpuSet::parse(m).map_err(|e| usage(format!("--rps-cpus '{m}': {e}"))))
        .collect::<Result<Vec<_>>>()?;
    let rx_queues = u16::try_from(config.queue_count()).context("too many receive queues")?;
    let steering = match policy {
        Policy::Rss if !rps_cpus.is_empty() => return Err(usage("--rps-cpus applies to --steer rps or rfs")),
        Policy::Rss => None,
        Policy::Rps if rps_cpus.is_empty() => {
            return Err(usage("--steer rps needs --rps-cpus (the CPUs each queue hands packets to)"))
        }
        Policy::Rps => Some(SoftSteering { rx_queues, rps_cpus: &rps_cpus, rfs: None }),
        Policy::Rfs => {
            let rfs =
                RfsTables { sock_flow_entries: table_size(args.rfs_entries), flow_cnt: table_size(args.rfs_flow_cnt) };
            Some(SoftSteering { rx_queues, rps_cpus: &rps_cpus, rfs: Some(rfs) })
        }
    };
    // Both of its errors are about the arguments given.
    let script = nic_script(&args.iface, &config, steering.as_ref()).map_err(|e| usage(e.to_string()))?;
    if args.json {
        let lines: Vec<_> = script
            .lines
            .iter()
            .map(|l| match l {
                Line::Command(c) => serde_json::json!({"command": c}),
                Line::Comment(c) => serde_json::json!({"comment": c}),
            })
            .collect();
        let mut doc = serde_json::json!({
            "schema": "flowsteer.export.v1",
            "iface": args.iface,
            "commands": script.commands().collect::<Vec<_>>(),
            "lines": lines,
            "warnings": warnings,
        });
        add_drawn_key(&mut doc, config.key());
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{script}");
    }
    Ok(0)
}
