//! The little of an Ethernet frame a bridge reads: destination, source,
//! and an 802.1Q / 802.1ad tag when there is one; how a frame is written
//! back out with a tag added, kept or removed; and how a frame shorter
//! than the Ethernet minimum is padded before it is sent.

use flowsteer_fdb::Mac;

/// Destination + source addresses.
const ADDRS: usize = 12;
/// The shortest frame a bridge takes: two addresses and an ethertype.
pub const MIN_FRAME: usize = 14;
/// The shortest frame a port sends: 60 bytes, the Ethernet minimum of 64
/// less the FCS (IEEE 802.3 clause 4.2.3.3; Linux's `ETH_ZLEN`). A NIC
/// pads a shorter frame with zeros before the FCS; a veth, an AF_PACKET
/// socket and an AF_XDP socket send it as it is, so the bridge pads it.
pub const MIN_TX_FRAME: usize = 60;
/// The 802.1Q (C-tag) TPID, and 802.1ad's (S-tag).
pub const TPID_8021Q: u16 = 0x8100;
/// The 802.1ad (S-tag) TPID.
pub const TPID_8021AD: u16 = 0x88a8;

/// Why a frame cannot be bridged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than 14 bytes, or a tag cut short (counted `malformed`).
    Runt,
}

/// A parsed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthHeader {
    /// Destination address.
    pub dst: Mac,
    /// Source address.
    pub src: Mac,
    /// The outer tag's TCI (PCP, DEI, VID), when the frame carries one of
    /// the bridge's protocol (VID 0: a priority tag).
    pub tci: Option<u16>,
    /// Where the bytes after the tag (or after the addresses, untagged)
    /// start: 12 or 16.
    pub rest_at: usize,
}

impl EthHeader {
    /// Reads the header of `frame`, taking an outer tag of `tpid` as the
    /// frame's tag (a tag of another TPID is payload); never panics.
    pub fn parse(frame: &[u8], tpid: u16) -> Result<EthHeader, FrameError> {
        if frame.len() < MIN_FRAME {
            return Err(FrameError::Runt);
        }
        let mac = |at: usize| {
            let mut m = [0u8; 6];
            m.copy_from_slice(&frame[at..at + 6]);
            Mac(m)
        };
        let (dst, src) = (mac(0), mac(6));
        let et = u16::from_be_bytes([frame[12], frame[13]]);
        if et == tpid {
            if frame.len() < MIN_FRAME + 4 {
                return Err(FrameError::Runt);
            }
            let tci = u16::from_be_bytes([frame[14], frame[15]]);
            return Ok(EthHeader { dst, src, tci: Some(tci), rest_at: ADDRS + 4 });
        }
        Ok(EthHeader { dst, src, tci: None, rest_at: ADDRS })
    }

    /// The VLAN id of the tag, if any (0 for a priority tag).
    pub fn vid(&self) -> Option<u16> {
        self.tci.map(|t| t & 0x0fff)
    }

    /// The VLAN id of the tag when it names a VLAN: `None` untagged or
    /// priority-tagged (VID 0, 802.1p priority only), which a VLAN-aware
    /// bridge classifies to the ingress port's PVID.
    pub fn tagged_vid(&self) -> Option<u16> {
        self.vid().filter(|v| *v != 0)
    }
}

/// The length of `frame` written out with `tci` (tagged) or without a tag.
pub fn out_len(frame_len: usize, hdr: &EthHeader, tci: Option<u16>) -> usize {
    frame_len - hdr.rest_at + ADDRS + if tci.is_some() { 4 } else { 0 }
}

/// Appends `frame` (header `hdr`) to `out`, tagged with `tci` (a tag of
/// `tpid`) or untagged.
pub fn write_frame(out: &mut Vec<u8>, frame: &[u8], hdr: &EthHeader, tci: Option<u16>, tpid: u16) {
    out.extend_from_slice(&frame[..ADDRS]);
    if let Some(t) = tci {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&t.to_be_bytes());
    }
    out.extend_from_slice(&frame[hdr.rest_at.min(frame.len())..]);
}

/// `frame` padded with zeros to [`MIN_TX_FRAME`] bytes when it is shorter
/// (`None`: it is long enough to go as it is). The padding is never
/// summed: an IP header's length says where the packet ends.
pub fn padded(frame: &[u8]) -> Option<[u8; MIN_TX_FRAME]> {
    let mut out = [0u8; MIN_TX_FRAME];
    out.get_mut(..frame.len())?.copy_from_slice(frame);
    (frame.len() < MIN_TX_FRAME).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: Option<u16>) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        if let Some(t) = tag {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&t.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x06, 0xaa, 0xbb]);
        f
    }

    #[test]
    fn parses_untagged_and_tagged() {
        let h = EthHeader::parse(&frame(None), TPID_8021Q).unwrap();
        assert_eq!((h.dst, h.src.0[5], h.tci, h.rest_at), (Mac::BROADCAST, 1, None, 12));
        let h = EthHeader::parse(&frame(Some(0x2064)), TPID_8021Q).unwrap();
        assert_eq!((h.vid(), h.rest_at), (Some(100), 16));
    }

    #[test]
    fn runts_are_errors_at_every_length() {
        let t = frame(Some(7));
        for len in 0..18 {
            let want = if len < 14 || (14..18).contains(&len) { Err(FrameError::Runt) } else { unreachable!() };
            assert_eq!(EthHeader::parse(&t[..len], TPID_8021Q), want, "{len}");
        }
        assert!(EthHeader::parse(&frame(None)[..14], TPID_8021Q).is_ok());
    }

    #[test]
    fn short_frames_are_padded_with_zeros_and_the_rest_left_alone() {
        let bytes: Vec<u8> = (1..=70).collect();
        for len in [0, 14, 42, 59] {
            let p = padded(&bytes[..len]).expect("short");
            assert_eq!(&p[..len], &bytes[..len], "{len}: the frame's own bytes intact");
            assert!(p[len..].iter().all(|b| *b == 0), "{len}: zeros after");
        }
        for len in [60, 61, 70] {
            assert_eq!(padded(&bytes[..len]), None, "{len}");
        }
    }

    #[test]
    fn tags_are_added_kept_and_removed() {
        let (plain, tagged) = (frame(None), frame(Some(10)));
        let hp = EthHeader::parse(&plain, TPID_8021Q).unwrap();
        let ht = EthHeader::parse(&tagged, TPID_8021Q).unwrap();
        let mut out = Vec::new();
        write_frame(&mut out, &plain, &hp, Some(10), TPID_8021Q);
        assert_eq!(out, tagged);
        assert_eq!(out_len(plain.len(), &hp, Some(10)), tagged.len());
        out.clear();
        write_frame(&mut out, &tagged, &ht, None, TPID_8021Q);
        assert_eq!(out, plain);
        out.clear();
        write_frame(&mut out, &tagged, &ht, Some(10), TPID_8021Q);
        assert_eq!(out, tagged);
    }

    #[test]
    fn a_tag_of_the_other_protocol_is_payload_and_vid_0_is_a_priority_tag() {
        let mut s_tagged = frame(Some(10));
        s_tagged[12..14].copy_from_slice(&TPID_8021AD.to_be_bytes());
        let h = EthHeader::parse(&s_tagged, TPID_8021Q).unwrap();
        assert_eq!((h.tci, h.rest_at), (None, 12), "an S-tag on an 802.1Q bridge is payload");
        let h = EthHeader::parse(&s_tagged, TPID_8021AD).unwrap();
        assert_eq!(h.vid(), Some(10));
        let h = EthHeader::parse(&frame(Some(0x6000)), TPID_8021Q).unwrap();
        assert_eq!((h.vid(), h.tagged_vid()), (Some(0), None));
        // Pushed in front of the S-tag, kept intact behind it.
        let hp = EthHeader::parse(&s_tagged, TPID_8021Q).unwrap();
        let mut out = Vec::new();
        write_frame(&mut out, &s_tagged, &hp, Some(20), TPID_8021Q);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x00, 20]);
        assert_eq!(&out[16..], &s_tagged[12..]);
    }
}
