//! Walker's alias method (Vose's construction): O(n) build, O(1) draw from
//! a discrete distribution with one 64-bit random number.

/// One slot: keep the slot's own index when the low 32 random bits are
/// below `threshold`, else take `alias`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    threshold: u32,
    alias: u32,
}

/// An alias table over indexes `0..len`.
#[derive(Clone, Debug, Default)]
pub(crate) struct AliasTable {
    slots: Vec<Slot>,
}

impl AliasTable {
    /// The table for `weights` (finite, `>= 0`). A table whose weights sum to
    /// zero (or are not finite) draws uniformly.
    /// Takes the weights by value to scale them in place (2^24 flows: 128 MiB).
    pub(crate) fn new(mut weights: Vec<f64>) -> AliasTable {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        if n == 0 {
            return AliasTable::default();
        }
        let uniform = !(total.is_finite() && total > 0.0);
        // Scaled so that the mean is 1.
        for w in &mut weights {
            *w = if uniform { 1.0 } else { *w * n as f64 / total };
        }
        let mut p = weights;
        let mut slots: Vec<Slot> = (0..n).map(|i| Slot { threshold: u32::MAX, alias: i as u32 }).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..n as u32).partition(|&i| p.get(i as usize).is_some_and(|&v| v < 1.0));
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            let (si, li) = (s as usize, l as usize);
            let ps = p.get(si).copied().unwrap_or(1.0);
            if let Some(slot) = slots.get_mut(si) {
                *slot = Slot { threshold: (ps * 4_294_967_296.0).min(u32::MAX as f64) as u32, alias: l };
            }
            if let Some(pl) = p.get_mut(li) {
                *pl = (*pl + ps) - 1.0;
                if *pl < 1.0 {
                    large.pop();
                    small.push(l);
                }
            }
        }
        // Leftovers (large, or small through rounding) keep their own index.
        AliasTable { slots }
    }

    /// The index drawn by the random number `r` (high 32 bits pick the
    /// slot, low 32 bits the coin). Panic-free; 0 for an empty table.
    #[inline]
    pub(crate) fn draw(&self, r: u64) -> usize {
        let n = self.slots.len() as u64;
        let i = (((r >> 32) * n) >> 32) as usize;
        match self.slots.get(i) {
            // Branch-free select: the coin is a coin, a branch on it mispredicts.
            Some(s) => {
                let keep = 0usize.wrapping_sub(usize::from((r as u32) < s.threshold));
                (i & keep) | (s.alias as usize & !keep)
            }
            None => 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowsteer_prim::SplitMix64;

    fn freqs(w: &[f64], draws: usize) -> Vec<f64> {
        let t = AliasTable::new(w.to_vec());
        let mut r = SplitMix64(7);
        let mut c = vec![0usize; w.len()];
        for _ in 0..draws {
            c[t.draw(r.next_u64())] += 1;
        }
        c.into_iter().map(|x| x as f64 / draws as f64).collect()
    }

    #[test]
    fn matches_weights() {
        let w = [1.0, 2.0, 3.0, 4.0, 0.0, 10.0];
        let total: f64 = w.iter().sum();
        for (f, w) in freqs(&w, 200_000).iter().zip(w) {
            assert!((f - w / total).abs() < 0.005, "{f} vs {}", w / total);
        }
    }

    #[test]
    fn degenerate_inputs() {
        assert!(AliasTable::new(vec![]).is_empty());
        assert_eq!(AliasTable::new(vec![]).draw(u64::MAX), 0);
        let f = freqs(&[0.0, 0.0], 10_000);
        assert!((f[0] - 0.5).abs() < 0.03);
        let f = freqs(&[f64::INFINITY, 1.0], 10_000);
        assert!((f[0] - 0.5).abs() < 0.03);
        assert_eq!(freqs(&[5.0], 100), vec![1.0]);
    }
}
