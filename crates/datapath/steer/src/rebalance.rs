//! Live rebalancing: move buckets from an overloaded worker to
//! a lighter one, from measured per-bucket load.
//!
//! [`plan_moves`] is pure: it takes the packets each bucket carried in the
//! last interval and the current bucket -> worker map and returns moves.
//! The engine applies them to the shared [`crate::steer::BucketMap`]; the
//! receive threads then carry each move out under the drain rule, so no
//! flow reorders.
//!
//! Greedy: while the heaviest worker carries more than `threshold` x the
//! mean, move from it the largest bucket that is smaller than the gap
//! between the heaviest and the lightest worker (so the move always lowers
//! the maximum), to the lightest worker. At most `max_moves` per interval.

use crate::WorkerId;

#[derive(Clone, Copy, Debug)]
pub struct RebalanceConfig {
    /// Rebalance when max load > threshold x mean (default 1.25).
    pub threshold: f64,
    /// Moves per interval at most (default 8).
    pub max_moves: usize,
    /// Ignore intervals with fewer packets than this (default 1000).
    pub min_packets: u64,
}

impl Default for RebalanceConfig {
    fn default() -> Self {
        RebalanceConfig { threshold: 1.25, max_moves: 8, min_packets: 1000 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub bucket: usize,
    pub from: WorkerId,
    pub to: WorkerId,
    /// Packets the bucket carried in the interval.
    pub load: u64,
}

/// Moves that bring the workers' loads closer together.
pub fn plan_moves(bucket_load: &[u64], map: &[WorkerId], workers: usize, cfg: &RebalanceConfig) -> Vec<Move> {
    if workers < 2 || bucket_load.len() != map.len() {
        return Vec::new();
    }
    let total: u64 = bucket_load.iter().sum();
    if total < cfg.min_packets {
        return Vec::new();
    }
    let mut map = map.to_vec();
    let mut load = vec![0u64; workers];
    for (b, w) in map.iter().enumerate() {
        if let Some(l) = load.get_mut(w.index()) {
            *l += bucket_load[b];
        }
    }
    let mean = total as f64 / workers as f64;
    let mut moves = Vec::new();
    while moves.len() < cfg.max_moves {
        let (hi, &hi_load) = load.iter().enumerate().max_by_key(|(_, l)| **l).unwrap_or((0, &0));
        let (lo, &lo_load) = load.iter().enumerate().min_by_key(|(_, l)| **l).unwrap_or((0, &0));
        if (hi_load as f64) <= cfg.threshold * mean || hi == lo {
            break;
        }
        let gap = hi_load - lo_load;
        let candidate = (0..map.len())
            .filter(|&b| map[b].index() == hi && bucket_load[b] > 0 && bucket_load[b] < gap)
            .max_by_key(|&b| bucket_load[b]);
        let Some(b) = candidate else { break };
        map[b] = WorkerId(lo as u16);
        load[hi] -= bucket_load[b];
        load[lo] += bucket_load[b];
        moves.push(Move { bucket: b, from: WorkerId(hi as u16), to: WorkerId(lo as u16), load: bucket_load[b] });
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_from_heavy_to_light_and_lowers_the_max() {
        // 8 buckets on 2 workers (even -> 0, odd -> 1); worker 0 carries 4x.
        let load = [400, 100, 400, 100, 400, 100, 400, 100];
        let map: Vec<WorkerId> = (0..8).map(|b| WorkerId(b % 2)).collect();
        let moves = plan_moves(&load, &map, 2, &RebalanceConfig::default());
        assert!(!moves.is_empty());
        let mut w = [0u64; 2];
        let mut m = map.clone();
        for mv in &moves {
            assert_eq!(mv.from, WorkerId(0));
            m[mv.bucket] = mv.to;
        }
        for (b, wk) in m.iter().enumerate() {
            w[wk.index()] += load[b];
        }
        assert!(w[0].max(w[1]) < 1600);
        assert!(w[0].abs_diff(w[1]) <= 400, "{w:?}");
    }

    #[test]
    fn balanced_or_tiny_loads_do_nothing() {
        let map: Vec<WorkerId> = (0..4).map(|b| WorkerId(b % 2)).collect();
        assert!(plan_moves(&[100, 100, 100, 100], &map, 2, &RebalanceConfig::default()).is_empty());
        assert!(plan_moves(&[10, 0, 0, 0], &map, 2, &RebalanceConfig::default()).is_empty());
        assert!(plan_moves(&[10, 0], &map, 2, &RebalanceConfig::default()).is_empty());
        // One giant bucket cannot be split: no move makes it better.
        assert!(plan_moves(&[100_000, 0, 0, 0], &map, 2, &RebalanceConfig::default()).is_empty());
    }
}
