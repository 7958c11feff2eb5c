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
//!   again retries.
//!
//! A record whose captured length exceeds [`MAX_PACKET_LEN`] (or a pcapng
//! SHB/IDB/packet block longer than [`MAX_BLOCK_LEN`]) is `Malformed`, so a
//! corrupt length field never makes the reader allocate more than
//! [`MAX_BUFFER_LEN`]. The reader is otherwise lenient: the pcap `snaplen` is
//! not enforced, `orig_len` is reported as stored even if smaller than the
//! captured length, and timestamp fractions are not range checked. In classic
//! pcap only the low 16 bits of the link-type field are reported (the upper
//! bits carry FCS information).
//!
//! # Writing
//!
//! [`CaptureWriter`] writes classic pcap, little-endian, with the
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

pub mod output;

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
    /// Length of the packet on the wire.
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

#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    res: TsRes,
    offset_secs: i64,
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
    orig_len: u32,
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

/// Why an interface description block is malformed (the text follows
/// "malformed capture file: at byte offset N: ").
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
enum IdbError {
    #[error("interface description block shorter than 20 bytes")]
    Short,
    /// The option with this code runs past the block.
    #[error("interface option {0} overruns its block")]
    OptionOverrun(u16),
}

/// Parses an interface description block body (without the 8-byte block
/// header and the trailing length).
fn parse_idb(body: &[u8], big: bool) -> Result<Interface, IdbError> {
    if body.len() < 8 {
        return Err(IdbError::Short);
    }
    let mut iface = Interface {
        linktype: u32::from(rd16(body, 0, big)),
        snaplen: rd32(body, 4, big),
        res: TsRes::Mul(1000),
        offset_secs: 0,
    };
    let mut opts = body.get(8..).unwrap_or(&[]);
    while opts.len() >= 4 {
        let code = rd16(opts, 0, big);
        let olen = usize::from(rd16(opts, 2, big));
        if code == 0 {
            break;
        }
        let value = opts.get(4..4 + olen).ok_or(IdbError::OptionOverrun(code))?;
        match (code, olen) {
            (9, 1) => iface.res = TsRes::from_option(value.first().copied().unwrap_or(6)),
            (14, 8) => iface.offset_secs = rd64(value, 0, big) as i64,
            _ => {}
        }
        let padded = (olen + 3) & !3;
        opts = opts.get(4 + padded..).unwrap_or(&[]);
    }
    Ok(iface)
}

impl CaptureReader<BufReader<File>> {
    /// Opens a capture file (buffered).
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let f = File::open(path)?;
        CaptureReader::new(BufReader::with_capacity(64 * 1024, f))
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
            pending_skip: 0,
            packets: 0,
            done: false,
        };
        if !r.fill_to(4)? {
            return Err(CaptureError::NotACapture);
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
                Ok(Some(CapturedPacket {
                    ts_nanos: m.ts_nanos,
                    linktype: m.linktype,
                    orig_len: m.orig_len,
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
            let room = self.buf.len() - self.len;
            match self.src.read(&mut self.buf[self.len..]) {
                Ok(0) => return Ok(false),
                Ok(k) => self.len += k.min(room),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
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
            match self.src.read(&mut self.buf[..]) {
                Ok(0) => return Ok(false),
                Ok(k) => self.len = k.min(self.buf.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn next_pcap(&mut self) -> Result<Option<Meta>, CaptureError> {
        let h = self.pcap_rec_hdr;
        if !self.fill_to(h)? {
            return if self.avail() == 0 { Ok(None) } else { Err(self.truncated()) };
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
            return if self.avail() == 0 { Ok(Block::Eof) } else { Err(self.truncated()) };
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
        if !matches!(btype, SHB | IDB | PB | SPB | EPB) {
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
                Block::Consumed
            }
            IDB => {
                if self.ifaces.len() >= MAX_INTERFACES {
                    return Err(self.malformed(format_args!("more than {MAX_INTERFACES} interfaces in one section")));
                }
                let iface = parse_idb(&self.buf[body_start..body_end], big).map_err(|m| self.malformed(m))?;
                self.ifaces.push(iface);
                Block::Consumed
            }
            SPB => {
                if body_len < 4 {
                    return Err(self.malformed("simple packet block too short"));
                }
                let orig_len = rd32(&self.buf, body_start, big);
                let Some(iface) = self.ifaces.first().copied() else {
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
                let Some(iface) = self.ifaces.get(id as usize).copied() else {
                    self.pos += blen;
                    return Err(CaptureError::UnknownInterface(id));
                };
                Block::Packet(Meta {
                    start: body_start + 20,
                    end: body_start + 20 + cap,
                    ts_nanos: iface.ts_nanos(ticks),
                    linktype: iface.linktype,
                    orig_len,
                })
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

#[cfg(test)]
mod tests;
