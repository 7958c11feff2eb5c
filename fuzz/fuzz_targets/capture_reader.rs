//! Any byte string as a capture file: the reader returns packets or errors, never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut r) = flowsteer_capture::CaptureReader::new(std::io::Cursor::new(data)) {
        for _ in 0..10_000 {
            match r.next_packet() {
                Ok(Some(p)) => {
                    let _ = (p.ts_nanos, p.linktype, p.data.len());
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }
});
