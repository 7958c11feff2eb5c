//! The pre-built-frame transmit loop shared by `flowsteer udp-gen --afxdp`
//! and the RFC 2544 harness's generator.
//!
//! Each transmit buffer holds a whole template of a
//! [`flowsteer_gen::frames::FrameSet`], written once; sent again it gets
//! only its sequence number and time rewritten and its UDP checksum updated
//! incrementally ([`flowsteer_gen::frames::Template::restamp`]), in place
//! (a buffer's tag says which template it holds). Unthrottled batches are a
//! whole multiple of the template count, so the frames, coming back round
//! an AF_XDP completion ring in order, meet their own template again.
//!
//! Rate control is a token bucket on `CLOCK_MONOTONIC` (`Instant`), sending
//! bursts of [`TxPace::burst`] frames (unthrottled: as many as one
//! [`TxPort::tx_prepared`] call takes); the bucket holds at most
//! [`BUCKET_SECS`] of frames (at least one burst), so a generator
//! descheduled briefly catches up in bursts while a stalled one does not
//! flood afterwards.
//!
//! Accounting: `sent` counts frames the port took (queued to the transmit
//! ring); after the loop it waits up to [`DRAIN`] for their completion, and
//! what is still in flight then is [`TxOutcome::incomplete`]. A full
//! transmit ring is not a drop: the loop recycles completions and retries
//! ([`TxOutcome::ring_full`] counts those turns).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use flowsteer_gen::frames::FrameSet;
use flowsteer_xsk::XskSocket;

/// Longest the token bucket's backlog: 10 ms of frames.
pub const BUCKET_SECS: f64 = 0.010;
/// Longest wait for outstanding completions after the last frame.
pub const DRAIN: Duration = Duration::from_secs(1);
/// Longest the loop retries a full transmit ring without the port taking
/// one frame: then it ends with [`TxOutcome::stalled`] (a link gone down, a
/// queue the kernel no longer serves), never spinning on.
pub const STALL: Duration = Duration::from_secs(1);

/// A transmit port the loop drives: an AF_XDP socket, or any port that
/// fills tagged buffers in place.
pub trait TxPort {
    /// Most frames one [`TxPort::tx_prepared`] call takes, given the
    /// transmit ring size `ring` the caller configured.
    fn tx_batch_max(&self, ring: usize) -> usize;
    /// Sends up to `max` frames, each written by `fill` into a transmit
    /// buffer with its tag (`XskSocket::tx_prepared`); returns (frames the
    /// kernel took, frames `fill` wrote). They differ when the kernel
    /// refused some (never on the wire, not sent).
    fn tx_prepared(&mut self, max: usize, fill: &mut dyn FnMut(&mut [u8], &mut u32) -> Option<usize>)
        -> (usize, usize);
    /// Recycles completed transmit frames; returns how many.
    fn tx_complete(&mut self) -> usize;
    /// Frames queued and not completed.
    fn tx_in_flight(&self) -> u32;
    /// Called once per loop turn before sending (a port that also receives
    /// drains its receive ring here).
    fn between(&mut self) {}
    /// Waits `gap` for tokens (a receiving port may wait for frames).
    fn pause(&mut self, gap: Duration) {
        std::thread::sleep(gap);
    }
}

impl TxPort for XskSocket {
    fn tx_batch_max(&self, ring: usize) -> usize {
        ring
    }

    fn tx_prepared(
        &mut self,
        max: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u32) -> Option<usize>,
    ) -> (usize, usize) {
        let k = XskSocket::tx_prepared(self, max, fill);
        (k, k)
    }

    fn tx_complete(&mut self) -> usize {
        XskSocket::tx_complete(self)
    }

    fn tx_in_flight(&self) -> u32 {
        XskSocket::tx_in_flight(self)
    }
}

/// How fast and how long to send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TxPace {
    /// Frames/s; infinite: as fast as the port takes them.
    pub rate: f64,
    /// Stop after this long.
    pub duration: Duration,
    /// Stop after this many frames written (`None`: the duration only).
    pub count: Option<u64>,
    /// Frames per burst when rate-limited (the harness: 32).
    pub burst: usize,
    /// The port's transmit ring size ([`TxPort::tx_batch_max`]'s argument).
    pub ring: usize,
}

/// What one run of [`transmit`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TxOutcome {
    /// Frames the port took.
    pub sent: u64,
    /// Frames written (sequence numbers used): `sent` plus the refused.
    pub written: u64,
    /// Seconds from the first frame to the end of the loop (before the drain).
    pub secs: f64,
    /// Frames still in flight after the drain (never completed).
    pub incomplete: u64,
    /// Turns on which the port took no frame (full ring): retried, not dropped.
    pub ring_full: u64,
    /// Stopped by the stop flag before the count or duration.
    pub stopped: bool,
    /// Ended because the port took no frame for [`STALL`].
    pub stalled: bool,
}

/// Sends `frames` (frame `seq` uses `frames.template(seq)`, stamped with
/// `seq` and the ns since `epoch`) through `port` at `pace`, until the
/// duration or count is reached or `stop` is set; then waits up to
/// [`DRAIN`] for completions.
///
/// Not thread-safe: one port, one calling thread.
pub fn transmit<P: TxPort + ?Sized>(
    port: &mut P,
    frames: &FrameSet,
    pace: &TxPace,
    epoch: Instant,
    stop: Option<&AtomicBool>,
) -> TxOutcome {
    let rate = pace.rate;
    // Unthrottled: as many frames per batch as the ring takes, rounded down
    // to a whole number of template rounds so each frame meets its own
    // template again when it comes back.
    let ring = port.tx_batch_max(pace.ring);
    let period = frames.len().max(1);
    let batch = if rate.is_finite() {
        pace.burst.min(ring)
    } else if period <= ring {
        ring / period * period
    } else {
        ring
    };
    let depth = if rate.is_finite() { (rate * BUCKET_SECS).max(batch as f64) } else { batch as f64 };
    // Wait for at least this many tokens: a whole burst, or 200 us of
    // frames at low rates, asleep (below saturation the thread sleeps
    // between bursts rather than spinning).
    let want = if rate.is_finite() { (rate * 200e-6).clamp(1.0, batch as f64) } else { batch as f64 };
    let start = Instant::now();
    // A duration beyond the clock's range: no end but the count or stop.
    let end = start.checked_add(pace.duration);
    let mut last = start;
    let mut tokens = 0.0f64;
    let mut seq: u32 = 0;
    let mut out = TxOutcome::default();
    let mut progress = start;
    loop {
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            out.stopped = true;
            break;
        }
        let left = match pace.count {
            Some(c) if out.written >= c => break,
            Some(c) => (c - out.written).min(batch as u64) as usize,
            None => batch,
        };
        port.between();
        let n = if rate.is_finite() {
            tokens = (tokens + rate * (now - last).as_secs_f64()).min(depth);
            last = now;
            if tokens < want.min(left as f64) {
                let gap = (want.min(left as f64) - tokens) / rate;
                if gap > 100e-6 {
                    // Asleep when the wait is long against a sleep's own
                    // cost; oversleeping (timer slack: 50 us) only fills
                    // the bucket further.
                    port.pause(Duration::from_secs_f64(gap));
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            (tokens as usize).min(left)
        } else {
            left
        };
        let ts = epoch.elapsed().as_nanos() as u64;
        let mut s = seq;
        let (k, w) = port.tx_prepared(n, &mut |buf, tag| {
            let index = frames.index(s);
            let t = frames.by_index(index)?;
            if *tag == index as u32 {
                t.restamp(buf, s, ts);
            } else {
                t.write(buf, s, ts);
                *tag = index as u32;
            }
            s = s.wrapping_add(1);
            Some(t.len())
        });
        seq = seq.wrapping_add(w as u32);
        out.sent += k as u64;
        out.written += w as u64;
        tokens -= w as f64;
        if w == 0 {
            if now.duration_since(progress) >= STALL {
                out.stalled = true;
                break;
            }
            out.ring_full += 1;
            port.tx_complete();
            std::thread::yield_now();
        } else {
            progress = now;
        }
    }
    out.secs = start.elapsed().as_secs_f64();
    let drain_end = Instant::now() + DRAIN;
    while port.tx_in_flight() > 0 && Instant::now() < drain_end {
        if port.tx_complete() == 0 {
            std::thread::yield_now();
        }
    }
    out.incomplete = u64::from(port.tx_in_flight());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_gen::frames::{read_stamp, FlowSpec, FrameSize};

    /// A transmit ring of `ring` slots whose frames complete `complete_per_call`
    /// at a time; it keeps every frame it took.
    struct FakePort {
        ring: usize,
        in_flight: usize,
        complete_per_call: usize,
        slots: Vec<(Vec<u8>, u32)>,
        next: usize,
        wire: Vec<Vec<u8>>,
        completed: u64,
    }

    impl FakePort {
        fn new(ring: usize, complete_per_call: usize) -> FakePort {
            FakePort {
                ring,
                in_flight: 0,
                complete_per_call,
                slots: vec![(vec![0u8; 2048], u32::MAX); ring],
                next: 0,
                wire: Vec::new(),
                completed: 0,
            }
        }
    }

    impl TxPort for FakePort {
        fn tx_batch_max(&self, ring: usize) -> usize {
            ring.min(self.ring)
        }

        fn tx_prepared(
            &mut self,
            max: usize,
            fill: &mut dyn FnMut(&mut [u8], &mut u32) -> Option<usize>,
        ) -> (usize, usize) {
            self.tx_complete();
            let mut k = 0;
            while k < max && self.in_flight < self.ring {
                let (buf, tag) = &mut self.slots[self.next % self.ring];
                let Some(len) = fill(buf, tag) else { break };
                self.wire.push(buf[..len].to_vec());
                self.next += 1;
                self.in_flight += 1;
                k += 1;
            }
            (k, k)
        }

        fn tx_complete(&mut self) -> usize {
            let c = self.in_flight.min(self.complete_per_call);
            self.in_flight -= c;
            self.completed += c as u64;
            c
        }

        fn tx_in_flight(&self) -> u32 {
            self.in_flight as u32
        }
    }

    fn frames(flows: u32) -> FrameSet {
        let spec = FlowSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 4000,
            dst_port: 9000,
            flows,
            src_ports: Vec::new(),
            stream_base: 0,
            src_addrs: Vec::new(),
        };
        FrameSet::new(&spec, FrameSize::Fixed(64)).unwrap()
    }

    fn pace(rate: f64, count: Option<u64>) -> TxPace {
        TxPace { rate, duration: Duration::from_secs(10), count, burst: 32, ring: 64 }
    }

    #[test]
    fn a_count_sends_exactly_that_many_in_sequence_and_every_frame_completes() {
        let set = frames(3);
        let mut port = FakePort::new(64, 7);
        let out = transmit(&mut port, &set, &pace(f64::INFINITY, Some(1000)), Instant::now(), None);
        assert_eq!((out.sent, out.written, out.incomplete), (1000, 1000, 0));
        assert_eq!(out.sent, port.completed + u64::from(port.tx_in_flight()), "sent = completed + in flight");
        assert!(!out.stopped);
        assert_eq!(port.wire.len(), 1000);
        for (seq, f) in port.wire.iter().enumerate() {
            let st = read_stamp(f, 9000).expect("a stamped frame");
            assert_eq!((st.seq, st.stream), (seq as u32, (seq % 3) as u16), "restamped in place, in order");
        }
    }

    #[test]
    fn a_rate_limited_count_stops_at_the_count() {
        let set = frames(1);
        let mut port = FakePort::new(64, 64);
        let out = transmit(&mut port, &set, &pace(200_000.0, Some(77)), Instant::now(), None);
        assert_eq!((out.sent, port.wire.len()), (77, 77));
    }

    #[test]
    fn frames_never_completed_are_counted_in_flight() {
        let set = frames(1);
        let mut port = FakePort::new(64, 0);
        let short = TxPace { duration: Duration::from_millis(100), ..pace(f64::INFINITY, Some(100)) };
        let out = transmit(&mut port, &set, &short, Instant::now(), None);
        assert_eq!((out.sent, out.incomplete), (64, 64), "the ring holds 64; none came back");
        assert!(out.ring_full > 0, "a full ring is retried, not dropped");
        assert_eq!(out.sent, port.completed + out.incomplete);
    }

    #[test]
    fn a_ring_that_never_completes_ends_a_count_run_as_stalled() {
        let set = frames(1);
        let mut port = FakePort::new(64, 0);
        let endless = TxPace { duration: Duration::from_secs(u64::from(u32::MAX)), ..pace(f64::INFINITY, Some(1000)) };
        let out = transmit(&mut port, &set, &endless, Instant::now(), None);
        assert!(out.stalled && !out.stopped);
        assert_eq!((out.sent, out.incomplete), (64, 64));
        assert_eq!(out.sent, port.completed + out.incomplete);
    }

    #[test]
    fn the_stop_flag_ends_the_run_early() {
        let set = frames(1);
        let mut port = FakePort::new(64, 64);
        let stop = AtomicBool::new(true);
        let out = transmit(&mut port, &set, &pace(f64::INFINITY, None), Instant::now(), Some(&stop));
        assert!(out.stopped);
        assert_eq!(out.sent, 0);
    }
}
