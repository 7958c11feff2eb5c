//! The parse error type.

use std::fmt;

/// The protocol layer an error refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// 802.1Q / 802.1ad tag.
    Vlan,
    /// PPPoE session header (incl. the PPP protocol field).
    Pppoe,
    /// IPv4 header.
    Ipv4,
    /// IPv6 fixed header.
    Ipv6,
    /// IPv6 extension header.
    Ipv6Ext,
    /// UDP header.
    Udp,
    /// TCP header.
    Tcp,
    /// GRE header.
    Gre,
    /// VXLAN header.
    Vxlan,
    /// Linux cooked capture header (SLL or SLL2).
    LinuxSll,
    /// BSD loopback header (link types NULL and LOOP).
    Loopback,
    /// Geneve header with its options.
    Geneve,
    /// GTP-U header with its extension headers.
    GtpU,
}

impl Layer {
    /// Every layer, in [`Layer::index`] order.
    pub const ALL: [Layer; 14] = [
        Layer::Ethernet,
        Layer::Vlan,
        Layer::Pppoe,
        Layer::Ipv4,
        Layer::Ipv6,
        Layer::Ipv6Ext,
        Layer::Udp,
        Layer::Tcp,
        Layer::Gre,
        Layer::Vxlan,
        Layer::LinuxSll,
        Layer::Loopback,
        Layer::Geneve,
        Layer::GtpU,
    ];

    /// Number of layers.
    pub const COUNT: usize = Self::ALL.len();

    /// Position in [`Layer::ALL`] (a fixed counter slot).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name ("ethernet", "ipv6_ext", "linux_sll", ...).
    pub fn name(&self) -> &'static str {
        match self {
            Layer::Ethernet => "ethernet",
            Layer::Vlan => "vlan",
            Layer::Pppoe => "pppoe",
            Layer::Ipv4 => "ipv4",
            Layer::Ipv6 => "ipv6",
            Layer::Ipv6Ext => "ipv6_ext",
            Layer::Udp => "udp",
            Layer::Tcp => "tcp",
            Layer::Gre => "gre",
            Layer::Vxlan => "vxlan",
            Layer::LinuxSll => "linux_sll",
            Layer::Loopback => "loopback",
            Layer::Geneve => "geneve",
            Layer::GtpU => "gtpu",
        }
    }

    fn display(&self) -> &'static str {
        match self {
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "VLAN",
            Layer::Pppoe => "PPPoE",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Ipv6Ext => "IPv6 extension",
            Layer::Udp => "UDP",
            Layer::Tcp => "TCP",
            Layer::Gre => "GRE",
            Layer::Vxlan => "VXLAN",
            Layer::LinuxSll => "Linux SLL",
            Layer::Loopback => "loopback",
            Layer::Geneve => "Geneve",
            Layer::GtpU => "GTP-U",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display())
    }
}

/// Why a frame could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseError {
    /// The buffer ends inside a header of `layer`.
    Truncated {
        /// The header that is cut short.
        layer: Layer,
    },
    /// IP version nibble not 4 / 6 (or not the one the ethertype / tunnel
    /// announced), PPPoE version/type not 1/1, GRE version not 0.
    BadVersion,
    /// A header length field is impossible: IPv4 IHL < 5, TCP data offset < 5,
    /// GRE with the routing bit, PPPoE length < 2.
    BadHeaderLen {
        /// The header whose length field is wrong.
        layer: Layer,
    },
    /// IPv4 total length smaller than the header, or an IPv6 extension header
    /// extending past the payload length.
    BadTotalLen,
    /// More than [`crate::MAX_VLAN_DEPTH`] VLAN tags.
    TooManyVlans,
    /// More than [`crate::MAX_IPV6_EXT_HEADERS`] IPv6 extension headers.
    ExtChainTooLong,
    /// IPv6 extension chain out of order: Hop-by-Hop not first, or two
    /// Fragment headers.
    BadExtHeader,
    /// A pcap link type this crate does not parse.
    UnsupportedLinkType,
}

impl ParseError {
    /// Number of distinct errors: one counter slot each ([`ParseError::index`]).
    pub const COUNT: usize = 2 * Layer::COUNT + 6;

    /// Every error, in [`ParseError::index`] order: `Truncated` for each
    /// layer, `BadHeaderLen` for each layer, then the layer-less ones.
    pub const ALL: [ParseError; ParseError::COUNT] = [
        ParseError::Truncated { layer: Layer::Ethernet },
        ParseError::Truncated { layer: Layer::Vlan },
        ParseError::Truncated { layer: Layer::Pppoe },
        ParseError::Truncated { layer: Layer::Ipv4 },
        ParseError::Truncated { layer: Layer::Ipv6 },
        ParseError::Truncated { layer: Layer::Ipv6Ext },
        ParseError::Truncated { layer: Layer::Udp },
        ParseError::Truncated { layer: Layer::Tcp },
        ParseError::Truncated { layer: Layer::Gre },
        ParseError::Truncated { layer: Layer::Vxlan },
        ParseError::Truncated { layer: Layer::LinuxSll },
        ParseError::Truncated { layer: Layer::Loopback },
        ParseError::Truncated { layer: Layer::Geneve },
        ParseError::Truncated { layer: Layer::GtpU },
        ParseError::BadHeaderLen { layer: Layer::Ethernet },
        ParseError::BadHeaderLen { layer: Layer::Vlan },
        ParseError::BadHeaderLen { layer: Layer::Pppoe },
        ParseError::BadHeaderLen { layer: Layer::Ipv4 },
        ParseError::BadHeaderLen { layer: Layer::Ipv6 },
        ParseError::BadHeaderLen { layer: Layer::Ipv6Ext },
        ParseError::BadHeaderLen { layer: Layer::Udp },
        ParseError::BadHeaderLen { layer: Layer::Tcp },
        ParseError::BadHeaderLen { layer: Layer::Gre },
        ParseError::BadHeaderLen { layer: Layer::Vxlan },
        ParseError::BadHeaderLen { layer: Layer::LinuxSll },
        ParseError::BadHeaderLen { layer: Layer::Loopback },
        ParseError::BadHeaderLen { layer: Layer::Geneve },
        ParseError::BadHeaderLen { layer: Layer::GtpU },
        ParseError::BadVersion,
        ParseError::BadTotalLen,
        ParseError::TooManyVlans,
        ParseError::ExtChainTooLong,
        ParseError::BadExtHeader,
        ParseError::UnsupportedLinkType,
    ];

    /// A fixed slot in `0..ParseError::COUNT`, for counting errors in an
    /// array (the slot's name is [`ParseError::reason`] of
    /// `ParseError::ALL[slot]`).
    pub const fn index(self) -> usize {
        match self {
            ParseError::Truncated { layer } => layer.index(),
            // At most 2 * Layer::COUNT: cannot wrap.
            ParseError::BadHeaderLen { layer } => Layer::COUNT.wrapping_add(layer.index()),
            ParseError::BadVersion => 2 * Layer::COUNT,
            ParseError::BadTotalLen => 2 * Layer::COUNT + 1,
            ParseError::TooManyVlans => 2 * Layer::COUNT + 2,
            ParseError::ExtChainTooLong => 2 * Layer::COUNT + 3,
            ParseError::BadExtHeader => 2 * Layer::COUNT + 4,
            ParseError::UnsupportedLinkType => 2 * Layer::COUNT + 5,
        }
    }

    /// Stable snake_case counter name: "truncated_ipv4", "bad_version",
    /// "bad_header_len_tcp", "bad_total_len", "too_many_vlans",
    /// "ext_chain_too_long", "bad_ext_header", "unsupported_link_type".
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::Truncated { layer } => match layer {
                Layer::Ethernet => "truncated_ethernet",
                Layer::Vlan => "truncated_vlan",
                Layer::Pppoe => "truncated_pppoe",
                Layer::Ipv4 => "truncated_ipv4",
                Layer::Ipv6 => "truncated_ipv6",
                Layer::Ipv6Ext => "truncated_ipv6_ext",
                Layer::Udp => "truncated_udp",
                Layer::Tcp => "truncated_tcp",
                Layer::Gre => "truncated_gre",
                Layer::Vxlan => "truncated_vxlan",
                Layer::LinuxSll => "truncated_linux_sll",
                Layer::Loopback => "truncated_loopback",
                Layer::Geneve => "truncated_geneve",
                Layer::GtpU => "truncated_gtpu",
            },
            ParseError::BadHeaderLen { layer } => match layer {
                Layer::Ethernet => "bad_header_len_ethernet",
                Layer::Vlan => "bad_header_len_vlan",
                Layer::Pppoe => "bad_header_len_pppoe",
                Layer::Ipv4 => "bad_header_len_ipv4",
                Layer::Ipv6 => "bad_header_len_ipv6",
                Layer::Ipv6Ext => "bad_header_len_ipv6_ext",
                Layer::Udp => "bad_header_len_udp",
                Layer::Tcp => "bad_header_len_tcp",
                Layer::Gre => "bad_header_len_gre",
                Layer::Vxlan => "bad_header_len_vxlan",
                Layer::LinuxSll => "bad_header_len_linux_sll",
                Layer::Loopback => "bad_header_len_loopback",
                Layer::Geneve => "bad_header_len_geneve",
                Layer::GtpU => "bad_header_len_gtpu",
            },
            ParseError::BadVersion => "bad_version",
            ParseError::BadTotalLen => "bad_total_len",
            ParseError::TooManyVlans => "too_many_vlans",
            ParseError::ExtChainTooLong => "ext_chain_too_long",
            ParseError::BadExtHeader => "bad_ext_header",
            ParseError::UnsupportedLinkType => "unsupported_link_type",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Truncated { layer } => write!(f, "truncated {layer} header"),
            ParseError::BadVersion => f.write_str("bad protocol version"),
            ParseError::BadHeaderLen { layer } => write!(f, "bad {layer} header length"),
            ParseError::BadTotalLen => f.write_str("IP length smaller than its headers"),
            ParseError::TooManyVlans => write!(f, "more than {} VLAN tags", crate::limits::MAX_VLAN_DEPTH),
            ParseError::ExtChainTooLong => {
                write!(f, "more than {} IPv6 extension headers", crate::limits::MAX_IPV6_EXT_HEADERS)
            }
            ParseError::BadExtHeader => f.write_str("IPv6 extension headers out of order"),
            ParseError::UnsupportedLinkType => f.write_str("unsupported link type"),
        }
    }
}

impl std::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERS: [Layer; 14] = [
        Layer::Ethernet,
        Layer::Vlan,
        Layer::Pppoe,
        Layer::Ipv4,
        Layer::Ipv6,
        Layer::Ipv6Ext,
        Layer::Udp,
        Layer::Tcp,
        Layer::Gre,
        Layer::Vxlan,
        Layer::LinuxSll,
        Layer::Loopback,
        Layer::Geneve,
        Layer::GtpU,
    ];

    #[test]
    fn reasons_are_stable_and_unique() {
        assert_eq!(ParseError::Truncated { layer: Layer::Ipv4 }.reason(), "truncated_ipv4");
        assert_eq!(ParseError::BadVersion.reason(), "bad_version");
        let mut all: Vec<ParseError> = LAYERS
            .iter()
            .flat_map(|&layer| [ParseError::Truncated { layer }, ParseError::BadHeaderLen { layer }])
            .collect();
        all.extend([
            ParseError::BadVersion,
            ParseError::BadTotalLen,
            ParseError::TooManyVlans,
            ParseError::ExtChainTooLong,
            ParseError::BadExtHeader,
            ParseError::UnsupportedLinkType,
        ]);
        let mut reasons: Vec<&str> = all.iter().map(|e| e.reason()).collect();
        for r in &reasons {
            assert!(r.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
        }
        for (e, layer) in all.iter().zip(LAYERS.iter().flat_map(|l| [l, l])) {
            if let ParseError::Truncated { .. } | ParseError::BadHeaderLen { .. } = e {
                assert!(e.reason().ends_with(layer.name()));
            }
        }
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), all.len());
    }

    #[test]
    fn indexes_are_dense_and_match_all() {
        assert_eq!(LAYERS, Layer::ALL);
        for (i, l) in Layer::ALL.iter().enumerate() {
            assert_eq!(l.index(), i);
        }
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i, "{e:?}");
        }
        let mut reasons: Vec<&str> = ParseError::ALL.iter().map(|e| e.reason()).collect();
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), ParseError::COUNT);
    }

    #[test]
    fn display() {
        let e = ParseError::Truncated { layer: Layer::Ipv6Ext };
        assert_eq!(e.to_string(), "truncated IPv6 extension header");
        assert_eq!(ParseError::TooManyVlans.to_string(), "more than 2 VLAN tags");
        let _: &dyn std::error::Error = &e;
    }
}
