//! Compressed captures, recognised by their first bytes (not by the file
//! name) and decompressed as they are read.
//!
//! * gzip (`1F 8B`), every member of a multi-member file (`cat a.gz b.gz`,
//!   what `pigz` and log rotation write), through `flate2`'s
//!   `MultiGzDecoder` (pure Rust);
//! * zstd (`28 B5 2F FD`), every frame of a multi-frame file, skippable
//!   frames skipped, through `ruzstd` (pure Rust);
//! * anything else is passed through unchanged.
//!
//! Memory: gzip needs its 32 KiB window and a 64 KiB input buffer; zstd
//! holds the frame's window, which `ruzstd` refuses above 100 MiB (`zstd`
//! writes 8 MiB windows up to level 19 and 128 MiB only with `--long` or
//! `--ultra`), plus a 64 KiB input buffer. Both are independent of the
//! file size.
//!
//! A compressed stream that ends early (the file was cut) reads as an
//! [`io::ErrorKind::UnexpectedEof`] error, which the capture reader reports
//! as a truncated capture after the packets it could read; corrupt
//! compressed data is an [`io::ErrorKind::InvalidData`] error.

use std::io::{self, BufRead, BufReader, Cursor, Read};

use flate2::bufread::MultiGzDecoder;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

/// Input buffer of the decompressors.
const INPUT_BUFFER_LEN: usize = 64 * 1024;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// How a capture file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Not compressed (or not in a format recognised here).
    None,
    /// gzip, one or more members.
    Gzip,
    /// Zstandard, one or more frames.
    Zstd,
}

impl Compression {
    /// `none`, `gzip` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// The first bytes read while sniffing, then the rest of the source.
type Sniffed<R> = io::Chain<Cursor<Vec<u8>>, R>;

/// Notes whether its source reached its end (to tell a cut stream from
/// corrupt data when a decompressor fails).
struct EofTracker<R> {
    inner: R,
    eof: bool,
}

impl<R: Read> Read for EofTracker<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.eof = true;
        }
        Ok(n)
    }
}

type Source<R> = BufReader<EofTracker<Sniffed<R>>>;

enum Inner<R: Read> {
    Plain(Sniffed<R>),
    Gzip(Box<MultiGzDecoder<Source<R>>>),
    Zstd(Box<ZstdFrames<R>>),
}

/// A reader that decompresses its source when it starts with a gzip or
/// zstd magic number, and passes it through otherwise.
pub struct Decompressed<R: Read> {
    inner: Inner<R>,
    compression: Compression,
}

impl<R: Read> std::fmt::Debug for Decompressed<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressed").field("compression", &self.compression).finish_non_exhaustive()
    }
}

impl<R: Read> Decompressed<R> {
    /// Reads the first bytes of `source` to recognise a compression.
    pub fn new(mut source: R) -> io::Result<Self> {
        let mut head = Vec::with_capacity(4);
        while head.len() < 4 {
            let mut b = [0u8; 4];
            let want = 4 - head.len();
            match source.read(&mut b[..want]) {
                Ok(0) => break,
                Ok(n) => head.extend_from_slice(b.get(..n).unwrap_or(&[])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let compression = if head.starts_with(&GZIP_MAGIC) {
            Compression::Gzip
        } else if head.starts_with(&ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::None
        };
        let sniffed = Cursor::new(head).chain(source);
        let inner = match compression {
            Compression::None => Inner::Plain(sniffed),
            Compression::Gzip => Inner::Gzip(Box::new(MultiGzDecoder::new(buffered(sniffed)))),
            Compression::Zstd => Inner::Zstd(Box::new(ZstdFrames::new(buffered(sniffed)))),
        };
        Ok(Decompressed { inner, compression })
    }

    /// The compression recognised.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    fn source_ended(&self) -> bool {
        match &self.inner {
            Inner::Plain(_) => false,
            Inner::Gzip(d) => d.get_ref().get_ref().eof,
            Inner::Zstd(z) => z.src.get_ref().eof,
        }
    }
}

fn buffered<R: Read>(sniffed: Sniffed<R>) -> Source<R> {
    BufReader::with_capacity(INPUT_BUFFER_LEN, EofTracker { inner: sniffed, eof: false })
}

impl<R: Read> Read for Decompressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = match &mut self.inner {
            Inner::Plain(r) => return r.read(buf),
            Inner::Gzip(d) => d.read(buf),
            Inner::Zstd(z) => z.read(buf),
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(e),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            // A decoder that fails after its source ended was cut short.
            Err(e) if self.source_ended() => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} stream ends early: {e}", self.compression.name()),
            )),
            Err(e) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("corrupt {} data: {e}", self.compression.name()),
            )),
            ok => ok,
        }
    }
}

/// The frames of a zstd stream, one after the other.
struct ZstdFrames<R: Read> {
    src: Source<R>,
    decoder: FrameDecoder,
    in_frame: bool,
}

impl<R: Read> ZstdFrames<R> {
    fn new(src: Source<R>) -> Self {
        ZstdFrames { src, decoder: FrameDecoder::new(), in_frame: false }
    }

    /// Starts the next frame (skipping skippable frames); false at the
    /// clean end of the stream.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            if self.src.fill_buf()?.is_empty() {
                return Ok(false);
            }
            match self.decoder.reset(&mut self.src) {
                Ok(()) => return Ok(true),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame { length, .. })) => {
                    let skipped = io::copy(&mut (&mut self.src).take(u64::from(length)), &mut io::sink())?;
                    if skipped < u64::from(length) {
                        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "zstd skippable frame ends early"));
                    }
                }
                Err(e) => return Err(io::Error::other(e)),
            }
        }
    }
}

impl<R: Read> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.in_frame {
                if !self.next_frame()? {
                    return Ok(0);
                }
                self.in_frame = true;
            }
            // As ruzstd's StreamingDecoder: decode blocks until enough
            // bytes can be collected or the frame is done.
            while self.decoder.can_collect() < buf.len() && !self.decoder.is_finished() {
                let need = buf.len() - self.decoder.can_collect();
                self.decoder
                    .decode_blocks(&mut self.src, BlockDecodingStrategy::UptoBytes(need))
                    .map_err(io::Error::other)?;
            }
            let n = self.decoder.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            if self.decoder.is_finished() && self.decoder.can_collect() == 0 {
                self.in_frame = false;
            }
        }
    }
}
