//! The receive side's bookkeeping for the `owner` fragment policy.
//!
//! A non-first fragment carries no ports, so it cannot be hashed to its
//! flow's owner. The first fragment (offset 0) can: its 4-tuple hash picks
//! the owner, and this table remembers that hash under the datagram's
//! identity (source, destination, protocol, IP id), so the later fragments
//! follow it. Fragments that arrive before their first fragment wait here,
//! bounded, and are released behind it.
//!
//! Bounds (per receive core; see [`FragHoldConfig`]): at most `max_ids`
//! datagram ids remembered (owned or waiting), `max_frags` waiting fragments
//! and `max_bytes` of waiting frames, 64 waiting fragments per datagram.
//! Overflow policy: the oldest id is forgotten first (its waiting fragments
//! are dropped as `frag_hold_evicted`), as the reassembler evicts its oldest
//! datagram, so a flood of orphan fragments cannot pin the table; a datagram
//! past its per-id cap drops the new fragment (`frag_hold_full`). Ids time out
//! after the reassembler's timeout of their family (`timeout_v4_ns`,
//! `timeout_v6_ns`; waiting fragments dropped as `frag_hold_timeout`): the
//! owning core calls [`FragHold::expire`] from its housekeeping timer, so an
//! idle core ages them on time, not only when the next fragment comes. What
//! still waits when the run ends is dropped by [`FragHold::flush`] as
//! `frag_hold_pending_at_end`.
//! The map is keyed by SipHash with a random key (std `RandomState`), so
//! crafted ids cannot force collisions. Every operation is O(1) amortised.

use crate::drops::DropReason;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// Limits of a [`FragHold`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragHoldConfig {
    /// Datagram ids remembered at most; default 4096.
    pub max_ids: usize,
    /// Fragments waiting for their first fragment at most; default 1024.
    pub max_frags: usize,
    /// Bytes of waiting frames at most; default 1 MiB.
    pub max_bytes: usize,
    /// An IPv4 id is forgotten this long after it was first seen; default
    /// 30 s (Linux's `ipfrag_time`, the reassembler's IPv4 timeout).
    pub timeout_v4_ns: u64,
    /// The same for IPv6; default 60 s (Linux's `ip6frag_time`).
    pub timeout_v6_ns: u64,
}

impl Default for FragHoldConfig {
    fn default() -> Self {
        FragHoldConfig {
            max_ids: 4096,
            max_frags: 1024,
            max_bytes: 1 << 20,
            timeout_v4_ns: 30_000_000_000,
            timeout_v6_ns: 60_000_000_000,
        }
    }
}

/// Waiting fragments per datagram at most.
pub const MAX_WAITING_PER_ID: usize = 64;

/// A datagram's identity (RFC 791 / RFC 8200 reassembly key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DgramKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub id: u32,
}

#[derive(Debug)]
enum State {
    /// The first fragment came: the flow's hash.
    Owned(u32),
    /// Fragments waiting for the first one.
    Waiting(Vec<Vec<u8>>),
}

#[derive(Debug)]
struct Entry {
    state: State,
    created: u64,
    gen: u64,
}

/// Counters of a [`FragHold`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoldStats {
    /// Fragments that had to wait.
    pub held: u64,
    /// Waiting fragments released behind their first fragment.
    pub released: u64,
    /// Waiting fragments dropped because their id was forgotten to make room.
    pub evicted: u64,
    /// Waiting fragments dropped because their id timed out.
    pub timed_out: u64,
    /// Waiting fragments dropped by [`FragHold::flush`] (end of run).
    pub at_end: u64,
    /// Fragments refused because their datagram already had
    /// [`MAX_WAITING_PER_ID`] waiting, or the frame alone exceeds `max_bytes`.
    pub full: u64,
}

/// What became of a fragment offered to [`FragHold::hold`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldVerdict {
    Held,
    /// Dropped, for this reason.
    Dropped(DropReason),
}

/// See the module docs.
#[derive(Debug)]
pub struct FragHold {
    cfg: FragHoldConfig,
    map: HashMap<DgramKey, Entry>,
    /// Ids in creation order, one queue per family (IPv4, IPv6: each has
    /// its own timeout), lazily pruned: an item whose generation no longer
    /// matches its entry is skipped.
    order: [VecDeque<(DgramKey, u64)>; 2],
    /// Ids created with waiting fragments, in creation order (lazily pruned
    /// the same way, and skipped once resolved): what frame and byte
    /// pressure evicts, so remembered owners of datagrams in progress are
    /// not forgotten to make room for orphans.
    waiting_order: VecDeque<(DgramKey, u64)>,
    next_gen: u64,
    waiting: usize,
    waiting_bytes: usize,
    stats: HoldStats,
    /// Drops by reason not yet collected by [`FragHold::take_drops`].
    new_drops: [u64; 4],
}

const R_EVICTED: usize = 0;
const R_TIMEOUT: usize = 1;
const R_FULL: usize = 2;
const R_AT_END: usize = 3;
const REASONS: [DropReason; 4] = [
    DropReason::FragHoldEvicted,
    DropReason::FragHoldTimeout,
    DropReason::FragHoldFull,
    DropReason::FragHoldPendingAtEnd,
];

/// The index of `key`'s family in [`FragHold::order`].
fn family(key: &DgramKey) -> usize {
    usize::from(key.src.is_ipv6())
}

impl FragHold {
    pub fn new(cfg: FragHoldConfig) -> FragHold {
        let cfg = FragHoldConfig { max_ids: cfg.max_ids.max(1), ..cfg };
        FragHold {
            cfg,
            map: HashMap::new(),
            order: [VecDeque::new(), VecDeque::new()],
            waiting_order: VecDeque::new(),
            next_gen: 0,
            waiting: 0,
            waiting_bytes: 0,
            stats: HoldStats::default(),
            new_drops: [0; 4],
        }
    }

    pub fn stats(&self) -> HoldStats {
        self.stats
    }

    /// Fragments waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Ids remembered now.
    pub fn ids(&self) -> usize {
        self.map.len()
    }

    /// The owner hash of a datagram whose first fragment was seen.
    pub fn owner(&self, key: &DgramKey) -> Option<u32> {
        match self.map.get(key) {
            Some(Entry { state: State::Owned(h), .. }) => Some(*h),
            _ => None,
        }
    }

    /// The first fragment of `key` came with flow hash `hash`: remember it
    /// and hand back the fragments that waited for it (to be sent behind it).
    pub fn resolve(&mut self, key: DgramKey, hash: u32, now: u64) -> Vec<Vec<u8>> {
        self.expire(now);
        if let Some(e) = self.map.get_mut(&key) {
            let old = std::mem::replace(&mut e.state, State::Owned(hash));
            if let State::Waiting(frames) = old {
                self.waiting -= frames.len();
                self.waiting_bytes -= frames.iter().map(Vec::len).sum::<usize>();
                self.stats.released += frames.len() as u64;
                return frames;
            }
            return Vec::new();
        }
        self.insert(key, State::Owned(hash), now);
        Vec::new()
    }

    /// A non-first fragment whose owner is unknown: keep a copy until its
    /// first fragment comes (or drop it, counted).
    pub fn hold(&mut self, key: DgramKey, frame: &[u8], now: u64) -> HoldVerdict {
        self.expire(now);
        if frame.len() > self.cfg.max_bytes {
            return self.refuse();
        }
        if let Some(Entry { state: State::Waiting(v), .. }) = self.map.get(&key) {
            if v.len() >= MAX_WAITING_PER_ID {
                return self.refuse();
            }
        }
        // Room: forget the oldest ids with waiting fragments (never the one
        // we add to).
        while self.waiting + 1 > self.cfg.max_frags || self.waiting_bytes + frame.len() > self.cfg.max_bytes {
            if !self.forget_oldest_waiting(&key) {
                return self.refuse();
            }
        }
        match self.map.get_mut(&key) {
            Some(Entry { state: State::Waiting(v), .. }) => v.push(frame.to_vec()),
            // The caller asks owner() first; refuse rather than mis-hold.
            Some(Entry { state: State::Owned(_), .. }) => return self.refuse(),
            None => self.insert(key, State::Waiting(vec![frame.to_vec()]), now),
        }
        self.waiting += 1;
        self.waiting_bytes += frame.len();
        self.stats.held += 1;
        HoldVerdict::Held
    }

    fn refuse(&mut self) -> HoldVerdict {
        self.stats.full += 1;
        self.new_drops[R_FULL] += 1;
        HoldVerdict::Dropped(REASONS[R_FULL])
    }

    fn insert(&mut self, key: DgramKey, state: State, now: u64) {
        while self.map.len() >= self.cfg.max_ids {
            if !self.forget_oldest() {
                break;
            }
        }
        self.next_gen += 1;
        let gen = self.next_gen;
        if matches!(state, State::Waiting(_)) {
            self.waiting_order.push_back((key, gen));
        }
        self.map.insert(key, Entry { state, created: now, gen });
        let order = &mut self.order[family(&key)];
        order.push_back((key, gen));
        // Stale items (ids forgotten out of order, resolved ids) are pruned
        // lazily from the front; compact when they pile up, so every queue
        // stays within 2 x max_ids items (amortised O(1) per insert).
        let limit = self.cfg.max_ids.saturating_mul(2).max(64);
        if order.len() > limit {
            let map = &self.map;
            order.retain(|(k, g)| map.get(k).is_some_and(|e| e.gen == *g));
        }
        if self.waiting_order.len() > limit {
            let map = &self.map;
            self.waiting_order
                .retain(|(k, g)| map.get(k).is_some_and(|e| e.gen == *g && matches!(e.state, State::Waiting(_))));
        }
    }

    /// Forgets the oldest id that still has waiting fragments (not `keep`);
    /// false when there is none.
    fn forget_oldest_waiting(&mut self, keep: &DgramKey) -> bool {
        let mut skipped = None;
        let mut found = false;
        while let Some((key, gen)) = self.waiting_order.pop_front() {
            match self.map.get(&key) {
                Some(e) if e.gen == gen && matches!(e.state, State::Waiting(_)) => {
                    if &key == keep {
                        skipped = Some((key, gen));
                        continue;
                    }
                    self.remove(&key, R_EVICTED);
                    found = true;
                    break;
                }
                _ => {} // stale or resolved
            }
        }
        if let Some(item) = skipped {
            self.waiting_order.push_front(item);
        }
        found
    }

    /// Forgets the oldest id of either family; false when there is none.
    fn forget_oldest(&mut self) -> bool {
        // Prune stale items off both fronts, then take the older front.
        for order in &mut self.order {
            while let Some((key, gen)) = order.front() {
                if self.map.get(key).is_some_and(|e| e.gen == *gen) {
                    break;
                }
                order.pop_front();
            }
        }
        let created = |order: &VecDeque<(DgramKey, u64)>| {
            order.front().and_then(|(k, _)| self.map.get(k)).map(|e| (e.created, e.gen))
        };
        let pick = match (created(&self.order[0]), created(&self.order[1])) {
            (Some(a), Some(b)) => usize::from(b < a),
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (None, None) => return false,
        };
        match self.order[pick].pop_front() {
            Some((key, _)) => {
                self.remove(&key, R_EVICTED);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, key: &DgramKey, reason: usize) {
        if let Some(Entry { state: State::Waiting(frames), .. }) = self.map.remove(key) {
            let n = frames.len() as u64;
            self.waiting -= frames.len();
            self.waiting_bytes -= frames.iter().map(Vec::len).sum::<usize>();
            match reason {
                R_TIMEOUT => self.stats.timed_out += n,
                R_AT_END => self.stats.at_end += n,
                _ => self.stats.evicted += n,
            }
            if let Some(d) = self.new_drops.get_mut(reason) {
                *d += n;
            }
        }
    }

    /// Forgets ids older than their family's timeout. O(expired).
    pub fn expire(&mut self, now: u64) {
        for (f, timeout) in [(0, self.cfg.timeout_v4_ns), (1, self.cfg.timeout_v6_ns)] {
            while let Some(&(key, gen)) = self.order[f].front() {
                match self.map.get(&key) {
                    Some(e) if e.gen == gen => {
                        if now.saturating_sub(e.created) < timeout {
                            break;
                        }
                        self.order[f].pop_front();
                        self.remove(&key, R_TIMEOUT);
                    }
                    _ => {
                        self.order[f].pop_front();
                    }
                }
            }
        }
    }

    /// Forgets everything (end of run): waiting fragments are dropped as
    /// `frag_hold_pending_at_end`.
    pub fn flush(&mut self) {
        for f in 0..2 {
            while let Some((key, _)) = self.order[f].pop_front() {
                self.remove(&key, R_AT_END);
            }
        }
        self.map.clear();
        self.waiting_order.clear();
    }

    /// Drops since the last call, by reason (for the drop counters).
    pub fn take_drops(&mut self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        let d = std::mem::take(&mut self.new_drops);
        REASONS.into_iter().zip(d).filter(|(_, n)| *n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(id: u32) -> DgramKey {
        DgramKey { src: Ipv4Addr::new(10, 0, 0, 1).into(), dst: Ipv4Addr::new(10, 0, 0, 2).into(), proto: 17, id }
    }

    fn conserved(h: &FragHold) -> bool {
        let s = h.stats();
        s.held == s.released + s.evicted + s.timed_out + s.at_end + h.waiting() as u64
    }

    #[test]
    fn early_fragments_wait_and_follow_their_first() {
        let mut h = FragHold::new(FragHoldConfig::default());
        assert_eq!(h.hold(key(1), &[1; 100], 0), HoldVerdict::Held);
        assert_eq!(h.hold(key(1), &[2; 100], 1), HoldVerdict::Held);
        assert_eq!(h.owner(&key(1)), None);
        let released = h.resolve(key(1), 0xabcd, 2);
        assert_eq!(released, vec![vec![1; 100], vec![2; 100]]);
        assert_eq!(h.owner(&key(1)), Some(0xabcd));
        assert_eq!(h.resolve(key(1), 0xabcd, 3), Vec::<Vec<u8>>::new());
        assert_eq!(h.waiting(), 0);
        assert!(conserved(&h));
    }

    #[test]
    fn bounded_by_frames_bytes_and_ids_oldest_forgotten_first() {
        let cfg =
            FragHoldConfig { max_ids: 8, max_frags: 4, max_bytes: 1000, timeout_v4_ns: 1000, timeout_v6_ns: 1000 };
        let mut h = FragHold::new(cfg);
        for id in 0..100 {
            assert_eq!(h.hold(key(id), &[0; 10], u64::from(id)), HoldVerdict::Held);
            assert!(h.waiting() <= 4 && h.ids() <= 8);
        }
        // The newest four survive.
        for id in 96..100 {
            assert_eq!(h.resolve(key(id), 7, 100).len(), 1);
        }
        assert_eq!(h.stats().evicted, 96);
        let drops: Vec<_> = h.take_drops().collect();
        assert_eq!(drops, vec![(DropReason::FragHoldEvicted, 96)]);
        // Byte bound.
        assert_eq!(h.hold(key(500), &[0; 600], 100), HoldVerdict::Held);
        assert_eq!(h.hold(key(501), &[0; 600], 100), HoldVerdict::Held);
        assert_eq!(h.stats().evicted, 97);
        assert_eq!(h.hold(key(502), &[0; 1001], 100), HoldVerdict::Dropped(DropReason::FragHoldFull));
        // Per-id cap.
        let mut h2 = FragHold::new(FragHoldConfig::default());
        for i in 0..MAX_WAITING_PER_ID {
            assert_eq!(h2.hold(key(9), &[i as u8], 0), HoldVerdict::Held);
        }
        assert_eq!(h2.hold(key(9), &[0], 0), HoldVerdict::Dropped(DropReason::FragHoldFull));
        assert!(conserved(&h) && conserved(&h2));
    }

    #[test]
    fn frame_pressure_evicts_orphans_not_remembered_owners() {
        let cfg = FragHoldConfig {
            max_ids: 100,
            max_frags: 2,
            max_bytes: 1 << 20,
            timeout_v4_ns: 1 << 40,
            timeout_v6_ns: 1 << 40,
        };
        let mut h = FragHold::new(cfg);
        h.resolve(key(1), 11, 0); // a datagram in progress, first fragment seen
        h.hold(key(2), &[0; 10], 1);
        h.hold(key(3), &[0; 10], 2);
        h.hold(key(4), &[0; 10], 3); // evicts id 2's fragment, not id 1's owner
        assert_eq!(h.owner(&key(1)), Some(11));
        assert_eq!(h.stats().evicted, 1);
        assert_eq!(h.resolve(key(2), 5, 4).len(), 0);
        assert_eq!(h.resolve(key(4), 5, 4).len(), 1);
        assert!(conserved(&h));
    }

    #[test]
    fn bookkeeping_stays_bounded_when_ids_resolve_out_of_order() {
        let cfg = FragHoldConfig { max_ids: 16, ..FragHoldConfig::default() };
        let mut h = FragHold::new(cfg);
        for id in 0..100_000u32 {
            // An early fragment, then its first fragment: every id resolves.
            h.hold(key(id), &[0; 8], u64::from(id));
            assert_eq!(h.resolve(key(id), id, u64::from(id)).len(), 1);
            assert!(h.order[0].len() <= 64 && h.waiting_order.len() <= 64, "{}", h.waiting_order.len());
            assert!(h.ids() <= 16);
        }
        assert!(conserved(&h));
    }

    #[test]
    fn ids_time_out_and_flush_drops_the_rest() {
        let cfg = FragHoldConfig { timeout_v4_ns: 100, timeout_v6_ns: 1000, ..FragHoldConfig::default() };
        let mut h = FragHold::new(cfg);
        h.hold(key(1), &[0; 10], 0);
        h.resolve(key(2), 5, 50);
        h.hold(key(3), &[0; 10], 60);
        h.expire(120);
        assert_eq!(h.stats().timed_out, 1);
        assert_eq!(h.owner(&key(2)), Some(5));
        h.expire(151);
        assert_eq!(h.owner(&key(2)), None);
        h.flush();
        assert_eq!((h.stats().timed_out, h.stats().at_end, h.waiting(), h.ids()), (1, 1, 0, 0));
        let drops: Vec<_> = h.take_drops().collect();
        assert_eq!(drops, vec![(DropReason::FragHoldTimeout, 1), (DropReason::FragHoldPendingAtEnd, 1)]);
        assert!(conserved(&h));
    }

    #[test]
    fn each_family_ages_at_its_own_timeout_and_an_old_ipv6_id_does_not_hold_ipv4_back() {
        let cfg = FragHoldConfig { timeout_v4_ns: 100, timeout_v6_ns: 1000, ..FragHoldConfig::default() };
        let mut h = FragHold::new(cfg);
        let v6 = DgramKey { src: "fd00::1".parse().unwrap(), dst: "fd00::2".parse().unwrap(), proto: 17, id: 1 };
        h.hold(v6, &[0; 10], 0);
        h.hold(key(1), &[0; 10], 10);
        h.expire(110);
        assert_eq!((h.stats().timed_out, h.waiting()), (1, 1), "the IPv4 id ages at 100");
        h.expire(999);
        assert_eq!(h.waiting(), 1, "the IPv6 one not before 1000");
        h.expire(1000);
        assert_eq!((h.stats().timed_out, h.waiting()), (2, 0));
        // Eviction takes the older id of either family.
        let cfg = FragHoldConfig { max_ids: 2, ..FragHoldConfig::default() };
        let mut h = FragHold::new(cfg);
        h.hold(v6, &[0; 10], 0);
        h.hold(key(1), &[0; 10], 1);
        h.hold(key(2), &[0; 10], 2);
        assert_eq!(h.resolve(v6, 1, 3).len(), 0, "the IPv6 id was the oldest");
        assert!(conserved(&h));
    }
}
