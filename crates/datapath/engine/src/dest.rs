//! Which destinations the built-in application listens to, decided as a
//! host's stack decides it before any socket is looked up.
//!
//! Linux classifies every received frame by its destination MAC
//! (`eth_type_trans`): to this interface (`PACKET_HOST`), to another host
//! (`PACKET_OTHERHOST`, seen only in promiscuous mode and dropped by IP),
//! broadcast, or multicast. A UDP socket bound to a port then gets
//! broadcast only when the destination address is a broadcast one and
//! multicast only for groups it joined. A packet steering engine that
//! listens on ports takes none of these by default: unicast to this host
//! only; `--listen-dst` adds the others. A frame refused here is counted
//! under its class: `dst_other_host`, `dst_broadcast`, `dst_multicast`.

use crate::drops::DropReason;
use std::net::IpAddr;

/// What the listener takes besides unicast to this host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DestFilter {
    /// The receiving interface's MAC. Unicast frames to another MAC are
    /// another host's; `None` (the generator, a capture) takes every
    /// unicast frame.
    pub host_mac: Option<[u8; 6]>,
    /// Unicast frames to other MACs (a promiscuous listener).
    pub other_host: bool,
    /// The broadcast MAC, or IPv4's limited broadcast 255.255.255.255.
    pub broadcast: bool,
    /// A group MAC other than broadcast, or an IPv4 (224.0.0.0/4) or IPv6
    /// (ff00::/8) multicast address.
    pub multicast: bool,
}

impl DestFilter {
    /// Every destination: what a tap or a promiscuous sniffer takes.
    pub const ALL: DestFilter = DestFilter { host_mac: None, other_host: true, broadcast: true, multicast: true };

    /// The drop reason for a frame with destination MAC `dst`, or `None`
    /// when the listener takes it.
    #[inline]
    pub fn check_mac(&self, dst: [u8; 6]) -> Option<DropReason> {
        if dst[0] & 1 == 0 {
            match self.host_mac {
                Some(mac) if mac != dst && !self.other_host => Some(DropReason::DstOtherHost),
                _ => None,
            }
        } else if dst == [0xff; 6] {
            (!self.broadcast).then_some(DropReason::DstBroadcast)
        } else {
            (!self.multicast).then_some(DropReason::DstMulticast)
        }
    }

    /// The drop reason for a packet to IP address `dst` (in a frame whose
    /// MAC passed), or `None` when the listener takes it.
    #[inline]
    pub fn check_ip(&self, dst: IpAddr) -> Option<DropReason> {
        match dst {
            IpAddr::V4(a) if a.is_broadcast() => (!self.broadcast).then_some(DropReason::DstBroadcast),
            IpAddr::V4(a) if a.is_multicast() => (!self.multicast).then_some(DropReason::DstMulticast),
            IpAddr::V6(a) if a.is_multicast() => (!self.multicast).then_some(DropReason::DstMulticast),
            _ => None,
        }
    }

    /// The names of what is taken besides unicast to this host, for the
    /// run's header: `unicast` alone by default.
    pub fn describe(&self) -> String {
        let mut s = String::from(if self.host_mac.is_some() { "unicast to this host" } else { "unicast" });
        for (on, what) in
            [(self.other_host, "other hosts"), (self.broadcast, "broadcast"), (self.multicast, "multicast")]
        {
            if on {
                s += ", ";
                s += what;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const ME: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
    const OTHER: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
    const BCAST: [u8; 6] = [0xff; 6];
    const MCAST: [u8; 6] = [0x01, 0x00, 0x5e, 0, 0, 0xfb];

    #[test]
    fn by_default_only_unicast_to_this_host() {
        let f = DestFilter { host_mac: Some(ME), ..DestFilter::default() };
        assert_eq!(f.check_mac(ME), None);
        assert_eq!(f.check_mac(OTHER), Some(DropReason::DstOtherHost));
        assert_eq!(f.check_mac(BCAST), Some(DropReason::DstBroadcast));
        assert_eq!(f.check_mac(MCAST), Some(DropReason::DstMulticast));
        assert_eq!(f.check_ip(Ipv4Addr::BROADCAST.into()), Some(DropReason::DstBroadcast));
        assert_eq!(f.check_ip(Ipv4Addr::new(224, 0, 0, 251).into()), Some(DropReason::DstMulticast));
        assert_eq!(f.check_ip("ff02::fb".parse::<Ipv6Addr>().unwrap().into()), Some(DropReason::DstMulticast));
        assert_eq!(f.check_ip(Ipv4Addr::new(10, 0, 0, 1).into()), None);
        assert_eq!(f.describe(), "unicast to this host");
    }

    #[test]
    fn without_a_mac_every_unicast_is_taken() {
        let f = DestFilter::default();
        assert_eq!(f.check_mac(OTHER), None);
        assert_eq!(f.describe(), "unicast");
    }

    #[test]
    fn each_class_is_opened_on_its_own() {
        let f = DestFilter { host_mac: Some(ME), broadcast: true, ..DestFilter::default() };
        assert_eq!(f.check_mac(BCAST), None);
        assert_eq!(f.check_ip(Ipv4Addr::BROADCAST.into()), None);
        assert_eq!(f.check_mac(MCAST), Some(DropReason::DstMulticast));
        assert_eq!(f.check_mac(OTHER), Some(DropReason::DstOtherHost));
        let f = DestFilter { host_mac: Some(ME), multicast: true, other_host: true, ..DestFilter::default() };
        assert_eq!(
            (f.check_mac(MCAST), f.check_mac(OTHER), f.check_mac(BCAST)),
            (None, None, Some(DropReason::DstBroadcast))
        );
        assert_eq!(f.describe(), "unicast to this host, other hosts, multicast");
        let all = DestFilter::ALL;
        assert!([ME, OTHER, BCAST, MCAST].iter().all(|m| all.check_mac(*m).is_none()));
    }
}
