//! Protocol numbers used by the hash types.

/// ICMP (IPv4).
pub const ICMP: u8 = 1;
/// IPv4 encapsulated in IP (IP-in-IP).
pub const IPIP: u8 = 4;
/// TCP.
pub const TCP: u8 = 6;
/// UDP.
pub const UDP: u8 = 17;
/// IPv6 encapsulated in IP (6in4 / IPv6-in-IPv6).
pub const IPV6: u8 = 41;
/// GRE.
pub const GRE: u8 = 47;
/// ESP (IPsec); the IPv6 extension walk stops here.
pub const ESP: u8 = 50;
/// ICMPv6.
pub const ICMPV6: u8 = 58;
/// SCTP.
pub const SCTP: u8 = 132;
