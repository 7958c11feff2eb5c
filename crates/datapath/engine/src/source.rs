//! Packet sources for the receive queues: the built-in generator and a
//! capture replayed from memory. Sources are sans-IO (the capture is read
//! into memory before the run) so the simulation can use them too.

use flowsteer_gen::{Frame, GenConfig, GenError, Generator, Spread};
use flowsteer_rss::QueueId;
use std::sync::Arc;

/// A source of frames for some receive queues. Each core owns one and
/// polls only its own queues.
pub trait RxSource: Send {
    /// Hand up to `max` frames of queue `q` to `sink`; returns how many.
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize;
    /// True when queue `q` will never produce again (a replay that ended).
    fn exhausted(&self, q: QueueId) -> bool;
}

/// The built-in generator.
pub struct GenSource {
    gen: Generator,
    frames: Vec<Frame>,
}

impl GenSource {
    /// Fails when the generator configuration is refused.
    pub fn new(cfg: &GenConfig, spread: Spread, burst: usize) -> Result<GenSource, GenError> {
        let gen = Generator::new(cfg, spread)?;
        Ok(GenSource { gen, frames: (0..burst.max(1)).map(|_| Frame::new()).collect() })
    }

    pub fn generator(&self) -> &Generator {
        &self.gen
    }
}

impl RxSource for GenSource {
    fn poll(&mut self, q: QueueId, max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let max = max.min(self.frames.len());
        let n = self.gen.next_burst(q, &mut self.frames[..max]);
        for f in &self.frames[..n] {
            sink(f.bytes());
        }
        n
    }

    fn exhausted(&self, q: QueueId) -> bool {
        self.gen.flows_on_queue(q) == 0
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
}
