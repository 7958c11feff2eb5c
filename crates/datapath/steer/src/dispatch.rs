//! FreeBSD netisr dispatch policies: where the steering decision is carried out.

use crate::{SteerError, WorkerId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Process in the receiving thread, always (netisr `direct`): no hand-off,
    /// no steering; the packet's worker is the receive queue's core.
    Direct,
    /// Always queue to the owning worker, even when it is this core
    /// (netisr `deferred`).
    Deferred,
    /// Process inline when the owner is this core, else queue (netisr `hybrid`).
    Hybrid,
}

impl Dispatch {
    pub fn parse(s: &str) -> Result<Dispatch, SteerError> {
        match s {
            "direct" => Ok(Dispatch::Direct),
            "deferred" => Ok(Dispatch::Deferred),
            "hybrid" => Ok(Dispatch::Hybrid),
            _ => Err(SteerError::UnknownDispatch(s.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dispatch::Direct => "direct",
            Dispatch::Deferred => "deferred",
            Dispatch::Hybrid => "hybrid",
        }
    }

    /// Does this policy steer at all (compute a target worker)?
    pub fn steers(self) -> bool {
        self != Dispatch::Direct
    }
}

/// What to do with one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Process now in this thread; counted as Disp'd (direct) or HDisp'd (hybrid).
    Inline,
    /// Queue to this worker.
    Queue(WorkerId),
}

#[inline]
pub fn decide(policy: Dispatch, own: WorkerId, target: WorkerId) -> Action {
    match policy {
        Dispatch::Direct => Action::Inline,
        Dispatch::Deferred => Action::Queue(target),
        Dispatch::Hybrid if target == own => Action::Inline,
        Dispatch::Hybrid => Action::Queue(target),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let (a, b) = (WorkerId(0), WorkerId(1));
        assert_eq!(decide(Dispatch::Direct, a, b), Action::Inline);
        assert_eq!(decide(Dispatch::Deferred, a, a), Action::Queue(a));
        assert_eq!(decide(Dispatch::Hybrid, a, a), Action::Inline);
        assert_eq!(decide(Dispatch::Hybrid, a, b), Action::Queue(b));
        let e = Dispatch::parse("lazy").unwrap_err();
        assert_eq!(e.to_string(), "unknown dispatch policy 'lazy' (expected direct, deferred or hybrid)");
    }
}
