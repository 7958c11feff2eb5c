//! The ring: slot storage, [`channel`], [`Producer`] and [`Consumer`].
//!
//! This is the only module of the crate with `unsafe` code. The invariant
//! every `unsafe` block relies on (called **the slot protocol** below):
//!
//! * slots `head..tail` (mod capacity) hold items and belong to the consumer,
//!   the other `capacity - (tail - head)` slots belong to the producer;
//! * only the producer advances `tail`, only the consumer advances `head`,
//!   both only forward, and `0 <= tail - head <= capacity`;
//! * a side only touches slots it owns according to *its own* index and a
//!   *possibly stale* copy of the other side's index. A stale copy is always
//!   behind the real value (indices only grow), so it can only make the side
//!   see fewer slots than it owns, never more;
//! * ownership moves with Release (store of the own index) / Acquire (load of
//!   the other index), so the slot contents (producer -> consumer) and the
//!   end of the slot reads (consumer -> producer) are ordered.
//!
//! There is exactly one `Producer` and one `Consumer` per ring (`channel`
//! returns them by value, they are not `Clone`), and all index-moving methods
//! take `&mut self`, so the "single" in SPSC is enforced by the type system.

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::stats::{Counters, RingStats, CONSUMER_GONE, PRODUCER_GONE};
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// Largest capacity [`channel`] accepts (16 Mi slots).
pub const MAX_CAPACITY: usize = 1 << 24;

#[cfg(not(loom))]
type Slot<T> = std::cell::UnsafeCell<MaybeUninit<T>>;
#[cfg(loom)]
type Slot<T> = loom::cell::UnsafeCell<MaybeUninit<T>>;

/// Why a ring could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingError {
    /// The requested capacity is 0 or above [`MAX_CAPACITY`].
    BadCapacity,
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::BadCapacity => {
                write!(f, "ring capacity must be between 1 and {MAX_CAPACITY}")
            }
        }
    }
}

impl std::error::Error for RingError {}

/// Creates a ring of `capacity` slots (rounded up to a power of two) and
/// returns its two ends.
///
/// Errors: [`RingError::BadCapacity`] unless `1 <= capacity <= MAX_CAPACITY`
/// (`1 << 24`). Allocates `capacity * size_of::<T>()` bytes for the slots
/// plus about 800 bytes of padded counters, once; nothing allocates later.
///
/// Thread safety: call from any thread; move each end to the thread that
/// will use it.
pub fn channel<T: Copy + Send>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), RingError> {
    if capacity == 0 || capacity > MAX_CAPACITY {
        return Err(RingError::BadCapacity);
    }
    let capacity = capacity.next_power_of_two();
    let slots: Arc<[Slot<T>]> = (0..capacity).map(|_| Slot::new(MaybeUninit::uninit())).collect();
    let counters = Arc::new(Counters::new(capacity));
    let producer = Producer {
        counters: Arc::clone(&counters),
        slots: Arc::clone(&slots),
        mask: capacity - 1,
        tail: 0,
        cached_head: 0,
        wmark: 0,
    };
    let consumer = Consumer { counters, slots, mask: capacity - 1, head: 0, cached_tail: 0, done: 0 };
    Ok((producer, consumer))
}

/// Copies `src` into the ring starting at slot index `idx`, wrapping to slot
/// 0 past the end.
///
/// # Safety
/// `src.len() <= slots.len()`, `idx < slots.len()`, and the caller owns
/// (by the slot protocol) the `src.len()` slots starting at `idx`.
#[inline(always)]
unsafe fn write_slots<T: Copy>(slots: &[Slot<T>], idx: usize, src: &[T]) {
    let first = src.len().min(slots.len() - idx);
    #[cfg(not(loom))]
    {
        let base = std::cell::UnsafeCell::raw_get(slots.as_ptr()).cast::<T>();
        // SAFETY: `Slot<T>` is `UnsafeCell<MaybeUninit<T>>`, both
        // `repr(transparent)`, so the slot array is laid out as `[T; len]`
        // and `base` (derived from the whole slice, through `UnsafeCell`,
        // hence writable) may address any slot. `idx + first <= len` and
        // `src.len() - first <= idx <= len` keep both copies in bounds; the
        // caller owns those slots, so nobody else reads or writes them, and
        // `src` is a separate borrow, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(idx), first);
            if first < src.len() {
                std::ptr::copy_nonoverlapping(src.as_ptr().add(first), base, src.len() - first);
            }
        }
    }
    #[cfg(loom)]
    for (k, item) in src.iter().enumerate() {
        let slot = &slots[if k < first { idx + k } else { k - first }];
        // SAFETY: the caller owns this slot (loom checks that claim).
        slot.with_mut(|p| unsafe { p.write(MaybeUninit::new(*item)) });
    }
}

/// Copies `dst.len()` items out of the ring starting at slot index `idx`,
/// wrapping to slot 0 past the end.
///
/// # Safety
/// `dst.len() <= slots.len()`, `idx < slots.len()`, and the caller owns
/// (by the slot protocol) the `dst.len()` slots starting at `idx`, all of
/// which hold items written by the producer.
#[inline(always)]
unsafe fn read_slots<T: Copy>(slots: &[Slot<T>], idx: usize, dst: &mut [T]) {
    let first = dst.len().min(slots.len() - idx);
    #[cfg(not(loom))]
    {
        let base = std::cell::UnsafeCell::raw_get(slots.as_ptr()).cast::<T>().cast_const();
        // SAFETY: layout and bounds as in `write_slots`; the slots are owned
        // by the caller and initialised (they are below the producer's
        // published tail, and the producer wrote them before publishing), so
        // reading them as `T` is valid; `dst` is a separate `&mut` borrow.
        unsafe {
            std::ptr::copy_nonoverlapping(base.add(idx), dst.as_mut_ptr(), first);
            if first < dst.len() {
                std::ptr::copy_nonoverlapping(base, dst.as_mut_ptr().add(first), dst.len() - first);
            }
        }
    }
    #[cfg(loom)]
    for (k, out) in dst.iter_mut().enumerate() {
        let slot = &slots[if k < first { idx + k } else { k - first }];
        // SAFETY: the caller owns this initialised slot (loom checks that).
        *out = slot.with(|p| unsafe { (*p).assume_init() });
    }
}

/// Writes one item into `slot`.
///
/// # Safety
/// The caller owns `slot` by the slot protocol.
#[inline(always)]
unsafe fn write_one<T: Copy>(slot: &Slot<T>, item: T) {
    #[cfg(not(loom))]
    // SAFETY: the caller owns the slot, so no other access is concurrent;
    // `UnsafeCell::get` gives a valid, aligned pointer to it.
    unsafe {
        slot.get().write(MaybeUninit::new(item));
    }
    #[cfg(loom)]
    // SAFETY: as above (loom checks the ownership claim).
    slot.with_mut(|p| unsafe { p.write(MaybeUninit::new(item)) });
}

/// Reads the item in `slot`.
///
/// # Safety
/// The caller owns `slot` by the slot protocol and it holds an item the
/// producer wrote.
#[inline(always)]
unsafe fn read_one<T: Copy>(slot: &Slot<T>) -> T {
    #[cfg(not(loom))]
    // SAFETY: the caller owns the slot (no concurrent writer) and it is
    // initialised; `T: Copy`, so reading leaves nothing to drop twice.
    unsafe {
        slot.get().read().assume_init()
    }
    #[cfg(loom)]
    // SAFETY: as above (loom checks the ownership claim).
    slot.with(|p| unsafe { p.read().assume_init() })
}

/// The enqueue end of a ring. Exactly one exists per ring; move it to the
/// receive thread.
///
/// Thread safety: `Send`, not `Sync`, not `Clone`. Every method is
/// wait-free: it finishes in a bounded number of steps whatever the
/// consumer does (at most two atomic loads and two atomic stores per call,
/// plus the copy).
// Aligned so that the private indices never share a line with the other
// handle, wherever the two are stored.
#[repr(align(128))]
pub struct Producer<T: Copy + Send> {
    counters: Arc<Counters>,
    slots: Arc<[Slot<T>]>,
    mask: usize,
    /// Our own `counters.tail` (we are its only writer).
    tail: u64,
    /// A possibly stale copy of `counters.head`, refreshed only when the
    /// ring looks full or the length looks like a new high watermark.
    cached_head: u64,
    /// Our own `counters.wmark`.
    wmark: usize,
}

// SAFETY: the producer only touches slots it owns by the slot protocol, the
// consumer only slots it owns, and ownership moves with Release/Acquire on
// the indices, so moving the producer to another thread cannot create a data
// race; items of type `T: Send` cross threads, which is what `Send` allows.
// `Producer` stays `!Sync` (the shared slot array is `!Sync`), and every
// mutating method takes `&mut self`.
unsafe impl<T: Copy + Send> Send for Producer<T> {}

impl<T: Copy + Send> Producer<T> {
    /// Used slots as our (possibly stale) view has them: an upper bound on
    /// the real length.
    #[inline(always)]
    fn used_upper_bound(&self) -> usize {
        // Cannot truncate: `tail - cached_head <= capacity <= MAX_CAPACITY`.
        self.tail.wrapping_sub(self.cached_head) as usize
    }

    /// Refreshes the cached consumer index.
    ///
    /// Acquire: pairs with the consumer's Release store of `head`: the
    /// consumer's reads of every slot below the new head happen-before our
    /// next writes to those slots (no write-after-read race).
    #[inline(always)]
    fn refresh_head(&mut self) {
        self.cached_head = self.counters.head.0.load(Acquire);
    }

    /// Publishes `self.tail` and keeps the high watermark.
    ///
    /// Release: the slot writes before this store become visible to a
    /// consumer that Acquire-loads the new tail.
    #[inline(always)]
    fn publish(&mut self) {
        self.counters.tail.0.store(self.tail, Release);
        // The watermark costs nothing while our stale view of the length is
        // not above it; only then do we read the real head. A stale head can
        // only overstate the length, so no new maximum is ever missed.
        if self.used_upper_bound() > self.wmark {
            self.raise_watermark();
        }
    }

    #[inline(never)]
    fn raise_watermark(&mut self) {
        self.refresh_head();
        let len = self.used_upper_bound();
        if len > self.wmark {
            self.wmark = len;
            // Relaxed: a statistic, nothing is read on its strength.
            self.counters.wmark.0.store(len, Relaxed);
        }
    }

    /// Enqueues one item. Returns `Err(item)` when the ring is full (the
    /// caller drops and counts, per flowsteer's overflow policy). Wait-free.
    #[inline]
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.used_upper_bound() == self.slots.len() {
            self.refresh_head();
            if self.used_upper_bound() == self.slots.len() {
                return Err(item);
            }
        }
        let idx = (self.tail as usize) & self.mask;
        // SAFETY: `tail - head < capacity` for our (stale, hence smaller)
        // head, so slot `tail` belongs to the producer; `idx <= mask < len`.
        unsafe { write_one(self.slots.get_unchecked(idx), item) };
        self.tail = self.tail.wrapping_add(1);
        self.publish();
        Ok(())
    }

    /// Enqueues the longest prefix of `items` that fits and returns its
    /// length (`0..=items.len()`); the caller handles the rest (drop and
    /// count, or retry). One tail publication per call. Wait-free.
    #[inline]
    pub fn push_burst(&mut self, items: &[T]) -> usize {
        let capacity = self.slots.len();
        if capacity - self.used_upper_bound() < items.len() {
            self.refresh_head();
        }
        let n = items.len().min(capacity - self.used_upper_bound());
        if n == 0 {
            return 0;
        }
        let idx = (self.tail as usize) & self.mask;
        // SAFETY: `n <= capacity - (tail - head)` with our stale (smaller)
        // head, so the `n` slots from `tail` belong to the producer;
        // `n <= capacity = len` and `idx <= mask < len`.
        unsafe { write_slots(&self.slots, idx, &items[..n]) };
        self.tail = self.tail.wrapping_add(n as u64);
        self.publish();
        n
    }

    /// Free slots right now (the consumer may free more at any moment).
    /// One atomic load; does not refresh the cached index.
    pub fn free_slots(&self) -> usize {
        // Relaxed: advisory; `push`/`push_burst` re-check with Acquire
        // before writing a slot.
        let head = self.counters.head.0.load(Relaxed);
        self.slots.len() - self.tail.wrapping_sub(head) as usize
    }

    /// Total items ever enqueued (monotonic). No atomic access.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Usable slots (the requested capacity rounded up to a power of two).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// True once the [`Consumer`] has been dropped (nothing will read what
    /// is pushed from now on; pushes still succeed until the ring is full).
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the consumer's Release in its `Drop`.
        self.counters.closed.0.load(Acquire) & CONSUMER_GONE != 0
    }

    /// A read-only view of this ring's counters for other threads.
    pub fn stats(&self) -> RingStats {
        RingStats { counters: Arc::clone(&self.counters) }
    }
}

impl<T: Copy + Send> Drop for Producer<T> {
    fn drop(&mut self) {
        // Release: our last tail store happens-before a consumer's Acquire
        // load that sees PRODUCER_GONE, so "abandoned and empty" is final.
        self.counters.closed.0.fetch_or(PRODUCER_GONE, Release);
    }
}

impl<T: Copy + Send> std::fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("tail", &self.tail)
            .field("free_slots", &self.free_slots())
            .field("abandoned", &self.is_abandoned())
            .finish()
    }
}

/// The dequeue end of a ring. Exactly one exists per ring; move it to the
/// worker thread.
///
/// Thread safety: `Send`, not `Sync`, not `Clone`. Every method is
/// wait-free (at most two atomic loads and two atomic stores per call, plus
/// the copy).
// Aligned so that the private indices never share a line with the other
// handle, wherever the two are stored.
#[repr(align(128))]
pub struct Consumer<T: Copy + Send> {
    counters: Arc<Counters>,
    slots: Arc<[Slot<T>]>,
    mask: usize,
    /// Our own `counters.head` (we are its only writer).
    head: u64,
    /// A possibly stale copy of `counters.tail`, refreshed only when the
    /// ring looks empty (or too short for the requested burst).
    cached_tail: u64,
    /// Our own `counters.done`.
    done: u64,
}

// SAFETY: as for `Producer`: the consumer only reads slots it owns by the
// slot protocol, ownership moves with Release/Acquire on the indices, and
// `T: Send` items may be received on another thread.
unsafe impl<T: Copy + Send> Send for Consumer<T> {}

impl<T: Copy + Send> Consumer<T> {
    /// Items available as our (possibly stale) view has them: a lower bound
    /// on the real length.
    #[inline(always)]
    fn available_lower_bound(&self) -> usize {
        // Cannot truncate: `cached_tail - head <= capacity <= MAX_CAPACITY`.
        self.cached_tail.wrapping_sub(self.head) as usize
    }

    /// Refreshes the cached producer index.
    ///
    /// Acquire: pairs with the producer's Release store of `tail`: the slot
    /// writes below the new tail happen-before our reads of them.
    #[inline(always)]
    fn refresh_tail(&mut self) {
        self.cached_tail = self.counters.tail.0.load(Acquire);
    }

    /// Hands the slots below `self.head` back to the producer.
    ///
    /// Release: our slot reads finish before the producer, Acquire-loading
    /// the new head, may overwrite those slots.
    #[inline(always)]
    fn publish(&mut self) {
        self.counters.head.0.store(self.head, Release);
    }

    /// Dequeues one item, or `None` when the ring is empty. Wait-free.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.available_lower_bound() == 0 {
            self.refresh_tail();
            if self.available_lower_bound() == 0 {
                return None;
            }
        }
        let idx = (self.head as usize) & self.mask;
        // SAFETY: `head < tail` for our (stale, hence smaller) tail, so slot
        // `head` belongs to the consumer and holds an item; `idx <= mask < len`.
        let item = unsafe { read_one(self.slots.get_unchecked(idx)) };
        self.head = self.head.wrapping_add(1);
        self.publish();
        Some(item)
    }

    /// Dequeues up to `out.len()` items into a prefix of `out` and returns
    /// how many (0 when empty). One head publication per call. Wait-free.
    #[inline]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize {
        if self.available_lower_bound() < out.len() {
            self.refresh_tail();
        }
        let n = out.len().min(self.available_lower_bound());
        if n == 0 {
            return 0;
        }
        let idx = (self.head as usize) & self.mask;
        // SAFETY: `n <= tail - head` with our stale (smaller) tail, so the
        // `n` slots from `head` belong to the consumer and hold items;
        // `n <= capacity = len` and `idx < len`.
        unsafe { read_slots(&self.slots, idx, &mut out[..n]) };
        self.head = self.head.wrapping_add(n as u64);
        self.publish();
        n
    }

    /// Items in the ring right now (the producer may add more at any
    /// moment). One atomic load; does not refresh the cached index.
    pub fn len(&self) -> usize {
        // Relaxed: advisory; `pop`/`pop_burst` re-check with Acquire before
        // reading a slot.
        let tail = self.counters.tail.0.load(Relaxed);
        tail.wrapping_sub(self.head) as usize
    }

    /// True when [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total items ever dequeued (monotonic). No atomic access.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Marks every item below position `upto` as *processed* (not merely
    /// dequeued), e.g. `c.set_processed(c.head())` after handling a burst.
    ///
    /// The `done` counter is what the RFS rule reads ("the old worker has
    /// finished every packet up to the flow's last `tail`"). It only grows:
    /// a value below the current one is ignored, and one above
    /// [`head`](Self::head) is clamped to it (an item cannot be processed
    /// before it is dequeued). Wait-free; one atomic store when it moves.
    #[inline]
    pub fn set_processed(&mut self, upto: u64) {
        let upto = upto.min(self.head);
        if upto > self.done {
            self.done = upto;
            // Release: the processing of items below `upto` happens-before a
            // reader's Acquire load that sees it (`RingStats::done`).
            self.counters.done.0.store(upto, Release);
        }
    }

    /// Total items marked processed (monotonic, `<= head`). No atomic access.
    pub fn processed(&self) -> u64 {
        self.done
    }

    /// Usable slots (the requested capacity rounded up to a power of two).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// True once the [`Producer`] has been dropped. Items already in the
    /// ring can still be popped; when `is_abandoned()` was true *before* a
    /// pop returned `None`, the ring is drained for good.
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the producer's Release in its `Drop`, so the
        // producer's final tail is visible to our next `pop`.
        self.counters.closed.0.load(Acquire) & PRODUCER_GONE != 0
    }

    /// A read-only view of this ring's counters for other threads.
    pub fn stats(&self) -> RingStats {
        RingStats { counters: Arc::clone(&self.counters) }
    }
}

impl<T: Copy + Send> Drop for Consumer<T> {
    fn drop(&mut self) {
        // Release: pairs with the producer's Acquire in `is_abandoned`.
        self.counters.closed.0.fetch_or(CONSUMER_GONE, Release);
    }
}

impl<T: Copy + Send> std::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("head", &self.head)
            .field("done", &self.done)
            .field("len", &self.len())
            .field("abandoned", &self.is_abandoned())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A descriptor of the size the engine moves (24 bytes).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    struct Desc {
        seq: u64,
        hash: u32,
        queue: u16,
        len: u16,
        off: u64,
    }

    fn desc(seq: u64) -> Desc {
        Desc { seq, hash: seq as u32 ^ 0x5bd1_e995, queue: (seq % 7) as u16, len: 60, off: seq * 2048 }
    }

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        for (asked, got) in
            [(1, 1), (2, 2), (3, 4), (5, 8), (1000, 1024), (1024, 1024), (MAX_CAPACITY - 1, MAX_CAPACITY)]
        {
            let (p, c) = channel::<u8>(asked).unwrap();
            assert_eq!((p.capacity(), c.capacity(), p.stats().capacity()), (got, got, got), "asked {asked}");
        }
    }

    #[test]
    fn bad_capacity() {
        assert_eq!(channel::<u64>(0).unwrap_err(), RingError::BadCapacity);
        assert_eq!(channel::<u64>(MAX_CAPACITY + 1).unwrap_err(), RingError::BadCapacity);
        assert_eq!(channel::<u64>(usize::MAX).unwrap_err(), RingError::BadCapacity);
        assert!(channel::<u64>(MAX_CAPACITY).is_ok());
        assert!(RingError::BadCapacity.to_string().contains("16777216"));
    }

    #[test]
    fn full_and_empty_boundaries() {
        let (mut p, mut c) = channel::<Desc>(4).unwrap();
        assert!(c.is_empty());
        assert_eq!(c.pop(), None);
        assert_eq!(p.free_slots(), 4);
        for i in 0..4 {
            assert_eq!(p.push(desc(i)), Ok(()));
        }
        assert_eq!(p.free_slots(), 0);
        assert_eq!(c.len(), 4);
        assert_eq!(p.push(desc(99)), Err(desc(99)));
        assert_eq!(p.push_burst(&[desc(99)]), 0);
        assert_eq!(p.tail(), 4);
        assert_eq!(c.pop(), Some(desc(0)));
        assert_eq!(p.free_slots(), 1);
        assert_eq!(p.push(desc(4)), Ok(()));
        assert_eq!(p.push(desc(5)), Err(desc(5)));
        for i in 1..5 {
            assert_eq!(c.pop(), Some(desc(i)));
        }
        assert_eq!(c.pop(), None);
        assert_eq!(c.pop_burst(&mut [Desc::default(); 4]), 0);
        assert!(c.is_empty());
        assert_eq!((p.tail(), c.head()), (5, 5));
    }

    #[test]
    fn capacity_one() {
        let (mut p, mut c) = channel::<u32>(1).unwrap();
        for i in 0..100 {
            assert_eq!(p.push(i), Ok(()));
            assert_eq!(p.push(i), Err(i));
            assert_eq!(c.pop(), Some(i));
            assert_eq!(c.pop(), None);
        }
    }

    #[test]
    fn wraps_many_times_with_odd_bursts() {
        let (mut p, mut c) = channel::<Desc>(8).unwrap();
        let mut next = 0u64;
        let mut expect = 0u64;
        let mut out = [Desc::default(); 8];
        for round in 0..10_000u64 {
            let k = (round % 8 + 1) as usize;
            let items: Vec<Desc> = (next..next + k as u64).map(desc).collect();
            let n = p.push_burst(&items);
            next += n as u64;
            let want = ((round * 5) % 8 + 1) as usize;
            let got = c.pop_burst(&mut out[..want]);
            for d in &out[..got] {
                assert_eq!(*d, desc(expect));
                expect += 1;
            }
        }
        while let Some(d) = c.pop() {
            assert_eq!(d, desc(expect));
            expect += 1;
        }
        assert_eq!(expect, next);
        assert!(next > 8 * 1000, "ring wrapped only {} times", next / 8);
        assert_eq!((p.tail(), c.head()), (next, next));
    }

    #[test]
    fn burst_partial_accept() {
        let (mut p, mut c) = channel::<u16>(8).unwrap();
        assert_eq!(p.push_burst(&[1, 2, 3, 4, 5]), 5);
        assert_eq!(p.push_burst(&[6, 7, 8, 9, 10]), 3); // prefix 6, 7, 8
        assert_eq!(p.push_burst(&[11]), 0);
        assert_eq!(p.push_burst(&[]), 0);
        let mut out = [0u16; 3];
        assert_eq!(c.pop_burst(&mut out), 3);
        assert_eq!(out, [1, 2, 3]);
        // Wraps: 3 free slots, at positions 0..3 after slot 7.
        assert_eq!(p.push_burst(&[9, 10, 11, 12]), 3);
        let mut out = [0u16; 16];
        assert_eq!(c.pop_burst(&mut out), 8);
        assert_eq!(&out[..8], &[4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(c.pop_burst(&mut out), 0);
        assert_eq!(c.pop_burst(&mut []), 0);
    }

    #[test]
    fn processed_counter_is_monotonic_and_clamped() {
        let (mut p, mut c) = channel::<u8>(8).unwrap();
        let stats = p.stats();
        assert_eq!(p.push_burst(&[1, 2, 3, 4]), 4);
        c.set_processed(3); // nothing dequeued yet: clamped to head = 0
        assert_eq!((c.processed(), stats.done()), (0, 0));
        let mut out = [0u8; 3];
        assert_eq!(c.pop_burst(&mut out), 3);
        c.set_processed(c.head());
        assert_eq!((c.processed(), stats.done()), (3, 3));
        c.set_processed(1); // backwards: ignored
        assert_eq!(stats.done(), 3);
        assert_eq!((stats.tail(), stats.head(), stats.len()), (4, 3, 1));
    }

    #[test]
    fn high_watermark_is_exact() {
        let (mut p, mut c) = channel::<u8>(16).unwrap();
        let stats = c.stats();
        assert_eq!(stats.high_watermark(), 0);
        for round in 0..50 {
            assert_eq!(p.push_burst(&[0; 5]), 5);
            assert_eq!(c.pop_burst(&mut [0; 5]), 5);
            assert_eq!(stats.high_watermark(), 5, "round {round}");
        }
        assert_eq!(p.push_burst(&[0; 9]), 9);
        assert_eq!(stats.high_watermark(), 9);
        assert_eq!(c.pop_burst(&mut [0; 9]), 9);
        for _ in 0..16 {
            p.push(0).unwrap();
        }
        assert_eq!(stats.high_watermark(), 16);
        assert!(p.push(0).is_err());
        assert_eq!(stats.high_watermark(), 16);
    }

    #[test]
    fn drop_is_seen_by_the_other_side() {
        let (mut p, mut c) = channel::<u32>(4).unwrap();
        let stats = p.stats();
        assert!(!p.is_abandoned() && !c.is_abandoned() && !stats.is_abandoned());
        p.push_burst(&[1, 2]);
        drop(p);
        assert!(c.is_abandoned() && stats.is_abandoned());
        assert_eq!(c.pop(), Some(1)); // what was pushed can still be drained
        assert_eq!(c.pop(), Some(2));
        assert_eq!(c.pop(), None);

        let (mut p, c) = channel::<u32>(4).unwrap();
        drop(c);
        assert!(p.is_abandoned());
        assert_eq!(p.push(7), Ok(()));
        drop(p); // both gone: the slots are freed once, nothing to drop in them
        assert_eq!(stats.capacity(), 4); // an old view stays valid
    }

    #[test]
    fn zero_sized_items() {
        let (mut p, mut c) = channel::<()>(2).unwrap();
        assert_eq!(p.push_burst(&[(), (), ()]), 2);
        assert_eq!(c.pop_burst(&mut [(); 5]), 2);
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn ends_are_send_and_stats_is_sync() {
        fn send<S: Send>() {}
        fn sync_clone<S: Send + Sync + Clone>() {}
        send::<Producer<Desc>>();
        send::<Consumer<Desc>>();
        sync_clone::<RingStats>();
    }

    #[test]
    fn debug_output() {
        let (p, c) = channel::<u8>(2).unwrap();
        assert!(format!("{p:?}").contains("Producer"));
        assert!(format!("{c:?}").contains("Consumer"));
        assert!(format!("{:?}", p.stats()).contains("high_watermark"));
    }
}
