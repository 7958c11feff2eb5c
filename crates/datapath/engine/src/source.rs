//! Packet sources for the receive queues: the built-in generator and a
//! capture replayed from memory. Sources are sans-IO (the capture is read
//! into memory before the run) so the simulation can use them too.
//!
//! Live sources (in the io crates) implement the same trait; its optional
//! methods let them wait instead of spinning when idle, report a failure
//! that ends the run (the interface is gone), and give the counts from
//! before the engine ([`Ingress`]) once the run is over.

use crate::ingress::Ingress;
use flowsteer_gen::{Frame, GenConfig, GenError, Generator, Spread};
use flowsteer_rss::QueueId;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of frames for some receive queues. Each core owns one and
/// polls only its own queues, from that core's thread.
///
/// The runtime's calls, in order: `poll` (and `wait` when the core is idle,
/// `failure` after a poll that found nothing) while the run lasts; at the
/// end, after every core stopped, `close` on every source, a pause as long
/// as the longest duration they returned, then `ingress` on every source.
pub trait RxSource: Send {
    /// Hand up to `max` frames of queue `q` to `sink`; returns how many.
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize;
    /// True when queue `q` will never produce again (a replay that ended).
    fn exhausted(&self, q: QueueId) -> bool;
    /// Sleep until a frame may be ready on one of this source's queues, at
    /// most `timeout`; called when the core found nothing to do. False when
    /// the source cannot wait (the default: the generator and a replay are
    /// never idle), and the core spins on.
    fn wait(&mut self, _timeout: Duration) -> bool {
        false
    }
    /// Why this source cannot go on, in one line naming what was lost
    /// (its interface deleted or set down); the run then stops. Checked
    /// after polls that found nothing, so it must be cheap.
    fn failure(&self) -> Option<String> {
        None
    }
    /// Stop taking frames in (the run is over) and return how long frames
    /// already on their way need to land where [`RxSource::ingress`] counts
    /// them.
    fn close(&mut self) -> Duration {
        Duration::ZERO
    }
    /// What this source counted before the engine (see [`Ingress`]); `None`
    /// when nothing comes before the engine (the default).
    fn ingress(&mut self) -> Option<Ingress> {
        None
    }
    /// True when the source can hold its frames back without losing any
    /// (the built-in generator without a rate, a capture replayed from
    /// memory): the core then takes from it only as many frames as its
    /// hand-off queues have room for, so it offers what the workers take
    /// and nothing is dropped for a full queue. False (the default) for a
    /// source whose frames arrive whether or not the workers keep up: a
    /// paced generator, a live interface.
    fn holds_back(&self) -> bool {
        false
    }
}

/// The built-in generator: as fast as the workers take its frames (it
/// [holds back](RxSource::holds_back)), or paced at a fixed rate per
/// receive queue ([`GenSource::paced`]), whatever the workers take.
pub struct GenSource {
    gen: Generator,
    frames: Vec<Frame>,
    pace: Option<Pace>,
    /// Offers a full burst at every poll ([`GenSource::flooding`]).
    flood: bool,
}

/// Most frames a paced queue may be behind its schedule (a NIC's receive
/// ring): frames due beyond it are never generated, so a core that falls
/// behind offers less than the rate asked, never a burst to catch up.
pub const PACE_BACKLOG: u64 = 1024;

/// A fixed offered rate for each receive queue, from the first poll on.
struct Pace {
    per_queue_pps: f64,
    start: Option<Instant>,
    /// Frames generated per queue (by [`QueueId::index`]).
    sent: Vec<u64>,
}

impl Pace {
    /// Frames queue `q` may generate now: those due by its schedule and
    /// not yet generated, at most [`PACE_BACKLOG`].
    fn due(&mut self, q: QueueId) -> u64 {
        let now = Instant::now();
        let start = *self.start.get_or_insert(now);
        let due = (now.duration_since(start).as_secs_f64() * self.per_queue_pps) as u64;
        if self.sent.len() <= q.index() {
            self.sent.resize(q.index() + 1, 0);
        }
        let sent = &mut self.sent[q.index()];
        if due.saturating_sub(*sent) > PACE_BACKLOG {
            *sent = due - PACE_BACKLOG;
        }
        due.saturating_sub(*sent)
    }
}

impl GenSource {
    /// The generator offering what the workers take. Fails when the
    /// generator configuration is refused.
    pub fn new(cfg: &GenConfig, spread: Spread, burst: usize) -> Result<GenSource, GenError> {
        let gen = Generator::new(cfg, spread)?;
        Ok(GenSource { gen, frames: (0..burst.max(1)).map(|_| Frame::new()).collect(), pace: None, flood: false })
    }

    /// This generator offering a full burst at every poll, neither holding
    /// back nor paced: what the workers cannot take is dropped as
    /// `queue_full` (tests and demonstrations of overflow).
    pub fn flooding(mut self) -> GenSource {
        self.flood = true;
        self.pace = None;
        self
    }

    /// The generator offering `per_queue_pps` frames per second on each of
    /// its receive queues (clock from its first poll), whether or not the
    /// workers keep up: what they cannot take is dropped as a NIC would
    /// (`queue_full`). Fails when the generator configuration is refused.
    pub fn paced(cfg: &GenConfig, spread: Spread, burst: usize, per_queue_pps: f64) -> Result<GenSource, GenError> {
        let mut s = GenSource::new(cfg, spread, burst)?;
        s.pace = Some(Pace { per_queue_pps: per_queue_pps.max(0.0), start: None, sent: Vec::new() });
        Ok(s)
    }

    /// The generator behind this source.
    pub fn generator(&self) -> &Generator {
        &self.gen
    }
}

impl RxSource for GenSource {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let mut max = max.min(self.frames.len());
        if let Some(p) = self.pace.as_mut() {
            max = max.min(usize::try_from(p.due(q)).unwrap_or(usize::MAX));
        }
        let n = self.gen.next_burst(q, &mut self.frames[..max]);
        for f in &self.frames[..n] {
            sink(f.bytes());
        }
        if let Some(sent) = self.pace.as_mut().and_then(|p| p.sent.get_mut(q.index())) {
            *sent += n as u64;
        }
        n
    }

    fn exhausted(&self, q: QueueId) -> bool {
        self.gen.flows_on_queue(q) == 0
    }

    fn holds_back(&self) -> bool {
        self.pace.is_none() && !self.flood
    }
}

/// Frames of a capture, already split by receive queue.
#[derive(Debug, Default)]
pub struct Replay {
    /// Frames of each receive queue (by [`QueueId::index`]).
    pub queues: Vec<Vec<Vec<u8>>>,
}

impl Replay {
    /// `n` empty receive queues.
    pub fn new(n: u16) -> Replay {
        Replay { queues: vec![Vec::new(); usize::from(n)] }
    }

    /// The frames of queue `q` (`None` for a queue that does not exist).
    pub fn queue(&self, q: QueueId) -> Option<&[Vec<u8>]> {
        self.queues.get(q.index()).map(Vec::as_slice)
    }

    /// Appends a frame to queue `q`; false (the frame dropped) for a queue
    /// that does not exist.
    pub fn push(&mut self, q: QueueId, frame: Vec<u8>) -> bool {
        match self.queues.get_mut(q.index()) {
            Some(v) => {
                v.push(frame);
                true
            }
            None => false,
        }
    }
}

/// Replays a capture from memory `loops` times per queue.
pub struct ReplaySource {
    replay: Arc<Replay>,
    pos: Vec<usize>,
    loops_left: Vec<u64>,
}

impl ReplaySource {
    pub fn new(replay: Arc<Replay>, loops: u64) -> ReplaySource {
        let n = replay.queues.len();
        ReplaySource { replay, pos: vec![0; n], loops_left: vec![loops; n] }
    }
}

impl RxSource for ReplaySource {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let qi = q.index();
        let Some(frames) = self.replay.queue(q) else { return 0 };
        if frames.is_empty() {
            return 0;
        }
        let mut n = 0;
        while n < max && self.loops_left[qi] > 0 {
            sink(&frames[self.pos[qi]]);
            n += 1;
            self.pos[qi] += 1;
            if self.pos[qi] == frames.len() {
                self.pos[qi] = 0;
                self.loops_left[qi] -= 1;
            }
        }
        n
    }

    fn exhausted(&self, q: QueueId) -> bool {
        self.replay.queue(q).is_none_or(|f| f.is_empty()) || self.loops_left.get(q.index()).is_none_or(|&l| l == 0)
    }

    fn holds_back(&self) -> bool {
        true
    }
}
