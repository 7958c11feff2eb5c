//! `cargo +nightly fuzz run parse_frame` (from fuzz/).
//!
//! The first byte picks the link type, whether inner headers are parsed and
//! whether VXLAN uses the default port; the rest is the frame.
#![no_main]

use flowsteer_wire::{parse_frame, parse_frame_into, LinkType, ParseOptions, Parsed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, frame)) = data.split_first() else {
        return;
    };
    let link = match sel & 0x07 {
        0 | 6 => LinkType::Ethernet,
        1 => LinkType::RawIp,
        2 => LinkType::LinuxSll,
        3 => LinkType::LinuxSll2,
        4 => LinkType::Null,
        _ => LinkType::Loop,
    };
    let opts =
        ParseOptions { inner: sel & 0x04 != 0, vxlan_port: if sel & 0x08 != 0 { 4789 } else { u16::from(sel) << 4 } };
    let r = parse_frame(frame, link, &opts);
    if let Ok(p) = &r {
        for l3 in [p.outer, p.inner].into_iter().flatten() {
            assert!(l3.l3_offset < frame.len());
            if let Some(l4) = l3.l4_offset {
                assert!(l4 <= frame.len());
            }
        }
        let _ = p.innermost();
    }
    if let Err(e) = &r {
        let _ = e.reason();
    }
    // the in-place variant agrees, whatever `out` held before
    let mut out = Parsed { vlan_count: 9, ..Parsed::default() };
    let r2 = parse_frame_into(frame, link, &opts, &mut out);
    assert_eq!(r.map(|_| ()), r2);
    if let Ok(p) = r {
        assert_eq!(p, out);
    }
});
