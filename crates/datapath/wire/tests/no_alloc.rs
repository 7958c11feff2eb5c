//! parse_frame does not allocate; a hot loop over every sample (not timed).
// A counting global allocator needs `unsafe impl GlobalAlloc`.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::*;
use flowsteer_wire::parse_frame;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

#[test]
fn parse_frame_does_not_allocate() {
    let samples = samples();
    for s in &samples {
        for opts in [OUTER, INNER] {
            let before = allocs();
            let r = parse_frame(&s.frame, s.link, &opts);
            let _ = parse_frame(&s.frame[..s.frame.len() / 2], s.link, &opts);
            let _ = parse_frame(&s.frame[..1], s.link, &opts);
            let after = allocs();
            assert!(r.is_ok());
            assert_eq!(after, before, "{} allocated", s.name);
        }
    }
}

#[test]
fn hot_loop_runs() {
    // Not a benchmark (see examples/parse_bench.rs): just many parses in a
    // row to make sure nothing accumulates or depends on call order.
    let samples = samples();
    let mut ports = 0u64;
    let before = allocs();
    for _ in 0..2_000 {
        for s in &samples {
            let p = std::hint::black_box(parse_frame(std::hint::black_box(&s.frame), s.link, &INNER)).unwrap();
            if let Some((a, b)) = p.innermost().and_then(|l| l.tuple.ports) {
                ports += u64::from(a) + u64::from(b);
            }
        }
    }
    assert_eq!(allocs(), before);
    assert!(ports > 0);
}
