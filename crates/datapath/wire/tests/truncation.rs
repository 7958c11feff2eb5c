//! Every prefix of every sample frame parses without panicking; prefixes
//! shorter than the headers are errors, longer ones are Ok.

mod common;

use common::*;
use flowsteer_wire::{parse_frame, ParseOptions};

#[test]
fn every_prefix_of_every_sample() {
    for s in samples() {
        assert!(s.min_ok <= s.frame.len(), "{}", s.name);
        let full = parse_frame(&s.frame, s.link, &INNER).unwrap();
        for n in 0..=s.frame.len() {
            let prefix = &s.frame[..n];
            for opts in [OUTER, INNER] {
                let r = parse_frame(prefix, s.link, &opts);
                if n < s.min_ok {
                    assert!(r.is_err(), "{} prefix {n}: {r:?}", s.name);
                } else {
                    let p = r.unwrap_or_else(|e| panic!("{} prefix {n}: {e}", s.name));
                    // the outer tuple does not depend on how much payload is present
                    // (a first fragment only hides its ports while they are cut)
                    let (a, b) = (p.outer, full.outer);
                    let key = |t: flowsteer_wire::FlowTuple| (t.src, t.dst, t.proto);
                    assert_eq!(a.map(|o| key(o.tuple)), b.map(|o| key(o.tuple)));
                    if let (Some(a), Some(b)) = (a, b) {
                        if a.frag.is_none() || a.tuple.ports.is_some() {
                            assert_eq!(a.tuple, b.tuple, "{} {n}", s.name);
                        }
                    }
                    if let Some(o) = a {
                        assert_eq!(o.truncated, n < s.frame.len(), "{} {n}", s.name);
                    }
                    if p.inner.is_some() {
                        assert_eq!(p.inner.map(|i| i.tuple), full.inner.map(|i| i.tuple), "{} {n}", s.name);
                    }
                }
            }
        }
    }
}

#[test]
fn inner_appears_once_its_headers_are_complete() {
    for s in samples() {
        let full = parse_frame(&s.frame, s.link, &INNER).unwrap();
        let Some(inner) = full.inner else { continue };
        // the inner L4 header end (ports known) or the inner IP header end
        let need = inner.l4_offset.unwrap_or(inner.l3_offset)
            + if inner.tuple.ports.is_some() {
                if inner.tuple.proto == 6 {
                    20
                } else {
                    8
                }
            } else {
                0
            };
        for n in need..=s.frame.len() {
            let p = parse_frame(&s.frame[..n], s.link, &INNER).unwrap();
            assert_eq!(p.inner.map(|i| i.tuple), Some(inner.tuple), "{} prefix {n}", s.name);
        }
    }
}

#[test]
fn overlong_frames_parse_the_same() {
    for s in samples() {
        for opts in [OUTER, INNER, ParseOptions::default()] {
            let full = parse_frame(&s.frame, s.link, &opts).unwrap();
            let mut long = s.frame.clone();
            long.extend_from_slice(&[0xa5; 64]);
            let p = parse_frame(&long, s.link, &opts).unwrap();
            assert_eq!(p, full, "{}", s.name);
        }
    }
}
