//! The writer: the one thread that changes the table.

use crate::error::FdbError;
use crate::key::{is_reserved, Entry, EntryKind, FdbKey, Mac, PortId, VlanId};
use crate::table::{Op, Table};
use crate::worker::{FdbEvent, FdbReader};
use flowsteer_ring::Consumer;
use std::collections::HashMap;

/// Events popped from one worker's queue per `pop_burst`.
const DRAIN_BURST: usize = 64;
/// Changes kept for [`FdbWriter::take_changes`] before the log gives up
/// and asks for a full copy ([`Changes::Resync`]).
pub const MAX_PENDING_CHANGES: usize = 1 << 20;

/// What changed in the table since the last [`FdbWriter::take_changes`],
/// for a copy of the table kept elsewhere (a BPF map a kernel fast path
/// reads). Refreshes (a last-seen second moving forward) are not changes:
/// only new entries, entries that moved or became static, and removals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changes {
    /// The changes in the order they were made (`Op::Set` carries the
    /// entry as it is now).
    List(Vec<Op>),
    /// More than [`MAX_PENDING_CHANGES`] piled up: copy the whole table
    /// ([`FdbWriter::entries`]) instead.
    Resync,
}

/// A MAC move: the station of a key was seen on a port other than the one
/// its entry named. Kept per key for as long as the key has an entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MoveRecord {
    /// Moves of this key since its entry was created.
    pub count: u64,
    /// The port of the last move's old entry.
    pub from: PortId,
    /// The port it moved to.
    pub to: PortId,
    /// When the last move was seen (the event's second).
    pub at_s: u64,
}

/// The writer's counters. Only the writer changes them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FdbStats {
    /// Learn/refresh events taken from the workers' queues.
    pub events_applied: u64,
    /// New entries learned.
    pub learned: u64,
    /// Entries whose last-seen second moved forward.
    pub refreshed: u64,
    /// Entries that followed their station to another port.
    pub moved: u64,
    /// Learned entries removed by the aging pass.
    pub aged: u64,
    /// Entries removed by a flush or a port removal.
    pub flushed: u64,
    /// Events not learned (new station or move) because the bridge's or the
    /// port's learned-entries limit was reached.
    pub not_learned_full: u64,
    /// Events that named a static entry on another port: the entry stays.
    pub static_kept: u64,
    /// Events with a source that is never learned (group or zero address);
    /// workers do not post these, so this stays 0 unless one misbehaves.
    pub invalid_source: u64,
    /// Versions published to the readers.
    pub publishes: u64,
}

/// Sizes and times of one bridge's table. Every bound is checked by
/// `fdb()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbConfig {
    /// A learned entry idle longer than this is removed by [`FdbWriter::age`].
    /// Default 300 s (802.1D's and Linux's default ageing time).
    pub ageing_s: u64,
    /// Learned entries in the whole bridge. Default 65,536, at most 2^24.
    /// When reached, nothing new is learned (the event is counted
    /// `not_learned_full`); known entries keep forwarding, unknown
    /// destinations flood.
    pub max_learned: usize,
    /// Learned entries on one port. Default 65,536 (the bridge's limit, so
    /// by default only that one binds); same overflow policy.
    pub max_learned_per_port: usize,
    /// Static entries. Default 4,096, at most 2^24; beyond it
    /// [`FdbWriter::add_static`] returns [`FdbError::StaticFull`].
    pub max_static: usize,
    /// Slots of each worker's event queue to the writer. Default 1,024
    /// (rounded up to a power of two), at most 2^24; a full queue drops the
    /// event and the worker counts it (`events_dropped`).
    pub event_queue: usize,
    /// Keys each worker remembers having posted in the current second (the
    /// refresh filter). Default 4,096, at most 2^24; when it is full, an
    /// event for a key not in it is not posted and counted
    /// (`events_suppressed`).
    pub posted_per_second: usize,
}

impl Default for FdbConfig {
    fn default() -> Self {
        Self {
            ageing_s: 300,
            max_learned: 65_536,
            max_learned_per_port: 65_536,
            max_static: 4_096,
            event_queue: 1_024,
            posted_per_second: 4_096,
        }
    }
}

/// The one thread that changes the table: it applies the workers' events,
/// ages, flushes and holds static entries, and publishes versions.
///
/// It keeps its own authoritative map (so every decision is made on the
/// table as it is, not as last published) and logs each change for
/// `left-right`, which applies the log to the copy the readers left and
/// swaps. Nothing it does is visible to readers until a publish; the
/// public methods that change the table publish before they return.
///
/// Thread safety: `Send`, not `Sync`; one thread owns it. `publish` waits
/// until every reader inside the old copy has dropped its guard (readers
/// hold one for a burst, never across a blocking call), so the writer, not
/// the readers, is the side that waits.
pub struct FdbWriter {
    cfg: FdbConfig,
    w: left_right::WriteHandle<Table, Op>,
    entries: HashMap<FdbKey, Entry>,
    learned_total: usize,
    static_total: usize,
    learned_per_port: HashMap<PortId, usize>,
    /// Learned-entry limits of single ports (`usize::MAX`: none), beside
    /// the configuration's `max_learned_per_port` for the others.
    port_limits: HashMap<PortId, usize>,
    moves: HashMap<FdbKey, MoveRecord>,
    queues: Vec<Consumer<FdbEvent>>,
    dirty: bool,
    stats: FdbStats,
    /// The change log of [`FdbWriter::take_changes`], when recording.
    changes: Option<Vec<Op>>,
    changes_overflowed: bool,
}

impl FdbWriter {
    pub(crate) fn new(cfg: FdbConfig, w: left_right::WriteHandle<Table, Op>, queues: Vec<Consumer<FdbEvent>>) -> Self {
        Self {
            cfg,
            w,
            entries: HashMap::new(),
            learned_total: 0,
            static_total: 0,
            learned_per_port: HashMap::new(),
            port_limits: HashMap::new(),
            moves: HashMap::new(),
            queues,
            dirty: false,
            stats: FdbStats::default(),
            changes: None,
            changes_overflowed: false,
        }
    }

    /// The configuration the table was built with.
    pub fn config(&self) -> &FdbConfig {
        &self.cfg
    }

    /// The writer's counters.
    pub fn stats(&self) -> FdbStats {
        self.stats
    }

    /// Entries (learned and static) in the authoritative table.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Learned (not static) entries.
    pub fn learned_len(&self) -> usize {
        self.learned_total
    }

    /// Learned entries on `port`.
    pub fn learned_on(&self, port: PortId) -> usize {
        self.learned_per_port.get(&port).copied().unwrap_or(0)
    }

    /// Sets the learned-entry limit of `port`: `Some(0)` for no limit of
    /// its own (the bridge's `max_learned` still binds), `None` for the
    /// configuration's `max_learned_per_port`. Entries above a lowered
    /// limit stay until they age; nothing new is learned there meanwhile.
    pub fn set_port_limit(&mut self, port: PortId, limit: Option<usize>) {
        match limit {
            None => {
                self.port_limits.remove(&port);
            }
            Some(0) => {
                self.port_limits.insert(port, usize::MAX);
            }
            Some(n) => {
                self.port_limits.insert(port, n);
            }
        }
    }

    /// The learned-entry limit of `port` (`usize::MAX`: none of its own).
    pub fn port_limit(&self, port: PortId) -> usize {
        self.port_limits.get(&port).copied().unwrap_or(self.cfg.max_learned_per_port)
    }

    /// The entry of `mac` in `vlan` (authoritative, published or not).
    pub fn entry(&self, mac: Mac, vlan: VlanId) -> Option<Entry> {
        self.entries.get(&FdbKey::new(mac, vlan)).copied()
    }

    /// Every entry, in no particular order (for `fdb show`).
    pub fn entries(&self) -> impl Iterator<Item = (&FdbKey, &Entry)> {
        self.entries.iter()
    }

    /// The move record of a key, if its station has moved since its entry
    /// was created.
    pub fn move_record(&self, key: FdbKey) -> Option<MoveRecord> {
        self.moves.get(&key).copied()
    }

    /// Every move record (one per moved key that still has an entry).
    pub fn moves(&self) -> impl Iterator<Item = (&FdbKey, &MoveRecord)> {
        self.moves.iter()
    }

    /// A new read handle (for a worker added later or a control reader).
    /// It is `Send`, not `Sync`: move it to the thread that reads.
    pub fn reader(&self) -> FdbReader {
        FdbReader { r: self.w.clone() }
    }

    /// Takes every event waiting in the workers' queues (at most one
    /// queue's capacity per queue per call, so a busy worker cannot keep
    /// the writer here), applies them, publishes once if anything changed,
    /// and returns how many were taken.
    pub fn drain(&mut self) -> usize {
        let mut buf = [FdbEvent::default(); DRAIN_BURST];
        let mut taken = 0;
        for qi in 0..self.queues.len() {
            let budget = self.queues[qi].capacity();
            let mut from_this = 0;
            while from_this < budget {
                let n = self.queues[qi].pop_burst(&mut buf);
                if n == 0 {
                    break;
                }
                for ev in &buf[..n] {
                    self.apply(*ev);
                }
                from_this += n;
            }
            taken += from_this;
        }
        self.publish();
        taken
    }

    /// Applies one learn/refresh event (as [`drain`](Self::drain) does for
    /// each event it takes); visible to readers after the next publish.
    ///
    /// * unknown key: learned, unless the bridge's or the port's limit is
    ///   reached (`not_learned_full`);
    /// * known key, same port: its last-seen second moves forward
    ///   (`refreshed`; an older event changes nothing);
    /// * known key, other port: a MAC move, followed and recorded (`moved`),
    ///   unless the new port's limit is reached (`not_learned_full`);
    /// * configured key ([`EntryKind::is_configured`]): never moved
    ///   (`static_kept` when the port differs); a sticky or external entry
    ///   seen on its own port is refreshed as a learned one is.
    pub fn apply(&mut self, ev: FdbEvent) {
        self.stats.events_applied += 1;
        if !ev.key.mac.is_learnable_source() {
            self.stats.invalid_source += 1;
            return;
        }
        let Some(e) = self.entries.get(&ev.key).copied() else {
            if self.learned_total >= self.cfg.max_learned || self.learned_on(ev.port) >= self.port_limit(ev.port) {
                self.stats.not_learned_full += 1;
                return;
            }
            let e = Entry { port: ev.port, kind: EntryKind::Learned, last_seen_s: ev.at_s };
            self.insert_learned(ev.key, e);
            self.stats.learned += 1;
            return;
        };
        if !e.kind.moves() && e.port != ev.port {
            self.stats.static_kept += 1;
            return;
        }
        if e.is_static() {
            return;
        }
        if e.port == ev.port {
            if ev.at_s > e.last_seen_s {
                self.set(ev.key, Entry { last_seen_s: ev.at_s, ..e });
                self.stats.refreshed += 1;
            }
            return;
        }
        if self.learned_on(ev.port) >= self.port_limit(ev.port) {
            self.stats.not_learned_full += 1;
            return;
        }
        self.count_port(e.port, false);
        self.count_port(ev.port, true);
        self.set(ev.key, Entry { port: ev.port, kind: EntryKind::Learned, last_seen_s: ev.at_s.max(e.last_seen_s) });
        let rec = self.moves.entry(ev.key).or_insert(MoveRecord { count: 0, from: e.port, to: ev.port, at_s: ev.at_s });
        rec.count += 1;
        rec.from = e.port;
        rec.to = ev.port;
        rec.at_s = ev.at_s;
        self.stats.moved += 1;
    }

    /// Removes every entry that ages ([`EntryKind::ages`]: all but static
    /// ones) idle for longer than the ageing time at `now_s`, in one pass
    /// over the table (O(n)).
    /// Publishes and returns how many were removed.
    pub fn age(&mut self, now_s: u64) -> usize {
        self.age_with(now_s, |_| None)
    }

    /// As [`age`](Self::age), asking `seen` about each entry that would
    /// age out: a station seen where this table does not look (a kernel
    /// fast path that forwards without posting events) answers the second
    /// it was last seen, and an entry seen within the ageing time is
    /// refreshed to it instead of removed.
    pub fn age_with(&mut self, now_s: u64, mut seen: impl FnMut(&FdbKey) -> Option<u64>) -> usize {
        let ageing = self.cfg.ageing_s;
        let idle = |at: u64| now_s.saturating_sub(at) > ageing;
        let mut refreshed = Vec::new();
        let n = self.remove_where(|k, e| {
            if !e.kind.ages() || !idle(e.last_seen_s) {
                return false;
            }
            match seen(k) {
                Some(at) if at > e.last_seen_s && !idle(at) => {
                    refreshed.push((*k, Entry { last_seen_s: at, ..*e }));
                    false
                }
                _ => true,
            }
        });
        for (k, e) in refreshed {
            self.set(k, e);
            self.stats.refreshed += 1;
        }
        self.stats.aged += n as u64;
        self.publish();
        n
    }

    /// Starts (or stops) logging changes for [`take_changes`](Self::take_changes);
    /// off by default. Starting clears the log.
    pub fn record_changes(&mut self, on: bool) {
        self.changes = on.then(Vec::new);
        self.changes_overflowed = false;
    }

    /// The changes since the last call (or since recording started); empty
    /// when not recording.
    pub fn take_changes(&mut self) -> Changes {
        if std::mem::take(&mut self.changes_overflowed) {
            if let Some(log) = self.changes.as_mut() {
                log.clear();
            }
            return Changes::Resync;
        }
        Changes::List(self.changes.as_mut().map(std::mem::take).unwrap_or_default())
    }

    fn log_change(&mut self, op: Op) {
        if let Some(log) = self.changes.as_mut() {
            if log.len() >= MAX_PENDING_CHANGES {
                log.clear();
                self.changes_overflowed = true;
            } else if !self.changes_overflowed {
                log.push(op);
            }
        }
    }

    /// Removes the dynamic entries of `port` when its link goes down:
    /// learned and sticky ones; static entries and a controller's
    /// (`External`) stay, as Linux's bridge keeps them. Publishes and
    /// returns how many were removed.
    pub fn flush_port(&mut self, port: PortId) -> usize {
        let n = self.remove_where(|_, e| e.port == port && matches!(e.kind, EntryKind::Learned | EntryKind::Sticky));
        self.stats.flushed += n as u64;
        self.publish();
        n
    }

    /// Removes every entry of `port`, static ones too (the port leaves the
    /// bridge). Publishes and returns how many were removed.
    pub fn remove_port(&mut self, port: PortId) -> usize {
        let n = self.remove_where(|_, e| e.port == port);
        self.stats.flushed += n as u64;
        self.publish();
        n
    }

    /// Removes every dynamic entry (all but static ones). Publishes and
    /// returns how many.
    pub fn flush_learned(&mut self) -> usize {
        self.flush(&Flush::default())
    }

    /// Removes the entries `f` selects (every condition it names must
    /// hold). Publishes and returns how many were removed.
    pub fn flush(&mut self, f: &Flush) -> usize {
        let n = self.remove_where(|k, e| f.selects(k, e));
        self.stats.flushed += n as u64;
        self.publish();
        n
    }

    /// Adds (or replaces) a static entry for `mac` in `vlan` on `port`, at
    /// `now_s`; a learned entry of the key becomes static. Publishes.
    ///
    /// Errors: [`FdbError::Reserved`] for an 802.1D reserved address,
    /// [`FdbError::NotUnicast`] for another group address or all zeros,
    /// [`FdbError::StaticFull`] when `max_static` entries exist.
    pub fn add_static(&mut self, mac: Mac, vlan: VlanId, port: PortId, now_s: u64) -> Result<(), FdbError> {
        self.add(mac, vlan, port, EntryKind::Static, now_s)
    }

    /// Adds (or replaces) a configured entry of `kind` (static, sticky or
    /// external) for `mac` in `vlan` on `port`, at `now_s`; a learned
    /// entry of the key becomes configured. Publishes. Errors as
    /// [`add_static`](Self::add_static), and [`FdbError::NotConfigured`]
    /// for [`EntryKind::Learned`] (learning is the workers').
    pub fn add(&mut self, mac: Mac, vlan: VlanId, port: PortId, kind: EntryKind, now_s: u64) -> Result<(), FdbError> {
        if kind == EntryKind::Learned {
            return Err(FdbError::NotConfigured);
        }
        if is_reserved(mac) {
            return Err(FdbError::Reserved);
        }
        if !mac.is_learnable_source() {
            return Err(FdbError::NotUnicast);
        }
        let key = FdbKey::new(mac, vlan);
        match self.entries.get(&key).copied() {
            Some(e) if e.kind.is_configured() => {}
            _ if self.static_total >= self.cfg.max_static => return Err(FdbError::StaticFull),
            Some(e) => {
                self.forget_learned(key, e.port);
                self.static_total += 1;
            }
            None => self.static_total += 1,
        }
        self.set(key, Entry { port, kind, last_seen_s: now_s });
        self.publish();
        Ok(())
    }

    /// Removes the entry of `mac` in `vlan`, static or learned. Publishes;
    /// returns whether there was one.
    pub fn remove(&mut self, mac: Mac, vlan: VlanId) -> bool {
        let key = FdbKey::new(mac, vlan);
        let Some(e) = self.entries.remove(&key) else { return false };
        self.account_removed(key, e);
        self.w.append(Op::Remove(key));
        self.log_change(Op::Remove(key));
        self.dirty = true;
        self.publish();
        true
    }

    /// Makes every logged change visible to readers, if there is any. Waits
    /// until the readers inside the old copy have left it (see the type's
    /// doc); the old copy is then brought up to date for the next publish.
    pub fn publish(&mut self) {
        if self.dirty {
            self.w.publish();
            self.dirty = false;
            self.stats.publishes += 1;
        }
    }

    fn set(&mut self, key: FdbKey, e: Entry) {
        let old = self.entries.insert(key, e);
        self.w.append(Op::Set(key, e));
        self.dirty = true;
        if old.is_none_or(|o| o.port != e.port || o.kind != e.kind) {
            self.log_change(Op::Set(key, e));
        }
    }

    fn insert_learned(&mut self, key: FdbKey, e: Entry) {
        self.learned_total += 1;
        self.count_port(e.port, true);
        self.set(key, e);
    }

    /// Drops the learned bookkeeping of a key whose entry is being replaced
    /// or removed.
    fn forget_learned(&mut self, key: FdbKey, port: PortId) {
        self.learned_total -= 1;
        self.count_port(port, false);
        self.moves.remove(&key);
    }

    fn account_removed(&mut self, key: FdbKey, e: Entry) {
        if e.kind.is_configured() {
            self.static_total -= 1;
        } else {
            self.forget_learned(key, e.port);
        }
    }

    fn count_port(&mut self, port: PortId, up: bool) {
        if up {
            *self.learned_per_port.entry(port).or_insert(0) += 1;
        } else if let Some(n) = self.learned_per_port.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.learned_per_port.remove(&port);
            }
        }
    }

    /// One pass over the table removing what `pred` selects; logs each
    /// removal. Returns how many.
    fn remove_where(&mut self, mut pred: impl FnMut(&FdbKey, &Entry) -> bool) -> usize {
        let mut removed = Vec::new();
        self.entries.retain(|k, e| {
            if pred(k, e) {
                removed.push((*k, *e));
                false
            } else {
                true
            }
        });
        for &(k, e) in &removed {
            self.account_removed(k, e);
            self.w.append(Op::Remove(k));
            self.log_change(Op::Remove(k));
        }
        if !removed.is_empty() {
            self.dirty = true;
        }
        removed.len()
    }
}

/// Which entries [`FdbWriter::flush`] removes: those on `port` (any port
/// when `None`), in `vlan` (any when `None`), of the selected kinds.
/// `Default`: every dynamic entry (learned, sticky, external) of every
/// port and VLAN, as `fdb flush` with no words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flush {
    /// Only entries on this port.
    pub port: Option<PortId>,
    /// Only entries in this VLAN.
    pub vlan: Option<VlanId>,
    /// Entries that age (learned, sticky, external).
    pub dynamic: bool,
    /// Static entries.
    pub statics: bool,
}

impl Default for Flush {
    fn default() -> Self {
        Flush { port: None, vlan: None, dynamic: true, statics: false }
    }
}

impl Flush {
    /// Whether the entry `e` of `k` is one to remove.
    pub fn selects(&self, k: &FdbKey, e: &Entry) -> bool {
        self.port.is_none_or(|p| p == e.port)
            && self.vlan.is_none_or(|v| v == k.vlan)
            && if e.is_static() { self.statics } else { self.dynamic }
    }
}

impl std::fmt::Debug for FdbWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FdbWriter")
            .field("entries", &self.entries.len())
            .field("queues", &self.queues.len())
            .field("stats", &self.stats)
            .finish()
    }
}
