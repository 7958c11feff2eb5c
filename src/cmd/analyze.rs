//! `flowsteer analyze CAPTURE`: predict per-queue load and ordering hazards
//! of a pcap/pcapng capture under an RSS configuration.
//!
//! The capture is streamed record by record into a
//! [`flowsteer_analyze::Analyzer`]; memory is bounded by `--max-flows`
//! (default 1,000,000 flows, about 128 MB when full; flows first seen after
//! that are counted as `untracked_flows` (an estimate) and
//! `untracked_packets`, and still counted per queue).
//!
//! Output: an aligned text report on stdout (per-queue table, imbalance,
//! unhashed packets, split flows, encapsulation, inner spread, top flows,
//! drops, conservation), or with `--json` one JSON document (schema
//! `flowsteer.analyze.v1`, see `flowsteer_analyze::report`). Warnings go to
//! stderr prefixed `warning: ` (and into the JSON `warnings` array). A
//! progress bar (by bytes of the file) is drawn on stderr only when stderr
//! is a terminal and `--quiet` is not given.
//!
//! Exit codes: 0 the report was printed, including for a capture cut short
//! (the warning `capture truncated after N packets` says where; the report
//! covers the packets before the cut); 1 error: the file cannot be read,
//! is not a pcap or pcapng capture, is malformed (a record or block that
//! cannot be a real one), a flag is invalid, or the chart cannot be written
//! (among others: `--plot` names one of the files read, refused before the
//! capture is read).

use crate::cli::AnalyzeArgs;
use crate::plot::{self, ChartFormat, Series};
use crate::report::count;
use crate::rssopts::{add_drawn_key, drawn_key_line, resolve, Resolved};
use anyhow::{bail, Context, Result};
use flowsteer_analyze::{report, AnalyzeOptions, Analyzer, Report};
use flowsteer_capture::output::check_not_input;
use flowsteer_capture::{CaptureError, CaptureReader, Decompressed, Format};
use flowsteer_rss::RssConfig;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::cell::Cell;
use std::fs::File;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::Path;
use std::rc::Rc;

pub fn run(args: &AnalyzeArgs) -> Result<i32> {
    let Resolved { config, mut warnings } = resolve(&args.rss, None)?;
    // The files read: a chart may be none of them.
    let mut inputs = vec![args.capture.as_path()];
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
    let analysis = analyze_file(&args.capture, &config, opts, progress)?;
    crate::cmd::warn_all(&analysis.warnings);
    warnings.extend(analysis.warnings.iter().cloned());

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        let doc = JsonReport { report: &analysis.report, capture: &analysis.capture, warnings: &warnings };
        let mut doc = serde_json::to_value(doc)?;
        add_drawn_key(&mut doc, config.key());
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &analysis.report, &analysis.capture, drawn_key_line(config.key()).as_deref())?;
    }
    out.flush()?;

    if let Some(path) = &args.plot {
        write_chart(path, &inputs, &analysis.report, &analysis.capture)?;
    }
    Ok(0)
}

/// The `--json` document: the report's fields, then the capture and warnings.
#[derive(Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    report: &'a Report,
    capture: &'a CaptureSummary,
    warnings: &'a [String],
}

/// What the file held, beside what the analyzer saw.
#[derive(Clone, Debug, Serialize)]
struct CaptureSummary {
    path: String,
    /// `pcap` or `pcapng` (null when the file ends inside its header).
    format: Option<&'static str>,
    /// `none`, `gzip` or `zstd`: recognised by content, decompressed as read.
    compression: &'static str,
    /// Bytes of the file (compressed, when it is).
    file_bytes: u64,
    /// The file ends inside a record; the report covers the records before.
    truncated: bool,
    /// pcapng packets naming an interface their section does not describe:
    /// skipped, not fed to the analyzer (so not in `packets_read`).
    skipped_unknown_interface: u64,
}

struct Analysis {
    report: Report,
    capture: CaptureSummary,
    warnings: Vec<String>,
}

/// Counts the bytes read through it (for the progress bar).
struct CountingReader<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Streams the capture at `path` through an analyzer: read + parse + hash +
/// flow table, single-threaded.
fn analyze_file(path: &Path, config: &RssConfig, opts: AnalyzeOptions, progress: bool) -> Result<Analysis> {
    let file = File::open(path).with_context(|| path.display().to_string())?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let read = Rc::new(Cell::new(0u64));
    // No BufReader: the capture reader fills its own 128 KiB buffer.
    let source = CountingReader { inner: file, read: Rc::clone(&read) };
    let mut capture = CaptureSummary {
        path: path.display().to_string(),
        format: None,
        compression: "none",
        file_bytes,
        truncated: false,
        skipped_unknown_interface: 0,
    };
    let mut warnings = Vec::new();
    let mut analyzer = Analyzer::new(config, opts);
    let source = Decompressed::new(source).with_context(|| path.display().to_string())?;
    capture.compression = source.compression().name();
    let mut reader = match CaptureReader::new(source) {
        Ok(r) => r,
        Err(CaptureError::NotACapture) => bail!("{}: not a pcap or pcapng capture", path.display()),
        Err(CaptureError::Truncated { .. }) => {
            bail!("{}: not a readable capture: the file ends inside its file header", path.display())
        }
        Err(e) => bail!("{}: {e}", path.display()),
    };
    capture.format = Some(match reader.format() {
        Format::Pcap => "pcap",
        Format::PcapNg => "pcapng",
    });
    let bar = progress.then(|| progress_bar(file_bytes));
    let mut records = 0u64;
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => {
                analyzer.feed(p.linktype, p.data, p.orig_len);
                records += 1;
                if records.is_multiple_of(65_536) {
                    if let Some(bar) = &bar {
                        bar.set_position(read.get());
                    }
                }
            }
            Ok(None) => break,
            Err(CaptureError::Truncated { packets_read }) => {
                capture.truncated = true;
                warnings.push(format!("capture truncated after {}", count(packets_read, "packet", "packets")));
            }
            Err(CaptureError::UnknownInterface(_)) => capture.skipped_unknown_interface += 1,
            Err(e) => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                bail!("{}: {e} (after {} packets)", path.display(), analyzer.packets_read());
            }
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if capture.skipped_unknown_interface > 0 {
        warnings.push(if capture.skipped_unknown_interface == 1 {
            "1 pcapng packet names an undescribed interface and was skipped".to_string()
        } else {
            format!(
                "{} pcapng packets name an undescribed interface and were skipped",
                capture.skipped_unknown_interface
            )
        });
    }
    warnings.extend(reader.stats().warnings());
    Ok(Analysis { report: analyzer.finish(), capture, warnings })
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}") {
        bar.set_style(style);
    }
    bar
}

// ---------------------------------------------------------------- text output

fn write_text(
    out: &mut impl Write,
    r: &Report,
    capture: &CaptureSummary,
    key_line: Option<&str>,
) -> std::io::Result<()> {
    let rss = &r.rss;
    writeln!(
        out,
        "capture: {} ({}, {} bytes){}",
        capture.path,
        capture.format.unwrap_or("?"),
        capture.file_bytes,
        if capture.truncated { ", truncated" } else { "" }
    )?;
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
    )
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

fn write_chart(path: &Path, inputs: &[&Path], r: &Report, capture: &CaptureSummary) -> Result<()> {
    let outer: Vec<u64> = r.queues.iter().map(|q| q.packets).collect();
    let inner: Vec<u64> = r.inner.as_ref().map(|i| i.queues.iter().map(|q| q.packets).collect()).unwrap_or_default();
    let mut series = vec![Series { name: "NIC RSS (outer headers)", values: &outer }];
    if r.inner.is_some() {
        series.push(Series { name: "hashed on inner headers", values: &inner });
    }
    let name =
        Path::new(&capture.path).file_name().map_or_else(|| capture.path.clone(), |n| n.to_string_lossy().into_owned());
    let title = format!(
        "{name}: packets per queue (key {}, {}, max/mean {:.2})",
        r.rss.key, r.rss.hash_types, r.imbalance.max_mean
    );
    plot::queue_chart(path, inputs, &title, "packets", &series)
}
