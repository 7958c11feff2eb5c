//! CPU sets in the Linux sysfs bitmap format (`/sys/class/net/*/queues/rx-*/rps_cpus`,
//! `cpumask_parse`): comma-separated groups of up to 8 hex digits, most
//! significant group first, each group 32 CPUs: `3` = CPUs 0-1,
//! `ff,ffffffff` = CPUs 0-39, `1,00000000` = CPU 32. Also accepts a list
//! form (`0-3,8`) when it is written with `list:` in front.

use std::fmt;

/// Highest CPU number + 1 that a set may name.
pub const MAX_CPUS: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSetError {
    Empty,
    BadDigit { group: usize, text: String },
    GroupTooLong { group: usize, text: String },
    TooManyCpus,
    BadList(String),
}

impl fmt::Display for CpuSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuSetError::Empty => write!(f, "empty CPU mask"),
            CpuSetError::BadDigit { group, text } => {
                write!(f, "CPU mask group {} ('{text}') is not hexadecimal", group + 1)
            }
            CpuSetError::GroupTooLong { group, text } => write!(
                f,
                "CPU mask group {} ('{text}') has more than 8 hex digits (sysfs writes 32 CPUs per comma-separated group)",
                group + 1
            ),
            CpuSetError::TooManyCpus => write!(f, "CPU mask names CPUs beyond {}", MAX_CPUS - 1),
            CpuSetError::BadList(t) => write!(f, "bad CPU list '{t}' (expected e.g. list:0-3,8)"),
        }
    }
}

impl std::error::Error for CpuSetError {}

/// A set of CPU numbers, kept sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet {
    cpus: Vec<u32>,
}

impl CpuSet {
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> CpuSet {
        let mut cpus: Vec<u32> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        CpuSet { cpus }
    }

    /// Parse the sysfs hex bitmap (or `list:0-3,8`). A mask of all zeros is
    /// valid and empty (RPS off for that queue).
    pub fn parse(text: &str) -> Result<CpuSet, CpuSetError> {
        let text = text.trim();
        if let Some(list) = text.strip_prefix("list:") {
            return parse_list(list);
        }
        if text.is_empty() {
            return Err(CpuSetError::Empty);
        }
        let groups: Vec<&str> = text.split(',').collect();
        if groups.len() * 32 > MAX_CPUS {
            return Err(CpuSetError::TooManyCpus);
        }
        let mut cpus = Vec::new();
        let n = groups.len();
        for (g, group) in groups.iter().enumerate() {
            let group = group.trim();
            if group.is_empty() || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(CpuSetError::BadDigit { group: g, text: group.to_string() });
            }
            if group.len() > 8 {
                return Err(CpuSetError::GroupTooLong { group: g, text: group.to_string() });
            }
            let word = u32::from_str_radix(group, 16)
                .map_err(|_| CpuSetError::BadDigit { group: g, text: group.to_string() })?;
            let base = 32 * (n - 1 - g) as u32;
            for bit in 0..32 {
                if word >> bit & 1 == 1 {
                    cpus.push(base + bit);
                }
            }
        }
        Ok(CpuSet::from_cpus(cpus))
    }

    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }

    /// The sysfs form: groups of 8 hex digits, most significant first, the
    /// first group without leading zeros (`0` for the empty set).
    pub fn to_mask(&self) -> String {
        let top = self.cpus.last().map_or(0, |&c| c as usize / 32);
        let mut words = vec![0u32; top + 1];
        for &c in &self.cpus {
            words[c as usize / 32] |= 1 << (c % 32);
        }
        let mut s = format!("{:x}", words[top]);
        for w in words[..top].iter().rev() {
            s.push_str(&format!(",{w:08x}"));
        }
        s
    }
}

fn parse_list(list: &str) -> Result<CpuSet, CpuSetError> {
    let bad = || CpuSetError::BadList(list.to_string());
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().map_err(|_| bad())?, b.trim().parse::<u32>().map_err(|_| bad())?),
            None => {
                let c = part.parse::<u32>().map_err(|_| bad())?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(bad());
        }
        if hi as usize >= MAX_CPUS {
            return Err(CpuSetError::TooManyCpus);
        }
        cpus.extend(lo..=hi);
    }
    if cpus.is_empty() {
        return Err(CpuSetError::Empty);
    }
    Ok(CpuSet::from_cpus(cpus))
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_mask())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sysfs_masks_parse_exactly() {
        assert_eq!(CpuSet::parse("3").unwrap().cpus(), &[0, 1]);
        assert_eq!(CpuSet::parse("0").unwrap().cpus(), &[] as &[u32]);
        assert_eq!(CpuSet::parse("00000000").unwrap().len(), 0);
        assert_eq!(CpuSet::parse("ff,ffffffff").unwrap().cpus(), &(0..40).collect::<Vec<_>>()[..]);
        assert_eq!(CpuSet::parse("1,00000000").unwrap().cpus(), &[32]);
        assert_eq!(CpuSet::parse("80000000,00000001").unwrap().cpus(), &[0, 63]);
        assert_eq!(CpuSet::parse("A").unwrap().cpus(), &[1, 3]);
        assert_eq!(CpuSet::parse(" f0\n").unwrap().cpus(), &[4, 5, 6, 7]);
        assert_eq!(CpuSet::parse("list:0-2,8").unwrap().cpus(), &[0, 1, 2, 8]);
    }

    #[test]
    fn bad_masks_are_rejected_with_reasons() {
        assert_eq!(CpuSet::parse(""), Err(CpuSetError::Empty));
        assert!(matches!(CpuSet::parse("xyz"), Err(CpuSetError::BadDigit { .. })));
        assert!(matches!(CpuSet::parse("0x3"), Err(CpuSetError::BadDigit { .. })));
        assert!(matches!(CpuSet::parse("ff,"), Err(CpuSetError::BadDigit { group: 1, .. })));
        assert!(matches!(CpuSet::parse("1ffffffff"), Err(CpuSetError::GroupTooLong { .. })));
        assert!(matches!(CpuSet::parse("-1"), Err(CpuSetError::BadDigit { .. })));
        let huge = vec!["ffffffff"; 129].join(",");
        assert_eq!(CpuSet::parse(&huge), Err(CpuSetError::TooManyCpus));
        assert!(CpuSet::parse("list:3-1").is_err());
        assert!(CpuSet::parse("list:a").is_err());
        for e in [CpuSet::parse("zz").unwrap_err(), CpuSet::parse("1ffffffff").unwrap_err()] {
            assert!(!e.to_string().is_empty());
        }
    }

    proptest! {
        #[test]
        fn mask_round_trips(cpus in proptest::collection::btree_set(0u32..256, 0..40)) {
            let set = CpuSet::from_cpus(cpus.iter().copied());
            let back = CpuSet::parse(&set.to_mask()).unwrap();
            prop_assert_eq!(back, set);
        }

        #[test]
        fn never_panics(s in ".{0,80}") {
            let _ = CpuSet::parse(&s);
        }
    }
}
