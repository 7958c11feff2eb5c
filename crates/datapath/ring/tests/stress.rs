//! Two-thread stress test: 10 million items in bursts of random sizes on
//! both sides; the consumer checks every item is the next in sequence.
#![cfg(not(loom))]

use flowsteer_ring::channel;

/// xorshift64*: a tiny deterministic generator for burst sizes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// 1..=max
    fn burst(&mut self, max: usize) -> usize {
        (self.next() % max as u64) as usize + 1
    }
}

/// A 16-byte descriptor: sequence number plus a check word derived from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Desc {
    seq: u64,
    check: u64,
}

fn desc(seq: u64) -> Desc {
    Desc { seq, check: seq.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15 }
}

fn stress(total: u64, capacity: usize, max_burst: usize) {
    let (mut p, mut c) = channel::<Desc>(capacity).unwrap();
    let stats = p.stats();
    let producer = std::thread::spawn(move || {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut buf = vec![Desc::default(); max_burst];
        let mut next = 0u64;
        while next < total {
            let want = rng.burst(max_burst).min((total - next) as usize);
            for (i, d) in buf[..want].iter_mut().enumerate() {
                *d = desc(next + i as u64);
            }
            // Mix single pushes in so both paths are exercised.
            let n = if want == 1 { usize::from(p.push(buf[0]).is_ok()) } else { p.push_burst(&buf[..want]) };
            if n == 0 {
                std::hint::spin_loop();
                std::thread::yield_now();
            }
            next += n as u64;
        }
        assert_eq!(p.tail(), total);
    });
    let mut rng = Rng(0xfeed_face_cafe_beef);
    let mut out = vec![Desc::default(); max_burst];
    let mut expect = 0u64;
    let mut idle = 0u64;
    loop {
        let want = rng.burst(max_burst);
        let n = if want == 1 {
            match c.pop() {
                Some(d) => {
                    out[0] = d;
                    1
                }
                None => 0,
            }
        } else {
            c.pop_burst(&mut out[..want])
        };
        for d in &out[..n] {
            assert_eq!(*d, desc(expect), "out of sequence");
            expect += 1;
        }
        c.set_processed(c.head());
        if n == 0 {
            if c.is_abandoned() && c.is_empty() {
                break;
            }
            idle += 1;
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    assert_eq!(c.pop(), None);
    assert_eq!(expect, total);
    assert_eq!((stats.tail(), stats.head(), stats.done(), stats.len()), (total, total, total, 0));
    assert!(stats.high_watermark() >= 1 && stats.high_watermark() <= c.capacity());
    let _ = idle;
}

#[test]
fn ten_million_items_random_bursts() {
    stress(10_000_000, 1024, 64);
}

#[test]
fn small_ring_many_wraps() {
    // Bursts larger than the ring: every push_burst is partial.
    stress(1_000_000, 8, 20);
}
