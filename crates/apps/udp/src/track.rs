//! Per-flow accounting of echoed replies: first copies, duplicates,
//! reordering (a sequence number below the highest seen so far) and, once
//! sending is over, loss (`sent - unique`).
//!
//! Duplicates are found with a sliding bitmap of the last [`WINDOW`]
//! sequence numbers below the highest seen. A reply older than that window
//! cannot be checked for duplication; it is counted as `late` (and as
//! reordered and unique), so `unique` can only overstate delivery by
//! duplicates that arrive more than `WINDOW` datagrams late.

/// Sequence numbers remembered per flow for duplicate detection (bits).
/// Memory: `WINDOW / 8` bytes per flow.
pub const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// One flow's reply accounting.
#[derive(Clone, Debug)]
pub struct FlowTracker {
    /// Highest sequence number seen plus one (0 = none yet).
    next: u64,
    /// Bit `s % WINDOW` set when sequence `s` (within the window below
    /// `next`) has been seen.
    seen: [u64; WORDS],
    pub unique: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub late: u64,
}

/// What one reply was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// First copy, in order.
    InOrder,
    /// First copy, after a higher sequence number.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Older than the window: counted as unique and reordered.
    Late,
}

impl Default for FlowTracker {
    fn default() -> Self {
        FlowTracker { next: 0, seen: [0; WORDS], unique: 0, duplicates: 0, reordered: 0, late: 0 }
    }
}

impl FlowTracker {
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = (seq % WINDOW) as usize;
        (&mut self.seen[i / 64], 1u64 << (i % 64))
    }

    /// Record a reply carrying `seq`.
    pub fn record(&mut self, seq: u64) -> Arrival {
        if seq >= self.next {
            // Advance the window: clear the bits of the numbers skipped over
            // (they leave the window's low end as the high end moves up).
            let gap = seq - self.next;
            if gap >= WINDOW {
                self.seen = [0; WORDS];
            } else {
                for s in self.next..seq {
                    let (w, m) = self.bit(s);
                    *w &= !m;
                }
            }
            let (w, m) = self.bit(seq);
            *w |= m;
            self.next = seq + 1;
            self.unique += 1;
            return Arrival::InOrder;
        }
        if self.next - seq > WINDOW {
            self.late += 1;
            self.reordered += 1;
            self.unique += 1;
            return Arrival::Late;
        }
        let (w, m) = self.bit(seq);
        if *w & m != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        *w |= m;
        self.unique += 1;
        self.reordered += 1;
        Arrival::Reordered
    }

    /// Replies missing when `sent` datagrams were sent on this flow.
    pub fn lost(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.unique)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_stream_has_no_loss_no_reorder() {
        let mut t = FlowTracker::default();
        for s in 0..10_000 {
            assert_eq!(t.record(s), Arrival::InOrder);
        }
        assert_eq!((t.unique, t.duplicates, t.reordered, t.late, t.lost(10_000)), (10_000, 0, 0, 0, 0));
    }

    #[test]
    fn reorder_duplicates_and_loss_are_told_apart() {
        let mut t = FlowTracker::default();
        // 0 1 3 2 (reordered) 2 (dup) 5 (4 lost) 5 (dup) 6
        let got: Vec<Arrival> = [0, 1, 3, 2, 2, 5, 5, 6].iter().map(|&s| t.record(s)).collect();
        use Arrival::*;
        assert_eq!(got, vec![InOrder, InOrder, InOrder, Reordered, Duplicate, InOrder, Duplicate, InOrder]);
        assert_eq!(t.unique, 6);
        assert_eq!(t.duplicates, 2);
        assert_eq!(t.reordered, 1);
        assert_eq!(t.lost(7), 1); // 0..=6 sent, 4 missing
                                  // Replies = unique + duplicates.
        assert_eq!(t.unique + t.duplicates, 8);
    }

    #[test]
    fn window_slides_and_old_arrivals_are_late() {
        let mut t = FlowTracker::default();
        t.record(0);
        // Jump far ahead: the old bit must not make seq WINDOW*2 look like a duplicate.
        assert_eq!(t.record(WINDOW * 2), Arrival::InOrder);
        assert_eq!(t.record(WINDOW * 2 - 5), Arrival::Reordered);
        assert_eq!(t.record(WINDOW * 2 - 5), Arrival::Duplicate);
        assert_eq!(t.record(1), Arrival::Late);
        // Sliding by less than a window clears the skipped numbers' stale bits.
        let mut u = FlowTracker::default();
        for s in 0..WINDOW {
            u.record(s);
        }
        assert_eq!(u.record(WINDOW + 10), Arrival::InOrder);
        // WINDOW + 3 shares a bit with 3 (seen long ago) but was never seen.
        assert_eq!(u.record(WINDOW + 3), Arrival::Reordered);
        assert_eq!(u.duplicates, 0);
    }
}
