//! `RssConfig::hash_frame` (bytes straight from the frame) agrees with
//! `RssConfig::place` (from the parsed tuple) for every kind of frame the
//! generator makes, under every hash-type setting.

use flowsteer_gen::{Frame, GenConfig, Generator, Spread};
use flowsteer_rss::{HashTypes, Reta, RssConfig, RssKey};
use flowsteer_wire::{parse_frame, LinkType, ParseOptions};

#[test]
fn hash_frame_equals_place() {
    let gen_cfg =
        GenConfig { flows: 500, ipv6_share: 0.5, tcp_share: 0.5, frag_share: 0.3, seed: 3, ..GenConfig::default() };
    let mut generator = Generator::new(&gen_cfg, Spread::Single).unwrap();
    let mut frames: Vec<Frame> = (0..32).map(|_| Frame::new()).collect();
    let mut checked = 0;
    for types in ["default", "all", "l3", "tcp4,udp6"] {
        let mut t = HashTypes::parse(types).unwrap();
        for frag4 in [false, true] {
            t.fragments_on_2tuple = !frag4;
            let cfg = RssConfig::new(RssKey::random(52).unwrap(), t, Reta::round_robin(128, 4).unwrap());
            for _ in 0..40 {
                let n = generator.next_burst(flowsteer_rss::QueueId(0), &mut frames);
                for f in &frames[..n] {
                    let p = parse_frame(f.bytes(), LinkType::Ethernet, &ParseOptions::default()).unwrap();
                    let l3 = p.outer.unwrap();
                    let want = cfg.place(&l3.tuple, l3.frag.is_some());
                    let (h, fields) = cfg.hash_frame(f.bytes(), &l3);
                    assert_eq!((h, fields), (want.hash, want.fields), "{types} {:?}", l3.tuple);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000);
}
