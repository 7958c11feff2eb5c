//! The offload state a packet socket hands over and accepts with each frame
//! when `PACKET_VNET_HDR` is on: `struct virtio_net_hdr` (10 bytes, in the
//! host's byte order for a packet socket: the legacy virtio layout).
//!
//! A frame a local sender left to offload arrives with
//! [`VnetHdr::needs_csum`]: its TCP/UDP checksum field holds only the
//! pseudo-header sum and must be completed from `csum_start` to the end of
//! the frame, the result stored at `csum_start + csum_offset`. A GSO frame
//! (a TCP or UDP super-frame of up to 64 KB) has a [`GsoType`] and
//! `gso_size`, the payload bytes of each segment it stands for. Sent back
//! out through a socket with the same option, the kernel keeps both: the
//! egress device (or the receiving host's stack) completes the checksum and
//! segments, as when the Linux bridge forwards the skb.

/// Size of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`.
const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_ECN`: a flag on the GSO type.
const GSO_ECN: u8 = 0x80;

/// What a GSO frame stands for (`VIRTIO_NET_HDR_GSO_*`, without the ECN flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GsoType {
    /// Not a GSO frame.
    None,
    /// TCP over IPv4 (`GSO_TCPV4`).
    TcpV4,
    /// UDP fragmentation offload (`GSO_UDP`, deprecated by the kernel).
    UdpUfo,
    /// TCP over IPv6 (`GSO_TCPV6`).
    TcpV6,
    /// UDP segmentation: datagrams of `gso_size` bytes (`GSO_UDP_L4`).
    UdpL4,
    /// A value this code does not know.
    Other(u8),
}

impl GsoType {
    fn from_raw(v: u8) -> GsoType {
        match v & !GSO_ECN {
            0 => GsoType::None,
            1 => GsoType::TcpV4,
            3 => GsoType::UdpUfo,
            4 => GsoType::TcpV6,
            5 => GsoType::UdpL4,
            o => GsoType::Other(o),
        }
    }

    fn raw(self) -> u8 {
        match self {
            GsoType::None => 0,
            GsoType::TcpV4 => 1,
            GsoType::UdpUfo => 3,
            GsoType::TcpV6 => 4,
            GsoType::UdpL4 => 5,
            GsoType::Other(o) => o,
        }
    }
}

/// One frame's offload state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VnetHdr {
    /// The checksum is partial: complete it from `csum_start`.
    pub needs_csum: bool,
    /// The checksum was verified (`CHECKSUM_UNNECESSARY`).
    pub data_valid: bool,
    /// What a GSO frame stands for.
    pub gso_type: GsoType,
    /// The TCP ECN (CWR) flag rides on the GSO type.
    pub gso_ecn: bool,
    /// Length of the headers (Ethernet to L4 included) of a GSO frame.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO frame.
    pub gso_size: u16,
    /// Where the checksummed part starts, from the Ethernet header.
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// A frame without offload state (a whole frame with complete checksums).
    pub const PLAIN: VnetHdr = VnetHdr {
        needs_csum: false,
        data_valid: false,
        gso_type: GsoType::None,
        gso_ecn: false,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    /// Reads the header from its wire form.
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let word = |at: usize| u16::from_ne_bytes([b[at], b[at + 1]]);
        VnetHdr {
            needs_csum: b[0] & F_NEEDS_CSUM != 0,
            data_valid: b[0] & F_DATA_VALID != 0,
            gso_type: GsoType::from_raw(b[1]),
            gso_ecn: b[1] & GSO_ECN != 0,
            hdr_len: word(2),
            gso_size: word(4),
            csum_start: word(6),
            csum_offset: word(8),
        }
    }

    /// The wire form.
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = if self.needs_csum { F_NEEDS_CSUM } else { 0 } | if self.data_valid { F_DATA_VALID } else { 0 };
        b[1] = self.gso_type.raw() | if self.gso_ecn { GSO_ECN } else { 0 };
        for (at, v) in [(2, self.hdr_len), (4, self.gso_size), (6, self.csum_start), (8, self.csum_offset)] {
            b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    /// True when the frame needs nothing done to it: no partial checksum
    /// and not a GSO frame.
    pub fn is_plain(&self) -> bool {
        !self.needs_csum && self.gso_type == GsoType::None
    }

    /// The header with its offsets moved by `delta` bytes (a VLAN tag of 4
    /// bytes put into or taken out of the frame before the L3 header).
    pub fn shifted(&self, delta: i32) -> VnetHdr {
        let mv = |v: u16| if v == 0 { 0 } else { (i32::from(v) + delta).clamp(0, i32::from(u16::MAX)) as u16 };
        VnetHdr { hdr_len: mv(self.hdr_len), csum_start: mv(self.csum_start), ..*self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_field() {
        let h = VnetHdr {
            needs_csum: true,
            data_valid: false,
            gso_type: GsoType::TcpV6,
            gso_ecn: true,
            hdr_len: 86,
            gso_size: 1428,
            csum_start: 54,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::from_bytes(&h.to_bytes()), h);
        assert_eq!(h.to_bytes()[..2], [1, 0x84]);
        assert_eq!(VnetHdr::from_bytes(&[0; VNET_HDR_LEN]), VnetHdr::PLAIN);
        assert!(VnetHdr::PLAIN.is_plain());
        let odd = VnetHdr::from_bytes(&[2, 9, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!((odd.data_valid, odd.gso_type), (true, GsoType::Other(9)));
        assert_eq!(VnetHdr::from_bytes(&odd.to_bytes()), odd);
    }

    #[test]
    fn shifting_moves_offsets_but_not_absent_ones() {
        let h = VnetHdr { needs_csum: true, csum_start: 34, csum_offset: 6, ..VnetHdr::PLAIN };
        let s = h.shifted(4);
        assert_eq!((s.csum_start, s.csum_offset, s.hdr_len), (38, 6, 0));
        assert_eq!(s.shifted(-4), h);
    }
}
