//! flowsteer-defrag: reassemble the IPv4/IPv6 fragments of a pcap/pcapng
//! capture into a pcap file (`flowsteer defrag IN -o OUT`).
//!
//! The capture is streamed record by record through one
//! [`flowsteer_reasm::Reassembler`] (memory bounded by `--mem-limit`); its
//! clock is the capture's timestamps (never going backwards), so timeouts
//! behave as they did on the wire. The output (classic pcap, the input's link
//! type) holds:
//!
//! * every packet that is not a fragment, unchanged: unfragmented IP packets,
//!   IPv6 atomic fragments (RFC 6946), non-IP frames, frames that do not parse
//!   and frames of an unsupported link type (the last three counted as
//!   `passed_unparsed`), so nothing is silently lost;
//! * every reassembled datagram as one packet, at the timestamp of the
//!   fragment that completed it, in delivery order: the link-layer header of
//!   that fragment (the bytes before the IP header, unchanged) followed by the
//!   reassembled IP packet.
//!
//! Fragments that do not end in a delivered datagram are counted by reason
//! and the conservation law `fragments_in = fragments_reassembled + Σ drops +
//! pending_at_end` is checked. Without `--no-flush` the datagrams still
//! pending at the end of the capture are dropped (`flushed_at_end`), so
//! `pending_at_end` is 0.
//!
//! The result is a [`DefragReport`] (the `--json` document, schema
//! `flowsteer.defrag.v1`, warnings included); [`write_text`] renders it as
//! an aligned counter table. The library prints nothing; failures are a
//! [`DefragError`] whose text starts with the file it concerns.
#![forbid(unsafe_code)]

use flowsteer_capture::{CaptureError, CaptureReader, CaptureWriter, Format};
use flowsteer_reasm::{DropReason, ReasmConfig, ReasmStats, Reassembler, Verdict};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Link type written when the input holds no packet to take it from.
const DEFAULT_LINKTYPE: u32 = 1;

/// What to reassemble, where to write it, and with which limits.
#[derive(Debug, Clone)]
pub struct DefragOptions {
    pub input: PathBuf,
    pub output: PathBuf,
    /// Keep the datagrams still pending at the end (reported as pending)
    /// instead of dropping them as `flushed_at_end`.
    pub no_flush: bool,
    /// The reassembler's limits (memory, timeouts, fragments per datagram).
    pub reasm: ReasmConfig,
}

/// Why a capture could not be reassembled. The text starts with the file
/// it concerns; an underlying I/O or capture error is its source.
#[derive(Debug, thiserror::Error)]
pub enum DefragError {
    #[error(transparent)]
    Config(#[from] flowsteer_reasm::ReasmConfigError),
    #[error("{path}")]
    Open { path: String, source: std::io::Error },
    #[error("{path}: not a pcap or pcapng capture")]
    NotACapture { path: String },
    #[error("{path}: {error}")]
    BadCapture { path: String, error: CaptureError },
    #[error("{path}: {error} (after {packets} packets)")]
    BadRecord { path: String, error: CaptureError, packets: u64 },
    #[error("{path}: cannot create the output")]
    Create { path: String, source: std::io::Error },
    #[error("{path}: cannot write")]
    Write { path: String, source: WriteError },
    #[error("{path}: output not started")]
    NotStarted { path: String },
}

/// What failed while writing the output.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The `--json` document (schema `flowsteer.defrag.v1`).
#[derive(Debug, Serialize)]
pub struct DefragReport {
    pub schema: &'static str,
    pub input: String,
    pub output: String,
    /// `pcap` or `pcapng` (null when the file ends inside its header).
    pub format: Option<&'static str>,
    /// Link type of the output file.
    pub linktype: u32,
    /// The input ends inside a record; the output covers the records before.
    pub truncated: bool,
    pub packets_in: u64,
    pub packets_out: u64,
    /// IP packets that are not fragments (written unchanged).
    pub unfragmented: u64,
    /// IPv6 atomic fragments (written unchanged).
    pub atomic_fragments: u64,
    /// Frames written unchanged without reassembly: non-IP, not parseable, or
    /// of an unsupported link type (the three counters below).
    pub passed_unparsed: u64,
    pub non_ip: u64,
    pub parse_errors: u64,
    pub unsupported_linktype: u64,
    /// pcapng packets whose interface has a link type other than the output's
    /// (written unchanged; the output labels them with its link type).
    pub linktype_mismatch: u64,
    /// pcapng packets naming an undescribed interface: skipped.
    pub skipped_unknown_interface: u64,
    pub fragments_in: u64,
    pub datagrams_reassembled: u64,
    /// Fragments that ended up in a delivered datagram.
    pub fragments_reassembled: u64,
    /// Fragments dropped, by reason (every reason, zeros included).
    pub dropped: BTreeMap<&'static str, u64>,
    /// Whole datagrams (queues) dropped, by queue-killing reason.
    pub dropped_datagrams: BTreeMap<&'static str, u64>,
    /// Fragments dropped as malformed (every malformed reason summed:
    /// bad_length, too_large, conflicting_end, tiny_first, truncated,
    /// bad_header, ecn_mismatch).
    pub malformed: u64,
    pub duplicates: u64,
    pub overlaps: u64,
    pub timed_out: u64,
    pub evicted: u64,
    pub too_many_frags: u64,
    /// Fragments of datagrams still pending at the end of the capture,
    /// dropped by the final flush.
    pub flushed_at_end: u64,
    /// Fragments still held after the end (0 unless `--no-flush`).
    pub pending_at_end: u64,
    pub pending_datagrams_at_end: u64,
    /// Timed-out datagrams that held their first fragment (an ICMP Time
    /// Exceeded would have been due).
    pub time_exceeded: u64,
    pub mem_limit: usize,
    pub mem_high_watermark: usize,
    pub conservation: String,
    pub conservation_ok: bool,
    pub warnings: Vec<String>,
}

/// Counter name of a drop reason in this report (the flush is reported as
/// `flushed_at_end`, distinct from what is still pending).
pub fn reason_name(r: DropReason) -> &'static str {
    match r {
        DropReason::Flushed => "flushed_at_end",
        other => other.name(),
    }
}

/// Counts of what the command did with the packets, beside the reassembler's.
#[derive(Debug, Default)]
struct Counts {
    packets_in: u64,
    packets_out: u64,
    unfragmented: u64,
    atomic: u64,
    non_ip: u64,
    parse_errors: u64,
    unsupported_linktype: u64,
    linktype_mismatch: u64,
    skipped_unknown_interface: u64,
    fragments_pushed: u64,
    datagrams: u64,
}

/// The output file: created before reading, its pcap header written when the
/// first packet tells the link type.
struct Output {
    path: String,
    file: Option<File>,
    writer: Option<CaptureWriter<BufWriter<File>>>,
    linktype: u32,
}

impl Output {
    fn create(path: &Path) -> Result<Output, DefragError> {
        let file =
            File::create(path).map_err(|source| DefragError::Create { path: path.display().to_string(), source })?;
        Ok(Output { path: path.display().to_string(), file: Some(file), writer: None, linktype: DEFAULT_LINKTYPE })
    }

    /// Writes the header for `linktype` if not done yet.
    fn write_err(&self, e: impl Into<WriteError>) -> DefragError {
        DefragError::Write { path: self.path.clone(), source: e.into() }
    }

    fn start(&mut self, linktype: u32) -> Result<(), DefragError> {
        if self.writer.is_none() {
            if let Some(f) = self.file.take() {
                let w = CaptureWriter::new(BufWriter::with_capacity(256 * 1024, f), linktype)
                    .map_err(|e| self.write_err(e))?;
                self.linktype = linktype;
                self.writer = Some(w);
            }
        }
        Ok(())
    }

    fn write(&mut self, ts: u64, data: &[u8], orig_len: u32) -> Result<(), DefragError> {
        let written = match self.writer.as_mut() {
            Some(w) => w.write_packet(ts, data, orig_len),
            None => return Err(DefragError::NotStarted { path: self.path.clone() }),
        };
        written.map_err(|e| self.write_err(e))
    }

    fn finish(mut self, linktype: u32) -> Result<(), DefragError> {
        self.start(linktype)?;
        if let Some(w) = self.writer.take() {
            let f = w.finish().map_err(|e| self.write_err(e))?;
            let f = f.into_inner().map_err(|e| self.write_err(e.into_error()))?;
            f.sync_all().ok();
        }
        Ok(())
    }
}

/// Streams `opts.input` through one reassembler into `opts.output` and
/// reports what happened to every packet (see the crate doc).
pub fn defrag_file(opts: &DefragOptions) -> Result<DefragReport, DefragError> {
    let args = opts;
    let in_path = &args.input;
    let in_name = in_path.display().to_string();
    let mut warnings = Vec::new();
    let mut truncated = false;
    let mut format = None;
    let mut counts = Counts::default();
    let mut reasm = Reassembler::new(opts.reasm)?;

    let file = File::open(in_path).map_err(|source| DefragError::Open { path: in_name.clone(), source })?;
    let reader = match CaptureReader::new(file) {
        Ok(r) => Some(r),
        Err(CaptureError::NotACapture) => return Err(DefragError::NotACapture { path: in_name }),
        Err(CaptureError::Truncated { .. }) => {
            truncated = true;
            warnings.push(format!("{in_name}: capture truncated after 0 packets (the file ends inside its header)"));
            None
        }
        Err(error) => return Err(DefragError::BadCapture { path: in_name, error }),
    };
    let mut output = Output::create(&args.output)?;

    if let Some(mut reader) = reader {
        format = Some(match reader.format() {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        });
        let parse_opts = ParseOptions::default();
        let mut out = Vec::with_capacity(65_536 + 64);
        let mut frame = Vec::with_capacity(65_536 + 64);
        let mut now = 0u64;
        let mut started = false;
        loop {
            let p = match reader.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(CaptureError::Truncated { packets_read }) => {
                    truncated = true;
                    warnings.push(format!("{in_name}: capture truncated after {packets_read} packets"));
                    continue;
                }
                Err(CaptureError::UnknownInterface(_)) => {
                    counts.skipped_unknown_interface += 1;
                    continue;
                }
                Err(error) => return Err(DefragError::BadRecord { path: in_name, error, packets: counts.packets_in }),
            };
            counts.packets_in += 1;
            if !started {
                output.start(p.linktype)?;
                started = true;
            }
            if p.linktype != output.linktype {
                counts.linktype_mismatch += 1;
            }
            // The reassembler's clock never goes backwards.
            now = now.max(p.ts_nanos);
            let Some(link) = LinkType::from_pcap(p.linktype) else {
                counts.unsupported_linktype += 1;
                output.write(p.ts_nanos, p.data, p.orig_len)?;
                counts.packets_out += 1;
                continue;
            };
            let l3 = match parse_frame(p.data, link, &parse_opts) {
                Ok(parsed) => parsed.outer,
                Err(_) => {
                    counts.parse_errors += 1;
                    reasm.expire(now);
                    output.write(p.ts_nanos, p.data, p.orig_len)?;
                    counts.packets_out += 1;
                    continue;
                }
            };
            let Some(l3) = l3 else {
                counts.non_ip += 1;
                reasm.expire(now);
                output.write(p.ts_nanos, p.data, p.orig_len)?;
                counts.packets_out += 1;
                continue;
            };
            if l3.frag.is_some() {
                counts.fragments_pushed += 1;
            }
            match reasm.push(p.data, &l3, now, &mut out) {
                Verdict::NotFragment | Verdict::Atomic => {
                    if l3.atomic_frag {
                        counts.atomic += 1;
                    } else {
                        counts.unfragmented += 1;
                    }
                    output.write(p.ts_nanos, p.data, p.orig_len)?;
                    counts.packets_out += 1;
                }
                Verdict::Complete { .. } => {
                    counts.datagrams += 1;
                    frame.clear();
                    frame.extend_from_slice(p.data.get(..l3.l3_offset).unwrap_or(&[]));
                    frame.extend_from_slice(&out);
                    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
                    output.write(p.ts_nanos, &frame, len)?;
                    counts.packets_out += 1;
                }
                Verdict::Held | Verdict::Dropped(_) => {}
            }
        }
    }
    if !args.no_flush {
        reasm.flush();
    }
    let linktype = output.linktype;
    output.finish(DEFAULT_LINKTYPE)?;

    if counts.skipped_unknown_interface > 0 {
        warnings.push(format!(
            "{in_name}: {} pcapng packets name an undescribed interface and were skipped",
            counts.skipped_unknown_interface
        ));
    }
    if counts.unsupported_linktype > 0 {
        warnings.push(format!(
            "{in_name}: {} packets of an unsupported link type were passed unchanged",
            counts.unsupported_linktype
        ));
    }
    if counts.linktype_mismatch > 0 {
        warnings.push(format!(
            "{in_name}: {} packets have a link type other than the output's ({linktype}) and were written unchanged",
            counts.linktype_mismatch
        ));
    }
    Ok(build_report(args, format, linktype, truncated, &counts, reasm.stats(), reasm.pending(), warnings))
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    args: &DefragOptions,
    format: Option<&'static str>,
    linktype: u32,
    truncated: bool,
    c: &Counts,
    s: &ReasmStats,
    pending_datagrams: usize,
    warnings: Vec<String>,
) -> DefragReport {
    let dropped: BTreeMap<&'static str, u64> =
        DropReason::ALL.iter().map(|&r| (reason_name(r), s.dropped(r))).collect();
    let dropped_datagrams: BTreeMap<&'static str, u64> =
        DropReason::ALL.iter().map(|&r| (reason_name(r), s.datagrams_dropped(r))).collect();
    let malformed: u64 = DropReason::ALL.iter().filter(|r| r.is_malformed()).map(|&r| s.dropped(r)).sum();
    let passed_unparsed = c.non_ip + c.parse_errors + c.unsupported_linktype;
    // Every fragment is accounted for once by the reassembler, the command
    // pushed exactly the fragments it counted, and every packet is either
    // written or a fragment.
    let frag_law = s.conservation_ok() && s.fragments_in == c.fragments_pushed;
    let packet_law = c.packets_in == c.unfragmented + c.atomic + passed_unparsed + s.fragments_in
        && c.packets_out == c.unfragmented + c.atomic + passed_unparsed + c.datagrams
        && c.datagrams == s.datagrams_completed;
    let mut terms = vec![format!("{} reassembled", s.fragments_completed)];
    for r in DropReason::ALL {
        let n = s.dropped(r);
        if n > 0 {
            terms.push(format!("{n} {}", reason_name(r)));
        }
    }
    terms.push(format!("{} pending", s.pending));
    let ok = frag_law && packet_law;
    let conservation = format!(
        "fragments_in {} {} {}",
        s.fragments_in,
        if s.fragments_in == s.fragments_completed + s.dropped_total() + s.pending { "=" } else { "!=" },
        terms.join(" + ")
    );
    DefragReport {
        schema: "flowsteer.defrag.v1",
        input: args.input.display().to_string(),
        output: args.output.display().to_string(),
        format,
        linktype,
        truncated,
        packets_in: c.packets_in,
        packets_out: c.packets_out,
        unfragmented: c.unfragmented,
        atomic_fragments: c.atomic,
        passed_unparsed,
        non_ip: c.non_ip,
        parse_errors: c.parse_errors,
        unsupported_linktype: c.unsupported_linktype,
        linktype_mismatch: c.linktype_mismatch,
        skipped_unknown_interface: c.skipped_unknown_interface,
        fragments_in: s.fragments_in,
        datagrams_reassembled: s.datagrams_completed,
        fragments_reassembled: s.fragments_completed,
        dropped,
        dropped_datagrams,
        malformed,
        duplicates: s.dropped(DropReason::Duplicate),
        overlaps: s.dropped(DropReason::Overlap),
        timed_out: s.dropped(DropReason::TimedOut),
        evicted: s.dropped(DropReason::Evicted),
        too_many_frags: s.dropped(DropReason::TooManyFrags),
        flushed_at_end: s.dropped(DropReason::Flushed),
        pending_at_end: s.pending,
        pending_datagrams_at_end: pending_datagrams as u64,
        time_exceeded: s.time_exceeded,
        mem_limit: args.reasm.high_thresh,
        mem_high_watermark: s.mem_high_watermark,
        conservation,
        conservation_ok: ok,
        warnings,
    }
}

/// The report as an aligned counter table (what `flowsteer defrag` prints).
pub fn write_text(w: &mut impl Write, r: &DefragReport) -> std::io::Result<()> {
    writeln!(w, "defrag {} -> {} ({}, linktype {})", r.input, r.output, r.format.unwrap_or("empty"), r.linktype)?;
    let mut rows: Vec<(&str, String)> = vec![
        ("packets in", r.packets_in.to_string()),
        ("packets out", r.packets_out.to_string()),
        ("unfragmented", r.unfragmented.to_string()),
        ("atomic fragments", r.atomic_fragments.to_string()),
        ("passed unparsed", r.passed_unparsed.to_string()),
        ("  non-IP", r.non_ip.to_string()),
        ("  parse errors", r.parse_errors.to_string()),
        ("  unsupported link type", r.unsupported_linktype.to_string()),
        ("fragments in", r.fragments_in.to_string()),
        ("datagrams reassembled", r.datagrams_reassembled.to_string()),
        ("fragments reassembled", r.fragments_reassembled.to_string()),
        ("duplicates", r.duplicates.to_string()),
        ("overlaps", r.overlaps.to_string()),
        ("timed out", r.timed_out.to_string()),
        ("evicted", r.evicted.to_string()),
        ("too many frags", r.too_many_frags.to_string()),
        ("malformed", r.malformed.to_string()),
    ];
    for reason in DropReason::ALL.into_iter().filter(|r| r.is_malformed()) {
        let n = r.dropped.get(reason_name(reason)).copied().unwrap_or(0);
        if n > 0 {
            rows.push((reason_name(reason), n.to_string()));
        }
    }
    for reason in [DropReason::NoMemory, DropReason::Disabled] {
        let n = r.dropped.get(reason_name(reason)).copied().unwrap_or(0);
        if n > 0 {
            rows.push((reason_name(reason), n.to_string()));
        }
    }
    rows.push(("flushed at end", r.flushed_at_end.to_string()));
    rows.push(("pending at end", r.pending_at_end.to_string()));
    rows.push(("memory high watermark", format!("{} B of {} B", r.mem_high_watermark, r.mem_limit)));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &rows {
        writeln!(w, "  {k:<width$}  {v:>12}")?;
    }
    writeln!(w, "conservation: {} ({})", r.conservation, if r.conservation_ok { "ok" } else { "VIOLATED" })?;
    Ok(())
}
