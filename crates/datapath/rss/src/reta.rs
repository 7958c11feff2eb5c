//! Indirection: hash -> RETA entry (low bits) -> queue -> CPU.
//!
//! The RETA (redirection / indirection table) has a power-of-two size
//! (default [`DEFAULT_RETA_SIZE`], at most [`MAX_RETA_SIZE`]) and is indexed by
//! the low bits of the hash, as every NIC and FreeBSD's `rss_getbucket` do.
//! Linux RPS instead scales the hash: `(hash * n) >> 32`
//! ([`Mapping::RpsScale`]).

use std::fmt;

/// RETA size when none is given (ixgbe, FreeBSD's default bucket count x 16).
pub const DEFAULT_RETA_SIZE: usize = 128;
/// Largest RETA accepted (ice uses 2048 per PF; 65536 bounds memory at 128 KiB).
pub const MAX_RETA_SIZE: usize = 65536;
/// Most queues a configuration may name.
pub const MAX_QUEUES: usize = 4096;

/// A receive queue number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueId(pub u16);

/// A CPU number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoreId(pub u32);

impl QueueId {
    /// The queue's position in a per-queue table (`Vec` index).
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Every queue of a device with `n` receive queues: `0..n`.
    pub fn all(n: u16) -> impl DoubleEndedIterator<Item = QueueId> + ExactSizeIterator + Clone {
        (0..n).map(QueueId)
    }
}

/// A queue number as a [`QueueId`].
impl From<u16> for QueueId {
    fn from(q: u16) -> QueueId {
        QueueId(q)
    }
}

/// The queue number of a [`QueueId`].
impl From<QueueId> for u16 {
    fn from(q: QueueId) -> u16 {
        q.0
    }
}

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for CoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetaError {
    NotPowerOfTwo { size: usize },
    TooLarge { size: usize },
    Empty,
    NoQueues,
    TooManyQueues { queues: usize },
}

impl fmt::Display for RetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetaError::NotPowerOfTwo { size } => {
                write!(f, "indirection table size {size} is not a power of two")
            }
            RetaError::TooLarge { size } => {
                write!(f, "indirection table size {size} exceeds the maximum {MAX_RETA_SIZE}")
            }
            RetaError::Empty => write!(f, "indirection table is empty"),
            RetaError::NoQueues => write!(f, "at least one queue is needed"),
            RetaError::TooManyQueues { queues } => {
                write!(f, "{queues} queues exceed the maximum {MAX_QUEUES}")
            }
        }
    }
}

impl std::error::Error for RetaError {}

/// The indirection table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reta {
    entries: Vec<QueueId>,
    mask: u32,
}

impl Reta {
    /// `size` entries filled round-robin over `queues` queues (entry `i` ->
    /// queue `i % queues`), as drivers initialise it.
    pub fn round_robin(size: usize, queues: usize) -> Result<Reta, RetaError> {
        check_size(size)?;
        check_queues(queues)?;
        let entries = (0..size).map(|i| QueueId((i % queues) as u16)).collect();
        Ok(Reta { entries, mask: (size - 1) as u32 })
    }

    /// A table given entry by entry (from `ethtool -x`).
    pub fn from_entries(entries: &[u32]) -> Result<Reta, RetaError> {
        check_size(entries.len())?;
        let max = entries.iter().copied().max().unwrap_or(0) as usize;
        check_queues(max + 1)?;
        Ok(Reta { entries: entries.iter().map(|&q| QueueId(q as u16)).collect(), mask: (entries.len() - 1) as u32 })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[QueueId] {
        &self.entries
    }

    /// Number of queues the table refers to (highest entry + 1).
    pub fn queue_count(&self) -> usize {
        self.entries.iter().map(|q| usize::from(q.0) + 1).max().unwrap_or(0)
    }

    /// The entry a hash selects: its low `log2(len)` bits.
    #[inline]
    pub fn index_for(&self, hash: u32) -> usize {
        (hash & self.mask) as usize
    }

    #[inline]
    pub fn queue_for(&self, hash: u32) -> QueueId {
        self.entries[self.index_for(hash)]
    }

    /// Point one entry at another queue (rebalancing). Out-of-range indexes
    /// are ignored and reported as `false`.
    pub fn set(&mut self, index: usize, queue: QueueId) -> bool {
        match self.entries.get_mut(index) {
            Some(e) => {
                *e = queue;
                true
            }
            None => false,
        }
    }
}

fn check_size(size: usize) -> Result<(), RetaError> {
    if size == 0 {
        Err(RetaError::Empty)
    } else if size > MAX_RETA_SIZE {
        Err(RetaError::TooLarge { size })
    } else if !size.is_power_of_two() {
        Err(RetaError::NotPowerOfTwo { size })
    } else {
        Ok(())
    }
}

fn check_queues(queues: usize) -> Result<(), RetaError> {
    if queues == 0 {
        Err(RetaError::NoQueues)
    } else if queues > MAX_QUEUES {
        Err(RetaError::TooManyQueues { queues })
    } else {
        Ok(())
    }
}

/// How a hash picks a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Low bits through the RETA (NIC RSS, FreeBSD).
    Reta,
    /// Linux RPS `reciprocal_scale`: `(hash * queues) >> 32`.
    RpsScale,
}

/// Linux `reciprocal_scale(hash, n)`.
#[inline]
pub fn rps_scale(hash: u32, n: u32) -> u32 {
    ((u64::from(hash) * u64::from(n)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_ids_index_tables() {
        assert_eq!(QueueId(7).index(), 7);
        assert_eq!(QueueId::from(3u16), QueueId(3));
        assert_eq!(u16::from(QueueId(9)), 9);
        assert_eq!(QueueId::all(3).collect::<Vec<_>>(), [QueueId(0), QueueId(1), QueueId(2)]);
        assert_eq!(QueueId::all(0).len(), 0);
    }

    #[test]
    fn round_robin_and_low_bits() {
        let r = Reta::round_robin(128, 4).unwrap();
        assert_eq!(r.len(), 128);
        assert_eq!(r.queue_count(), 4);
        // v4-1 4-tuple hash 0x51ccc178 -> index 120 (rxtxcpu output "idx: 120").
        assert_eq!(r.index_for(0x51ccc178), 120);
        assert_eq!(r.queue_for(0x51ccc178), QueueId(0));
        assert_eq!(r.index_for(0xc626b0ea), 106);
        assert_eq!(r.index_for(0x5c2b394a), 74);
    }

    #[test]
    fn bad_tables_are_errors() {
        assert_eq!(Reta::round_robin(100, 4), Err(RetaError::NotPowerOfTwo { size: 100 }));
        assert_eq!(Reta::round_robin(0, 4), Err(RetaError::Empty));
        assert_eq!(Reta::round_robin(1 << 17, 4), Err(RetaError::TooLarge { size: 1 << 17 }));
        assert_eq!(Reta::round_robin(128, 0), Err(RetaError::NoQueues));
        assert!(Reta::from_entries(&[0, 1, 2]).is_err());
        assert!(Reta::from_entries(&[0, 70000]).is_err());
    }

    #[test]
    fn rps_scale_matches_linux_selftest_values() {
        // toeplitz-vectors.md "RPS CPU for n=4".
        assert_eq!(rps_scale(0x51ccc178, 4), 1);
        assert_eq!(rps_scale(0xc626b0ea, 4), 3);
        assert_eq!(rps_scale(0x10e828a2, 4), 0);
        assert_eq!(rps_scale(0xafc7327f, 4), 2);
    }
}
