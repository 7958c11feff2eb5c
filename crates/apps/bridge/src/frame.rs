//! The little of an Ethernet frame a bridge reads: destination, source,
//! and an 802.1Q / 802.1ad tag when there is one; and how a frame is
//! written back out with a tag added, kept or removed.

use flowsteer_fdb::Mac;

/// Destination + source addresses.
const ADDRS: usize = 12;
/// The shortest frame a bridge takes: two addresses and an ethertype.
pub const MIN_FRAME: usize = 14;
/// 802.1Q (C-tag) and 802.1ad (S-tag) TPIDs.
const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88a8;

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
    /// The outer tag's TCI (PCP, DEI, VID), when the frame carries one.
    pub tci: Option<u16>,
    /// Where the bytes after the tag (or after the addresses, untagged)
    /// start: 12 or 16.
    pub rest_at: usize,
}

impl EthHeader {
    /// Reads the header of `frame`; never panics.
    pub fn parse(frame: &[u8]) -> Result<EthHeader, FrameError> {
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
        if et == TPID_8021Q || et == TPID_8021AD {
            if frame.len() < MIN_FRAME + 4 {
                return Err(FrameError::Runt);
            }
            let tci = u16::from_be_bytes([frame[14], frame[15]]);
            return Ok(EthHeader { dst, src, tci: Some(tci), rest_at: ADDRS + 4 });
        }
        Ok(EthHeader { dst, src, tci: None, rest_at: ADDRS })
    }

    /// The VLAN id of the tag, if any.
    pub fn vid(&self) -> Option<u16> {
        self.tci.map(|t| t & 0x0fff)
    }
}

/// The length of `frame` written out with `tci` (tagged) or without a tag.
pub fn out_len(frame_len: usize, hdr: &EthHeader, tci: Option<u16>) -> usize {
    frame_len - hdr.rest_at + ADDRS + if tci.is_some() { 4 } else { 0 }
}

/// Appends `frame` (header `hdr`) to `out`, tagged with `tci` (802.1Q) or
/// untagged.
pub fn write_frame(out: &mut Vec<u8>, frame: &[u8], hdr: &EthHeader, tci: Option<u16>) {
    out.extend_from_slice(&frame[..ADDRS]);
    if let Some(t) = tci {
        out.extend_from_slice(&TPID_8021Q.to_be_bytes());
        out.extend_from_slice(&t.to_be_bytes());
    }
    out.extend_from_slice(&frame[hdr.rest_at.min(frame.len())..]);
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
        let h = EthHeader::parse(&frame(None)).unwrap();
        assert_eq!((h.dst, h.src.0[5], h.tci, h.rest_at), (Mac::BROADCAST, 1, None, 12));
        let h = EthHeader::parse(&frame(Some(0x2064))).unwrap();
        assert_eq!((h.vid(), h.rest_at), (Some(100), 16));
    }

    #[test]
    fn runts_are_errors_at_every_length() {
        let t = frame(Some(7));
        for len in 0..18 {
            let want = if len < 14 || (14..18).contains(&len) { Err(FrameError::Runt) } else { unreachable!() };
            assert_eq!(EthHeader::parse(&t[..len]), want, "{len}");
        }
        assert!(EthHeader::parse(&frame(None)[..14]).is_ok());
    }

    #[test]
    fn tags_are_added_kept_and_removed() {
        let (plain, tagged) = (frame(None), frame(Some(10)));
        let hp = EthHeader::parse(&plain).unwrap();
        let ht = EthHeader::parse(&tagged).unwrap();
        let mut out = Vec::new();
        write_frame(&mut out, &plain, &hp, Some(10));
        assert_eq!(out, tagged);
        assert_eq!(out_len(plain.len(), &hp, Some(10)), tagged.len());
        out.clear();
        write_frame(&mut out, &tagged, &ht, None);
        assert_eq!(out, plain);
        out.clear();
        write_frame(&mut out, &tagged, &ht, Some(10));
        assert_eq!(out, tagged);
    }
}
