//! The atomics the ring uses: `std`'s, or loom's when model-checking
//! (`RUSTFLAGS="--cfg loom" cargo test -p flowsteer-ring --release --test loom`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
