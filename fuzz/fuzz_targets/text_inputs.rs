//! Text the user types or feeds: ethtool -x output, RSS keys, CPU masks, hash types.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = flowsteer_rss::ethtool::parse_ethtool_x(s);
        let _ = flowsteer_rss::RssKey::parse_hex(s);
        let _ = flowsteer_rss::HashTypes::parse(s);
        let _ = flowsteer_steer::cpuset::CpuSet::parse(s);
        let _ = s.parse::<flowsteer_rss::plan::AddrRange>();
        let _ = s.parse::<flowsteer_rss::plan::PortRange>();
    }
});
