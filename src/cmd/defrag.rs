//! `flowsteer defrag IN -o OUT`: reassemble the IPv4/IPv6 fragments of a
//! pcap/pcapng capture (gzip or zstd compressed or not) into a pcap file,
//! or a pcapng file when OUT ends in `.pcapng` (one interface per input
//! link type; a pcap output refuses an input that mixes link types).
//!
//! The work (and what the output holds) is `flowsteer-defrag`'s; this
//! module maps the flags to its options and prints its report: an aligned
//! counter table on stdout, or with `--json` one JSON document (schema
//! `flowsteer.defrag.v2`). Warnings go to stderr prefixed `warning: ` (and
//! into the JSON `warnings` array).
//!
//! The output is never the input (the same path, a hard link or a symbolic
//! link either way is refused before anything is read) and is written
//! through a temporary file renamed into place at the end: on an error, or
//! on SIGINT/SIGTERM, the temporary file is removed and a previous output
//! is left as it was (a second signal exits at once, possibly leaving the
//! hidden `.OUT.PID-N.tmp` beside it, never a half-written OUT).
//!
//! Exit codes: 0 the output was written (also for a capture cut short: the
//! warning `IN: capture truncated after N packets` says where); 1 error: the
//! input cannot be read, is not a capture or is malformed, the output is the
//! input or cannot be written, the run was interrupted, or a flag is
//! invalid.

use crate::cli::DefragArgs;
use anyhow::Result;
use flowsteer_defrag::{defrag_file, write_text, DefragOptions};
use flowsteer_reasm::ReasmConfig;
use std::io::Write;

pub fn run(args: &DefragArgs) -> Result<i32> {
    let mut opts = DefragOptions {
        input: args.input.clone(),
        output: args.output.clone(),
        no_flush: args.no_flush,
        keep_malformed: args.keep_malformed,
        reasm: config(args)?,
        stop: Some(flowsteer_live::stop_on_signals()?),
        progress: None,
    };
    // A bar by bytes of the input, on a terminal only.
    let bar = if !args.quiet && crate::progress::wanted(args.json) {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        opts.progress = Some(done.clone());
        let total = std::fs::metadata(&args.input).map(|m| m.len()).unwrap_or(0);
        Some(crate::progress::ByteBar::start("defrag: reading", total, done))
    } else {
        None
    };
    let report = defrag_file(&opts);
    drop(bar);
    let report = report?;
    crate::cmd::warn_all(&report.warnings);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &report)?;
    }
    out.flush()?;
    Ok(0)
}

/// The reassembler's limits from the flags.
fn config(args: &DefragArgs) -> Result<ReasmConfig> {
    // The flags' ranges (clap) keep every value here meaningful.
    let mut cfg = ReasmConfig {
        high_thresh: args.mem_limit,
        low_thresh: args.mem_limit / 4 * 3 + (args.mem_limit % 4) * 3 / 4,
        max_frags: args.max_frags,
        ..ReasmConfig::default()
    };
    if let Some(t) = args.timeout {
        let ns = (t * 1e9).round() as u64;
        cfg.timeout_v4_ns = ns.max(1);
        cfg.timeout_v6_ns = ns.max(1);
    }
    Ok(cfg)
}
