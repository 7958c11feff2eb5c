//! The echo payload decoder of `udp-gen` reads whatever comes back from the
//! network: it must reject anything malformed without panicking, and a
//! header it accepts must re-encode (with the length of the buffer it is
//! written into) to a datagram that verifies.
#![no_main]

use flowsteer_udp::payload::{decode_header, encode, verify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = decode_header(data) {
        let mut buf = vec![0u8; data.len()];
        if encode(&mut buf, &h) {
            let want = flowsteer_udp::payload::Header { len: buf.len() as u32, ..h };
            assert_eq!(decode_header(&buf).ok(), Some(want));
            assert_eq!(verify(&buf, buf.len()).ok(), Some(want));
        }
    }
    let _ = verify(data, data.len());
    let _ = verify(data, data.len().wrapping_add(1));
});
