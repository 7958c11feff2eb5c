//! Pre-built frames cycled from memory: the generator's frames made once,
//! before the run, so that a benchmark measures the engine and not the
//! making of packets (`flowsteer bench flows`).
//!
//! The frames of one pass are the generator's own (same flows, tuples and
//! sizes), in a shuffled order for a uniform mix: at a million flows,
//! consecutive packets then belong to unrelated flows, as on a busy link,
//! instead of walking the flows in id order (which lets the hardware
//! prefetcher stream every per-flow array). Zipf draws are random already
//! and keep their order. The ring is at least [`MIN_RING_FRAMES`] frames
//! (several passes over few flows), so that even a small flow count reads
//! packets from more memory than the L2 holds, as from a NIC's ring.
//!
//! Every pass hands out the same bytes with a higher sequence number:
//! the 8-byte stamp is rewritten and the L4 checksum patched
//! incrementally (RFC 1624) as each frame leaves, so the engine's order
//! check sees every flow's numbers rise and the frames stay valid.

use crate::source::RxSource;
use flowsteer_gen::{Frame, GenConfig, GenError, Generator, Spread};
use flowsteer_prim::SplitMix64;
use flowsteer_rss::QueueId;
use flowsteer_wire::{parse_frame, proto, LinkType, ParseOptions};

/// Fewest frames in a ring (a uniform mix of fewer flows repeats them).
pub const MIN_RING_FRAMES: usize = 1 << 16;
/// Most frames in a ring (about 1.3 GB of 64-byte frames and index).
pub const MAX_RING_FRAMES: usize = 1 << 24;

/// Why a ring could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error(transparent)]
    Gen(#[from] GenError),
    #[error("a frame ring needs whole packets: the generator's fragment share must be 0")]
    Fragments,
    #[error("a frame ring holds at most {max} frames, not {asked}")]
    TooLarge { asked: usize, max: usize },
    #[error("the generator made a frame the ring cannot restamp ({0})")]
    Unstampable(&'static str),
}

/// Where one frame sits in the arena and where its stamp and checksum are.
#[derive(Clone, Copy, Debug)]
struct Slot {
    offset: u64,
    len: u16,
    seq_at: u16,
    csum_at: u16,
    udp: bool,
}

/// The generator's frames, built once and handed out in a cycle on
/// receive queue 0 (one worker's source). It
/// [holds back](RxSource::holds_back), like the generator.
pub struct RingSource {
    arena: Vec<u8>,
    slots: Vec<Slot>,
    pos: usize,
    pass: u64,
    /// Sequence numbers one pass spans: pass `p` adds `p * stride`.
    stride: u64,
}

impl std::fmt::Debug for RingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingSource").field("frames", &self.slots.len()).field("bytes", &self.arena.len()).finish()
    }
}

impl RingSource {
    /// A ring of at least `frames` frames (and at least
    /// [`MIN_RING_FRAMES`], and a whole number of the generator's rounds
    /// for a uniform mix) of `cfg`'s traffic on one queue; a uniform mix is
    /// shuffled within each round with `cfg.seed`. Takes ~0.1-0.2 us per
    /// frame to build.
    pub fn new(cfg: &GenConfig, frames: usize) -> Result<RingSource, RingError> {
        cfg.validate()?;
        if cfg.frag_share > 0.0 {
            return Err(RingError::Fragments);
        }
        let flows = (cfg.flows as usize).max(1);
        let uniform = cfg.zipf.is_none();
        let want = frames.max(MIN_RING_FRAMES);
        // Uniform: whole rounds of every flow, so each pass holds each
        // flow equally often.
        let want = if uniform { want.div_ceil(flows) * flows } else { want };
        if want > MAX_RING_FRAMES {
            return Err(RingError::TooLarge { asked: want, max: MAX_RING_FRAMES });
        }
        let mut gen = Generator::new(cfg, Spread::Single)?;
        let mut rng = SplitMix64(cfg.seed ^ 0x7269_6e67);
        let mut arena = Vec::with_capacity(want * 80);
        let mut slots = Vec::with_capacity(want);
        let mut max_seq = 0;
        let mut burst: Vec<Frame> = (0..32).map(|_| Frame::new()).collect();
        let opts = ParseOptions::default();
        while slots.len() < want {
            let n = gen.next_burst(QueueId(0), &mut burst).min(want - slots.len());
            if n == 0 {
                return Err(RingError::Unstampable("the generator made no frame"));
            }
            for f in &burst[..n] {
                let bytes = f.bytes();
                let l3 = parse_frame(bytes, LinkType::Ethernet, &opts)
                    .ok()
                    .and_then(|p| p.outer)
                    .ok_or(RingError::Unstampable("unparsable"))?;
                let l4 = l3.l4_offset.ok_or(RingError::Unstampable("no L4 header"))?;
                let (seq_at, csum_at, udp) = match l3.tuple.proto {
                    proto::UDP => (l4 + 8, l4 + 6, true),
                    proto::TCP => {
                        let doff = usize::from(bytes.get(l4 + 12).copied().unwrap_or(0) >> 4) * 4;
                        (l4 + doff, l4 + 16, false)
                    }
                    _ => return Err(RingError::Unstampable("neither UDP nor TCP")),
                };
                if seq_at + 8 > bytes.len() {
                    return Err(RingError::Unstampable("no room for the stamp"));
                }
                max_seq = max_seq.max(f.seq());
                slots.push(Slot {
                    offset: arena.len() as u64,
                    len: bytes.len() as u16,
                    seq_at: seq_at as u16,
                    csum_at: csum_at as u16,
                    udp,
                });
                arena.extend_from_slice(bytes);
            }
        }
        if uniform {
            // Fisher-Yates within each round: a round's frames all carry
            // the same sequence number, so any order within it keeps every
            // flow's numbers rising.
            for round in slots.chunks_mut(flows) {
                for i in (1..round.len()).rev() {
                    let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                    round.swap(i, j);
                }
            }
        }
        // Lay the frames out in the order they are handed out, as in a
        // NIC's ring: reading them is a sequential stream, not a miss per
        // frame.
        let mut laid = Vec::with_capacity(arena.len());
        for s in &mut slots {
            let start = s.offset as usize;
            let Some(frame) = arena.get(start..start + usize::from(s.len)) else {
                return Err(RingError::Unstampable("frame out of the arena"));
            };
            s.offset = laid.len() as u64;
            laid.extend_from_slice(frame);
        }
        Ok(RingSource { arena: laid, slots, pos: 0, pass: 0, stride: max_seq + 1 })
    }

    /// Frames in the ring.
    pub fn frames(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of frames in the ring.
    pub fn bytes(&self) -> usize {
        self.arena.len()
    }
}

/// Writes `seq` as the frame's stamp and patches its L4 checksum for the
/// change (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')).
#[inline]
fn restamp(frame: &mut [u8], s: &Slot, seq: u64) {
    let (seq_at, csum_at) = (usize::from(s.seq_at), usize::from(s.csum_at));
    let (Some(old), Some(c)) = (frame.get(seq_at..seq_at + 8), frame.get(csum_at..csum_at + 2)) else {
        return;
    };
    let old_seq = u64::from_be_bytes(old.try_into().unwrap_or([0; 8]));
    let old_csum = u16::from_be_bytes([c[0], c[1]]);
    let words = |v: u64| (v >> 48) + ((v >> 32) & 0xffff) + ((v >> 16) & 0xffff) + (v & 0xffff);
    let mut acc = u64::from(!old_csum) + words(!old_seq) + words(seq);
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    let mut csum = !(acc as u16);
    if s.udp && csum == 0 {
        // UDP sends a computed 0 as all ones (0 means "no checksum").
        csum = 0xffff;
    }
    if let Some(d) = frame.get_mut(seq_at..seq_at + 8) {
        d.copy_from_slice(&seq.to_be_bytes());
    }
    if let Some(d) = frame.get_mut(csum_at..csum_at + 2) {
        d.copy_from_slice(&csum.to_be_bytes());
    }
}

impl RxSource for RingSource {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        if q.index() != 0 || self.slots.is_empty() {
            return 0;
        }
        for _ in 0..max {
            let s = self.slots[self.pos];
            let start = s.offset as usize;
            let Some(frame) = self.arena.get_mut(start..start + usize::from(s.len)) else { break };
            let seq = u64::from_be_bytes(
                frame
                    .get(usize::from(s.seq_at)..usize::from(s.seq_at) + 8)
                    .and_then(|b| b.try_into().ok())
                    .unwrap_or([0; 8]),
            );
            // The frame's number within its pass, moved to this pass.
            let base = seq % self.stride;
            restamp(frame, &s, base + self.pass * self.stride);
            sink(frame);
            self.pos += 1;
            if self.pos == self.slots.len() {
                self.pos = 0;
                self.pass += 1;
            }
        }
        max
    }

    fn exhausted(&self, q: QueueId) -> bool {
        q.index() != 0 || self.slots.is_empty()
    }

    fn holds_back(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_wire::L3Info;
    use std::collections::HashMap;
    use std::net::IpAddr;

    /// The L4 checksum over the pseudo-header and segment sums to all ones.
    fn l4_checksum_ok(b: &[u8], l3: &L3Info) -> bool {
        let l4 = l3.l4_offset.unwrap();
        let end = l3.l3_offset + l3.ip_total_len;
        let mut sum = 0u64;
        let mut add = |bytes: &[u8]| {
            for w in bytes.chunks(2) {
                sum += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            }
        };
        for a in [l3.tuple.src, l3.tuple.dst] {
            match a {
                IpAddr::V4(v) => add(&v.octets()),
                IpAddr::V6(v) => add(&v.octets()),
            }
        }
        add(&[0, l3.tuple.proto]);
        add(&((end - l4) as u16).to_be_bytes());
        add(&b[l4..end]);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum == 0xffff
    }

    fn cfg(flows: u32, zipf: Option<f64>) -> GenConfig {
        GenConfig { flows, zipf, ..GenConfig::default() }
    }

    /// Three passes: every frame parses, carries a valid L4 checksum, and
    /// every flow's sequence numbers rise; a uniform pass holds each flow
    /// equally often, in an order other than the flow ids'.
    #[test]
    fn passes_restamp_and_keep_frames_valid() {
        for (flows, zipf) in [(1000u32, None), (70_000, None), (5000, Some(1.1))] {
            let mut r = RingSource::new(&cfg(flows, zipf), 0).unwrap();
            let n = r.frames();
            assert!(n >= MIN_RING_FRAMES);
            if zipf.is_none() {
                assert_eq!(n % flows as usize, 0, "whole rounds");
            }
            let mut last: HashMap<u32, u64> = HashMap::new();
            let mut count: HashMap<u32, usize> = HashMap::new();
            let mut ids = Vec::new();
            let opts = ParseOptions::default();
            for _ in 0..3 * n / 32 + 1 {
                r.poll(QueueId(0), 32, &mut |b| {
                    let p = parse_frame(b, LinkType::Ethernet, &opts).unwrap();
                    let l3 = p.outer.unwrap();
                    assert!(l4_checksum_ok(b, &l3), "checksum after restamp");
                    let l4 = l3.l4_offset.unwrap();
                    let pay = if l3.tuple.proto == proto::UDP { l4 + 8 } else { l4 + usize::from(b[l4 + 12] >> 4) * 4 };
                    let (seq, id) = flowsteer_gen::read_seq(&b[pay..]).unwrap();
                    if let Some(&prev) = last.get(&id) {
                        assert!(seq > prev, "flow {id}: {seq} after {prev}");
                    }
                    last.insert(id, seq);
                    *count.entry(id).or_default() += 1;
                    if ids.len() < 64 {
                        ids.push(id);
                    }
                });
            }
            if zipf.is_none() {
                assert_eq!(last.len(), flows as usize);
                assert!(ids.windows(2).any(|w| w[1] != w[0] + 1), "shuffled, not in id order");
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_ring() {
        let frag = GenConfig { frag_share: 0.5, ..cfg(10, None) };
        assert!(matches!(RingSource::new(&frag, 0), Err(RingError::Fragments)));
        let big = cfg(1 << 24, None);
        assert!(matches!(RingSource::new(&big, MAX_RING_FRAMES + 1), Err(RingError::TooLarge { .. })));
        assert!(matches!(RingSource::new(&cfg(0, None), 0), Err(RingError::Gen(_))));
        let r = RingSource::new(&cfg(3, None), 0).unwrap();
        assert!(r.exhausted(QueueId(1)) && !r.exhausted(QueueId(0)) && r.holds_back());
    }
}
