//! flowsteer-prim: the small primitives several flowsteer crates share, kept
//! in one place so that there is one implementation of each, tested once.
//!
//! * [`splitmix`]: [`SplitMix64`], the deterministic generator behind every
//!   seeded sample, traffic stream and test key set, and its finaliser
//!   [`mix64`].
//! * [`siphash`]: keyed SipHash (Aumasson & Bernstein), the hash of the
//!   tables that hostile traffic fills (the per-core flow table, the
//!   reassembly table): [`SipKey`] and the word-shaped SipHash-1-3
//!   [`sip13`].
//!
//! A leaf crate: no flowsteer dependencies, no `unsafe`, no panics on any
//! input; `getrandom` is its only dependency (for [`SipKey::random`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod siphash;
pub mod splitmix;

pub use siphash::{sip13, SipKey};
pub use splitmix::{mix64, SplitMix64};
