//! The range of every numeric flag, checked while the command line is
//! parsed (clap `value_parser`): a value outside it is a usage error (exit
//! 2) whose one line names the flag and the range, before anything runs or
//! prints. The bounds are the libraries' own limits where they have one.

/// Longest time any `--duration`, `--interval`, `--seconds`, ... may ask
/// for: one year (also keeps `Duration::from_secs_f64` far from overflow).
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;
/// Highest CPU number a CPU list may name (`flowsteer_steer::cpuset::MAX_CPUS` - 1).
pub const MAX_CPU: u64 = flowsteer_steer::cpuset::MAX_CPUS as u64 - 1;
/// Largest RSS indirection table (`--reta-size`) and software bucket count (`--buckets`).
pub const MAX_TABLE: u64 = flowsteer_rss::reta::MAX_RETA_SIZE as u64;
/// Most queues an RSS configuration may spread over (`--queues`).
pub const MAX_QUEUES: u64 = flowsteer_rss::reta::MAX_QUEUES as u64;
/// Largest RFS table (`--rfs-entries`, `--rfs-flow-cnt`).
pub const MAX_RFS: u64 = flowsteer_steer::steer::MAX_TABLE_ENTRIES as u64;
/// Largest hand-off queue (`--ring-size`): the ring's `MAX_CAPACITY`, 2^24.
pub const MAX_RING: u64 = 1 << 24;
/// Largest flow table per worker (`--flow-capacity`).
pub const MAX_FLOW_TABLE: u64 = flowsteer_flow::table::MAX_CAPACITY as u64;
/// Most datagrams per recvmmsg/sendmmsg call, packets per poll (`--batch`, `--burst`).
pub const MAX_BATCH: u64 = 1024;
/// Largest reassembly memory limit (`--reasm-mem`, `--mem-limit`): 64 GiB.
pub const MAX_MEM: u64 = 1 << 36;

/// An integer in `MIN..=MAX`, as the flag's type `T`.
pub fn int<T: TryFrom<u64>, const MIN: u64, const MAX: u64>(s: &str) -> Result<T, String> {
    let range = || format!("expected an integer in {MIN}..={MAX}");
    let v: u64 = s.trim().parse().map_err(|_| range())?;
    if !(MIN..=MAX).contains(&v) {
        return Err(range());
    }
    T::try_from(v).map_err(|_| range())
}

/// A nice value, -20..=19 (lower runs first).
pub fn nice(s: &str) -> Result<i8, String> {
    let bad = || format!("{s:?}: expected a nice value in -20..=19");
    let v: i8 = s.trim().parse().map_err(|_| bad())?;
    if !(-20..=19).contains(&v) {
        return Err(bad());
    }
    Ok(v)
}

/// A power of two in `MIN..=MAX`.
pub fn pow2<const MIN: u64, const MAX: u64>(s: &str) -> Result<usize, String> {
    let range = || format!("expected a power of two in {MIN}..={MAX}");
    let v: u64 = s.trim().parse().map_err(|_| range())?;
    if !(MIN..=MAX).contains(&v) || !v.is_power_of_two() {
        return Err(range());
    }
    usize::try_from(v).map_err(|_| range())
}

/// A CPU number, `0..=MAX_CPU`.
pub fn cpu(s: &str) -> Result<u32, String> {
    int::<u32, 0, MAX_CPU>(s).map_err(|_| format!("expected a CPU number in 0..={MAX_CPU}"))
}

fn float(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A time in seconds, `> 0` and at most [`MAX_SECONDS`].
pub fn seconds(s: &str) -> Result<f64, String> {
    float(s)
        .filter(|v| *v > 0.0 && *v <= MAX_SECONDS)
        .ok_or_else(|| format!("expected seconds, a number > 0 and <= {MAX_SECONDS}"))
}

/// A time in seconds that may be 0, at most [`MAX_SECONDS`].
pub fn seconds_or_zero(s: &str) -> Result<f64, String> {
    float(s)
        .filter(|v| *v >= 0.0 && *v <= MAX_SECONDS)
        .ok_or_else(|| format!("expected seconds, a number in 0..={MAX_SECONDS}"))
}

/// A share (fraction), `0..=1`.
pub fn share(s: &str) -> Result<f64, String> {
    float(s).filter(|v| (0.0..=1.0).contains(v)).ok_or_else(|| "expected a share, a number in 0..=1".to_string())
}

/// A Zipf exponent, `0..=10` (0 is uniform popularity; above 10 one flow takes everything).
pub fn zipf(s: &str) -> Result<f64, String> {
    float(s).filter(|v| (0.0..=10.0).contains(v)).ok_or_else(|| "expected a number in 0..=10".to_string())
}

/// `run --size`: a frame length in bytes (the generator's range) or `imix`.
pub fn frame_size(s: &str) -> Result<String, String> {
    use flowsteer_gen::{MAX_FRAME_LEN, MIN_FRAME_LEN};
    if s == "imix" {
        return Ok(s.to_string());
    }
    int::<u16, { MIN_FRAME_LEN as u64 }, { MAX_FRAME_LEN as u64 }>(s)
        .map(|_| s.trim().to_string())
        .map_err(|_| format!("expected imix or a frame length in {MIN_FRAME_LEN}..={MAX_FRAME_LEN} bytes"))
}

/// `udp-gen --rate` when it is not given: datagrams per second.
pub const DEFAULT_RATE: u64 = 10_000;

/// `udp-gen --rate`: datagrams per second, or as fast as the kernel takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// This many datagrams per second over all flows, at least 1.
    Pps(u64),
    /// `max`: no pacing, on purpose.
    Max,
}

impl Rate {
    /// As the generators take it: datagrams per second, 0 for no pacing.
    pub fn pps_or_zero(self) -> u64 {
        match self {
            Rate::Pps(n) => n,
            Rate::Max => 0,
        }
    }
}

/// As `--rate` takes it back.
impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Pps(n) => write!(f, "{n}"),
            Rate::Max => f.write_str("max"),
        }
    }
}

/// `udp-gen --rate`: `max`, or datagrams per second in 1..=u64::MAX. 0,
/// which once meant `max`, is refused with a pointer to it: flooding is
/// asked for by name.
pub fn rate(s: &str) -> Result<Rate, String> {
    let s = s.trim();
    if s == "max" {
        return Ok(Rate::Max);
    }
    if s == "0" {
        return Err(format!(
            "0 no longer means as fast as possible: give --rate max for that, or a rate in 1..={}",
            u64::MAX
        ));
    }
    int::<u64, 1, { u64::MAX }>(s).map(Rate::Pps).map_err(|_| format!("expected max or an integer in 1..={}", u64::MAX))
}

/// A MAC address, six hex octets separated by `:` (or `-`), printed back
/// as lowercase `aa:bb:cc:dd:ee:ff`.
pub fn mac(s: &str) -> Result<String, String> {
    let bad = || format!("expected a MAC address like 02:00:00:00:00:01, got {s:?}");
    let octets: Vec<&str> = s.trim().split([':', '-']).collect();
    if octets.len() != 6 || octets.iter().any(|o| o.is_empty() || o.len() > 2) {
        return Err(bad());
    }
    let bytes = octets.iter().map(|o| u8::from_str_radix(o, 16)).collect::<Result<Vec<u8>, _>>().map_err(|_| bad())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"))
}

/// A VLAN id as `bridge-ctl fdb ... vlan VID` takes it: 1..=4094 (no
/// `vlan`: untagged).
pub fn vid(s: &str) -> Result<u16, String> {
    int::<u16, 1, 4094>(s)
        .map_err(|_| format!("vlan {s:?}: expected a VLAN id in 1..=4094 (leave out vlan for untagged)"))
}

/// An interface name: 1 to 15 bytes, no `/`, `:` or blank.
pub fn iface(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 15 || s.contains(['/', ':']) || s.contains(char::is_whitespace) {
        return Err(format!("{s:?}: expected an interface name (1 to 15 bytes, no '/', ':' or blank)"));
    }
    Ok(s.to_string())
}

/// A bridge port `KIND:IFACE` (`afxdp:veth0`, `afpacket:eth1`).
pub fn port_spec(s: &str) -> Result<flowsteer_bridge::PortSpec, String> {
    flowsteer_bridge::PortSpec::parse(s).map_err(|e| e.to_string())
}

/// `--port-vlans IFACE=VIDS[:pvid=N]`.
pub fn port_vlans(s: &str) -> Result<(String, flowsteer_bridge::PortVlans), String> {
    let (iface, vids) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected IFACE=VIDS[:pvid=N]"))?;
    Ok((iface.to_string(), flowsteer_bridge::PortVlans::parse(vids).map_err(|e| e.to_string())?))
}

/// A bridge port's flags `IFACE=NAME=VALUE,...` (`veth1=learning=off,state=blocking`).
pub fn port_flags(s: &str) -> Result<(String, flowsteer_bridge::PortFlags), String> {
    let (iface, flags) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected IFACE=FLAG=VALUE,... (e.g. veth1=learning=off,isolated=on)"))?;
    let iface = self::iface(iface)?;
    Ok((iface, flowsteer_bridge::PortFlags::parse(flags).map_err(|e| e.to_string())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_vids_and_interfaces() {
        assert_eq!(mac("02:00:00:00:00:0A"), Ok("02:00:00:00:00:0a".into()));
        assert_eq!(mac("2-0-0-0-0-1"), Ok("02:00:00:00:00:01".into()));
        for bad in
            ["02:00:00:00:00", "02:00:00:00:00:01:02", "02:00:00:00:00:0g", "020:00:00:00:00:01", "02::00:00:00:01", ""]
        {
            assert!(mac(bad).is_err(), "{bad}");
        }
        assert_eq!(vid("4094"), Ok(4094));
        assert!(vid("0").is_err() && vid("4095").is_err() && vid("x").is_err());
        assert!(iface("veth0").is_ok());
        for bad in ["", "0123456789abcdef", "a/b", "a:b", "a b"] {
            assert!(iface(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn integers_outside_the_range_are_refused_with_the_range() {
        assert_eq!(int::<u16, 1, 10>("10"), Ok(10));
        for bad in ["0", "11", "-1", "18446744073709551616", "x", ""] {
            assert_eq!(int::<u16, 1, 10>(bad), Err("expected an integer in 1..=10".into()), "{bad}");
        }
        assert!(int::<u8, 0, 1000>("300").is_err(), "a value that fits the range but not the type");
    }

    #[test]
    fn rates_are_max_or_positive() {
        assert_eq!(rate("max"), Ok(Rate::Max));
        assert_eq!(rate("10000"), Ok(Rate::Pps(10_000)));
        assert_eq!((Rate::Max.pps_or_zero(), Rate::Pps(5).pps_or_zero()), (0, 5));
        assert!(rate("0").unwrap_err().contains("--rate max"));
        for bad in ["-1", "18446744073709551616", "MAX", "", "1.5"] {
            assert!(rate(bad).unwrap_err().contains("1..="), "{bad}");
        }
    }

    #[test]
    fn powers_of_two_only() {
        assert_eq!(pow2::<1, 64>("64"), Ok(64));
        for bad in ["0", "3", "128", "-1"] {
            assert!(pow2::<1, 64>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds_are_positive_finite_and_bounded() {
        assert_eq!(seconds("0.5"), Ok(0.5));
        for bad in ["0", "-1", "nan", "inf", "1e300", "18446744073709551616"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds_or_zero("0"), Ok(0.0));
        assert!(share("1.01").is_err() && share("-0.1").is_err() && share("1").is_ok());
    }
}
