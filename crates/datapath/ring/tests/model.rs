//! Property test: random push/pop/burst sequences on one thread against a
//! `VecDeque` model with the same capacity.
#![cfg(not(loom))]

use std::collections::VecDeque;

use flowsteer_ring::channel;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Push(u32),
    PushBurst(Vec<u32>),
    Pop,
    PopBurst(usize),
    Processed,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u32>().prop_map(Op::Push),
        prop::collection::vec(any::<u32>(), 0..40).prop_map(Op::PushBurst),
        Just(Op::Pop),
        (0usize..40).prop_map(Op::PopBurst),
        Just(Op::Processed),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_vecdeque(requested in 1usize..=40, ops in prop::collection::vec(op(), 0..300)) {
        let (mut p, mut c) = channel::<u32>(requested).unwrap();
        let cap = requested.next_power_of_two();
        prop_assert_eq!(p.capacity(), cap);
        let stats = p.stats();
        let mut model: VecDeque<u32> = VecDeque::new();
        let (mut pushed, mut popped, mut wmark) = (0u64, 0u64, 0usize);
        for op in ops {
            match op {
                Op::Push(v) => {
                    let r = p.push(v);
                    if model.len() < cap {
                        prop_assert_eq!(r, Ok(()));
                        model.push_back(v);
                        pushed += 1;
                    } else {
                        prop_assert_eq!(r, Err(v));
                    }
                }
                Op::PushBurst(vs) => {
                    let n = p.push_burst(&vs);
                    prop_assert_eq!(n, vs.len().min(cap - model.len()));
                    model.extend(&vs[..n]);
                    pushed += n as u64;
                }
                Op::Pop => {
                    let got = c.pop();
                    prop_assert_eq!(got, model.pop_front());
                    popped += u64::from(got.is_some());
                }
                Op::PopBurst(k) => {
                    let mut out = vec![0u32; k];
                    let n = c.pop_burst(&mut out);
                    prop_assert_eq!(n, k.min(model.len()));
                    let want: Vec<u32> = model.drain(..n).collect();
                    prop_assert_eq!(&out[..n], &want[..]);
                    popped += n as u64;
                }
                Op::Processed => c.set_processed(c.head()),
            }
            wmark = wmark.max(model.len());
            prop_assert_eq!(c.len(), model.len());
            prop_assert_eq!(c.is_empty(), model.is_empty());
            prop_assert_eq!(p.free_slots(), cap - model.len());
            prop_assert_eq!((p.tail(), c.head()), (pushed, popped));
            prop_assert_eq!((stats.tail(), stats.head(), stats.len()), (pushed, popped, model.len()));
            prop_assert!(stats.done() <= stats.head());
            prop_assert_eq!(stats.done(), c.processed());
            // Exact: the model's length only rises on pushes.
            prop_assert_eq!(stats.high_watermark(), wmark);
        }
    }
}
