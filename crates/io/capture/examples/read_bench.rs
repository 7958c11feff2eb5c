//! Reader throughput: `cargo run --release -p flowsteer-capture --example read_bench [packets]`.
//! Writes a pcap of 64-byte packets into memory and times reading it back.

use flowsteer_capture::{CaptureReader, CaptureWriter};
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000_000);
    let mut w = match CaptureWriter::new(Vec::new(), 1) {
        Ok(w) => w,
        Err(e) => return eprintln!("error: {e}"),
    };
    for i in 0..n {
        if let Err(e) = w.write_packet(i, &[0x5a; 64], 64) {
            return eprintln!("error: {e}");
        }
    }
    let bytes = match w.finish() {
        Ok(b) => b,
        Err(e) => return eprintln!("error: {e}"),
    };
    let t = Instant::now();
    let mut r = match CaptureReader::new(bytes.as_slice()) {
        Ok(r) => r,
        Err(e) => return eprintln!("error: {e}"),
    };
    let (mut count, mut sum) = (0u64, 0u64);
    while let Ok(Some(p)) = r.next_packet() {
        count += 1;
        sum = sum.wrapping_add(u64::from(p.data[13]) + p.ts_nanos);
    }
    let dt = t.elapsed().as_secs_f64();
    println!("pcap: {count} packets in {dt:.3} s = {:.1} Mpps (checksum {sum})", count as f64 / dt / 1e6);
}
