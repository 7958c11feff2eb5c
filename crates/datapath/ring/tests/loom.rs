//! Model check of the slot protocol with loom: every interleaving (within
//! loom's bounds) of a producer and a consumer moving a few items in
//! bursts through a 2-slot ring. Loom's `UnsafeCell` reports any slot access
//! that is not ordered by the Release/Acquire pairs on `tail` and `head`.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p flowsteer-ring --release --test loom`
#![cfg(loom)]

use flowsteer_ring::channel;

const ITEMS: u32 = 3;

#[test]
fn bursts_through_a_two_slot_ring() {
    loom::model(|| {
        let (mut p, mut c) = channel::<u32>(2).unwrap();
        let stats = p.stats();
        let producer = loom::thread::spawn(move || {
            let all: Vec<u32> = (0..ITEMS).collect();
            let mut sent = 0usize;
            while sent < all.len() {
                let n = p.push_burst(&all[sent..]);
                if n == 0 {
                    loom::thread::yield_now();
                }
                sent += n;
            }
        });
        let mut got = Vec::new();
        let mut out = [0u32; 2];
        while got.len() < ITEMS as usize {
            // Alternate single and burst pops.
            if got.len() % 2 == 0 {
                match c.pop() {
                    Some(v) => got.push(v),
                    None => loom::thread::yield_now(),
                }
            } else {
                let n = c.pop_burst(&mut out);
                if n == 0 {
                    loom::thread::yield_now();
                }
                got.extend_from_slice(&out[..n]);
            }
            c.set_processed(c.head());
        }
        producer.join().unwrap();
        assert_eq!(got, (0..ITEMS).collect::<Vec<_>>());
        assert!(c.is_abandoned());
        assert_eq!(c.pop(), None);
        assert_eq!((stats.tail(), stats.head(), stats.done()), (3, 3, 3));
        assert!(stats.high_watermark() <= 2);
    });
}

#[test]
fn single_pushes_and_abandonment() {
    loom::model(|| {
        let (mut p, mut c) = channel::<u64>(1).unwrap();
        let producer = loom::thread::spawn(move || {
            for v in 0..2u64 {
                while p.push(v).is_err() {
                    loom::thread::yield_now();
                }
            }
            // Dropping `p` here publishes PRODUCER_GONE.
        });
        let mut next = 0u64;
        loop {
            let gone = c.is_abandoned();
            match c.pop() {
                Some(v) => {
                    assert_eq!(v, next);
                    next += 1;
                }
                // Abandoned before an empty pop: drained for good.
                None if gone => break,
                None => loom::thread::yield_now(),
            }
        }
        assert_eq!(next, 2);
        producer.join().unwrap();
    });
}
