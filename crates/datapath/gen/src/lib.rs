//! flowsteer-gen: the built-in traffic generator, the default source of
//! `flowsteer run`.
//!
//! Stage 0 of the packet's path (**source** -> parse -> hash -> steer -> ...).
//! A [`Generator`] plays the NIC: it owns a set of flows, knows which
//! receive queue each flow's packets land on ([`Spread`]) and fills bursts
//! of reusable [`Frame`]s for one queue at a time
//! ([`Generator::next_burst`]). Sans-IO and deterministic: no threads, no
//! clocks, no printing, no allocation per packet; the same [`GenConfig`]
//! (seed included) and the same calls give byte-identical frames.
//!
//! # What is generated
//!
//! * Flow `i` (`0..flows`) has a fixed tuple and kind derived from the seed
//!   ([`Generator::flow_tuple`]): IPv4 or IPv6 (`ipv6_share`), TCP or UDP
//!   (`tcp_share`), and for UDP flows, with probability `frag_share`, a
//!   *fragmenting* flow. Shares are per flow, so under Zipf the share of
//!   *packets* follows the popularity of the flows that drew each kind.
//! * Every frame is Ethernet II / IPv4 or IPv6 / UDP or TCP (PSH|ACK) with
//!   correct IPv4 header, UDP and TCP checksums. The payload starts with the
//!   8-byte big-endian per-flow sequence number and the 4-byte flow id
//!   ([`read_seq`]); the rest is zero. IPv4 identification is the low 16
//!   bits of the sequence number, the TCP sequence number field its low 32
//!   bits (a segment count, not a byte offset).
//! * Frame lengths follow [`SizeDist`] but never go below the headers plus
//!   the 12-byte sequence header (54/66/74/86 bytes for IPv4-UDP/IPv4-TCP/
//!   IPv6-UDP/IPv6-TCP).
//! * Fragmenting flows send every datagram as a
//!   [`FRAG_UDP_PAYLOAD`]-byte UDP payload split at the 1500-byte [`MTU`]
//!   into 3 fragments (IPv4 fragments, or IPv6 with a Fragment header whose
//!   identification is the low 32 bits of the sequence number). Fragments of
//!   one datagram share its sequence number and are emitted consecutively and
//!   in offset order, possibly across two bursts of the queue.
//! * Per-flow sequence numbers start at 0 and grow by 1 per datagram.
//!
//! # Flow selection
//!
//! Each queue serves only its own flows (`Spread::Rss`: the flows the RSS
//! configuration places on it; `Spread::Single`: all flows on queue 0).
//! Uniform: round robin over the queue's flows in id order. Zipf(s): flow
//! `i` weighs `(i + 1)^-s` (flow 0 is the heaviest hitter); each queue draws
//! from an alias table (Walker/Vose, O(1) per draw) over its own flows.
//! Flows are drawn 32 at a time and IMIX sizes come from a second PRNG, so a
//! queue's stream of frames depends only on the configuration and on how
//! many frames were taken from that queue: not on burst sizes, and not on
//! how other queues are polled. Two generators built from the same
//! configuration can therefore serve disjoint queues on different threads
//! and together produce exactly what one would.
//!
//! # Cost
//!
//! Measured on the 2-core dev VM (AMD EPYC, shared), release build, bursts
//! of 32, 1000 flows, `Fixed(64)`, min of 5 runs by task clock:
//!
//! | flows                          | uniform  | Zipf 1.1 |
//! |--------------------------------|----------|----------|
//! | IPv4, 50% TCP                  | ~11 ns   | ~13 ns   |
//! | default mix (25% IPv6, 50% TCP)| ~11 ns   | ~17-19 ns|
//!
//! Per packet: one 88-byte template copy, seven to eight stores and two
//! checksum folds, branch-free in the flow kind. Drawing flows one at a time
//! cost ~27 ns under Zipf (the PRNG -> alias -> flow -> counter -> template
//! chain serialised packets); drawing them in batches of 32 removed that.
//! IMIX adds ~1.5 ns (the size draw; padding is free, see `template`).
//! Fragments take a slower, branchy path. Over 2^20 flows under Zipf the templates no longer fit in
//! cache and a tail draw costs a DRAM miss (~150-200 ns); flows built on the
//! fly cost ~150 ns. Building costs ~0.1 us per flow (2^24 flows: 1-2 s).
//!
//! # Limits and memory
//!
//! * `flows <= MAX_FLOWS` (2^24). Per flow: an 8-byte sequence counter and
//!   a 4-byte entry in its queue's list, plus under Zipf an 8-byte alias
//!   slot; flows below [`MAX_TEMPLATED_FLOWS`] (2^20) also a 94-byte
//!   template. Worst case (2^24 flows, Zipf) ~420 MiB (~480 MiB peak while
//!   building); the default 1024 flows ~120 KiB.
//! * Flows at or above `MAX_TEMPLATED_FLOWS` build their template on the fly
//!   for each packet (~10x slower; no allocation: a scratch buffer is reused).
//! * `Frame` buffers hold [`FRAME_CAPACITY`] (9018) bytes.
//!
//! # Thread safety
//!
//! `Generator` and `Frame` are `Send` (plain owned data) and not shared:
//! `next_burst` takes `&mut self`. Nothing is global.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod alias;
mod config;
mod flow;
pub mod frames;
mod template;

use std::fmt;

use flowsteer_prim::{mix64, SplitMix64};
use flowsteer_rss::QueueId;
use flowsteer_wire::FlowTuple;

use crate::alias::AliasTable;
use crate::flow::FlowParams;
use crate::template::{Buf, Template};

pub use crate::config::{
    GenConfig, GenError, SizeDist, Spread, FRAG_UDP_PAYLOAD, IMIX, MAX_FLOWS, MAX_FRAME_LEN, MAX_TEMPLATED_FLOWS,
    MIN_FRAME_LEN, MTU,
};
pub use crate::template::FRAME_CAPACITY;

/// A reusable frame buffer of [`FRAME_CAPACITY`] bytes; [`Frame::bytes`] is
/// the frame last written into it. Allocate a burst's worth once and pass
/// them to every [`Generator::next_burst`]: no allocation per packet.
#[derive(Clone)]
pub struct Frame {
    buf: Box<Buf>,
    len: usize,
    flow_id: u32,
    seq: u64,
    fragment: bool,
}

impl Frame {
    /// An empty frame (allocates its 9018-byte buffer).
    pub fn new() -> Frame {
        Frame { buf: Box::new([0u8; FRAME_CAPACITY]), len: 0, flow_id: 0, seq: 0, fragment: false }
    }

    /// The frame: Ethernet header first, no FCS. Empty until written.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    /// The generator flow that sent it.
    #[inline]
    pub fn flow_id(&self) -> u32 {
        self.flow_id
    }

    /// Its per-flow sequence number (shared by the fragments of a datagram).
    #[inline]
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// True for an IP fragment (first or not).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.fragment
    }
}

impl Default for Frame {
    fn default() -> Self {
        Frame::new()
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("len", &self.len)
            .field("flow_id", &self.flow_id)
            .field("seq", &self.seq)
            .field("fragment", &self.fragment)
            .finish()
    }
}

/// Reads the `(sequence number, flow id)` header at the start of a UDP/TCP
/// payload (or of a first fragment's UDP payload); None when shorter than
/// 12 bytes.
pub fn read_seq(payload: &[u8]) -> Option<(u64, u32)> {
    let (seq, rest) = payload.split_first_chunk::<8>()?;
    let id = rest.first_chunk::<4>()?;
    Some((u64::from_be_bytes(*seq), u32::from_be_bytes(*id)))
}

/// The datagram being sent as fragments on one queue.
#[derive(Clone, Copy, Debug)]
struct Pending {
    flow: u32,
    seq: u64,
    offset: usize,
}

/// Flows drawn ahead per queue (see [`QueueState::refill`]).
const PICK_BATCH: usize = 32;

/// One receive queue's flows and drawing state.
#[derive(Clone, Debug)]
struct QueueState {
    /// Its flows, ascending ids.
    flows: Vec<u32>,
    /// Round-robin position (uniform).
    cursor: usize,
    /// Zipf draws over `flows` (empty: uniform).
    alias: AliasTable,
    /// Flow draws.
    pick_rng: SplitMix64,
    /// Size draws (IMIX).
    size_rng: SplitMix64,
    /// The flows of the next datagrams: `picks[next..]` are still to send.
    picks: [u32; PICK_BATCH],
    next: usize,
    pending: Option<Pending>,
}

impl QueueState {
    fn new(flows: Vec<u32>, alias: AliasTable, seed: u64, q: usize) -> QueueState {
        let qseed = seed ^ (q as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f);
        QueueState {
            flows,
            cursor: 0,
            alias,
            pick_rng: SplitMix64(mix64(qseed)),
            size_rng: SplitMix64(mix64(qseed ^ 0x5151_5151_5151_5151)),
            picks: [0; PICK_BATCH],
            next: PICK_BATCH,
            pending: None,
        }
    }

    /// The flow of the next datagram.
    #[inline]
    fn pick(&mut self) -> u32 {
        if self.next >= PICK_BATCH {
            self.refill();
        }
        let f = self.picks.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        f
    }

    /// Draws the next `PICK_BATCH` flows in one go. Drawing one flow at a
    /// time put the whole chain (PRNG, alias slot, flow list, sequence
    /// counter, template) on each packet's critical path and made Zipf
    /// ~2x slower than round robin; a batch of independent draws pipelines.
    /// The stream of flows is the same whatever the burst sizes.
    #[inline(never)]
    fn refill(&mut self) {
        if self.alias.is_empty() {
            let n = self.flows.len();
            for p in &mut self.picks {
                *p = self.flows.get(self.cursor).copied().unwrap_or(0);
                self.cursor += 1;
                if self.cursor >= n {
                    self.cursor = 0;
                }
            }
        } else {
            for p in &mut self.picks {
                let i = self.alias.draw(self.pick_rng.next_u64());
                *p = self.flows.get(i).copied().unwrap_or(0);
            }
        }
        self.next = 0;
    }
}

/// The traffic generator. See the crate docs.
#[derive(Clone, Debug)]
pub struct Generator {
    params: FlowParams,
    flows: u32,
    size: SizeDist,
    /// See [`GenConfig::frag_every`].
    frag_every: u64,
    /// Templates of flows `0..templates.len()`.
    templates: Vec<Template>,
    /// Next sequence number per flow.
    seqs: Vec<u64>,
    queues: Vec<QueueState>,
    /// Reused by on-the-fly templates.
    scratch: Vec<u8>,
}

impl Generator {
    /// Validates `cfg`, derives every flow, places it on a queue and
    /// precomputes templates and Zipf tables. Cost ~0.1 us per flow.
    pub fn new(cfg: &GenConfig, spread: Spread) -> Result<Generator, GenError> {
        cfg.validate()?;
        let params = FlowParams::new(cfg);
        let nq = match &spread {
            Spread::Rss { queues: 0, .. } => return Err(GenError::NoQueues),
            Spread::Rss { queues, .. } => *queues,
            Spread::Single => 1,
        };
        if cfg.frag_every > 1 && cfg.frag_share > 0.0 && nq > 1 {
            return Err(GenError::MixedNeedsOneQueue(nq));
        }
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); usize::from(nq)];
        let templated = cfg.flows.min(MAX_TEMPLATED_FLOWS);
        let mut templates = Vec::with_capacity(templated as usize);
        let mut scratch = Vec::with_capacity(128);
        for id in 0..cfg.flows {
            let spec = params.spec(id);
            if id < templated {
                templates.push(Template::build(&spec, id, &mut scratch));
            }
            let q = match &spread {
                Spread::Rss { config, .. } => spec.queue(config),
                Spread::Single => QueueId(0),
            };
            match lists.get_mut(q.index()) {
                Some(list) => list.push(id),
                None => return Err(GenError::QueueOutOfRange { queue: q, queues: nq }),
            }
        }
        let queues = lists
            .into_iter()
            .enumerate()
            .map(|(q, flows)| {
                let alias = match cfg.zipf {
                    Some(s) => zipf_table(&flows, s),
                    None => AliasTable::default(),
                };
                QueueState::new(flows, alias, cfg.seed, q)
            })
            .collect();
        Ok(Generator {
            params,
            flows: cfg.flows,
            size: cfg.size,
            frag_every: u64::from(cfg.frag_every.max(1)),
            templates,
            seqs: vec![0; cfg.flows as usize],
            queues,
            scratch,
        })
    }

    /// Number of receive queues (1 for `Spread::Single`).
    pub fn queues(&self) -> u16 {
        self.queues.len() as u16
    }

    /// Fills `out` with the next packets of receive queue `q` and returns
    /// how many were written: `out.len()`, or 0 when `q` has no flows (or
    /// does not exist). Each frame is a fresh packet of one of `q`'s flows
    /// (see the crate docs for the selection); fragments of a datagram are
    /// consecutive and may continue in the next burst for `q`.
    pub fn next_burst(&mut self, q: QueueId, out: &mut [Frame]) -> usize {
        let Generator { params, size, templates, seqs, queues, scratch, frag_every, .. } = self;
        let Some(st) = queues.get_mut(q.index()) else {
            return 0;
        };
        if st.flows.is_empty() {
            return 0;
        }
        for frame in out.iter_mut() {
            let (flow, seq, offset) = match st.pending.take() {
                Some(p) => (p.flow, p.seq, p.offset),
                None => {
                    let flow = st.pick();
                    // `pick` only returns ids < flows == seqs.len().
                    let s = seqs.get_mut(flow as usize).map_or(0, |seq| {
                        let s = *seq;
                        *seq = s.wrapping_add(1);
                        s
                    });
                    (flow, s, 0)
                }
            };
            let owned;
            let t = match templates.get(flow as usize) {
                Some(t) => t,
                None => {
                    owned = Template::build(&params.spec(flow), flow, scratch);
                    &owned
                }
            };
            frame.flow_id = flow;
            frame.seq = seq;
            if t.kind.is_frag() && (offset > 0 || seq.is_multiple_of(*frag_every)) {
                let (len, next) = t.emit_fragment(&mut frame.buf, seq, offset);
                frame.len = len;
                frame.fragment = true;
                st.pending = next.map(|offset| Pending { flow, seq, offset });
            } else {
                let want = match *size {
                    SizeDist::Fixed(n) => usize::from(n),
                    SizeDist::Imix => imix_len(st.size_rng.next_u64()),
                };
                // Raised to the flow's minimum without a branch (the minimum
                // depends on the kind, which is random under Zipf).
                let want = want.min(usize::from(MAX_FRAME_LEN));
                let len = want + t.min_len().saturating_sub(want);
                t.emit_whole(&mut frame.buf, seq, len);
                frame.len = len;
                frame.fragment = false;
            }
        }
        out.len()
    }

    /// Number of flows.
    pub fn flow_count(&self) -> u32 {
        self.flows
    }

    /// Number of flows whose packets go to queue `q` (0 for a queue that
    /// does not exist).
    pub fn flows_on_queue(&self, q: QueueId) -> u32 {
        self.queues.get(q.index()).map_or(0, |s| s.flows.len() as u32)
    }

    /// Flow `flow_id`'s tuple (ports included, also for fragmenting flows).
    /// Defined for any id; ids `>= flow_count()` are never sent.
    pub fn flow_tuple(&self, flow_id: u32) -> FlowTuple {
        self.params.spec(flow_id).tuple
    }
}

/// [`IMIX`] unrolled: one entry per unit of weight (7 x 64, 4 x 570, 1 x 1518).
const IMIX_TABLE: [u16; IMIX_SLOTS] = imix_table();
const IMIX_SLOTS: usize = imix_slots();

const fn imix_slots() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < IMIX.len() {
        n += IMIX[i].1 as usize;
        i += 1;
    }
    n
}

const fn imix_table() -> [u16; IMIX_SLOTS] {
    let mut t = [0u16; IMIX_SLOTS];
    let (mut i, mut k) = (0, 0);
    while i < IMIX.len() {
        let mut w = 0;
        while w < IMIX[i].1 {
            t[k] = IMIX[i].0;
            k += 1;
            w += 1;
        }
        i += 1;
    }
    t
}

/// The IMIX frame length for the random number `r` (its high 32 bits pick
/// one of the [`IMIX_SLOTS`] entries).
#[inline]
fn imix_len(r: u64) -> usize {
    let i = (((r >> 32) * IMIX_SLOTS as u64) >> 32) as usize;
    usize::from(IMIX_TABLE.get(i).copied().unwrap_or(MIN_FRAME_LEN))
}

/// Alias table over `flows` (ascending ids) with Zipf weights
/// `(id + 1)^-s`, normalised to the queue's heaviest flow so that the
/// weights cannot all underflow.
fn zipf_table(flows: &[u32], s: f64) -> AliasTable {
    let Some(&first) = flows.first() else {
        return AliasTable::default();
    };
    let base = (f64::from(first) + 1.0).ln();
    let weights: Vec<f64> = flows.iter().map(|&id| (-s * ((f64::from(id) + 1.0).ln() - base)).exp()).collect();
    AliasTable::new(weights)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_seq_roundtrip() {
        let mut p = [0u8; 14];
        p[..8].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        p[8..12].copy_from_slice(&77u32.to_be_bytes());
        assert_eq!(read_seq(&p), Some((0x0102_0304_0506_0708, 77)));
        assert_eq!(read_seq(&p[..12]), Some((0x0102_0304_0506_0708, 77)));
        assert_eq!(read_seq(&p[..11]), None);
        assert_eq!(read_seq(&[]), None);
    }

    #[test]
    fn imix_table() {
        let mut counts = [0usize; 3];
        let mut r = SplitMix64(1);
        for _ in 0..120_000 {
            match imix_len(r.next_u64()) {
                64 => counts[0] += 1,
                570 => counts[1] += 1,
                1518 => counts[2] += 1,
                other => panic!("unexpected length {other}"),
            }
        }
        for (c, expect) in counts.iter().zip([70_000.0, 40_000.0, 10_000.0]) {
            assert!((*c as f64 - expect).abs() / expect < 0.03);
        }
        assert_eq!(imix_len(0), 64);
        assert_eq!(imix_len(u64::MAX), 1518);
    }

    #[test]
    fn frame_default_is_empty() {
        let f = Frame::default();
        assert!(f.bytes().is_empty());
        assert!(!f.is_fragment());
        assert!(format!("{f:?}").contains("len: 0"));
    }
}
