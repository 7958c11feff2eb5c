//! Which fields are hashed for which protocol (NDIS hash types / FreeBSD
//! `RSS_HASHTYPE_*` / ethtool `rx-flow-hash`).
//!
//! Defaults follow the Intel drivers and FreeBSD: TCP on the 4-tuple, UDP on
//! the 2-tuple, other IP on the 2-tuple. Fragments (including the first one,
//! which carries the ports) always use the 2-tuple, as the Microsoft
//! specification requires, so that every fragment of a datagram lands on the
//! same queue. A packet no enabled type matches is not hashed; a NIC then
//! reports hash 0 and delivers it through RETA entry 0.

use flowsteer_wire::{proto, FlowTuple};
use std::fmt;
use std::net::IpAddr;

/// Longest hash input: IPv6 source + destination + two ports.
pub const MAX_INPUT_LEN: usize = 36;

/// A set of enabled hash types.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashTypes {
    bits: u8,
    /// Hash every fragment on the 2-tuple (the Microsoft rule). Default true.
    pub fragments_on_2tuple: bool,
}

/// Why [`HashTypes::parse`] refused a list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HashTypeError {
    /// A word that names no hash type.
    #[error("unknown hash type '{0}' (expected ipv4, tcp4, udp4, ipv6, tcp6, udp6, default, all or l3)")]
    Unknown(String),
    /// No word at all.
    #[error("empty hash type list")]
    Empty,
}

impl HashTypes {
    pub const IPV4: u8 = 1 << 0;
    pub const TCP_IPV4: u8 = 1 << 1;
    pub const UDP_IPV4: u8 = 1 << 2;
    pub const IPV6: u8 = 1 << 3;
    pub const TCP_IPV6: u8 = 1 << 4;
    pub const UDP_IPV6: u8 = 1 << 5;
    const NAMES: [(u8, &'static str); 6] = [
        (Self::IPV4, "ipv4"),
        (Self::TCP_IPV4, "tcp4"),
        (Self::UDP_IPV4, "udp4"),
        (Self::IPV6, "ipv6"),
        (Self::TCP_IPV6, "tcp6"),
        (Self::UDP_IPV6, "udp6"),
    ];

    pub const fn from_bits(bits: u8) -> HashTypes {
        HashTypes { bits: bits & 0x3f, fragments_on_2tuple: true }
    }

    pub fn bits(self) -> u8 {
        self.bits
    }

    pub fn contains(self, bit: u8) -> bool {
        self.bits & bit == bit
    }

    /// Parse a comma list of `ipv4,tcp4,udp4,ipv6,tcp6,udp6`, or one of
    /// `default`, `all` (UDP on the 4-tuple too), `l3` (addresses only).
    pub fn parse(text: &str) -> Result<HashTypes, HashTypeError> {
        let mut bits = 0;
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            bits |= match word.to_ascii_lowercase().as_str() {
                "default" => HashTypes::default().bits,
                "all" => 0x3f,
                "l3" | "2tuple" => Self::IPV4 | Self::IPV6,
                w => match Self::NAMES.iter().find(|(_, n)| *n == w) {
                    Some((b, _)) => *b,
                    None => return Err(HashTypeError::Unknown(word.to_string())),
                },
            };
        }
        if bits == 0 {
            return Err(HashTypeError::Empty);
        }
        Ok(HashTypes::from_bits(bits))
    }

    /// Which fields this packet is hashed on.
    #[inline]
    pub fn fields_for(self, tuple: &FlowTuple, is_fragment: bool) -> Fields {
        let (l3, tcp, udp) = match (tuple.src, tuple.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (Self::IPV4, Self::TCP_IPV4, Self::UDP_IPV4),
            (IpAddr::V6(_), IpAddr::V6(_)) => (Self::IPV6, Self::TCP_IPV6, Self::UDP_IPV6),
            _ => return Fields::None,
        };
        let l4_bit = match tuple.proto {
            proto::TCP => Some(tcp),
            proto::UDP => Some(udp),
            _ => None,
        };
        let l4_allowed = !(is_fragment && self.fragments_on_2tuple);
        match l4_bit {
            Some(bit) if l4_allowed && tuple.ports.is_some() && self.contains(bit) => Fields::FourTuple,
            _ if self.contains(l3) => Fields::TwoTuple,
            _ => Fields::None,
        }
    }

    /// The hash input for this packet under these types.
    #[inline]
    pub fn input_for(self, tuple: &FlowTuple, is_fragment: bool) -> HashInput {
        match self.fields_for(tuple, is_fragment) {
            Fields::None => HashInput::none(),
            Fields::TwoTuple => HashInput::build(tuple.src, tuple.dst, None),
            Fields::FourTuple => HashInput::build(tuple.src, tuple.dst, tuple.ports),
        }
    }
}

impl Default for HashTypes {
    fn default() -> Self {
        HashTypes::from_bits(Self::IPV4 | Self::TCP_IPV4 | Self::IPV6 | Self::TCP_IPV6)
    }
}

impl fmt::Display for HashTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Self::NAMES.iter().filter(|(b, _)| self.contains(*b)).map(|(_, n)| *n).collect();
        write!(f, "{}", names.join(","))
    }
}

impl fmt::Debug for HashTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HashTypes({self}, fragments_on_2tuple={})", self.fragments_on_2tuple)
    }
}

/// The fields a hash covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fields {
    /// Not hashed (no enabled type matches): hash 0.
    None,
    /// Source and destination address.
    TwoTuple,
    /// Addresses and ports.
    FourTuple,
}

impl Fields {
    pub fn name(self) -> &'static str {
        match self {
            Fields::None => "none",
            Fields::TwoTuple => "2-tuple",
            Fields::FourTuple => "4-tuple",
        }
    }
}

/// The bytes the Toeplitz hash runs over, in wire order.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashInput {
    buf: [u8; MAX_INPUT_LEN],
    len: u8,
    fields: Fields,
}

impl fmt::Debug for HashInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HashInput({:?}, ", self.fields)?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl HashInput {
    /// The empty input of an unhashed packet.
    pub const fn none() -> HashInput {
        HashInput { buf: [0; MAX_INPUT_LEN], len: 0, fields: Fields::None }
    }

    /// `src ‖ dst [‖ sport ‖ dport]`. Mixed address families give
    /// [`HashInput::none`].
    pub fn build(src: IpAddr, dst: IpAddr, ports: Option<(u16, u16)>) -> HashInput {
        let mut buf = [0u8; MAX_INPUT_LEN];
        let addr_len = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                buf[..4].copy_from_slice(&s.octets());
                buf[4..8].copy_from_slice(&d.octets());
                8
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                buf[..16].copy_from_slice(&s.octets());
                buf[16..32].copy_from_slice(&d.octets());
                32
            }
            _ => return HashInput::none(),
        };
        let (len, fields) = match ports {
            Some((sp, dp)) => {
                buf[addr_len..addr_len + 2].copy_from_slice(&sp.to_be_bytes());
                buf[addr_len + 2..addr_len + 4].copy_from_slice(&dp.to_be_bytes());
                (addr_len + 4, Fields::FourTuple)
            }
            None => (addr_len, Fields::TwoTuple),
        };
        HashInput { buf, len: len as u8, fields }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    pub fn fields(&self) -> Fields {
        self.fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(src: &str, dst: &str, proto: u8, ports: Option<(u16, u16)>) -> FlowTuple {
        FlowTuple { src: src.parse().unwrap(), dst: dst.parse().unwrap(), proto, ports }
    }

    #[test]
    fn defaults_hash_tcp_on_four_udp_on_two() {
        let ht = HashTypes::default();
        let tcp = t("1.2.3.4", "5.6.7.8", proto::TCP, Some((1, 2)));
        let udp = t("1.2.3.4", "5.6.7.8", proto::UDP, Some((1, 2)));
        let icmp = t("::1", "::2", proto::ICMPV6, None);
        assert_eq!(ht.fields_for(&tcp, false), Fields::FourTuple);
        assert_eq!(ht.fields_for(&udp, false), Fields::TwoTuple);
        assert_eq!(ht.fields_for(&icmp, false), Fields::TwoTuple);
        // Fragments: 2-tuple even when the first fragment carries ports.
        assert_eq!(ht.fields_for(&tcp, true), Fields::TwoTuple);
        let mut loose = ht;
        loose.fragments_on_2tuple = false;
        assert_eq!(loose.fields_for(&tcp, true), Fields::FourTuple);
    }

    #[test]
    fn parse_lists_and_errors() {
        let all = HashTypes::parse("all").unwrap();
        assert_eq!(all.bits(), 0x3f);
        assert_eq!(HashTypes::parse("tcp4, udp4").unwrap().to_string(), "tcp4,udp4");
        assert!(HashTypes::parse("sctp4").is_err());
        assert!(HashTypes::parse("").is_err());
        // No matching type: not hashed.
        let only_tcp = HashTypes::parse("tcp4").unwrap();
        assert_eq!(only_tcp.fields_for(&t("1.2.3.4", "5.6.7.8", proto::UDP, Some((1, 2))), false), Fields::None);
    }

    #[test]
    fn input_bytes_are_wire_order() {
        let i =
            HashInput::build("66.9.149.187".parse().unwrap(), "161.142.100.80".parse().unwrap(), Some((2794, 1766)));
        assert_eq!(i.as_bytes(), &[0x42, 0x09, 0x95, 0xbb, 0xa1, 0x8e, 0x64, 0x50, 0x0a, 0xea, 0x06, 0xe6]);
        let mixed = HashInput::build("1.2.3.4".parse().unwrap(), "::1".parse().unwrap(), None);
        assert_eq!(mixed.fields(), Fields::None);
        assert!(mixed.as_bytes().is_empty());
    }
}
