//! A token bucket for the generator's `--rate`: tokens accrue at `rate` per
//! second up to `burst`; sending n datagrams takes n tokens. Time is passed
//! in (ns since any fixed origin) so the logic is testable without sleeping.

/// Token bucket. `rate == 0` means unlimited (every request is granted).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    /// Tokens, in units of 1/1e9 token (so integer arithmetic stays exact:
    /// one ns at `rate` per second adds `rate` units).
    units: u128,
    last_ns: u64,
}

const UNITS_PER_TOKEN: u128 = 1_000_000_000;

impl TokenBucket {
    /// A bucket that starts full. `burst` is clamped to at least 1.
    pub fn new(rate: u64, burst: u64, now_ns: u64) -> TokenBucket {
        let burst = burst.max(1);
        TokenBucket { rate, burst, units: u128::from(burst) * UNITS_PER_TOKEN, last_ns: now_ns }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    fn refill(&mut self, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        let cap = u128::from(self.burst) * UNITS_PER_TOKEN;
        self.units = (self.units + u128::from(dt) * u128::from(self.rate)).min(cap);
    }

    /// Take up to `want` tokens; returns how many were granted (0..=want).
    pub fn take(&mut self, now_ns: u64, want: u64) -> u64 {
        if self.rate == 0 {
            return want;
        }
        self.refill(now_ns);
        let have = (self.units / UNITS_PER_TOKEN) as u64;
        let grant = have.min(want);
        self.units -= u128::from(grant) * UNITS_PER_TOKEN;
        grant
    }

    /// Nanoseconds until one token is available (0 when one is, or unlimited).
    pub fn wait_ns(&mut self, now_ns: u64) -> u64 {
        if self.rate == 0 {
            return 0;
        }
        self.refill(now_ns);
        if self.units >= UNITS_PER_TOKEN {
            return 0;
        }
        let missing = UNITS_PER_TOKEN - self.units;
        missing.div_ceil(u128::from(self.rate)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_follow_the_rate_after_the_initial_burst() {
        // 1000 pps, burst 10: the first 10 go at once, then one per ms.
        let mut b = TokenBucket::new(1000, 10, 0);
        assert_eq!(b.take(0, 100), 10);
        assert_eq!(b.take(0, 1), 0);
        assert_eq!(b.wait_ns(0), 1_000_000);
        assert_eq!(b.take(999_999, 1), 0);
        assert_eq!(b.take(1_000_000, 5), 1);
        // Over one simulated second in 37 µs steps: about 1000 more tokens.
        let mut granted = 0;
        let mut t = 1_000_000;
        while t <= 1_001_000_000 {
            granted += b.take(t, 3);
            t += 37_000;
        }
        assert!((999..=1001).contains(&granted), "{granted}");
    }

    #[test]
    fn burst_caps_accrual_and_zero_rate_is_unlimited() {
        let mut b = TokenBucket::new(1_000_000, 32, 0);
        b.take(0, 32);
        // An hour idle still yields only one burst.
        assert_eq!(b.take(3_600_000_000_000, 1000), 32);
        let mut u = TokenBucket::new(0, 1, 0);
        assert_eq!(u.take(0, 12345), 12345);
        assert_eq!(u.wait_ns(0), 0);
    }

    #[test]
    fn time_going_backwards_grants_nothing_extra() {
        let mut b = TokenBucket::new(100, 1, 1_000_000_000);
        assert_eq!(b.take(1_000_000_000, 1), 1);
        assert_eq!(b.take(0, 1), 0);
        assert_eq!(b.take(1_010_000_000, 1), 1);
    }
}
