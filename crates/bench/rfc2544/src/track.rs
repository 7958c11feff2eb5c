//! The receiver's bookkeeping, sans-IO: was each frame one that was sent,
//! seen before, out of order; and its latency. Time is an argument.
//!
//! Every frame handed to [`RxTracker::on_frame`] is counted exactly once:
//! `frames = received + duplicates + foreign`.

use hdrhistogram::Histogram;
use serde::Serialize;

use flowsteer_gen::frames::read_stamp;

/// Highest latency recorded, ns (10 s); longer ones are clamped to it.
pub const MAX_LATENCY_NS: u64 = 10_000_000_000;

/// What the receiver counted in one trial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RxCounts {
    /// Frames handed to the tracker.
    pub frames: u64,
    /// Distinct frames of this trial (first copy of each sequence number).
    pub received: u64,
    /// Second and later copies of a sequence number.
    pub duplicates: u64,
    /// Frames that were not sent in this trial: no stamp, another
    /// destination port, a stream id that does not match the sequence
    /// number, or a sequence number beyond what the tracker covers.
    pub foreign: u64,
    /// Frames with a sequence number below the highest already seen on
    /// their stream.
    pub reordered: u64,
}

/// Latency percentiles, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Frames measured.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Maximum.
    pub max_ns: u64,
}

/// Tracks one trial's frames.
///
/// Capacity: one bit per sequence number up to `capacity` (fixed at
/// creation: a 60 s trial at 10 Mframes/s takes 75 MB); a higher sequence
/// number counts as foreign.
#[derive(Debug)]
pub struct RxTracker {
    dst_port: u16,
    flows: u32,
    stream_base: u16,
    seen: Vec<u64>,
    capacity: u32,
    max_seq: Vec<Option<u32>>,
    counts: RxCounts,
    latency: Histogram<u64>,
}

impl RxTracker {
    /// A tracker for frames to `dst_port` of `flows` streams, covering
    /// sequence numbers `0..capacity`.
    pub fn new(dst_port: u16, flows: u32, capacity: u32) -> RxTracker {
        // Constant, valid bounds (1 ns..10 s, 3 significant figures).
        let latency = Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("constant histogram bounds");
        RxTracker {
            dst_port,
            flows: flows.max(1),
            stream_base: 0,
            seen: vec![0; (capacity as usize).div_ceil(64)],
            capacity,
            max_seq: vec![None; flows.max(1) as usize],
            counts: RxCounts::default(),
            latency,
        }
    }

    /// Expects stream ids from `base` ([`flowsteer_gen::frames::FlowSpec::stream_base`]):
    /// frame `seq` must carry stream `base + seq % flows`; any other stream
    /// id (the other direction's, say) is foreign.
    pub fn with_stream_base(mut self, base: u16) -> RxTracker {
        self.stream_base = base;
        self
    }

    /// Counts one frame received at `now_ns` (the clock of the stamps).
    pub fn on_frame(&mut self, frame: &[u8], now_ns: u64) {
        self.counts.frames += 1;
        let Some(st) = read_stamp(frame, self.dst_port) else {
            self.counts.foreign += 1;
            return;
        };
        let stream = u32::from(st.stream.wrapping_sub(self.stream_base));
        if st.seq >= self.capacity || stream != st.seq % self.flows {
            self.counts.foreign += 1;
            return;
        }
        let (word, bit) = ((st.seq / 64) as usize, st.seq % 64);
        let Some(w) = self.seen.get_mut(word) else {
            self.counts.foreign += 1;
            return;
        };
        if *w & (1 << bit) != 0 {
            self.counts.duplicates += 1;
            return;
        }
        *w |= 1 << bit;
        self.counts.received += 1;
        let top = &mut self.max_seq[stream as usize];
        match top {
            Some(m) if st.seq < *m => self.counts.reordered += 1,
            _ => *top = Some(st.seq),
        }
        let lat = now_ns.saturating_sub(st.ts_ns).clamp(1, MAX_LATENCY_NS);
        let _ = self.latency.record(lat);
    }

    /// The counts so far.
    pub fn counts(&self) -> RxCounts {
        self.counts
    }

    /// Received frames whose sequence number is below `sent` (what counts
    /// against the generator's total).
    pub fn received_below(&self, sent: u64) -> u64 {
        let full = (sent / 64) as usize;
        let mut n: u64 = self.seen.iter().take(full).map(|w| u64::from(w.count_ones())).sum();
        if let Some(w) = self.seen.get(full) {
            let rest = sent % 64;
            if rest > 0 {
                n += u64::from((w & ((1u64 << rest) - 1)).count_ones());
            }
        }
        n
    }

    /// Latency percentiles of the received frames.
    pub fn latency(&self) -> Latency {
        let h = &self.latency;
        Latency {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_gen::frames::{FlowSpec, FrameSet, FrameSize};

    fn frames() -> FrameSet {
        let spec = FlowSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 1000,
            dst_port: 7000,
            flows: 3,
            src_ports: Vec::new(),
            stream_base: 0,
            src_addrs: Vec::new(),
        };
        FrameSet::new(&spec, FrameSize::Fixed(64)).unwrap()
    }

    fn frame(set: &FrameSet, seq: u32, ts: u64) -> Vec<u8> {
        let t = set.template(seq);
        let mut b = vec![0; t.len()];
        t.write(&mut b, seq, ts);
        b
    }

    #[test]
    fn counts_loss_duplicates_reordering_and_foreign_frames() {
        let set = frames();
        let mut rx = RxTracker::new(7000, 3, 100);
        for seq in [0, 1, 2, 3, 6, 5, 4, 3, 9] {
            rx.on_frame(&frame(&set, seq, 1000), 1500);
        }
        // A frame whose stream does not match its sequence number.
        let mut forged = frame(&set, 7, 1000);
        forged[42 + 3] = 0;
        rx.on_frame(&forged, 1500);
        rx.on_frame(&frame(&set, 150, 1000), 1500);
        rx.on_frame(b"not a test frame at all", 1500);
        let c = rx.counts();
        assert_eq!(c.frames, 12);
        assert_eq!(c.received, 8);
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.foreign, 3);
        assert_eq!(c.frames, c.received + c.duplicates + c.foreign);
        // Per stream the order holds: 0 3 6 (3 again is a duplicate) 9, 1 4, 2 5.
        assert_eq!(c.reordered, 0);
        assert_eq!(rx.received_below(10), 8);
        assert_eq!(rx.received_below(4), 4);
        assert_eq!(rx.latency().count, 8);
        assert!(rx.latency().p50_ns >= 499 && rx.latency().p50_ns <= 501);
    }

    #[test]
    fn another_directions_stream_ids_are_foreign() {
        let set = frames();
        // The tracker of the stream ids 3..6 (the other direction's frames
        // carry 0..3 with the same sequence numbers).
        let mut rx = RxTracker::new(7000, 3, 100).with_stream_base(3);
        for seq in 0..6 {
            rx.on_frame(&frame(&set, seq, 0), 10);
        }
        assert_eq!((rx.counts().received, rx.counts().foreign), (0, 6));
        let mut rx = RxTracker::new(7000, 3, 100);
        for seq in 0..6 {
            rx.on_frame(&frame(&set, seq, 0), 10);
        }
        assert_eq!((rx.counts().received, rx.counts().foreign), (6, 0));
    }

    #[test]
    fn a_lower_sequence_after_a_higher_one_of_its_stream_is_reordered() {
        let set = frames();
        let mut rx = RxTracker::new(7000, 3, 100);
        for seq in [6, 0, 3, 1] {
            rx.on_frame(&frame(&set, seq, 0), 10);
        }
        assert_eq!(rx.counts().reordered, 2);
    }
}
