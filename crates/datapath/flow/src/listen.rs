//! Per-bucket listeners (FreeBSD's `IP_RSS_LISTEN_BUCKET`).
//!
//! A listener is bound to `(protocol, port)` either for one RSS bucket or,
//! with `bucket = None`, as the wildcard for every bucket this core serves.
//! A lookup prefers the listener bound to the packet's exact bucket and
//! falls back to the wildcard. Two listeners on the same `(proto, port,
//! bucket)` are refused ([`BindError::AddrInUse`]), like `bind(2)` without
//! `SO_REUSEPORT`. Binding is control-plane work; the map grows with the
//! number of binds (at most 65 536 ports x (buckets + 1) per protocol).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

/// Why a bind failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// A listener is already bound to this `(proto, port, bucket)`.
    AddrInUse { proto: u8, port: u16, bucket: Option<u16> },
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::AddrInUse { proto, port, bucket: Some(b) } => {
                write!(f, "protocol {proto} port {port} bucket {b} already has a listener")
            }
            BindError::AddrInUse { proto, port, bucket: None } => {
                write!(f, "protocol {proto} port {port} already has a wildcard listener")
            }
        }
    }
}

impl std::error::Error for BindError {}

/// One core's listeners; see the module documentation. `Send`, not `Sync`.
pub struct Listeners<L> {
    map: HashMap<(u8, u16, Option<u16>), L>,
    _not_sync: PhantomData<Cell<()>>,
}

impl<L> Default for Listeners<L> {
    fn default() -> Self {
        Listeners { map: HashMap::new(), _not_sync: PhantomData }
    }
}

impl<L> fmt::Debug for Listeners<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listeners").field("bound", &self.map.len()).finish()
    }
}

impl<L> Listeners<L> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bind `listener` to `(proto, port)` for `bucket`, or for every bucket
    /// of this core when `bucket` is `None`.
    pub fn bind(&mut self, proto: u8, port: u16, bucket: Option<u16>, listener: L) -> Result<(), BindError> {
        match self.map.entry((proto, port, bucket)) {
            std::collections::hash_map::Entry::Occupied(_) => Err(BindError::AddrInUse { proto, port, bucket }),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(listener);
                Ok(())
            }
        }
    }

    /// Remove and return the listener bound to exactly `(proto, port, bucket)`.
    pub fn unbind(&mut self, proto: u8, port: u16, bucket: Option<u16>) -> Option<L> {
        self.map.remove(&(proto, port, bucket))
    }

    /// The listener for a packet to `dport` that hashed to `bucket`: the one
    /// bound to that bucket, else the wildcard, else none.
    pub fn lookup(&self, proto: u8, dport: u16, bucket: u16) -> Option<&L> {
        self.map.get(&(proto, dport, Some(bucket))).or_else(|| self.map.get(&(proto, dport, None)))
    }

    /// Bound listeners (wildcards included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bucket_beats_wildcard() {
        let mut l = Listeners::new();
        l.bind(17, 53, None, "any").unwrap();
        l.bind(17, 53, Some(3), "third").unwrap();
        assert_eq!(l.lookup(17, 53, 3), Some(&"third"));
        assert_eq!(l.lookup(17, 53, 4), Some(&"any"));
        assert_eq!(l.lookup(6, 53, 3), None, "protocol matters");
        assert_eq!(l.lookup(17, 54, 3), None, "port matters");
        assert_eq!(l.unbind(17, 53, None), Some("any"));
        assert_eq!(l.lookup(17, 53, 4), None);
        assert_eq!(l.lookup(17, 53, 3), Some(&"third"));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn double_bind_is_refused() {
        let mut l = Listeners::new();
        l.bind(6, 80, Some(1), 1).unwrap();
        assert_eq!(l.bind(6, 80, Some(1), 2), Err(BindError::AddrInUse { proto: 6, port: 80, bucket: Some(1) }));
        l.bind(6, 80, None, 3).unwrap();
        assert!(l.bind(6, 80, None, 4).is_err());
        assert_eq!(l.lookup(6, 80, 1), Some(&1));
        assert_eq!(l.lookup(6, 80, 0), Some(&3));
    }
}
