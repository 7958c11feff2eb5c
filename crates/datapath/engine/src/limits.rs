//! The engine's defaults and bounds.

/// Default capacity of each hand-off queue (descriptors).
pub const DEFAULT_RING_CAPACITY: usize = 1024;
/// Default burst (frames per receive poll, descriptors per queue pop).
pub const DEFAULT_BURST: usize = 32;
/// Default software bucket count (FreeBSD: RSS buckets; a 128-entry RETA).
pub const DEFAULT_BUCKETS: usize = 128;
/// Most receive queues.
pub const MAX_RX_QUEUES: usize = 1024;
