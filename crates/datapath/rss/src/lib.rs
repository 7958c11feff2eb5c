//! flowsteer-rss: receive side scaling in software.
//!
//! Stage 2 of the packet's path (source -> parse -> **hash** -> steer -> ...):
//! the Toeplitz hash ([`toeplitz`]), the keys ([`key`]), which fields are
//! hashed for which protocol ([`hashtype`]), the indirection table and the
//! queue -> CPU map ([`reta`]), the whole configuration ([`config`]) and key
//! quality checks ([`quality`]); the GF(2) tuple planner and the `ethtool -x`
//! reader are in `flowsteer-plan`. Pure: no threads, clocks or sockets.

pub mod config;
pub mod hashtype;
pub mod key;
pub mod quality;
pub mod reta;
mod simd;
pub mod toeplitz;

pub use config::{Placement, RssConfig};
pub use hashtype::{Fields, HashInput, HashTypeError, HashTypes};
pub use key::{KeyKind, RssKey, PUBLIC_KEY_WARNING};
pub use reta::{CoreId, Mapping, QueueId, Reta};
pub use toeplitz::{reference, Impl, Toeplitz};
