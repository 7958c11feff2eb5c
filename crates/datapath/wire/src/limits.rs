//! The parser's bounds.

/// Most VLAN tags (802.1Q / 802.1ad QinQ) followed; a deeper stack is
/// [`crate::ParseError::TooManyVlans`].
pub const MAX_VLAN_DEPTH: usize = 2;

/// Most IPv6 extension headers followed; a longer chain is
/// [`crate::ParseError::ExtChainTooLong`].
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Default VXLAN UDP destination port (IANA).
pub const VXLAN_PORT: u16 = 4789;

/// Geneve UDP destination port (IANA).
pub const GENEVE_PORT: u16 = 6081;

/// VXLAN-GPE UDP destination port (IANA).
pub const VXLAN_GPE_PORT: u16 = 4790;

/// GTP-U UDP destination port (3GPP TS 29.281).
pub const GTPU_PORT: u16 = 2152;
