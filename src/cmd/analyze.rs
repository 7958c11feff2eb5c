//! `flowsteer analyze CAPTURE...`: predict per-queue load and ordering
//! hazards of pcap/pcapng captures under an RSS configuration;
//! `flowsteer analyze --merge REPORT...`: the same report for captures
//! analysed separately (other hosts, a batch runner).
//!
//! Each capture is streamed record by record into a
//! [`flowsteer_analyze::Analyzer`], one reader thread per file and
//! `--threads` at once; their states are merged in the time order of the
//! captures (see [`archive`]) into one report whose figures
//! are those of the captures concatenated. Memory is bounded by
//! `--max-flows` per reader (default 1,000,000 flows, about 128 MB when
//! full; flows first seen after that are counted as `untracked_flows` (an
//! estimate) and `untracked_packets`, and still counted per queue).
//!
//! Output: an aligned text report on stdout (per-queue table, imbalance,
//! unhashed packets, split flows, encapsulation, inner spread, top flows,
//! drops, conservation), or with `--json` one JSON document (schema
//! `flowsteer.analyze.v2`, see `flowsteer_analyze::report`: the report,
//! `inputs` (each capture's size, BLAKE3, packets and time span),
//! `flowsteer_version`, `warnings`, and `state`, what `--merge` combines).
//! Warnings go to stderr prefixed `warning: ` (and into the JSON `warnings`
//! array). A progress bar (files, packets, bytes, rate, time left) is drawn
//! on stderr only when stderr is a terminal and `--quiet` is not given.
//!
//! Exit codes: 0 the report was printed, including for a capture cut short
//! (the warning `capture truncated after N packets` says where; the report
//! covers the packets before the cut); 1 error: a file cannot be read,
//! is not a pcap or pcapng capture, is malformed (a record or block that
//! cannot be a real one), a report to merge is of another schema or
//! configuration, a flag is invalid, or the chart cannot be written
//! (among others: `--plot` names one of the files read, refused before the
//! capture is read); 2 usage (with `--merge`, a flag that the reports
//! decide, such as `--key`).

pub mod archive;

use crate::cli::AnalyzeArgs;
use crate::plot::{self, ChartFormat, Series};
use crate::report::count;
use crate::rssopts::{add_drawn_key, drawn_key_line, resolve, Resolved};
use anyhow::{anyhow, Result};
use archive::{Combined, Input};
use flowsteer_analyze::{report, AnalyzeOptions, Report, State};
use flowsteer_capture::output::check_not_input;
use flowsteer_rss::RssKey;
use serde::Serialize;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The flowsteer version a report names.
const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn run(args: &AnalyzeArgs) -> Result<i32> {
    if args.merge {
        return run_merge(args);
    }
    let Resolved { config, mut warnings } = resolve(&args.rss, None)?;
    let files = archive::expand(&args.inputs, &mut warnings)?;
    // The files read: a chart may be none of them.
    let mut inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    inputs.extend(args.rss.ethtool_x.as_deref());
    if let Some(path) = &args.plot {
        ChartFormat::from_path(path)?;
        check_not_input(path, &inputs)?;
    }
    crate::cmd::warn_all(&warnings);
    let opts = AnalyzeOptions {
        inner: args.inner,
        vxlan_port: args.vxlan_port,
        max_flows: args.max_flows,
        top: args.top,
        ..AnalyzeOptions::default()
    };
    let progress = !args.quiet && crate::progress::wanted(args.json);
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let combined = archive::analyze_files(&files, &config, opts, threads, progress, !args.no_hash)?;
    crate::cmd::warn_all(&combined.warnings);
    warnings.extend(combined.warnings.iter().cloned());
    output(args, &combined, &warnings, Some(config.key()), &inputs)
}

/// `--merge REPORT...`: the reports' configuration and options are theirs,
/// so the flags that would set them are refused.
fn run_merge(args: &AnalyzeArgs) -> Result<i32> {
    let r = &args.rss;
    let given: Vec<&str> = [
        (r.key != "default", "--key"),
        (r.seed.is_some(), "--seed"),
        (r.key_len != 52, "--key-len"),
        (r.reta_size != 128, "--reta-size"),
        (r.queues.is_some(), "--queues"),
        (!r.cpus.is_empty(), "--cpus"),
        (r.hash_types != "default", "--hash-types"),
        (r.frag_4tuple, "--frag-4tuple"),
        (r.ethtool_x.is_some(), "--ethtool-x"),
        (r.mapping != "reta", "--mapping"),
        (r.imp != "auto", "--impl"),
        (args.inner, "--inner"),
        (args.vxlan_port != flowsteer_wire::VXLAN_PORT, "--vxlan-port"),
        (args.max_flows != flowsteer_analyze::DEFAULT_MAX_FLOWS, "--max-flows"),
        (args.threads.is_some(), "--threads"),
        (args.no_hash, "--no-hash"),
    ]
    .into_iter()
    .filter_map(|(on, flag)| on.then_some(flag))
    .collect();
    if !given.is_empty() {
        return Err(crate::cmd::usage(format!(
            "--merge takes the RSS configuration and the analysis options from the reports: drop {}",
            given.join(", ")
        )));
    }
    let mut warnings = Vec::new();
    let reports = archive::expand(&args.inputs, &mut warnings)?;
    let inputs: Vec<&Path> = reports.iter().map(PathBuf::as_path).collect();
    if let Some(path) = &args.plot {
        ChartFormat::from_path(path)?;
        check_not_input(path, &inputs)?;
    }
    let combined = archive::merge_reports(&reports, VERSION)?;
    warnings.extend(combined.warnings.iter().cloned());
    crate::cmd::warn_all(&warnings);
    output(args, &combined, &warnings, None, &inputs)
}

/// Prints the report (text or `--json`) and writes the chart.
fn output(
    args: &AnalyzeArgs,
    combined: &Combined,
    warnings: &[String],
    key: Option<&RssKey>,
    read: &[&Path],
) -> Result<i32> {
    let report = combined.state.report(args.top);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        let doc = JsonReport {
            report: &report,
            capture: match combined.inputs.as_slice() {
                [one] => Some(one),
                _ => None,
            },
            inputs: &combined.inputs,
            merged_reports: (!combined.reports.is_empty()).then_some(&combined.reports),
            flowsteer_version: VERSION,
            warnings,
        };
        let mut doc = serde_json::to_value(doc)?;
        if let Some(key) = key {
            add_drawn_key(&mut doc, key);
        }
        write_json(&mut out, &doc, &combined.state)?;
    } else {
        let key_line = key.and_then(drawn_key_line);
        write_text(&mut out, &report, &combined.inputs, key_line.as_deref())?;
        if !combined.reports.is_empty() {
            writeln!(out, "Merged from {} reports", combined.reports.len())?;
        }
    }
    out.flush()?;

    if let Some(path) = &args.plot {
        let name = match combined.inputs.as_slice() {
            [one] => {
                Path::new(&one.path).file_name().map_or_else(|| one.path.clone(), |n| n.to_string_lossy().into_owned())
            }
            many => format!("{} captures", many.len()),
        };
        write_chart(path, read, &report, &name)?;
    }
    Ok(0)
}

/// The `--json` document (schema `flowsteer.analyze.v2`): the report's
/// fields, what it was made from, the warnings, then the mergeable state.
#[derive(Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    report: &'a Report,
    /// The capture, when there is one (as in v1).
    #[serde(skip_serializing_if = "Option::is_none")]
    capture: Option<&'a Input>,
    /// Every capture, in the order analysed.
    inputs: &'a [Input],
    /// With --merge: the reports merged, in that order.
    #[serde(skip_serializing_if = "Option::is_none")]
    merged_reports: Option<&'a Vec<String>>,
    flowsteer_version: &'static str,
    warnings: &'a [String],
}

/// The document pretty-printed, then `state` on one line: the state holds
/// one entry per tracked flow, so it is written as it is serialised, never
/// held as a JSON tree.
fn write_json(out: &mut impl Write, doc: &serde_json::Value, state: &State) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    let head = text.strip_suffix("\n}").ok_or_else(|| anyhow!("the report is not a JSON object"))?;
    out.write_all(head.as_bytes())?;
    out.write_all(b",\n  \"state\": ")?;
    serde_json::to_writer(&mut *out, state)?;
    out.write_all(b"\n}\n")?;
    Ok(())
}

// ---------------------------------------------------------------- text output

fn write_text(out: &mut impl Write, r: &Report, inputs: &[Input], key_line: Option<&str>) -> std::io::Result<()> {
    let rss = &r.rss;
    write_inputs(out, inputs)?;
    writeln!(
        out,
        "rss: key {} ({}), hash types {} (fragments on the {}), RETA {} over {}, mapping {}",
        rss.key,
        count(rss.key_len as u64, "byte", "bytes"),
        rss.hash_types,
        if rss.fragments_on_2tuple { "2-tuple" } else { "4-tuple when ports are present" },
        count(rss.reta_size as u64, "entry", "entries"),
        count(rss.queues as u64, "queue", "queues"),
        rss.mapping
    )?;
    if let Some(line) = key_line {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "packets: {} read, {} analysed, {} dropped\n", r.packets_read, r.analysed_packets, r.drops.total)?;

    let rows: Vec<QueueRow> = r
        .queues
        .iter()
        .map(|q| QueueRow { queue: q.queue, cpu: q.cpu, packets: q.packets, bytes: q.bytes, flows: Some(q.flows) })
        .collect();
    write_queue_table(out, &rows, Some(r.flows.tracked))?;
    writeln!(out, "{}", crate::legend::footer(crate::legend::ANALYZE_QUEUES))?;
    write_imbalance(out, &r.imbalance)?;

    let u = &r.unhashed;
    writeln!(
        out,
        "\nNot hashed (hash 0 -> RETA[0] -> queue {}): {} (non-IP {}, PPPoE {}, no matching hash type {})",
        u.queue,
        count(u.packets, "packet", "packets"),
        u.non_ip,
        u.pppoe,
        u.no_hash_type
    )?;
    let f = &r.flows;
    writeln!(
        out,
        "Flows: {} tracked (cap {}); beyond the cap: ~{}, {} (counted per queue, not per flow)",
        f.tracked,
        f.max_flows,
        count(f.untracked_flows, "flow", "flows"),
        count(f.untracked_packets, "packet", "packets")
    )?;
    let fr = &r.fragments;
    writeln!(
        out,
        "Fragments: {}, {}, {} without a preceding first fragment",
        count(fr.packets, "packet", "packets"),
        count(fr.first, "first fragment", "first fragments"),
        fr.unmatched
    )?;

    let s = &r.split_flows;
    writeln!(out, "\nSplit flows (reordering hazards):")?;
    writeln!(
        out,
        "  fragments:  {} ({}) {} on more than one queue (fragments hashed on the 2-tuple, whole packets on the 4-tuple)",
        count(s.fragments.flows, "flow", "flows"),
        count(s.fragments.packets, "packet", "packets"),
        if s.fragments.flows == 1 { "lands" } else { "land" }
    )?;
    writeln!(
        out,
        "  directions: {} of {} seen both ways {} its directions on different queues ({})",
        s.directions.split,
        count(s.directions.connections, "connection", "connections"),
        if s.directions.split == 1 { "has" } else { "have" },
        count(s.directions.packets, "packet", "packets")
    )?;

    let seen: Vec<_> = r.encap.iter().filter(|(_, e)| e.packets > 0).collect();
    writeln!(out, "\nEncapsulation:{}", if seen.is_empty() { " none" } else { "" })?;
    if !seen.is_empty() {
        writeln!(out, "  {:<9} {:>12} {:>15} {:>7} {:>7}  NIC", "Kind", "Packets", "Bytes", "Queues", "Inner")?;
        for (kind, e) in seen {
            let inner = e.inner_queues_hit.map_or_else(|| "-".to_string(), |n| n.to_string());
            writeln!(
                out,
                "  {:<9} {:>12} {:>15} {:>7} {:>7}  {}",
                kind, e.packets, e.bytes, e.queues_hit, inner, e.nic
            )?;
        }
        if r.inner.is_none() {
            writeln!(out, "  (--inner shows the spread these packets would get if hashed on their inner headers)")?;
        }
        writeln!(out, "{}", crate::legend::footer_indented(crate::legend::ANALYZE_ENCAP, "  "))?;
    }

    if let Some(inner) = &r.inner {
        writeln!(out, "\nInner-header spread (the same packets hashed on their innermost IP header):")?;
        let rows: Vec<QueueRow> = inner
            .queues
            .iter()
            .map(|q| QueueRow { queue: q.queue, cpu: q.cpu, packets: q.packets, bytes: q.bytes, flows: None })
            .collect();
        write_queue_table(out, &rows, None)?;
        write_imbalance(out, &inner.imbalance)?;
        let outer = &inner.hashed_on_outer;
        let why: Vec<String> = outer
            .by_reason
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("{} {n}", r.replace('_', " ")))
            .collect();
        writeln!(
            out,
            "  hashed on an inner header: {}; on the outer headers: {}{}",
            inner.hashed_on_inner,
            outer.packets,
            if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) }
        )?;
    }

    if !r.top_flows.is_empty() {
        let flows: Vec<(String, String)> =
            r.top_flows.iter().map(|t| (endpoint(t.src, t.sport), endpoint(t.dst, t.dport))).collect();
        let src_w = flows.iter().map(|f| f.0.len()).max().unwrap_or(0).max("Source".len());
        let dst_w = flows.iter().map(|f| f.1.len()).max().unwrap_or(0).max("Destination".len());
        writeln!(out, "\nTop {} by packets:", count(r.top_flows.len() as u64, "flow", "flows"))?;
        writeln!(
            out,
            "  {:<6} {:<src_w$} {:<dst_w$} {:>5} {:>5} {:>12} {:>15}  Split",
            "Proto", "Source", "Destination", "Queue", "CPU", "Packets", "Bytes"
        )?;
        for (t, (src, dst)) in r.top_flows.iter().zip(&flows) {
            writeln!(
                out,
                "  {:<6} {:<src_w$} {:<dst_w$} {:>5} {:>5} {:>12} {:>15}  {}",
                proto_name(t.proto),
                src,
                dst,
                t.queue,
                t.cpu,
                t.packets,
                t.bytes,
                if t.split { "yes" } else { "no" }
            )?;
        }
        writeln!(out, "{}", crate::legend::footer_indented(crate::legend::ANALYZE_FLOWS, "  "))?;
    }

    writeln!(out, "\nDrops: {}", count(r.drops.total, "packet", "packets"))?;
    for (reason, n) in &r.drops.parse_errors {
        writeln!(out, "  parse error {reason}: {n}")?;
    }
    for (linktype, n) in &r.drops.unsupported_linktypes {
        writeln!(out, "  unsupported linktype {linktype}: {n}")?;
    }
    writeln!(
        out,
        "Conservation: {} read = {} analysed + {} dropped: {}",
        r.packets_read,
        r.analysed_packets,
        r.drops.total,
        if r.conservation_ok { "ok" } else { "MISMATCH" }
    )?;
    write_accuracy(out, r)
}

/// The capture line: the file, or how many and which first and last.
fn write_inputs(out: &mut impl Write, inputs: &[Input]) -> std::io::Result<()> {
    match inputs {
        [one] => writeln!(
            out,
            "capture: {} ({}, {} bytes){}",
            one.path,
            one.format.as_deref().unwrap_or("?"),
            one.file_bytes,
            if one.truncated { ", truncated" } else { "" }
        ),
        many => {
            let bytes: u64 = many.iter().map(|i| i.file_bytes).sum();
            let truncated = many.iter().filter(|i| i.truncated).count();
            writeln!(
                out,
                "captures: {} files, {bytes} bytes, in time order from {} to {}{}",
                many.len(),
                many.first().map_or("?", |i| i.path.as_str()),
                many.last().map_or("?", |i| i.path.as_str()),
                if truncated > 0 { format!(", {truncated} truncated") } else { String::new() }
            )
        }
    }
}

/// The figures a merge left bounded, if any (the untracked-flow estimate
/// is always one and goes without saying).
fn write_accuracy(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let bounded: Vec<&report::Bounded> =
        r.accuracy.bounded.iter().filter(|b| b.field != "flows.untracked_flows").collect();
    if let Some(first) = bounded.first() {
        let fields: Vec<&str> = bounded.iter().map(|b| b.field).collect();
        writeln!(out, "Not exact after the merge: {} ({})", fields.join(", "), first.bound)?;
    }
    Ok(())
}

struct QueueRow {
    queue: u16,
    cpu: u32,
    packets: u64,
    bytes: u64,
    flows: Option<u64>,
}

/// `netstat -Q`-style table with a totals line.
fn write_queue_table(out: &mut impl Write, rows: &[QueueRow], total_flows: Option<u64>) -> std::io::Result<()> {
    let packets: u64 = rows.iter().map(|q| q.packets).sum();
    let bytes: u64 = rows.iter().map(|q| q.bytes).sum();
    let pct = |n: u64| if packets == 0 { 0.0 } else { 100.0 * n as f64 / packets as f64 };
    let flows_head = if total_flows.is_some() { format!(" {:>9}", "Flows") } else { String::new() };
    writeln!(out, "{:>5} {:>5} {:>12} {:>7} {:>15}{flows_head}", "Queue", "CPU", "Packets", "Pkt%", "Bytes")?;
    for q in rows {
        let flows = q.flows.map_or_else(String::new, |f| format!(" {f:>9}"));
        writeln!(out, "{:>5} {:>5} {:>12} {:>6.1}% {:>15}{flows}", q.queue, q.cpu, q.packets, pct(q.packets), q.bytes)?;
    }
    let flows = total_flows.map_or_else(String::new, |f| format!(" {f:>9}"));
    writeln!(out, "{:>5} {:>5} {:>12} {:>6.1}% {:>15}{flows}", "Total", "", packets, pct(packets), bytes)
}

/// Imbalance verdicts by packets max/mean: below [`BALANCED_BELOW`]
/// balanced, below [`SEVERE_FROM`] uneven, from it severe (the busiest
/// queue gets at least twice its fair share: with two queues, everything
/// on one).
const BALANCED_BELOW: f64 = 1.25;
const SEVERE_FROM: f64 = 2.0;

/// The verdict on a packets max/mean figure (`None` with no packets).
fn imbalance_verdict(max_mean: f64) -> Option<&'static str> {
    if max_mean <= 0.0 {
        None
    } else if max_mean < BALANCED_BELOW {
        Some("balanced")
    } else if max_mean < SEVERE_FROM {
        Some("uneven")
    } else {
        Some("severe")
    }
}

/// The imbalance figures, then what they mean and a verdict.
fn write_imbalance(out: &mut impl Write, i: &report::Imbalance) -> std::io::Result<()> {
    writeln!(
        out,
        "Imbalance: packets max/mean {:.3}, cv {:.3}; bytes max/mean {:.3}, cv {:.3}",
        i.max_mean, i.cv, i.bytes_max_mean, i.bytes_cv
    )?;
    match imbalance_verdict(i.max_mean) {
        None => writeln!(out, "  no packets: nothing to balance"),
        Some(verdict) => writeln!(
            out,
            "  {verdict}: the busiest queue gets {:.1}x its fair share of the packets (max/mean; 1.0 = even); cv {:.2} is \
             the standard deviation of packets per queue over their mean (0 = even) (balanced below {BALANCED_BELOW}x, \
             uneven below {SEVERE_FROM}x, severe from {SEVERE_FROM}x)",
            i.max_mean, i.cv
        ),
    }
}

fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        58 => "icmp6".into(),
        132 => "sctp".into(),
        other => other.to_string(),
    }
}

fn endpoint(addr: IpAddr, port: Option<u16>) -> String {
    match (addr, port) {
        (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
        (a, None) => a.to_string(),
    }
}

fn write_chart(path: &Path, inputs: &[&Path], r: &Report, name: &str) -> Result<()> {
    let outer: Vec<u64> = r.queues.iter().map(|q| q.packets).collect();
    let inner: Vec<u64> = r.inner.as_ref().map(|i| i.queues.iter().map(|q| q.packets).collect()).unwrap_or_default();
    let mut series = vec![Series { name: "NIC RSS (outer headers)", values: &outer }];
    if r.inner.is_some() {
        series.push(Series { name: "hashed on inner headers", values: &inner });
    }
    let title = format!(
        "{name}: packets per queue (key {}, {}, max/mean {:.2})",
        r.rss.key, r.rss.hash_types, r.imbalance.max_mean
    );
    plot::queue_chart(path, inputs, &title, "packets", &series)
}
