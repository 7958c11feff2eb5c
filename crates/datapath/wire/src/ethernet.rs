//! Ethernet II header and 802.1Q / 802.1ad VLAN tags.
//!
//! Tags with TPID 0x8100 (802.1Q), 0x88a8 (802.1ad S-tag) and 0x9100 (the
//! pre-standard QinQ TPID) are followed, at most [`crate::MAX_VLAN_DEPTH`]
//! deep; a deeper stack is [`ParseError::TooManyVlans`]. Ethertype values
//! below 0x0600 are 802.3 length fields (LLC frames) and are not IP.

use crate::error::{Layer, ParseError};
use crate::limits::MAX_VLAN_DEPTH;

/// IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q customer VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// 802.1ad service VLAN tag (QinQ outer tag).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// Pre-standard QinQ outer tag.
pub const ETHERTYPE_QINQ_OLD: u16 = 0x9100;
/// PPPoE discovery stage.
pub const ETHERTYPE_PPPOE_DISCOVERY: u16 = 0x8863;
/// PPPoE session stage.
pub const ETHERTYPE_PPPOE_SESSION: u16 = 0x8864;
/// Transparent Ethernet bridging (GRE protocol type for an inner Ethernet frame).
pub const ETHERTYPE_TEB: u16 = 0x6558;
/// Smallest ethertype; smaller values are 802.3 length fields.
pub const ETHERTYPE_MIN: u16 = 0x0600;

/// True for the TPIDs treated as VLAN tags (0x8100, 0x88a8, 0x9100).
pub fn is_vlan_tpid(ethertype: u16) -> bool {
    matches!(ethertype, ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD)
}

/// A checked view of an Ethernet II header (14 bytes) and what follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetFrame<'a> {
    hdr: &'a [u8; EthernetFrame::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> EthernetFrame<'a> {
    /// Length of the Ethernet II header.
    pub const HEADER_LEN: usize = 14;

    /// Checks that the 14-byte header is present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        match buf.first_chunk() {
            Some(hdr) => Ok(EthernetFrame { hdr, buf }),
            None => Err(ParseError::Truncated { layer: Layer::Ethernet }),
        }
    }

    /// Destination MAC address.
    pub fn dst_mac(&self) -> [u8; 6] {
        let h = self.hdr;
        [h[0], h[1], h[2], h[3], h[4], h[5]]
    }

    /// Source MAC address.
    pub fn src_mac(&self) -> [u8; 6] {
        let h = self.hdr;
        [h[6], h[7], h[8], h[9], h[10], h[11]]
    }

    /// The ethertype / TPID / length field.
    pub fn ethertype(&self) -> u16 {
        u16::from_be_bytes([self.hdr[12], self.hdr[13]])
    }

    /// Everything after the 14-byte header (VLAN tags included).
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

/// A checked view of one 4-byte VLAN tag (TCI + next ethertype), starting
/// right after the TPID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag<'a> {
    hdr: &'a [u8; VlanTag::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> VlanTag<'a> {
    /// TCI (2 bytes) plus the encapsulated ethertype (2 bytes).
    pub const HEADER_LEN: usize = 4;

    /// Checks that the 4 bytes are present.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        match buf.first_chunk() {
            Some(hdr) => Ok(VlanTag { hdr, buf }),
            None => Err(ParseError::Truncated { layer: Layer::Vlan }),
        }
    }

    /// The whole tag control information.
    pub fn tci(&self) -> u16 {
        u16::from_be_bytes([self.hdr[0], self.hdr[1]])
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        self.hdr[0] >> 5
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.hdr[0] & 0x10 != 0
    }

    /// VLAN id (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// Ethertype of what follows the tag (possibly another TPID).
    pub fn ethertype(&self) -> u16 {
        u16::from_be_bytes([self.hdr[2], self.hdr[3]])
    }

    /// Everything after the tag.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

/// Result of walking the VLAN tags behind an ethertype field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanStack {
    /// Tags seen (0..=MAX_VLAN_DEPTH).
    pub count: u8,
    /// Their VLAN ids, outermost first.
    pub ids: [u16; MAX_VLAN_DEPTH],
    /// The ethertype after the last tag.
    pub ethertype: u16,
    /// Offset in `buf` of the first byte after the last tag.
    pub payload_offset: usize,
}

/// Follows VLAN tags: `ethertype` is the value of the ethertype field that
/// ends at `offset` in `buf` (12..14 for Ethernet, so `offset` 14).
pub fn walk_vlans(buf: &[u8], ethertype: u16, offset: usize) -> Result<VlanStack, ParseError> {
    let mut stack = VlanStack { count: 0, ids: [0; MAX_VLAN_DEPTH], ethertype, payload_offset: offset };
    while is_vlan_tpid(stack.ethertype) {
        let slot = stack.ids.get_mut(usize::from(stack.count)).ok_or(ParseError::TooManyVlans)?;
        let tag = VlanTag::new_checked(buf.get(stack.payload_offset..).unwrap_or(&[]))?;
        *slot = tag.vid();
        stack.count = stack.count.saturating_add(1);
        stack.ethertype = tag.ethertype();
        stack.payload_offset = stack.payload_offset.saturating_add(VlanTag::HEADER_LEN);
    }
    Ok(stack)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ethertype: u16, rest: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(rest);
        f
    }

    #[test]
    fn ethernet_fields() {
        let f = frame(ETHERTYPE_IPV4, &[0x45, 0]);
        let e = EthernetFrame::new_checked(&f).unwrap();
        assert_eq!(e.dst_mac(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(e.src_mac(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(e.ethertype(), 0x0800);
        assert_eq!(e.payload(), &[0x45, 0]);
        for n in 0..14 {
            assert_eq!(EthernetFrame::new_checked(&f[..n]), Err(ParseError::Truncated { layer: Layer::Ethernet }));
        }
        assert_eq!(EthernetFrame::new_checked(&f[..14]).unwrap().payload(), &[]);
    }

    #[test]
    fn vlan_tag_fields() {
        let t = [0xb0 | 0x0f, 0xff, 0x08, 0x00, 0xaa];
        let v = VlanTag::new_checked(&t).unwrap();
        assert_eq!(v.pcp(), 5);
        assert!(v.dei());
        assert_eq!(v.vid(), 0xfff);
        assert_eq!(v.ethertype(), 0x0800);
        assert_eq!(v.payload(), &[0xaa]);
        assert!(VlanTag::new_checked(&t[..3]).is_err());
    }

    #[test]
    fn walk_qinq_and_limits() {
        let f = frame(ETHERTYPE_QINQ, &[0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x86, 0xdd]);
        let s = walk_vlans(&f, ETHERTYPE_QINQ, 14).unwrap();
        assert_eq!(s.count, 2);
        assert_eq!(s.ids, [100, 200]);
        assert_eq!(s.ethertype, ETHERTYPE_IPV6);
        assert_eq!(s.payload_offset, 22);

        let f = frame(ETHERTYPE_QINQ_OLD, &[0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3, 0x08, 0x00]);
        assert_eq!(walk_vlans(&f, ETHERTYPE_QINQ_OLD, 14), Err(ParseError::TooManyVlans));
        for n in 14..18 {
            assert_eq!(walk_vlans(&f[..n], ETHERTYPE_QINQ_OLD, 14), Err(ParseError::Truncated { layer: Layer::Vlan }));
        }
        // offset past the end: truncated, no panic
        assert!(walk_vlans(&f, ETHERTYPE_VLAN, 1000).is_err());
        let none = walk_vlans(&f, ETHERTYPE_ARP, 14).unwrap();
        assert_eq!(none.count, 0);
        assert_eq!(none.payload_offset, 14);
    }
}
