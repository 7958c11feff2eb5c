//! [`Chain`], the zero-copy delivery: the rewritten IP header and the
//! fragments' payload slices in offset order.

use crate::queue::Frag;

/// Bytes of the header a [`Chain`] holds without a vector.
const INLINE_HEADER: usize = 64;

/// A reassembled datagram delivered without copying (see
/// [`Reassembler::push_owned`](crate::Reassembler::push_owned)): the
/// rewritten IP header followed by the fragments' payload slices in offset
/// order, each still in its frame buffer. Ready to use: the header is exactly
/// the one the copying path delivers (IPv4 total length, MF, offset, checksum
/// and ECN fixed; IPv6 Fragment header removed, Next Header and payload
/// length fixed, ECN combined), and [`Chain::copy_into`] gives the same bytes
/// as [`Reassembler::push`](crate::Reassembler::push).
///
/// The caller owns the chain and reuses it across pushes: delivery swaps
/// the queue's fragment list into it (no per-piece work), and its vectors
/// keep their capacity, so steady state does not allocate. Take the frame
/// buffers back with [`Chain::drain_buffers`] once done; buffers still in
/// the chain when the next datagram is delivered into it are handed back
/// through that push's `spare`.
#[derive(Debug)]
pub struct Chain<B> {
    /// The header when it fits (every IPv4 one, IPv6 with up to 24 bytes of
    /// extension headers): `inline[..inline_len]`, no vector to fill.
    pub(crate) inline: [u8; INLINE_HEADER],
    /// 0: the header is in `header`.
    pub(crate) inline_len: usize,
    pub(crate) header: Vec<u8>,
    /// The fragments in offset order.
    pub(crate) frags: Vec<Frag<B>>,
    /// Payload bytes of fragments that were pushed by copying (only when a
    /// queue mixed both ways of pushing).
    pub(crate) copied: Vec<u8>,
    pub(crate) len: usize,
}

impl<B> Default for Chain<B> {
    fn default() -> Self {
        Chain {
            inline: [0; INLINE_HEADER],
            inline_len: 0,
            header: Vec::new(),
            frags: Vec::new(),
            copied: Vec::new(),
            len: 0,
        }
    }
}

impl<B> Chain<B> {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Length of the IP datagram (header plus payload), 0 when empty.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chain holds no datagram.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fragments the datagram was made of.
    pub fn fragments(&self) -> usize {
        self.frags.len()
    }

    /// The rewritten IP header (IPv6: with the extension headers that came
    /// before the Fragment header).
    pub fn header(&self) -> &[u8] {
        if self.inline_len == 0 {
            &self.header
        } else {
            self.inline.get(..self.inline_len).unwrap_or(&[])
        }
    }

    /// Moves the frame buffers out (for recycling) and empties the chain,
    /// keeping its capacity. Dropping the iterator early drops the rest.
    pub fn drain_buffers(&mut self) -> impl Iterator<Item = B> + '_ {
        self.clear_header();
        self.frags.drain(..).filter_map(Frag::into_held)
    }

    /// Empties the chain, dropping its frame buffers (for handles that need
    /// no recycling), and keeps its capacity.
    #[inline]
    pub fn clear(&mut self) {
        self.clear_header();
        self.frags.clear();
    }

    /// Empties everything but the fragment list.
    #[inline]
    fn clear_header(&mut self) {
        self.inline_len = 0;
        self.header.clear();
        self.copied.clear();
        self.len = 0;
    }

    /// The frame buffers, consuming the chain.
    pub fn into_buffers(self) -> impl Iterator<Item = B> {
        self.frags.into_iter().filter_map(Frag::into_held)
    }
}

impl<B: AsRef<[u8]>> Chain<B> {
    /// The payload pieces in offset order (the header not included).
    pub fn payload(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.frags.iter().map(move |f| f.bytes(&self.copied))
    }

    /// Every piece of the datagram in order: the header, then the payload
    /// pieces. Their lengths add up to [`Chain::len`].
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(self.header()).chain(self.payload())
    }

    /// Clears `out` and writes the datagram into it contiguously (byte for
    /// byte what [`Reassembler::push`](crate::Reassembler::push) delivers).
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.len);
        for piece in self.iter() {
            out.extend_from_slice(piece);
        }
    }
}
