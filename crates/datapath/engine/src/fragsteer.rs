//! Where the engine reassembles IP fragments.

use crate::error::EngineError;

/// What the engine does with IP fragments (fragment-safe steering). A NIC hashes a
/// fragment on its address pair only (a non-first fragment has no ports),
/// so a UDP flow's fragments and its whole datagrams land on different
/// cores; the policies differ in where the fragments are reassembled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragSteer {
    /// Steer each fragment on its own (2-tuple hash); no reassembly.
    Off,
    /// Reassemble on the receiving core before steering, then steer the
    /// datagram by its own hash. In order with one receive queue; costs the
    /// receive core the reassembly work.
    Local,
    /// FreeBSD's way: a fragment goes (with its bytes) to the worker its
    /// 2-tuple hash selects, is reassembled there, and the datagram is
    /// re-hashed with the configured hash types and re-injected to its
    /// owner when that differs (`reinjected`). The extra hop lets a flow's
    /// later small datagrams overtake a reassembled one: reordering.
    Rehash,
    /// Beyond FreeBSD: the first fragment's ports pick the flow's owner and
    /// the datagram id is remembered, so every fragment goes to the owner,
    /// behind the flow's earlier packets, and is reassembled there; earlier
    /// fragments wait in a bounded holding area ([`crate::fraghold`]).
    /// Keeps a mixed-size flow in order.
    Owner,
}

impl FragSteer {
    pub fn parse(s: &str) -> Result<FragSteer, EngineError> {
        match s {
            "off" => Ok(FragSteer::Off),
            "local" => Ok(FragSteer::Local),
            "rehash" => Ok(FragSteer::Rehash),
            "owner" => Ok(FragSteer::Owner),
            _ => Err(EngineError::UnknownFragSteer(s.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FragSteer::Off => "off",
            FragSteer::Local => "local",
            FragSteer::Rehash => "rehash",
            FragSteer::Owner => "owner",
        }
    }

    /// Fragments travel to a worker with their bytes.
    pub fn carries_bytes(self) -> bool {
        matches!(self, FragSteer::Rehash | FragSteer::Owner)
    }
}
