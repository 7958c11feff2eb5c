//! flowsteer-plan: tools around an RSS configuration, off the packet path.
//!
//! * [`plan`]: the GF(2) tuple planner: addresses and ports that land on
//!   chosen queues under a given key and RETA (`flowsteer plan`, and the
//!   UDP client's flow spreading).
//! * [`ethtool`]: the reader of a NIC's RSS configuration as `ethtool -x`
//!   prints it (text or `--json`), so a key and RETA can be taken from a
//!   real device.
//!
//! Both are pure: no I/O, no threads, no clock; errors are typed.
#![forbid(unsafe_code)]

pub mod ethtool;
pub mod plan;
