//! flowsteer-plan: tools around an RSS configuration, off the packet path.
//!
//! * [`plan`]: the GF(2) tuple planner: addresses and ports that land on
//!   chosen queues under a given key and RETA (`flowsteer plan`, and the
//!   UDP client's flow spreading).
//! * [`ethtool`]: the reader of a NIC's RSS configuration as `ethtool -x`
//!   prints it (text or `--json`), so a key and RETA can be taken from a
//!   real device.
//! * [`export`]: the writer: a configuration as the `ethtool -X`,
//!   `ethtool -N` and RPS/RFS sysfs commands that put it on an interface
//!   (`flowsteer export`).
//!
//! All three are pure: no I/O, no threads, no clock; errors are typed.
#![forbid(unsafe_code)]

pub mod ethtool;
pub mod export;
pub mod plan;
