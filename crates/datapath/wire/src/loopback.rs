//! BSD loopback headers (`LINKTYPE_NULL` 0 and `LINKTYPE_LOOP` 108), written
//! by `tcpdump -i lo0` on the BSDs and macOS: a 4-byte address family, then
//! the packet.
//!
//! `LINKTYPE_NULL` stores the family in the byte order of the machine that
//! captured, `LINKTYPE_LOOP` in network byte order, but files of both kinds
//! exist in either order. As Wireshark does, a value whose upper 16 bits
//! are set is read byte-swapped (no family is above 0xFFFF). The family
//! values of IPv6 differ between systems: 24 (NetBSD, OpenBSD, BSD/OS), 28
//! (FreeBSD, DragonFly BSD) and 30 (macOS); IPv4 is 2 everywhere.

use crate::error::{Layer, ParseError};

/// `AF_INET` on every BSD.
pub const AF_INET: u32 = 2;
/// The `AF_INET6` values in use: NetBSD/OpenBSD/BSD/OS, FreeBSD/DragonFly, macOS.
pub const AF_INET6: [u32; 3] = [24, 28, 30];

/// What a loopback header announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    Ipv4,
    /// IPv6 (any of [`AF_INET6`]).
    Ipv6,
    /// Any other family (not parsed further).
    Other(u32),
}

/// A checked view of a 4-byte loopback header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopbackHeader<'a> {
    hdr: &'a [u8; LoopbackHeader::HEADER_LEN],
    buf: &'a [u8],
}

impl<'a> LoopbackHeader<'a> {
    /// Length of the header.
    pub const HEADER_LEN: usize = 4;

    /// Checks that the 4-byte header is present (`Truncated{Loopback}`).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, ParseError> {
        let hdr = buf.first_chunk().ok_or(ParseError::Truncated { layer: Layer::Loopback })?;
        Ok(LoopbackHeader { hdr, buf })
    }

    /// The address family, whichever byte order it was written in.
    pub fn family_value(&self) -> u32 {
        let be = u32::from_be_bytes(*self.hdr);
        if be & 0xFFFF_0000 != 0 {
            be.swap_bytes()
        } else {
            be
        }
    }

    /// The family, classified.
    pub fn family(&self) -> Family {
        match self.family_value() {
            AF_INET => Family::Ipv4,
            v if AF_INET6.contains(&v) => Family::Ipv6,
            v => Family::Other(v),
        }
    }

    /// Everything after the header.
    pub fn payload(&self) -> &'a [u8] {
        self.buf.get(Self::HEADER_LEN..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_byte_orders_and_every_inet6_value() {
        for v in [2u32, 24, 28, 30, 7] {
            for bytes in [v.to_be_bytes(), v.to_le_bytes()] {
                let mut b = bytes.to_vec();
                b.push(0x45);
                let h = LoopbackHeader::new_checked(&b).unwrap();
                assert_eq!(h.family_value(), v);
                let want = match v {
                    2 => Family::Ipv4,
                    24 | 28 | 30 => Family::Ipv6,
                    other => Family::Other(other),
                };
                assert_eq!(h.family(), want);
                assert_eq!(h.payload(), &[0x45]);
            }
        }
        for n in 0..4 {
            assert_eq!(
                LoopbackHeader::new_checked(&[2, 0, 0, 0][..n]),
                Err(ParseError::Truncated { layer: Layer::Loopback })
            );
        }
    }
}
