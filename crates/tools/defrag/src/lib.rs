//! flowsteer-defrag: reassemble the IPv4/IPv6 fragments of a pcap/pcapng
//! capture (gzip or zstd compressed or not) into a pcap or pcapng file
//! (`flowsteer defrag IN -o OUT`).
//!
//! The capture is streamed record by record through one
//! [`flowsteer_reasm::Reassembler`] (memory bounded by `--mem-limit`); its
//! clock is the capture's timestamps (never going backwards), so timeouts
//! behave as they did on the wire. The output ([`OutputFormat`]: pcapng
//! when its name ends in `.pcapng`, with one interface per link type of the
//! input, named and timed as the first input interface of that link type;
//! otherwise classic pcap with the input's link type, and an input that
//! mixes link types is refused with [`DefragError::MixedLinkTypes`] rather
//! than written under the wrong one) holds:
//!
//! * every frame that parses and is not a fragment, unchanged: unfragmented
//!   IP packets (PPPoE-carried ones included), IPv6 atomic fragments (RFC
//!   6946) and non-IP frames (ARP, ...);
//! * every reassembled datagram as one packet, at the timestamp of the
//!   fragment that completed it, in delivery order: the link-layer header of
//!   that fragment (the bytes before the IP header, unchanged but for a
//!   PPPoE length field, set to the new length) followed by the reassembled
//!   IP packet;
//! * with [`DefragOptions::keep_malformed`] (`--keep-malformed`) only: the
//!   frames the parser refused and the frames of a link type it does not
//!   parse, unchanged, except those whose bytes show, or cannot rule out,
//!   an IP fragment.
//!
//! Nothing else: no fragment reaches the output on its own. The fragments
//! the reassembler rejects (a tiny first fragment, a truncated, overlapping
//! or excess one, a datagram that timed out, ...) are dropped and counted
//! by reason ([`DefragReport::dropped`]); the frames the parser refused are
//! dropped and counted by parse error ([`DefragReport::unparseable_by_reason`])
//! unless kept, and a refused frame that may hold a fragment is dropped
//! even when malformed frames are kept ([`DefragReport::unparseable_fragments`]):
//! it is a fragment defrag cannot check.
//!
//! Every packet read is accounted for once, and the report checks both laws:
//! `packets_in = written_unchanged + fragments in written datagrams +
//! packets_dropped + pending_at_end` and, for the fragments,
//! `fragments_in = fragments_reassembled + Σ drops + pending_at_end`.
//! Without `--no-flush` the datagrams still pending at the end of the
//! capture are dropped (`flushed_at_end`), so `pending_at_end` is 0.
//!
//! The output is written through
//! [`OutputFile`]: it may not be the
//! input under any name (the same path, a hard link, a symbolic link either
//! way), and the packets go to a temporary file renamed into place once
//! the whole capture is done. A failure on the way (a malformed record, a
//! full disk) or a stop request ([`DefragOptions::stop`]) leaves no output
//! and a previous file at the path as it was.
//!
//! The result is a [`DefragReport`] (the `--json` document, schema
//! `flowsteer.defrag.v2`, warnings included); [`write_text`] renders it as
//! an aligned counter table. The library prints nothing; failures are a
//! [`DefragError`] whose text starts with the file it concerns.
#![forbid(unsafe_code)]

mod unparsed;

use flowsteer_capture::output::{OutputError, OutputFile};
use flowsteer_capture::{CaptureError, CaptureFile, CaptureReader, Decompressed, Format, NgInterface, PcapNgFile};
use flowsteer_reasm::{DropReason, ReasmConfig, ReasmStats, Reassembler, Verdict};
use flowsteer_wire::pppoe::PppoeSession;
use flowsteer_wire::{parse_frame, Encap, LinkType, ParseError, ParseOptions};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

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
    /// Write the frames the parser refuses (and the frames of a link type
    /// it does not parse) unchanged instead of dropping them. They are not
    /// fragments, so keeping them is safe; a refused frame that may hold an
    /// IP fragment is dropped all the same, as is every fragment the
    /// reassembler rejects.
    pub keep_malformed: bool,
    /// The reassembler's limits (memory, timeouts, fragments per datagram).
    pub reasm: ReasmConfig,
    /// A stop request (the CLI sets it on SIGINT/SIGTERM), read before
    /// every packet and before the output is put in place: once set, the
    /// run ends with [`DefragError::Interrupted`] and writes nothing.
    pub stop: Option<Arc<AtomicBool>>,
    /// Bytes of the input read so far, published for a progress display
    /// that reads it from another thread; `None`: not counted.
    pub progress: Option<Arc<AtomicU64>>,
}

/// Adds the bytes read through it to [`DefragOptions::progress`].
struct Counted<R> {
    inner: R,
    read: Option<Arc<AtomicU64>>,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(r) = &self.read {
            r.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// Why a capture could not be reassembled. The text starts with the file
/// it concerns; an underlying I/O or capture error is its source. On every
/// error the output is left as it was (absent, or the previous file).
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
    /// The file starts as a capture but ends inside its file header: no
    /// packet can be read from it.
    #[error("{path}: not a readable capture: the file ends inside its file header")]
    HeaderCut { path: String },
    #[error("{path}: {error} (after {packets} packets)")]
    BadRecord { path: String, error: CaptureError, packets: u64 },
    /// The output cannot be created: among others, it is the input.
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{path}: cannot write")]
    Write { path: String, source: WriteError },
    #[error("{path}: output not started")]
    NotStarted { path: String },
    /// The input holds packets of two link types and the output is pcap,
    /// which has one; nothing was written.
    #[error("{path}: packets of link type {other} follow packets of link type {first}; a pcap file has one link type: write pcapng instead (-o {suggestion})", suggestion = pcapng_name(output))]
    MixedLinkTypes { path: String, first: u32, other: u32, output: String },
    #[error("{path}: interrupted after {packets} packets; the output was not written")]
    Interrupted { path: String, packets: u64 },
}

/// `path` with its extension replaced by `.pcapng`.
fn pcapng_name(path: &str) -> String {
    std::path::Path::new(path).with_extension("pcapng").display().to_string()
}

/// What failed while writing the output.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The `--json` document (schema `flowsteer.defrag.v2`).
#[derive(Debug, Serialize)]
pub struct DefragReport {
    pub schema: &'static str,
    pub input: String,
    pub output: String,
    /// `pcap` or `pcapng` (null when the file ends inside its header).
    pub format: Option<&'static str>,
    /// `none`, `gzip` or `zstd`: recognised by content, decompressed as read.
    pub compression: &'static str,
    /// `pcap` or `pcapng`, from the output's extension (`.pcapng`).
    pub output_format: &'static str,
    /// Link type of the output file (pcapng: of its first interface).
    pub linktype: u32,
    /// Link types written, in order of appearance: one per interface of a
    /// pcapng output (a pcap output has one; an input that mixes link
    /// types is refused for pcap).
    pub linktypes: Vec<u32>,
    /// The input ends inside a record; the output covers the records before.
    pub truncated: bool,
    /// Malformed frames were kept (`--keep-malformed`).
    pub keep_malformed: bool,
    pub packets_in: u64,
    /// Packets written: `written_unchanged` plus the reassembled datagrams
    /// written.
    pub packets_out: u64,
    /// Frames written as they were read: `unfragmented + atomic_fragments +
    /// non_ip + unparseable_kept`.
    pub written_unchanged: u64,
    /// IP packets that are not fragments (PPPoE-carried ones included).
    pub unfragmented: u64,
    /// IPv6 atomic fragments.
    pub atomic_fragments: u64,
    /// Frames that parse and carry no IP packet (ARP, LLDP, ...).
    pub non_ip: u64,
    /// Frames the parser refused, frames of an unsupported link type
    /// included (the sum of `unparseable_by_reason`).
    pub unparseable: u64,
    /// The same by parse error (every reason, zeros included);
    /// `unsupported_link_type` counts the frames of a link type defrag
    /// does not parse.
    pub unparseable_by_reason: BTreeMap<&'static str, u64>,
    /// Refused frames whose bytes show, or cannot rule out, an IP fragment:
    /// always dropped.
    pub unparseable_fragments: u64,
    /// Refused frames written unchanged (`--keep-malformed`).
    pub unparseable_kept: u64,
    /// Refused frames dropped: `unparseable - unparseable_kept`.
    pub unparseable_dropped: u64,
    /// pcapng packets naming an undescribed interface: skipped, not counted
    /// in `packets_in`.
    pub skipped_unknown_interface: u64,
    pub fragments_in: u64,
    pub datagrams_reassembled: u64,
    /// Fragments that ended up in a reassembled datagram.
    pub fragments_reassembled: u64,
    /// Reassembled PPPoE-carried datagrams longer than the PPPoE length
    /// field can say (65,533 bytes of IP): dropped.
    pub datagrams_too_long_for_pppoe: u64,
    /// Their fragments.
    pub fragments_too_long_for_pppoe: u64,
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
    /// Packets read and not written, in any form: every fragment drop
    /// (`dropped`), `unparseable_dropped` and `fragments_too_long_for_pppoe`.
    pub packets_dropped: u64,
    /// Timed-out datagrams that held their first fragment (an ICMP Time
    /// Exceeded would have been due).
    pub time_exceeded: u64,
    pub mem_limit: usize,
    pub mem_high_watermark: usize,
    /// The fragment law, written out.
    pub conservation: String,
    /// The packet law, written out.
    pub packet_conservation: String,
    /// Both laws hold.
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
#[derive(Debug)]
struct Counts {
    packets_in: u64,
    packets_out: u64,
    unfragmented: u64,
    atomic: u64,
    non_ip: u64,
    /// Refused frames by [`ParseError::index`].
    unparseable: [u64; ParseError::COUNT],
    unparseable_fragments: u64,
    unparseable_kept: u64,
    skipped_unknown_interface: u64,
    fragments_pushed: u64,
    datagrams: u64,
    datagrams_too_long: u64,
    fragments_too_long: u64,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            packets_in: 0,
            packets_out: 0,
            unfragmented: 0,
            atomic: 0,
            non_ip: 0,
            unparseable: [0; ParseError::COUNT],
            unparseable_fragments: 0,
            unparseable_kept: 0,
            skipped_unknown_interface: 0,
            fragments_pushed: 0,
            datagrams: 0,
            datagrams_too_long: 0,
            fragments_too_long: 0,
        }
    }
}

impl Counts {
    fn unparseable_total(&self) -> u64 {
        self.unparseable.iter().sum()
    }

    fn unsupported_linktype(&self) -> u64 {
        self.unparseable[ParseError::UnsupportedLinkType.index()]
    }
}

/// The output file format, from the output path: `.pcapng` (any case)
/// is pcapng, anything else classic pcap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Classic pcap: one link type for the whole file.
    Pcap,
    /// pcapng: one interface per link type of the input.
    PcapNg,
}

impl OutputFormat {
    /// The format an output path asks for.
    pub fn of(path: &std::path::Path) -> OutputFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("pcapng") => OutputFormat::PcapNg,
            _ => OutputFormat::Pcap,
        }
    }

    /// `pcap` or `pcapng`.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Pcap => "pcap",
            OutputFormat::PcapNg => "pcapng",
        }
    }
}

enum Writer {
    Pcap(CaptureFile),
    /// With the output interface of each link type, in order of appearance.
    PcapNg(PcapNgFile, Vec<(u32, u32)>),
}

/// The output: its temporary file created before reading, the header
/// written with the first packet written (pcap: for its link type), renamed
/// into place by [`Output::finish`]. Dropped unfinished, it leaves nothing
/// behind.
struct Output {
    path: String,
    format: OutputFormat,
    file: Option<OutputFile>,
    writer: Option<Writer>,
    /// The link types written, in order of appearance.
    linktypes: Vec<u32>,
    /// The link type of the first packet read.
    first_read: Option<u32>,
}

/// The link type and interface of one packet to write.
#[derive(Clone, Copy)]
struct Link<'a> {
    linktype: u32,
    if_name: &'a str,
    tsresol: u8,
}

impl Output {
    fn create(opts: &DefragOptions) -> Result<Output, DefragError> {
        let file = OutputFile::create(&opts.output, &[&opts.input])?;
        Ok(Output {
            path: opts.output.display().to_string(),
            format: OutputFormat::of(&opts.output),
            file: Some(file),
            writer: None,
            linktypes: Vec::new(),
            first_read: None,
        })
    }

    fn write_err(&self, e: impl Into<WriteError>) -> DefragError {
        DefragError::Write { path: self.path.clone(), source: e.into() }
    }

    /// Writes the file header if not done yet (for pcap: for `linktype`).
    fn start(&mut self, linktype: u32) -> Result<(), DefragError> {
        if self.writer.is_none() {
            if let Some(f) = self.file.take() {
                let w = match self.format {
                    OutputFormat::Pcap => CaptureFile::new(f, linktype).map(Writer::Pcap),
                    OutputFormat::PcapNg => PcapNgFile::new(f).map(|w| Writer::PcapNg(w, Vec::new())),
                };
                self.writer = Some(w.map_err(|e| self.write_err(e))?);
                if self.format == OutputFormat::Pcap {
                    self.linktypes.push(linktype);
                }
            }
        }
        Ok(())
    }

    /// Checks that a packet of `link` can be written: pcapng adds an
    /// interface for a new link type; pcap refuses a second link type.
    fn admit(&mut self, link: Link<'_>, input: &str) -> Result<(), DefragError> {
        self.start(link.linktype)?;
        let result = match self.writer.as_mut() {
            Some(Writer::Pcap(_)) => match self.linktypes.first() {
                Some(&first) if first != link.linktype => {
                    return Err(DefragError::MixedLinkTypes {
                        path: input.to_string(),
                        first,
                        other: link.linktype,
                        output: self.path.clone(),
                    })
                }
                _ => return Ok(()),
            },
            Some(Writer::PcapNg(w, ifaces)) => {
                if ifaces.iter().any(|&(lt, _)| lt == link.linktype) {
                    return Ok(());
                }
                let iface =
                    NgInterface { linktype: link.linktype, name: link.if_name.to_string(), tsresol: link.tsresol };
                w.add_interface(&iface).map(|id| {
                    ifaces.push((link.linktype, id));
                    self.linktypes.push(link.linktype);
                })
            }
            None => return Err(DefragError::NotStarted { path: self.path.clone() }),
        };
        result.map_err(|e| self.write_err(e))
    }

    /// Writes one packet of `link` (read from `input`), after
    /// [`Output::admit`].
    fn write(&mut self, link: Link<'_>, input: &str, ts: u64, data: &[u8], orig_len: u32) -> Result<(), DefragError> {
        self.admit(link, input)?;
        let linktype = link.linktype;
        let written = match self.writer.as_mut() {
            Some(Writer::Pcap(w)) => w.write_packet(ts, data, orig_len),
            Some(Writer::PcapNg(w, ifaces)) => {
                let id = ifaces.iter().find(|&&(lt, _)| lt == linktype).map_or(0, |&(_, id)| id);
                w.write_packet(id, ts, data, orig_len)
            }
            None => return Err(DefragError::NotStarted { path: self.path.clone() }),
        };
        written.map_err(|e| self.write_err(e))
    }

    /// Syncs the file and renames it into place. A pcap file with no
    /// packet has the link type of the first packet read, else Ethernet.
    fn finish(mut self) -> Result<(), DefragError> {
        self.start(self.first_read.unwrap_or(DEFAULT_LINKTYPE))?;
        let finished = match self.writer.take() {
            Some(Writer::Pcap(w)) => w.finish(),
            Some(Writer::PcapNg(w, _)) => w.finish(),
            None => Ok(()),
        };
        finished.map_err(|e| self.write_err(e))
    }
}

/// Sets the PPPoE length field of a frame whose IP packet (`ip_len` bytes)
/// starts at `ip_at` behind the PPPoE header. False when the length does
/// not fit the field.
fn set_pppoe_length(frame: &mut [u8], ip_at: usize, ip_len: usize) -> bool {
    // The length counts the PPP protocol field (2 bytes) and the packet.
    let Ok(len) = u16::try_from(ip_len.saturating_add(2)) else { return false };
    let Some(field) = ip_at.checked_sub(PppoeSession::HEADER_LEN - 4) else { return false };
    match frame.get_mut(field..field + 2) {
        Some(f) => {
            f.copy_from_slice(&len.to_be_bytes());
            true
        }
        None => false,
    }
}

fn stopped(opts: &DefragOptions) -> bool {
    opts.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
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

    // Refused before a byte of the input is read when it is the input.
    let mut output = Output::create(args)?;
    let file = File::open(in_path).map_err(|source| DefragError::Open { path: in_name.clone(), source })?;
    // Progress counts the bytes of the file as stored (compressed or not).
    let file = Counted { inner: file, read: opts.progress.clone() };
    let file = Decompressed::new(std::io::BufReader::with_capacity(64 * 1024, file))
        .map_err(|source| DefragError::Open { path: in_name.clone(), source })?;
    let compression = file.compression().name();
    let reader = match CaptureReader::new(file) {
        Ok(r) => Some(r),
        Err(CaptureError::NotACapture) => return Err(DefragError::NotACapture { path: in_name }),
        Err(CaptureError::Truncated { .. }) => return Err(DefragError::HeaderCut { path: in_name }),
        Err(error) => return Err(DefragError::BadCapture { path: in_name, error }),
    };
    let interrupted = |packets| DefragError::Interrupted { path: args.output.display().to_string(), packets };

    if let Some(mut reader) = reader {
        format = Some(match reader.format() {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        });
        let parse_opts = ParseOptions::default();
        let mut out = Vec::with_capacity(65_536 + 64);
        let mut frame = Vec::with_capacity(65_536 + 64);
        let mut now = 0u64;
        loop {
            if stopped(args) {
                return Err(interrupted(counts.packets_in));
            }
            let p = match reader.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(CaptureError::Truncated { packets_read }) => {
                    truncated = true;
                    warnings.push(format!(
                        "{in_name}: capture truncated after {}",
                        count(packets_read, "packet", "packets")
                    ));
                    continue;
                }
                Err(CaptureError::UnknownInterface(_)) => {
                    counts.skipped_unknown_interface += 1;
                    continue;
                }
                Err(error) => return Err(DefragError::BadRecord { path: in_name, error, packets: counts.packets_in }),
            };
            counts.packets_in += 1;
            let link = Link { linktype: p.linktype, if_name: p.if_name, tsresol: p.tsresol };
            output.first_read.get_or_insert(p.linktype);
            // The reassembler's clock never goes backwards.
            now = now.max(p.ts_nanos);
            let parsed = match LinkType::from_pcap(p.linktype) {
                None => Err((ParseError::UnsupportedLinkType, false)),
                Some(link) => {
                    parse_frame(p.data, link, &parse_opts).map_err(|e| (e, unparsed::may_hold_fragment(p.data, link)))
                }
            };
            let parsed = match parsed {
                Ok(parsed) => parsed,
                Err((error, may_be_fragment)) => {
                    reasm.expire(now);
                    if let Some(c) = counts.unparseable.get_mut(error.index()) {
                        *c += 1;
                    }
                    if may_be_fragment {
                        counts.unparseable_fragments += 1;
                    } else if args.keep_malformed {
                        output.write(link, &in_name, p.ts_nanos, p.data, p.orig_len)?;
                        counts.unparseable_kept += 1;
                        counts.packets_out += 1;
                    }
                    continue;
                }
            };
            // The IP packet to reassemble: the outer one, or the one inside
            // a PPPoE session (which has no outer IP header).
            let (l3, pppoe) = match (parsed.outer, parsed.encap, parsed.inner) {
                (Some(l3), _, _) => (l3, false),
                (None, Some(Encap::Pppoe { .. }), Some(l3)) => (l3, true),
                _ => {
                    counts.non_ip += 1;
                    reasm.expire(now);
                    output.write(link, &in_name, p.ts_nanos, p.data, p.orig_len)?;
                    counts.packets_out += 1;
                    continue;
                }
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
                    output.write(link, &in_name, p.ts_nanos, p.data, p.orig_len)?;
                    counts.packets_out += 1;
                }
                Verdict::Complete { fragments } => {
                    counts.datagrams += 1;
                    frame.clear();
                    frame.extend_from_slice(p.data.get(..l3.l3_offset).unwrap_or(&[]));
                    frame.extend_from_slice(&out);
                    if pppoe && !set_pppoe_length(&mut frame, l3.l3_offset, out.len()) {
                        counts.datagrams_too_long += 1;
                        counts.fragments_too_long += u64::from(fragments);
                        continue;
                    }
                    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
                    output.write(link, &in_name, p.ts_nanos, &frame, len)?;
                    counts.packets_out += 1;
                }
                // Held for later, or rejected: a fragment is never written
                // on its own.
                Verdict::Held | Verdict::Dropped(_) => {}
            }
        }
        warnings.extend(reader.stats().warnings().into_iter().map(|w| format!("{in_name}: {w}")));
    }
    if stopped(args) {
        return Err(interrupted(counts.packets_in));
    }
    if !args.no_flush {
        reasm.flush();
    }
    let linktype = output.linktypes.first().copied().or(output.first_read).unwrap_or(DEFAULT_LINKTYPE);
    let output_format = output.format;
    let first_read = output.first_read;
    let mut linktypes = output.linktypes.clone();
    output.finish()?;
    // A pcap file's one link type, even when no packet was written.
    if output_format == OutputFormat::Pcap && linktypes.is_empty() {
        linktypes.push(first_read.unwrap_or(DEFAULT_LINKTYPE));
    }

    if counts.skipped_unknown_interface > 0 {
        warnings.push(format!(
            "{in_name}: {} and {} skipped",
            count(
                counts.skipped_unknown_interface,
                "pcapng packet names an undescribed interface",
                "pcapng packets name an undescribed interface"
            ),
            if counts.skipped_unknown_interface == 1 { "was" } else { "were" }
        ));
    }
    let unsupported = counts.unsupported_linktype();
    if unsupported > 0 {
        let (what, were, them) = if unsupported == 1 {
            ("packet of an unsupported link type", "was", "it")
        } else {
            ("packets of an unsupported link type", "were", "them")
        };
        warnings.push(if args.keep_malformed {
            format!("{in_name}: {unsupported} {what} {were} written unchanged, unexamined")
        } else {
            format!("{in_name}: {unsupported} {what} {were} dropped (--keep-malformed writes {them} unchanged)")
        });
    }
    let refused = counts.unparseable_total() - unsupported;
    if refused > 0 {
        let fragments = counts.unparseable_fragments;
        warnings.push(if args.keep_malformed {
            let kept = counts.unparseable_kept - unsupported;
            format!(
                "{in_name}: {} did not parse: {kept} written unchanged, {fragments} dropped as {} hold IP fragments",
                count(refused, "frame", "frames"),
                if fragments == 1 { "it may" } else { "they may" }
            )
        } else {
            format!(
                "{in_name}: {} did not parse and {} dropped ({fragments} may hold IP fragments; --keep-malformed writes the others unchanged)",
                count(refused, "frame", "frames"),
                if refused == 1 { "was" } else { "were" }
            )
        });
    }
    if counts.datagrams_too_long > 0 {
        warnings.push(if counts.datagrams_too_long == 1 {
            format!("{in_name}: 1 reassembled PPPoE datagram is longer than a PPPoE length can say and was dropped")
        } else {
            format!(
                "{in_name}: {} reassembled PPPoE datagrams are longer than a PPPoE length can say and were dropped",
                counts.datagrams_too_long
            )
        });
    }
    let mut report = build_report(args, format, linktype, truncated, &counts, reasm.stats(), reasm.pending(), warnings);
    report.compression = compression;
    report.output_format = output_format.name();
    report.linktypes = linktypes;
    Ok(report)
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
    let unparseable_by_reason: BTreeMap<&'static str, u64> =
        ParseError::ALL.iter().map(|e| (e.reason(), c.unparseable.get(e.index()).copied().unwrap_or(0))).collect();
    let malformed: u64 = DropReason::ALL.iter().filter(|r| r.is_malformed()).map(|&r| s.dropped(r)).sum();
    let unparseable = c.unparseable_total();
    let unparseable_dropped = unparseable.saturating_sub(c.unparseable_kept);
    let written_unchanged = c.unfragmented + c.atomic + c.non_ip + c.unparseable_kept;
    let packets_dropped = s.dropped_total() + unparseable_dropped + c.fragments_too_long;
    let in_written_datagrams = s.fragments_completed.saturating_sub(c.fragments_too_long);
    // Every fragment is accounted for once by the reassembler, and the
    // command pushed exactly the fragments it counted.
    let frag_law = s.conservation_ok() && s.fragments_in == c.fragments_pushed;
    // Every packet read is written unchanged, in a written datagram,
    // dropped for one reason, or still pending; every packet written is
    // one of the unchanged or one datagram.
    let packet_sum = written_unchanged + in_written_datagrams + packets_dropped + s.pending;
    let packet_law = c.packets_in == packet_sum
        && c.packets_in == c.unfragmented + c.atomic + c.non_ip + unparseable + s.fragments_in
        && c.packets_out == written_unchanged + c.datagrams - c.datagrams_too_long
        && c.datagrams == s.datagrams_completed;
    let mut terms = vec![format!("{} reassembled", s.fragments_completed)];
    for r in DropReason::ALL {
        let n = s.dropped(r);
        if n > 0 {
            terms.push(format!("{n} {}", reason_name(r)));
        }
    }
    terms.push(format!("{} pending", s.pending));
    let conservation = format!(
        "fragments_in {} {} {}",
        s.fragments_in,
        if s.fragments_in == s.fragments_completed + s.dropped_total() + s.pending { "=" } else { "!=" },
        terms.join(" + ")
    );
    let packet_conservation = format!(
        "packets_in {} {} {written_unchanged} written unchanged + {in_written_datagrams} in written datagrams + {packets_dropped} dropped + {} pending",
        c.packets_in,
        if c.packets_in == packet_sum { "=" } else { "!=" },
        s.pending
    );
    DefragReport {
        schema: "flowsteer.defrag.v2",
        input: args.input.display().to_string(),
        output: args.output.display().to_string(),
        format,
        compression: "none",
        output_format: "pcap",
        linktype,
        linktypes: Vec::new(),
        truncated,
        keep_malformed: args.keep_malformed,
        packets_in: c.packets_in,
        packets_out: c.packets_out,
        written_unchanged,
        unfragmented: c.unfragmented,
        atomic_fragments: c.atomic,
        non_ip: c.non_ip,
        unparseable,
        unparseable_by_reason,
        unparseable_fragments: c.unparseable_fragments,
        unparseable_kept: c.unparseable_kept,
        unparseable_dropped,
        skipped_unknown_interface: c.skipped_unknown_interface,
        fragments_in: s.fragments_in,
        datagrams_reassembled: s.datagrams_completed,
        fragments_reassembled: s.fragments_completed,
        datagrams_too_long_for_pppoe: c.datagrams_too_long,
        fragments_too_long_for_pppoe: c.fragments_too_long,
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
        packets_dropped,
        time_exceeded: s.time_exceeded,
        mem_limit: args.reasm.high_thresh,
        mem_high_watermark: s.mem_high_watermark,
        conservation,
        packet_conservation,
        conservation_ok: frag_law && packet_law,
        warnings,
    }
}

/// A count with its noun, singular for one (`1 packet`, `2 packets`).
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The report as an aligned counter table (what `flowsteer defrag` prints).
pub fn write_text(w: &mut impl Write, r: &DefragReport) -> std::io::Result<()> {
    writeln!(w, "defrag {} -> {} ({}, linktype {})", r.input, r.output, r.format.unwrap_or("empty"), r.linktype)?;
    let mut rows: Vec<(String, String)> = [
        ("packets in", r.packets_in.to_string()),
        ("packets out", r.packets_out.to_string()),
        ("written unchanged", r.written_unchanged.to_string()),
        ("  unfragmented", r.unfragmented.to_string()),
        ("  atomic fragments", r.atomic_fragments.to_string()),
        ("  non-IP", r.non_ip.to_string()),
        ("  unparseable kept", r.unparseable_kept.to_string()),
        ("packets dropped", r.packets_dropped.to_string()),
        ("unparseable", r.unparseable.to_string()),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .into();
    for (reason, n) in &r.unparseable_by_reason {
        if *n > 0 {
            rows.push((format!("  {reason}"), n.to_string()));
        }
    }
    rows.extend(
        [
            ("  may hold a fragment", r.unparseable_fragments.to_string()),
            ("  dropped", r.unparseable_dropped.to_string()),
            ("fragments in", r.fragments_in.to_string()),
            ("datagrams reassembled", r.datagrams_reassembled.to_string()),
            ("fragments reassembled", r.fragments_reassembled.to_string()),
            ("duplicates", r.duplicates.to_string()),
            ("overlaps", r.overlaps.to_string()),
            ("timed out", r.timed_out.to_string()),
            ("evicted", r.evicted.to_string()),
            ("too many frags", r.too_many_frags.to_string()),
            ("malformed", r.malformed.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    for reason in DropReason::ALL.into_iter().filter(|r| r.is_malformed()) {
        let n = r.dropped.get(reason_name(reason)).copied().unwrap_or(0);
        if n > 0 {
            rows.push((reason_name(reason).to_string(), n.to_string()));
        }
    }
    for reason in [DropReason::NoMemory, DropReason::Disabled] {
        let n = r.dropped.get(reason_name(reason)).copied().unwrap_or(0);
        if n > 0 {
            rows.push((reason_name(reason).to_string(), n.to_string()));
        }
    }
    if r.datagrams_too_long_for_pppoe > 0 {
        rows.push(("too long for PPPoE".to_string(), r.fragments_too_long_for_pppoe.to_string()));
    }
    rows.push(("flushed at end".to_string(), r.flushed_at_end.to_string()));
    rows.push(("pending at end".to_string(), r.pending_at_end.to_string()));
    rows.push(("memory high watermark".to_string(), format!("{} B of {} B", r.mem_high_watermark, r.mem_limit)));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &rows {
        writeln!(w, "  {k:<width$}  {v:>12}")?;
    }
    let verdict = if r.conservation_ok { "ok" } else { "VIOLATED" };
    writeln!(w, "conservation: {} ({verdict})", r.conservation)?;
    writeln!(w, "packets: {} ({verdict})", r.packet_conservation)?;
    Ok(())
}

#[cfg(test)]
mod tests;
