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
//! * [`prefetch`]: a cache prefetch hint, for lookups that fetch a burst's
//!   lines before they need them.
//!
//! A leaf crate: no flowsteer dependencies, no panics on any input;
//! `getrandom` is its only dependency (for [`SipKey::random`]). Its one
//! `unsafe` call, the prefetch instruction, is in `sys`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod siphash;
pub mod splitmix;
#[allow(unsafe_code)]
mod sys;

pub use siphash::{sip13, SipKey};
pub use splitmix::{mix64, SplitMix64};
pub use sys::{prefetch, prefetch_at};
