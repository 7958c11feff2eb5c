//! Any frame through `analyze`'s analyzer, for every link type, with inner hashing.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = flowsteer_rss::RssConfig::default_for_queues(4).expect("4 queues is valid");
    let opts = flowsteer_analyze::AnalyzeOptions { inner: true, ..Default::default() };
    let mut a = flowsteer_analyze::Analyzer::new(&cfg, opts);
    for linktype in [1u32, 101, 113, 276, 228, 229, 147] {
        a.feed(linktype, data, data.len() as u32);
    }
    let _ = a.finish();
});
