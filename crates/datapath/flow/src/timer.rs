//! Per-core timers: a hashed timing wheel (Varghese & Lauck).
//!
//! Time is cut into ticks of `tick_ns`; a timer due at tick `d` hangs in
//! slot `d mod slots` (a doubly linked list threaded through a slab, so
//! schedule and cancel are O(1)). [`TimerWheel::advance`] visits the slots of
//! the ticks that have passed and fires the timers whose tick has come;
//! timers more than one revolution away stay in their slot until their
//! round comes. One wheel per worker core: a flow's timers are scheduled on
//! the wheel of the core that owns the flow, so they fire there.
//!
//! Guarantees: a timer fires exactly once, and never before its deadline:
//! it fires during the first `advance(now)` with
//! `now >= ceil(deadline / tick) * tick` (or, for a deadline already past
//! when scheduled, the first advance that reaches the next unprocessed
//! tick), given enough budget. Within one tick, timers fire in the order
//! they were scheduled.
//!
//! Cost: `schedule` and `cancel` O(1); `advance` O(ticks passed, at most
//! `slots`) + O(timers examined in those slots). After a long pause the
//! wheel catches up in one revolution: timers from the skipped ticks fire
//! in the pass, possibly out of deadline order.
//!
//! Bounds: at most `capacity` pending timers (default 65 536, at most
//! 2^24); one more is refused with [`TimerError::Full`] and counted.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

/// Default wheel size in slots.
pub const DEFAULT_SLOTS: usize = 256;
/// Largest wheel.
pub const MAX_SLOTS: usize = 1 << 20;
/// Default tick: 1 ms.
pub const DEFAULT_TICK_NS: u64 = 1_000_000;
/// Default most pending timers.
pub const DEFAULT_TIMER_CAPACITY: usize = 65_536;
/// Hard upper bound on pending timers.
pub const MAX_TIMER_CAPACITY: usize = 1 << 24;

/// Shape and bound of one [`TimerWheel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerWheelConfig {
    /// Slots: a power of two, 1..=[`MAX_SLOTS`]. Default [`DEFAULT_SLOTS`].
    pub slots: usize,
    /// Tick length in ns, > 0: the resolution. Default [`DEFAULT_TICK_NS`].
    pub tick_ns: u64,
    /// Most pending timers, 1..=[`MAX_TIMER_CAPACITY`]. Default
    /// [`DEFAULT_TIMER_CAPACITY`].
    pub capacity: usize,
}

impl Default for TimerWheelConfig {
    fn default() -> Self {
        TimerWheelConfig { slots: DEFAULT_SLOTS, tick_ns: DEFAULT_TICK_NS, capacity: DEFAULT_TIMER_CAPACITY }
    }
}

/// Why a timer wheel call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerError {
    /// `slots` is 0, not a power of two, or above [`MAX_SLOTS`].
    BadSlots(usize),
    /// `tick_ns` is 0.
    ZeroTick,
    /// `capacity` is 0 or above [`MAX_TIMER_CAPACITY`].
    BadCapacity(usize),
    /// `capacity` timers are pending already.
    Full,
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::BadSlots(n) => write!(f, "timer wheel slots {n} is not a power of two in 1..={MAX_SLOTS}"),
            TimerError::ZeroTick => write!(f, "timer wheel tick must be at least 1 ns"),
            TimerError::BadCapacity(n) => {
                write!(f, "timer wheel capacity {n} is not in 1..={MAX_TIMER_CAPACITY}")
            }
            TimerError::Full => write!(f, "timer wheel full"),
        }
    }
}

impl std::error::Error for TimerError {}

/// A pending timer; stale (a no-op to cancel) once it fired or was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    gen: u32,
}

/// Counters of one wheel (monotonic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerStats {
    pub scheduled: u64,
    pub fired: u64,
    pub cancelled: u64,
    /// Schedules refused because the wheel was full.
    pub schedule_failed_full: u64,
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Timer {
    tick: u64,
    token: u64,
    gen: u32,
    prev: u32,
    next: u32,
    live: bool,
}

/// A hashed timing wheel; see the module documentation. Owned by one
/// worker: `Send`, not `Sync`; no call allocates after construction, reads
/// a clock or panics.
pub struct TimerWheel {
    heads: Box<[u32]>,
    tails: Box<[u32]>,
    mask: u64,
    tick_ns: u64,
    timers: Vec<Timer>,
    free: u32,
    capacity: usize,
    len: usize,
    /// The next tick to process; every tick before it has been processed.
    cursor: u64,
    stats: TimerStats,
    _not_sync: PhantomData<Cell<()>>,
}

impl fmt::Debug for TimerWheel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWheel")
            .field("slots", &self.heads.len())
            .field("tick_ns", &self.tick_ns)
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("cursor", &self.cursor)
            .field("stats", &self.stats)
            .finish()
    }
}

impl TimerWheel {
    pub fn new(cfg: TimerWheelConfig) -> Result<TimerWheel, TimerError> {
        if cfg.slots == 0 || !cfg.slots.is_power_of_two() || cfg.slots > MAX_SLOTS {
            return Err(TimerError::BadSlots(cfg.slots));
        }
        if cfg.tick_ns == 0 {
            return Err(TimerError::ZeroTick);
        }
        if cfg.capacity == 0 || cfg.capacity > MAX_TIMER_CAPACITY {
            return Err(TimerError::BadCapacity(cfg.capacity));
        }
        Ok(TimerWheel {
            heads: vec![NIL; cfg.slots].into_boxed_slice(),
            tails: vec![NIL; cfg.slots].into_boxed_slice(),
            mask: cfg.slots as u64 - 1,
            tick_ns: cfg.tick_ns,
            timers: Vec::with_capacity(cfg.capacity),
            free: NIL,
            capacity: cfg.capacity,
            len: 0,
            cursor: 0,
            stats: TimerStats::default(),
            _not_sync: PhantomData,
        })
    }

    /// Pending timers.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most pending timers.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn stats(&self) -> TimerStats {
        self.stats
    }

    /// Arrange for `fire(token)` during the first [`advance`](Self::advance)
    /// at or after `deadline` (rounded up to a tick). A deadline at or before
    /// `now` fires at the next tick. O(1).
    pub fn schedule(&mut self, now: u64, deadline: u64, token: u64) -> Result<TimerId, TimerError> {
        if self.len >= self.capacity {
            self.stats.schedule_failed_full += 1;
            return Err(TimerError::Full);
        }
        if self.len == 0 {
            // Nothing pending: the ticks up to `now` need no visit.
            self.cursor = self.cursor.max(now / self.tick_ns);
        }
        let tick = deadline.div_ceil(self.tick_ns).max(self.cursor);
        let t = Timer { tick, token, gen: 0, prev: NIL, next: NIL, live: true };
        let index = if self.free != NIL {
            let i = self.free;
            let slot = &mut self.timers[i as usize];
            self.free = slot.next;
            *slot = Timer { gen: slot.gen, ..t };
            i
        } else {
            // Fewer than `capacity` timers exist: within the reserved capacity.
            self.timers.push(t);
            (self.timers.len() - 1) as u32
        };
        self.link(index);
        self.len += 1;
        self.stats.scheduled += 1;
        Ok(TimerId { index, gen: self.timers[index as usize].gen })
    }

    /// Cancel a pending timer. Returns false if it already fired or was
    /// cancelled. O(1).
    pub fn cancel(&mut self, id: TimerId) -> bool {
        match self.timers.get(id.index as usize) {
            Some(t) if t.live && t.gen == id.gen => {
                self.unlink_and_free(id.index);
                self.stats.cancelled += 1;
                true
            }
            _ => false,
        }
    }

    /// Process the ticks up to `now`: call `fire(token)` for each due timer,
    /// at most `budget` of them (the rest fire on the next call). Returns how
    /// many fired.
    pub fn advance(&mut self, now: u64, budget: usize, mut fire: impl FnMut(u64)) -> usize {
        let target = now / self.tick_ns;
        if self.cursor > target {
            return 0;
        }
        if self.len == 0 {
            self.cursor = target.saturating_add(1);
            return 0;
        }
        let revolution = self.mask + 1;
        if target - self.cursor >= revolution {
            // Behind by more than a revolution: visiting the last `slots`
            // ticks visits every slot once, and a timer whose tick was
            // skipped is due when its slot comes.
            self.cursor = target + 1 - revolution;
        }
        let mut fired = 0;
        loop {
            let slot = (self.cursor & self.mask) as usize;
            let mut i = self.heads[slot];
            while i != NIL {
                let t = self.timers[i as usize];
                if t.tick <= self.cursor {
                    if fired == budget {
                        // Out of budget: resume at this tick next time.
                        return fired;
                    }
                    self.unlink_and_free(i);
                    self.stats.fired += 1;
                    fired += 1;
                    fire(t.token);
                }
                i = t.next;
            }
            if self.cursor == target || self.cursor == u64::MAX {
                self.cursor = self.cursor.saturating_add(1);
                return fired;
            }
            self.cursor += 1;
            if self.len == 0 {
                self.cursor = target.saturating_add(1);
                return fired;
            }
        }
    }

    fn link(&mut self, i: u32) {
        let slot = (self.timers[i as usize].tick & self.mask) as usize;
        let tail = self.tails[slot];
        self.timers[i as usize].prev = tail;
        self.timers[i as usize].next = NIL;
        if tail == NIL {
            self.heads[slot] = i;
        } else {
            self.timers[tail as usize].next = i;
        }
        self.tails[slot] = i;
    }

    fn unlink_and_free(&mut self, i: u32) {
        let t = self.timers[i as usize];
        let slot = (t.tick & self.mask) as usize;
        if t.prev == NIL {
            self.heads[slot] = t.next;
        } else {
            self.timers[t.prev as usize].next = t.next;
        }
        if t.next == NIL {
            self.tails[slot] = t.prev;
        } else {
            self.timers[t.next as usize].prev = t.prev;
        }
        let e = &mut self.timers[i as usize];
        e.live = false;
        e.gen = e.gen.wrapping_add(1);
        e.prev = NIL;
        e.next = self.free;
        self.free = i;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn wheel(slots: usize, tick_ns: u64, capacity: usize) -> TimerWheel {
        TimerWheel::new(TimerWheelConfig { slots, tick_ns, capacity }).unwrap()
    }

    fn fired(w: &mut TimerWheel, now: u64, budget: usize) -> Vec<u64> {
        let mut v = Vec::new();
        w.advance(now, budget, |t| v.push(t));
        v
    }

    #[test]
    fn config_is_checked() {
        let c = TimerWheelConfig::default();
        assert!(TimerWheel::new(c).is_ok());
        assert_eq!(TimerWheel::new(TimerWheelConfig { slots: 3, ..c }).unwrap_err(), TimerError::BadSlots(3));
        assert_eq!(TimerWheel::new(TimerWheelConfig { slots: 0, ..c }).unwrap_err(), TimerError::BadSlots(0));
        assert_eq!(TimerWheel::new(TimerWheelConfig { tick_ns: 0, ..c }).unwrap_err(), TimerError::ZeroTick);
        assert_eq!(TimerWheel::new(TimerWheelConfig { capacity: 0, ..c }).unwrap_err(), TimerError::BadCapacity(0));
    }

    #[test]
    fn fires_once_at_or_after_deadline() {
        let mut w = wheel(8, 10, 16);
        w.schedule(0, 25, 1).unwrap(); // tick 3 = 30 ns
        assert!(fired(&mut w, 29, 10).is_empty());
        assert_eq!(fired(&mut w, 30, 10), vec![1]);
        assert!(fired(&mut w, 1000, 10).is_empty());
        assert_eq!(w.stats().fired, 1);
        assert!(w.is_empty());
    }

    #[test]
    fn past_deadline_fires_on_next_advance() {
        let mut w = wheel(8, 10, 16);
        assert!(fired(&mut w, 100, 10).is_empty());
        w.schedule(100, 50, 7).unwrap();
        assert!(fired(&mut w, 109, 10).is_empty(), "tick 10 was processed already");
        assert_eq!(fired(&mut w, 110, 10), vec![7]);
    }

    #[test]
    fn cancel_works_and_is_idempotent() {
        let mut w = wheel(8, 10, 16);
        let a = w.schedule(0, 10, 1).unwrap();
        let b = w.schedule(0, 10, 2).unwrap();
        let c = w.schedule(0, 10, 3).unwrap();
        assert!(w.cancel(b));
        assert!(!w.cancel(b));
        assert_eq!(fired(&mut w, 10, 10), vec![1, 3]);
        assert!(!w.cancel(a), "already fired");
        assert!(!w.cancel(c));
        // A stale id does not cancel the timer that reuses its slot.
        let d = w.schedule(10, 20, 4).unwrap();
        assert!(!w.cancel(b));
        assert_eq!(fired(&mut w, 20, 10), vec![4]);
        assert!(!w.cancel(d));
        assert_eq!(w.stats(), TimerStats { scheduled: 4, fired: 3, cancelled: 1, schedule_failed_full: 0 });
    }

    #[test]
    fn many_timers_in_one_slot_and_rounds() {
        // 4 slots: deadlines 1, 5, 9, ... all hash to slot 1, many rounds apart.
        let mut w = wheel(4, 1, 1000);
        for r in 0..100u64 {
            w.schedule(0, 1 + 4 * r, r).unwrap();
            w.schedule(0, 1 + 4 * r, 1000 + r).unwrap();
        }
        for r in 0..100u64 {
            assert_eq!(fired(&mut w, 1 + 4 * r, usize::MAX), vec![r, 1000 + r], "round {r}");
        }
        assert!(w.is_empty());
    }

    #[test]
    fn budget_limits_fires_and_resumes() {
        let mut w = wheel(8, 1, 100);
        for i in 0..10 {
            w.schedule(0, 3, i).unwrap();
        }
        assert_eq!(fired(&mut w, 5, 4), vec![0, 1, 2, 3]);
        assert_eq!(fired(&mut w, 5, 4), vec![4, 5, 6, 7]);
        assert_eq!(fired(&mut w, 5, 0), Vec::<u64>::new());
        assert_eq!(fired(&mut w, 5, 4), vec![8, 9]);
    }

    #[test]
    fn full_wheel_refuses() {
        let mut w = wheel(8, 1, 2);
        w.schedule(0, 1, 0).unwrap();
        w.schedule(0, 1, 1).unwrap();
        assert_eq!(w.schedule(0, 1, 2).unwrap_err(), TimerError::Full);
        assert_eq!(w.stats().schedule_failed_full, 1);
        fired(&mut w, 1, 10);
        assert!(w.schedule(1, 2, 2).is_ok());
    }

    #[test]
    fn long_pause_and_extreme_times_do_not_loop_or_panic() {
        let mut w = wheel(256, 1, 16);
        w.schedule(0, 10, 1).unwrap();
        w.schedule(0, 1 << 40, 2).unwrap();
        // One revolution of work, not 2^62 ticks.
        assert_eq!(fired(&mut w, 1 << 62, 10), vec![1, 2]);
        w.schedule(u64::MAX, u64::MAX, 3).unwrap();
        assert_eq!(fired(&mut w, u64::MAX, 10), vec![3]);
        assert!(fired(&mut w, u64::MAX, 10).is_empty());
        // Starting far from zero: the first schedule moves the cursor.
        let mut w = wheel(8, 1_000_000, 16);
        let t0 = 1_700_000_000_000_000_000;
        w.schedule(t0, t0 + 5_000_000, 9).unwrap();
        assert!(fired(&mut w, t0 + 4_999_999, 10).is_empty());
        assert_eq!(fired(&mut w, t0 + 5_000_000, 10), vec![9]);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Schedule(u64),
        Cancel(usize),
        Advance(u64, usize),
    }

    proptest! {
        /// Every timer fires exactly once (unless cancelled first), never
        /// before its deadline, and no later than the first advance with
        /// unlimited budget that reaches its tick.
        #[test]
        fn never_early_never_twice(
            slots_log in 0u32..5, tick in 1u64..20,
            ops in proptest::collection::vec(prop_oneof![
                3 => (0u64..500).prop_map(Op::Schedule),
                1 => any::<usize>().prop_map(Op::Cancel),
                2 => ((0u64..100), prop_oneof![Just(usize::MAX), 0usize..3]).prop_map(|(d, b)| Op::Advance(d, b)),
            ], 1..150),
        ) {
            let mut w = wheel(1 << slots_log, tick, 1 << 12);
            let mut now = 0u64;
            // token -> (id, deadline, latest tick by which it must have fired)
            let mut pending: HashMap<u64, (TimerId, u64, u64)> = HashMap::new();
            let mut ids = Vec::new();
            let mut done = std::collections::HashSet::new();
            let mut next_token = 0u64;
            for op in ops {
                match op {
                    Op::Schedule(delta) => {
                        // Deadlines may lie in the past.
                        let deadline = (now + delta).saturating_sub(100);
                        let id = w.schedule(now, deadline, next_token).unwrap();
                        let latest = deadline.div_ceil(tick).max(now / tick + 1);
                        pending.insert(next_token, (id, deadline, latest));
                        ids.push((next_token, id));
                        next_token += 1;
                    }
                    Op::Cancel(i) => {
                        if !ids.is_empty() {
                            let (tok, id) = ids[i % ids.len()];
                            let was = pending.remove(&tok).is_some();
                            prop_assert_eq!(w.cancel(id), was);
                        }
                    }
                    Op::Advance(dt, budget) => {
                        now += dt;
                        let mut got = Vec::new();
                        w.advance(now, budget, |t| got.push(t));
                        prop_assert!(got.len() <= budget);
                        for t in got {
                            let (_, deadline, _) = pending.remove(&t).expect("fired once, not cancelled");
                            prop_assert!(now >= deadline, "fired at {} before deadline {}", now, deadline);
                            prop_assert!(done.insert(t));
                        }
                        if budget == usize::MAX {
                            for (tok, &(_, _, latest)) in &pending {
                                prop_assert!(latest * tick > now, "token {} late: due by tick {}, now {}", tok, latest, now);
                            }
                        }
                    }
                }
                prop_assert_eq!(w.len(), pending.len());
            }
        }
    }
}
