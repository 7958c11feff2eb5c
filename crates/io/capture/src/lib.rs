//! flowsteer-capture: streaming pcap / pcapng reading and pcap writing.
//!
//! Memory use is independent of the file size: the reader keeps one internal
//! buffer (128 KiB, growing to at most [`MAX_BUFFER_LEN`] for large records)
//! plus one small entry per pcapng interface of the current section (at most
//! [`MAX_INTERFACES`]). Packets are handed out as slices into that buffer, so
//! reading does not allocate per packet.
//!
//! # Reading
//!
//! [`CaptureReader::open`] first recognises a gzip or zstd file by its
//! content and decompresses it as it reads ([`Decompressed`], which
//! [`CaptureReader::new`] callers wrap their source in the same way); then
//! [`CaptureReader::new`] sniffs the magic number:
//!
//! * classic pcap in both byte orders, with the microsecond (`0xA1B2C3D4`),
//!   nanosecond (`0xA1B23C4D`) and the old "modified pcap" (`0xA1B2CD34`,
//!   24-byte record headers) magics;
//! * pcapng (`0x0A0D0D0A`): section header blocks in both byte orders (and
//!   several sections per file), interface description blocks (link type,
//!   `if_tsresol`, `if_tsoffset`), enhanced packet blocks, simple packet blocks
//!   (interface 0, timestamp 0) and obsolete packet blocks; every other block
//!   type is skipped without being buffered.
//!
//! Anything else, including an empty file or one shorter than 4 bytes, is
//! [`CaptureError::NotACapture`]. A file that has a valid magic but ends inside
//! its file header (pcap) or first section header block (pcapng) gives
//! [`CaptureError::Truncated`] from `new`.
//!
//! Error behaviour of [`CaptureReader::next_packet`]:
//!
//! * [`CaptureError::Truncated`] (file ends inside a record/block) and
//!   [`CaptureError::Malformed`] are returned once; the reader is then
//!   finished and returns `Ok(None)`.
//! * [`CaptureError::UnknownInterface`] (a pcapng packet that names an
//!   interface not described in its section) is per packet: the block has been
//!   consumed and the next call continues with the following block.
//! * [`CaptureError::Io`] from the underlying reader consumes nothing; calling
//!   again retries. The exception is [`io::ErrorKind::UnexpectedEof`], what
//!   [`Decompressed`] returns for a compressed stream cut short: it ends the
//!   input like the end of the file, so a cut inside a record is
//!   [`CaptureError::Truncated`], and so is a cut between records.
//!
//! A record whose captured length exceeds [`MAX_PACKET_LEN`] (or a pcapng
//! SHB/IDB/packet block longer than [`MAX_BLOCK_LEN`]) is `Malformed`, so a
//! corrupt length field never makes the reader allocate more than
//! [`MAX_BUFFER_LEN`]. The reader is otherwise lenient: the pcap `snaplen` is
//! not enforced, and timestamp fractions are not range checked.
//!
//! What the reader repairs or skips is counted in [`ReadStats`]
//! ([`CaptureReader::stats`]), for the caller to warn about once:
//!
//! * a record whose captured length exceeds its original length (malformed,
//!   but tshark reads it) is returned with the captured length as its
//!   original length (`inconsistent_lengths`), so counting and writing see
//!   one consistent length;
//! * a pcapng section whose header has a major version other than 1 is
//!   skipped up to the next section header, as the specification requires
//!   (`sections_skipped`, `packets_in_skipped_sections`);
//! * a pcapng option that runs past its block ends the block's options: the
//!   options before it and the block's fixed part are used (`bad_options`).
//!
//! In classic pcap only the low 16 bits of the link-type field are reported
//! (the upper bits carry FCS information).
//!
//! # Writing
//!
//! [`PcapNgWriter`] (through an [`output::OutputFile`]: [`PcapNgFile`])
//! writes pcapng: one little-endian section, one interface description
//! per [`NgInterface`] (link type, name, timestamp resolution), enhanced
//! packet blocks. [`CaptureWriter`] writes classic pcap, little-endian, with the
//! **nanosecond** magic (`0xA1B23C4D`), version 2.4, snaplen
//! [`MAX_PACKET_LEN`] and a single link type, to any [`Write`]. A file is
//! written through [`output::OutputFile`]: [`CaptureFile`] (also what
//! [`CaptureWriter::create`] returns) refuses to write over one of the
//! command's inputs and writes a temporary file renamed into place by
//! [`CaptureFile::finish`], so a failed or interrupted run never leaves a
//! half-written capture.
//!
//! # Why reading does not use `pcap-file`
//!
//! `pcap-file` 2.0 is used for writing (`PcapWriter`). Its readers are not used
//! because, checked against its sources: `PcapReader` rejects valid files whose
//! `orig_len` exceeds the snaplen (every capture taken with `-s 96`); both
//! readers allocate a fixed 8 MB buffer each; a record claiming a huge length
//! fills that buffer and is then reported as an `UnexpectedEof`, which is
//! indistinguishable from a truncated file; `PcapNgReader` ignores
//! `if_tsresol` for enhanced packet blocks (the raw tick count is returned as
//! nanoseconds) and parses all EPB options into a `Vec` per packet. The record
//! formats are simple, so both are parsed here over an internal buffer.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

pub mod decompress;
pub mod output;

pub use decompress::{Compression, Decompressed};
use output::{OutputError, OutputFile};

/// Largest captured packet length accepted by the reader and the writer
/// (256 KiB, the snaplen tcpdump uses by default).
pub const MAX_PACKET_LEN: usize = 256 * 1024;

/// Largest pcapng section header, interface description or packet block
/// accepted (a packet of [`MAX_PACKET_LEN`] plus 64 KiB of options).
pub const MAX_BLOCK_LEN: usize = MAX_PACKET_LEN + 64 * 1024;

/// Upper bound of the reader's internal buffer.
pub const MAX_BUFFER_LEN: usize = 512 * 1024;

/// Most interfaces a pcapng section may describe.
pub const MAX_INTERFACES: usize = 65_536;

/// Longest interface name kept (`if_name`, cut at a character boundary).
pub const MAX_NAME_LEN: usize = 256;

const INITIAL_BUFFER_LEN: usize = 128 * 1024;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 0x0000_0001;
const PB: u32 = 0x0000_0002;
const SPB: u32 = 0x0000_0003;
const EPB: u32 = 0x0000_0006;

/// Capture file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Classic libpcap format.
    Pcap,
    /// pcapng.
    PcapNg,
}

/// Errors of reading or writing a capture.
#[derive(Debug)]
#[non_exhaustive]
pub enum CaptureError {
    /// The underlying reader or writer failed.
    Io(io::Error),
    /// The data does not start with a pcap or pcapng magic number (this
    /// includes empty input and input shorter than 4 bytes).
    NotACapture,
    /// The input ends in the middle of a header, record or block.
    Truncated {
        /// Complete packets returned before the truncation.
        packets_read: u64,
    },
    /// A structurally invalid record or block, or one over the size limits.
    Malformed(String),
    /// A pcapng packet refers to an interface id that its section does not
    /// describe.
    UnknownInterface(u32),
    /// [`CaptureWriter::write_packet`] was given a packet it cannot store.
    InvalidPacket(String),
    /// The output file could not be created or put in place (among others:
    /// it is one of the inputs).
    Output(OutputError),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Io(e) => write!(f, "capture I/O error: {e}"),
            CaptureError::NotACapture => f.write_str("not a pcap or pcapng capture file"),
            CaptureError::Truncated { packets_read } => {
                write!(f, "capture file is truncated (ends inside a record after {packets_read} complete packets)")
            }
            CaptureError::Malformed(msg) => write!(f, "malformed capture file: {msg}"),
            CaptureError::UnknownInterface(id) => {
                write!(f, "pcapng packet refers to undescribed interface {id}")
            }
            CaptureError::InvalidPacket(msg) => write!(f, "cannot write packet: {msg}"),
            CaptureError::Output(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Io(e) => Some(e),
            CaptureError::Output(e) => e.source(),
            _ => None,
        }
    }
}

impl From<OutputError> for CaptureError {
    fn from(e: OutputError) -> Self {
        CaptureError::Output(e)
    }
}

impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> Self {
        CaptureError::Io(e)
    }
}

/// One packet, borrowing the reader's buffer until the next call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapturedPacket<'a> {
    /// Timestamp since the Unix epoch in nanoseconds (pcapng: honours the
    /// interface's `if_tsresol`, default microseconds, and `if_tsoffset`;
    /// saturates at the `u64` range).
    pub ts_nanos: u64,
    /// pcap `LINKTYPE_*` number (pcapng: from the packet's interface).
    pub linktype: u32,
    /// pcapng: the packet's interface in its section (see
    /// [`CaptureReader::interface`]); 0 for pcap.
    pub interface: u32,
    /// pcapng: the interface's `if_name` (empty when absent, and for pcap).
    pub if_name: &'a str,
    /// The timestamp resolution as a pcapng `if_tsresol` byte: the
    /// interface's (6 when absent), or 6 / 9 for a microsecond / nanosecond
    /// pcap.
    pub tsresol: u8,
    /// Length of the packet on the wire, never below the captured length: a
    /// record that says less is read with its captured length as original
    /// length and counted ([`ReadStats::inconsistent_lengths`]).
    pub orig_len: u32,
    /// Captured bytes (may be shorter than `orig_len`).
    pub data: &'a [u8],
}

/// Timestamp resolution of a pcapng interface.
#[derive(Clone, Copy, Debug)]
enum TsRes {
    /// nanos = ticks * n
    Mul(u64),
    /// nanos = ticks / n
    Div(u64),
    /// nanos = ticks * 1e9 / 2^n
    Pow2(u32),
    /// Resolution so fine that every representable tick count is < 1 ns.
    Zero,
}

impl TsRes {
    fn from_option(v: u8) -> TsRes {
        if v & 0x80 != 0 {
            TsRes::Pow2(u32::from(v & 0x7f))
        } else if v <= 9 {
            TsRes::Mul(10u64.pow(9 - u32::from(v)))
        } else if v - 9 <= 19 {
            TsRes::Div(10u64.pow(u32::from(v - 9)))
        } else {
            TsRes::Zero
        }
    }

    fn nanos(self, ticks: u64) -> u64 {
        match self {
            TsRes::Mul(n) => ticks.saturating_mul(n),
            TsRes::Div(n) => ticks / n.max(1),
            TsRes::Pow2(s) => {
                let v = (u128::from(ticks) * 1_000_000_000u128) >> s.min(127);
                u64::try_from(v).unwrap_or(u64::MAX)
            }
            TsRes::Zero => 0,
        }
    }
}

#[derive(Clone, Debug)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    res: TsRes,
    /// The `if_tsresol` byte as read (6, microseconds, when absent).
    tsresol: u8,
    offset_secs: i64,
    /// `if_name`, at most [`MAX_NAME_LEN`] bytes.
    name: String,
}

impl Interface {
    fn ts_nanos(&self, ticks: u64) -> u64 {
        let n = self.res.nanos(ticks);
        let off = i128::from(self.offset_secs) * 1_000_000_000;
        let v = i128::from(n) + off;
        u64::try_from(v.max(0)).unwrap_or(u64::MAX)
    }
}

/// Where a parsed packet lies in the buffer.
#[derive(Clone, Copy)]
struct Meta {
    start: usize,
    end: usize,
    ts_nanos: u64,
    linktype: u32,
    interface: u32,
    orig_len: u32,
}

/// What a pcapng interface description block said, as
/// [`CaptureReader::interface`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterfaceInfo<'a> {
    /// pcap `LINKTYPE_*` number.
    pub linktype: u32,
    /// `if_name` (empty when absent), at most [`MAX_NAME_LEN`] bytes.
    pub name: &'a str,
    /// The `if_tsresol` byte (6, microseconds, when absent): 9 is
    /// nanoseconds, see the pcapng specification for the encoding.
    pub tsresol: u8,
}

/// What the reader skipped or repaired on the way, beside the packets it
/// returned. Every count is also the number of the corresponding events:
/// the CLI warns once per kind with the count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Records whose captured length exceeds their original length (a
    /// malformed record that tshark reads too): returned with the captured
    /// length as their original length.
    pub inconsistent_lengths: u64,
    /// pcapng sections skipped whole because their major version is not 1
    /// (the specification forbids parsing them).
    pub sections_skipped: u64,
    /// Packet blocks in those skipped sections (not returned).
    pub packets_in_skipped_sections: u64,
    /// pcapng blocks with an option running past the end of the block: the
    /// options from that one on are ignored, the rest of the block is used.
    pub bad_options: u64,
}

impl ReadStats {
    /// One line per kind of event that happened, with its count (what the
    /// commands print as warnings).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let n = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        if self.inconsistent_lengths > 0 {
            w.push(format!(
                "{}; read with the captured length as original",
                n(
                    self.inconsistent_lengths,
                    "record has a captured length above its original length",
                    "records have a captured length above their original length"
                )
            ));
        }
        if self.sections_skipped > 0 {
            let one = self.sections_skipped == 1;
            w.push(format!(
                "{} ({} in {})",
                n(
                    self.sections_skipped,
                    "pcapng section of an unknown major version was skipped",
                    "pcapng sections of an unknown major version were skipped"
                ),
                n(self.packets_in_skipped_sections, "packet", "packets"),
                if one { "it" } else { "them" }
            ));
        }
        if self.bad_options > 0 {
            w.push(format!(
                "{}; {} options from there on were ignored",
                n(
                    self.bad_options,
                    "pcapng block has an option running past the block",
                    "pcapng blocks have an option running past the block"
                ),
                if self.bad_options == 1 { "its" } else { "their" }
            ));
        }
        w
    }
}

enum Block {
    Packet(Meta),
    Consumed,
    Eof,
}

/// Streaming reader of pcap and pcapng files.
pub struct CaptureReader<R: Read> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// File offset of `buf[0]`.
    base: u64,
    format: Format,
    /// Byte order of the pcap file or of the current pcapng section.
    big: bool,
    /// pcap: timestamps are nanoseconds (else microseconds).
    pcap_nanos: bool,
    /// pcap: length of a record header (16, or 24 for modified pcap).
    pcap_rec_hdr: usize,
    /// pcap: the file's link type.
    pcap_linktype: u32,
    /// pcapng: interfaces of the current section.
    ifaces: Vec<Interface>,
    /// pcapng: the current section has an unknown major version; its
    /// blocks are skipped up to the next section header.
    skip_section: bool,
    stats: ReadStats,
    /// The source reported its data cut short (`UnexpectedEof`, as a
    /// decompressor does for a compressed stream that ends early).
    input_cut: bool,
    /// Bytes of a skipped pcapng block still to discard.
    pending_skip: u64,
    packets: u64,
    done: bool,
}

impl<R: Read> fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("offset", &self.offset())
            .field("packets_read", &self.packets)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

fn rd16(b: &[u8], off: usize, big: bool) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(off..off.saturating_add(2)) {
        a.copy_from_slice(s);
    }
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

fn rd32(b: &[u8], off: usize, big: bool) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(off..off.saturating_add(4)) {
        a.copy_from_slice(s);
    }
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn rd64(b: &[u8], off: usize, big: bool) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(off..off.saturating_add(8)) {
        a.copy_from_slice(s);
    }
    if big {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}

/// Walks the options of a pcapng block (`opts`: from the first option to
/// the end of the body), calling `each(code, value)` for every option
/// before the end-of-options marker. False when an option runs past the
/// block: the walk stops there.
fn walk_options(mut opts: &[u8], big: bool, mut each: impl FnMut(u16, &[u8])) -> bool {
    while opts.len() >= 4 {
        let code = rd16(opts, 0, big);
        let olen = usize::from(rd16(opts, 2, big));
        if code == 0 {
            break;
        }
        let Some(value) = opts.get(4..4 + olen) else { return false };
        each(code, value);
        let padded = (olen + 3) & !3;
        opts = opts.get(4 + padded..).unwrap_or(&[]);
    }
    true
}

/// Parses an interface description block body (without the 8-byte block
/// header and the trailing length); `None` when shorter than its fixed
/// part. The flag is false when an option runs past the block (the
/// options before it are used).
fn parse_idb(body: &[u8], big: bool) -> Option<(Interface, bool)> {
    if body.len() < 8 {
        return None;
    }
    let mut iface = Interface {
        linktype: u32::from(rd16(body, 0, big)),
        snaplen: rd32(body, 4, big),
        res: TsRes::Mul(1000),
        tsresol: 6,
        offset_secs: 0,
        name: String::new(),
    };
    let ok = walk_options(body.get(8..).unwrap_or(&[]), big, |code, value| match (code, value.len()) {
        (2, _) => {
            let text = String::from_utf8_lossy(value);
            let text = text.trim_end_matches('\0');
            let mut end = text.len().min(MAX_NAME_LEN);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            iface.name = text[..end].to_string();
        }
        (9, 1) => {
            let v = value.first().copied().unwrap_or(6);
            iface.res = TsRes::from_option(v);
            iface.tsresol = v;
        }
        (14, 8) => iface.offset_secs = rd64(value, 0, big) as i64,
        _ => {}
    });
    Some((iface, ok))
}

impl CaptureReader<Decompressed<BufReader<File>>> {
    /// Opens a capture file (buffered), decompressing it if it is gzip or
    /// zstd ([`Decompressed`]).
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let f = File::open(path)?;
        CaptureReader::new(Decompressed::new(BufReader::with_capacity(64 * 1024, f))?)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Wraps a reader, sniffs the magic and reads the file header (pcap) or
    /// first section header block (pcapng).
    pub fn new(reader: R) -> Result<Self, CaptureError> {
        let mut r = CaptureReader {
            src: reader,
            buf: vec![0u8; INITIAL_BUFFER_LEN],
            pos: 0,
            len: 0,
            base: 0,
            format: Format::Pcap,
            big: false,
            pcap_nanos: false,
            pcap_rec_hdr: 16,
            pcap_linktype: 0,
            ifaces: Vec::new(),
            skip_section: false,
            stats: ReadStats::default(),
            input_cut: false,
            pending_skip: 0,
            packets: 0,
            done: false,
        };
        if !r.fill_to(4)? {
            return Err(if r.input_cut {
                CaptureError::Truncated { packets_read: 0 }
            } else {
                CaptureError::NotACapture
            });
        }
        let magic = [r.buf[0], r.buf[1], r.buf[2], r.buf[3]];
        // (big endian, nanoseconds, record header length)
        let pcap = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] => Some((false, false, 16)),
            [0xa1, 0xb2, 0xc3, 0xd4] => Some((true, false, 16)),
            [0x4d, 0x3c, 0xb2, 0xa1] => Some((false, true, 16)),
            [0xa1, 0xb2, 0x3c, 0x4d] => Some((true, true, 16)),
            [0x34, 0xcd, 0xb2, 0xa1] => Some((false, false, 24)),
            [0xa1, 0xb2, 0xcd, 0x34] => Some((true, false, 24)),
            [0x0a, 0x0d, 0x0d, 0x0a] => None,
            _ => return Err(CaptureError::NotACapture),
        };
        match pcap {
            Some((big, nanos, rec_hdr)) => {
                if !r.fill_to(24)? {
                    return Err(CaptureError::Truncated { packets_read: 0 });
                }
                r.big = big;
                r.pcap_nanos = nanos;
                r.pcap_rec_hdr = rec_hdr;
                r.pcap_linktype = rd32(&r.buf, 20, big) & 0xffff;
                r.pos = 24;
            }
            None => {
                r.format = Format::PcapNg;
                if !r.fill_to(12)? {
                    return Err(CaptureError::Truncated { packets_read: 0 });
                }
                if !matches!(
                    [r.buf[8], r.buf[9], r.buf[10], r.buf[11]],
                    [0x1a, 0x2b, 0x3c, 0x4d] | [0x4d, 0x3c, 0x2b, 0x1a]
                ) {
                    return Err(CaptureError::NotACapture);
                }
                match r.next_block()? {
                    Block::Consumed => {}
                    Block::Eof | Block::Packet(_) => {
                        return Err(CaptureError::Malformed("pcapng file does not start with a section header".into()))
                    }
                }
            }
        }
        Ok(r)
    }

    /// The format of the capture.
    pub fn format(&self) -> Format {
        self.format
    }

    /// What was skipped or repaired so far (see [`ReadStats`]).
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// The interface `id` of the current pcapng section (a packet's
    /// [`CapturedPacket::interface`]); for pcap, interface 0 is the file's
    /// link type with no name and the file's resolution.
    pub fn interface(&self, id: u32) -> Option<InterfaceInfo<'_>> {
        match self.format {
            Format::Pcap => (id == 0).then_some(InterfaceInfo {
                linktype: self.pcap_linktype,
                name: "",
                tsresol: if self.pcap_nanos { 9 } else { 6 },
            }),
            Format::PcapNg => self.ifaces.get(id as usize).map(|i| InterfaceInfo {
                linktype: i.linktype,
                name: &i.name,
                tsresol: i.tsresol,
            }),
        }
    }

    /// The underlying reader.
    pub fn source(&self) -> &R {
        &self.src
    }

    /// Next packet. `Ok(None)` at a clean end of file. A file cut in the
    /// middle of a record returns `Err(CaptureError::Truncated { .. })` once
    /// (after all complete packets), then `Ok(None)`; see the crate
    /// documentation for the other errors.
    pub fn next_packet(&mut self) -> Result<Option<CapturedPacket<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let r = match self.format {
            Format::Pcap => self.next_pcap(),
            Format::PcapNg => self.next_pcapng(),
        };
        match r {
            Ok(Some(m)) => {
                self.packets += 1;
                let captured = u32::try_from(m.end - m.start).unwrap_or(u32::MAX);
                if captured > m.orig_len {
                    self.stats.inconsistent_lengths += 1;
                }
                let (if_name, tsresol) = match self.format {
                    Format::Pcap => ("", if self.pcap_nanos { 9 } else { 6 }),
                    Format::PcapNg => {
                        self.ifaces.get(m.interface as usize).map_or(("", 6), |i| (i.name.as_str(), i.tsresol))
                    }
                };
                Ok(Some(CapturedPacket {
                    ts_nanos: m.ts_nanos,
                    linktype: m.linktype,
                    interface: m.interface,
                    if_name,
                    tsresol,
                    orig_len: m.orig_len.max(captured),
                    data: self.buf.get(m.start..m.end).unwrap_or(&[]),
                }))
            }
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                if matches!(e, CaptureError::Truncated { .. } | CaptureError::Malformed(_)) {
                    self.done = true;
                }
                Err(e)
            }
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn avail(&self) -> usize {
        self.len - self.pos
    }

    fn truncated(&self) -> CaptureError {
        CaptureError::Truncated { packets_read: self.packets }
    }

    fn malformed(&self, msg: impl fmt::Display) -> CaptureError {
        CaptureError::Malformed(format!("at byte offset {}: {msg}", self.offset()))
    }

    /// Makes at least `n` bytes available at `pos`. `Ok(false)` if the input
    /// ends first (everything read so far stays buffered).
    fn fill_to(&mut self, n: usize) -> io::Result<bool> {
        if self.avail() >= n {
            return Ok(true);
        }
        if n > MAX_BUFFER_LEN {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "record larger than the capture buffer"));
        }
        if self.buf.len() - self.pos < n {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.base += self.pos as u64;
            self.pos = 0;
            if self.buf.len() < n {
                let new_len = n.next_power_of_two().min(MAX_BUFFER_LEN).max(n);
                self.buf.resize(new_len, 0);
            }
        }
        while self.avail() < n {
            if self.input_cut {
                return Ok(false);
            }
            let room = self.buf.len() - self.len;
            match self.src.read(&mut self.buf[self.len..]) {
                Ok(0) => return Ok(false),
                Ok(k) => self.len += k.min(room),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    self.input_cut = true;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Discards `pending_skip` bytes. `Ok(false)` if the input ends first.
    fn skip_pending(&mut self) -> io::Result<bool> {
        loop {
            let take = (self.avail() as u64).min(self.pending_skip) as usize;
            self.pos += take;
            self.pending_skip -= take as u64;
            if self.pending_skip == 0 {
                return Ok(true);
            }
            // Buffer is empty here.
            self.base += self.pos as u64;
            self.pos = 0;
            self.len = 0;
            if self.input_cut {
                return Ok(false);
            }
            match self.src.read(&mut self.buf[..]) {
                Ok(0) => return Ok(false),
                Ok(k) => self.len = k.min(self.buf.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    self.input_cut = true;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn next_pcap(&mut self) -> Result<Option<Meta>, CaptureError> {
        let h = self.pcap_rec_hdr;
        if !self.fill_to(h)? {
            return if self.avail() == 0 && !self.input_cut { Ok(None) } else { Err(self.truncated()) };
        }
        let incl = rd32(&self.buf, self.pos + 8, self.big) as usize;
        if incl > MAX_PACKET_LEN {
            return Err(self.malformed(format_args!(
                "packet record claims a captured length of {incl} bytes (limit {MAX_PACKET_LEN})"
            )));
        }
        if !self.fill_to(h + incl)? {
            return Err(self.truncated());
        }
        let p = self.pos;
        let ts_sec = u64::from(rd32(&self.buf, p, self.big));
        let frac = u64::from(rd32(&self.buf, p + 4, self.big));
        let orig_len = rd32(&self.buf, p + 12, self.big);
        let frac_nanos = if self.pcap_nanos { frac } else { frac * 1000 };
        self.pos += h + incl;
        Ok(Some(Meta {
            start: p + h,
            end: p + h + incl,
            ts_nanos: ts_sec * 1_000_000_000 + frac_nanos,
            linktype: self.pcap_linktype,
            interface: 0,
            orig_len,
        }))
    }

    fn next_pcapng(&mut self) -> Result<Option<Meta>, CaptureError> {
        loop {
            match self.next_block()? {
                Block::Packet(m) => return Ok(Some(m)),
                Block::Consumed => {}
                Block::Eof => return Ok(None),
            }
        }
    }

    /// Reads one pcapng block.
    fn next_block(&mut self) -> Result<Block, CaptureError> {
        if self.pending_skip > 0 && !self.skip_pending()? {
            return Err(self.truncated());
        }
        if !self.fill_to(8)? {
            return if self.avail() == 0 && !self.input_cut { Ok(Block::Eof) } else { Err(self.truncated()) };
        }
        let btype = rd32(&self.buf, self.pos, self.big);
        if btype == SHB {
            if !self.fill_to(12)? {
                return Err(self.truncated());
            }
            let p = self.pos;
            self.big = match [self.buf[p + 8], self.buf[p + 9], self.buf[p + 10], self.buf[p + 11]] {
                [0x1a, 0x2b, 0x3c, 0x4d] => true,
                [0x4d, 0x3c, 0x2b, 0x1a] => false,
                _ => return Err(self.malformed("section header block with a bad byte-order magic")),
            };
        }
        let blen = rd32(&self.buf, self.pos + 4, self.big) as usize;
        if blen < 12 || blen & 3 != 0 {
            return Err(self.malformed(format_args!("block of type {btype:#x} has invalid length {blen}")));
        }
        if !matches!(btype, SHB | IDB | PB | SPB | EPB) || (self.skip_section && btype != SHB) {
            if self.skip_section && matches!(btype, PB | SPB | EPB) {
                self.stats.packets_in_skipped_sections += 1;
            }
            self.pending_skip = blen as u64;
            if !self.skip_pending()? {
                return Err(self.truncated());
            }
            return Ok(Block::Consumed);
        }
        if blen > MAX_BLOCK_LEN {
            return Err(
                self.malformed(format_args!("block of type {btype:#x} is {blen} bytes long (limit {MAX_BLOCK_LEN})"))
            );
        }
        if !self.fill_to(blen)? {
            return Err(self.truncated());
        }
        let p = self.pos;
        let big = self.big;
        if rd32(&self.buf, p + blen - 4, big) as usize != blen {
            return Err(self.malformed(format_args!(
                "block of type {btype:#x}: trailing length differs from leading length {blen}"
            )));
        }
        let body_start = p + 8;
        let body_end = p + blen - 4;
        let body_len = body_end - body_start;
        let block = match btype {
            SHB => {
                if body_len < 16 {
                    return Err(self.malformed("section header block too short"));
                }
                self.ifaces.clear();
                let major = rd16(&self.buf, body_start + 4, big);
                self.skip_section = major != 1;
                if self.skip_section {
                    self.stats.sections_skipped += 1;
                } else if !walk_options(&self.buf[body_start + 16..body_end], big, |_, _| {}) {
                    self.stats.bad_options += 1;
                }
                Block::Consumed
            }
            IDB => {
                if self.ifaces.len() >= MAX_INTERFACES {
                    return Err(self.malformed(format_args!("more than {MAX_INTERFACES} interfaces in one section")));
                }
                let Some((iface, options_ok)) = parse_idb(&self.buf[body_start..body_end], big) else {
                    return Err(self.malformed("interface description block shorter than 20 bytes"));
                };
                if !options_ok {
                    self.stats.bad_options += 1;
                }
                self.ifaces.push(iface);
                Block::Consumed
            }
            SPB => {
                if body_len < 4 {
                    return Err(self.malformed("simple packet block too short"));
                }
                let orig_len = rd32(&self.buf, body_start, big);
                let Some(iface) = self.ifaces.first() else {
                    self.pos += blen;
                    return Err(CaptureError::UnknownInterface(0));
                };
                let mut cap = (orig_len as usize).min(body_len - 4);
                if iface.snaplen != 0 {
                    cap = cap.min(iface.snaplen as usize);
                }
                Block::Packet(Meta {
                    start: body_start + 4,
                    end: body_start + 4 + cap,
                    ts_nanos: 0,
                    linktype: iface.linktype,
                    interface: 0,
                    orig_len,
                })
            }
            _ => {
                // EPB and the obsolete PB share the layout, except that PB has
                // a 16-bit interface id followed by a 16-bit drop count.
                if body_len < 20 {
                    return Err(self.malformed("packet block too short"));
                }
                let b = &self.buf[body_start..body_end];
                let id = if btype == EPB { rd32(b, 0, big) } else { u32::from(rd16(b, 0, big)) };
                let ticks = (u64::from(rd32(b, 4, big)) << 32) | u64::from(rd32(b, 8, big));
                let cap = rd32(b, 12, big) as usize;
                let orig_len = rd32(b, 16, big);
                if cap > body_len - 20 {
                    return Err(self.malformed(format_args!("packet block captured length {cap} exceeds its block")));
                }
                let Some(iface) = self.ifaces.get(id as usize) else {
                    self.pos += blen;
                    return Err(CaptureError::UnknownInterface(id));
                };
                let meta = Meta {
                    start: body_start + 20,
                    end: body_start + 20 + cap,
                    ts_nanos: iface.ts_nanos(ticks),
                    linktype: iface.linktype,
                    interface: id,
                    orig_len,
                };
                if btype == EPB {
                    let opts_at = body_start + 20 + ((cap + 3) & !3);
                    let opts = self.buf.get(opts_at..body_end).unwrap_or(&[]);
                    if !walk_options(opts, big, |_, _| {}) {
                        self.stats.bad_options += 1;
                    }
                }
                Block::Packet(meta)
            }
        };
        self.pos += blen;
        Ok(block)
    }

    #[cfg(test)]
    fn buffer_len(&self) -> usize {
        self.buf.len()
    }
}

/// Writer of classic pcap files: little-endian, nanosecond magic
/// (`0xA1B23C4D`), version 2.4, snaplen [`MAX_PACKET_LEN`], one link type.
pub struct CaptureWriter<W: Write> {
    inner: PcapWriter<W>,
}

impl<W: Write> fmt::Debug for CaptureWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureWriter").finish_non_exhaustive()
    }
}

fn map_pcap_err(e: PcapError) -> CaptureError {
    match e {
        PcapError::IoError(e) => CaptureError::Io(e),
        other => CaptureError::InvalidPacket(other.to_string()),
    }
}

impl CaptureWriter<BufWriter<OutputFile>> {
    /// Creates a pcap file at `path`, written in full or not at all: the
    /// same as [`CaptureFile::create`] with no inputs to protect.
    pub fn create(path: &Path, linktype: u32) -> Result<CaptureFile, CaptureError> {
        CaptureFile::create(path, &[], linktype)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the pcap file header for `linktype` to `w`.
    pub fn new(w: W, linktype: u32) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: MAX_PACKET_LEN as u32,
            datalink: DataLink::from(linktype),
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
        };
        let inner = PcapWriter::with_header(w, header).map_err(map_pcap_err)?;
        Ok(CaptureWriter { inner })
    }

    /// Appends one packet. Errors with [`CaptureError::InvalidPacket`] if
    /// `data` is longer than [`MAX_PACKET_LEN`] or than `orig_len`, or if the
    /// timestamp's seconds do not fit the format's 32 bits (after 2106).
    pub fn write_packet(&mut self, ts_nanos: u64, data: &[u8], orig_len: u32) -> Result<(), CaptureError> {
        if data.len() > MAX_PACKET_LEN {
            return Err(CaptureError::InvalidPacket(format!(
                "captured length {} exceeds the limit of {MAX_PACKET_LEN} bytes",
                data.len()
            )));
        }
        if data.len() > orig_len as usize {
            return Err(CaptureError::InvalidPacket(format!(
                "captured length {} exceeds the original length {orig_len}",
                data.len()
            )));
        }
        if ts_nanos / 1_000_000_000 > u64::from(u32::MAX) {
            return Err(CaptureError::InvalidPacket(format!("timestamp {ts_nanos} ns does not fit 32-bit seconds")));
        }
        let pkt = PcapPacket::new(Duration::from_nanos(ts_nanos), orig_len, data);
        self.inner.write_packet(&pkt).map_err(map_pcap_err)?;
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = self.inner.into_writer();
        w.flush()?;
        Ok(w)
    }
}

/// A pcap file being written through an [`OutputFile`]: the packets go to
/// a temporary file that [`CaptureFile::finish`] renames into place.
/// Dropped unfinished (an error on the way), it leaves nothing behind and a
/// previous file at the path untouched.
#[derive(Debug)]
pub struct CaptureFile {
    writer: CaptureWriter<BufWriter<OutputFile>>,
}

impl CaptureFile {
    /// Creates a pcap file at `path` for `linktype`, refusing a path that
    /// is one of `inputs` ([`OutputError::SameAsInput`]).
    pub fn create(path: &Path, inputs: &[&Path], linktype: u32) -> Result<CaptureFile, CaptureError> {
        CaptureFile::new(OutputFile::create(path, inputs)?, linktype)
    }

    /// Writes the pcap header for `linktype` into `file`.
    pub fn new(file: OutputFile, linktype: u32) -> Result<CaptureFile, CaptureError> {
        Ok(CaptureFile { writer: CaptureWriter::new(BufWriter::with_capacity(256 * 1024, file), linktype)? })
    }

    /// Appends one packet, as [`CaptureWriter::write_packet`].
    pub fn write_packet(&mut self, ts_nanos: u64, data: &[u8], orig_len: u32) -> Result<(), CaptureError> {
        self.writer.write_packet(ts_nanos, data, orig_len)
    }

    /// Flushes the packets, syncs them to disk and renames the file into
    /// place ([`OutputFile::commit`]).
    pub fn finish(self) -> Result<(), CaptureError> {
        let file = self.writer.finish()?.into_inner().map_err(|e| CaptureError::Io(e.into_error()))?;
        file.commit()?;
        Ok(())
    }
}

/// An interface of a pcapng file being written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NgInterface {
    /// pcap `LINKTYPE_*` number.
    pub linktype: u32,
    /// `if_name` (omitted when empty).
    pub name: String,
    /// `if_tsresol`: decimal exponents 0 to 9 are kept (6 microseconds, 9
    /// nanoseconds); any other value is written as 9.
    pub tsresol: u8,
}

/// Writer of pcapng files: little-endian, one section (version 1.0, no
/// section length), interface description blocks added as needed (with
/// `if_name` and `if_tsresol`) and enhanced packet blocks.
pub struct PcapNgWriter<W: Write> {
    w: W,
    /// Per interface: nanoseconds per tick (a power of ten).
    ticks: Vec<u64>,
}

impl<W: Write> fmt::Debug for PcapNgWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapNgWriter").field("interfaces", &self.ticks.len()).finish_non_exhaustive()
    }
}

fn ng_block(w: &mut impl Write, btype: u32, body: &[u8]) -> io::Result<()> {
    let padded = (body.len() + 3) & !3;
    let len = u32::try_from(12 + padded).map_err(|_| io::Error::other("pcapng block too long"))?;
    w.write_all(&btype.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&[0u8; 3][..padded - body.len()])?;
    w.write_all(&len.to_le_bytes())
}

fn ng_option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.resize((body.len() + 3) & !3, 0);
}

impl<W: Write> PcapNgWriter<W> {
    /// Writes the section header block to `w`.
    pub fn new(mut w: W) -> Result<Self, CaptureError> {
        let mut body = Vec::with_capacity(16);
        body.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        ng_block(&mut w, SHB, &body)?;
        Ok(PcapNgWriter { w, ticks: Vec::new() })
    }

    /// Describes one more interface; returns its id for
    /// [`PcapNgWriter::write_packet`].
    pub fn add_interface(&mut self, iface: &NgInterface) -> Result<u32, CaptureError> {
        let id =
            u32::try_from(self.ticks.len()).map_err(|_| CaptureError::InvalidPacket("too many interfaces".into()))?;
        let linktype = u16::try_from(iface.linktype)
            .map_err(|_| CaptureError::InvalidPacket(format!("link type {} does not fit pcapng", iface.linktype)))?;
        let tsresol = if iface.tsresol <= 9 { iface.tsresol } else { 9 };
        let mut body = Vec::with_capacity(64);
        body.extend_from_slice(&linktype.to_le_bytes());
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&(MAX_PACKET_LEN as u32).to_le_bytes());
        let name = iface.name.as_bytes();
        if !name.is_empty() {
            ng_option(&mut body, 2, name.get(..MAX_NAME_LEN.min(name.len())).unwrap_or(name));
        }
        ng_option(&mut body, 9, &[tsresol]);
        body.extend_from_slice(&[0; 4]);
        ng_block(&mut self.w, IDB, &body)?;
        self.ticks.push(10u64.pow(9 - u32::from(tsresol)));
        Ok(id)
    }

    /// Appends one packet on interface `iface`. Errors with
    /// [`CaptureError::InvalidPacket`] for an interface not added, or if
    /// `data` is longer than [`MAX_PACKET_LEN`] or than `orig_len`.
    pub fn write_packet(&mut self, iface: u32, ts_nanos: u64, data: &[u8], orig_len: u32) -> Result<(), CaptureError> {
        let Some(&per_tick) = self.ticks.get(iface as usize) else {
            return Err(CaptureError::InvalidPacket(format!("interface {iface} was not described")));
        };
        if data.len() > MAX_PACKET_LEN || data.len() > orig_len as usize {
            return Err(CaptureError::InvalidPacket(format!(
                "captured length {} exceeds the limit of {MAX_PACKET_LEN} bytes or the original length {orig_len}",
                data.len()
            )));
        }
        let ticks = ts_nanos / per_tick;
        let padded = (data.len() + 3) & !3;
        let len = (32 + padded) as u32;
        let mut head = [0u8; 28];
        head[0..4].copy_from_slice(&EPB.to_le_bytes());
        head[4..8].copy_from_slice(&len.to_le_bytes());
        head[8..12].copy_from_slice(&iface.to_le_bytes());
        head[12..16].copy_from_slice(&((ticks >> 32) as u32).to_le_bytes());
        head[16..20].copy_from_slice(&(ticks as u32).to_le_bytes());
        head[20..24].copy_from_slice(&(data.len() as u32).to_le_bytes());
        head[24..28].copy_from_slice(&orig_len.to_le_bytes());
        self.w.write_all(&head)?;
        self.w.write_all(data)?;
        self.w.write_all(&[0u8; 3][..padded - data.len()])?;
        self.w.write_all(&len.to_le_bytes())?;
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W, CaptureError> {
        self.w.flush()?;
        Ok(self.w)
    }
}

/// A pcapng file being written through an [`OutputFile`], as
/// [`CaptureFile`] is for pcap.
#[derive(Debug)]
pub struct PcapNgFile {
    writer: PcapNgWriter<BufWriter<OutputFile>>,
}

impl PcapNgFile {
    /// Writes the section header into `file`.
    pub fn new(file: OutputFile) -> Result<PcapNgFile, CaptureError> {
        Ok(PcapNgFile { writer: PcapNgWriter::new(BufWriter::with_capacity(256 * 1024, file))? })
    }

    /// Creates a pcapng file at `path`, refusing a path that is one of
    /// `inputs` ([`OutputError::SameAsInput`]).
    pub fn create(path: &Path, inputs: &[&Path]) -> Result<PcapNgFile, CaptureError> {
        PcapNgFile::new(OutputFile::create(path, inputs)?)
    }

    /// As [`PcapNgWriter::add_interface`].
    pub fn add_interface(&mut self, iface: &NgInterface) -> Result<u32, CaptureError> {
        self.writer.add_interface(iface)
    }

    /// As [`PcapNgWriter::write_packet`].
    pub fn write_packet(&mut self, iface: u32, ts_nanos: u64, data: &[u8], orig_len: u32) -> Result<(), CaptureError> {
        self.writer.write_packet(iface, ts_nanos, data, orig_len)
    }

    /// Flushes, syncs and renames the file into place.
    pub fn finish(self) -> Result<(), CaptureError> {
        let file = self.writer.finish()?.into_inner().map_err(|e| CaptureError::Io(e.into_error()))?;
        file.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
