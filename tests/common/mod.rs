//! Helpers shared by the CLI tests (each test file includes this module
//! with `mod common;`).

use std::path::PathBuf;
use std::process::{Command, Output};

/// A fresh directory per test (`<tmp>/flowsteer-<suite>-<pid>-<name>`),
/// removed when dropped, also when the test fails.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(suite: &str, name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("flowsteer-{suite}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    /// The directory itself.
    #[allow(dead_code)] // not every test file needs it
    pub fn dir(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Why the DPDK harnesses (`bench/dpdk/`) cannot be built here, if they
/// cannot: no `libdpdk` for `pkg-config`, or no `make`.
#[allow(dead_code)] // only the DPDK comparisons use it
pub fn dpdk_skip_reason() -> Option<&'static str> {
    let ok = |cmd: &str, args: &[&str]| Command::new(cmd).args(args).output().is_ok_and(|o| o.status.success());
    if !ok("pkg-config", &["--exists", "libdpdk"]) {
        return Some("libdpdk-dev not installed (pkg-config --exists libdpdk failed)");
    }
    if !ok("make", &["--version"]) {
        return Some("make is not available");
    }
    None
}

/// Builds the DPDK harness `target` with the repository's own Makefile,
/// but in `dir`: the Makefile and `sources` are copied there, so the build
/// never writes into the source tree, where a parallel test or a
/// developer's own build could be using it. -O2 instead of the Makefile's
/// -O3 -march=native: nothing is compared with a bar.
#[allow(dead_code)] // only the DPDK comparisons use it
pub fn build_dpdk_harness(dir: &TempDir, target: &str, sources: &[&str]) -> PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/dpdk");
    for file in std::iter::once(&"Makefile").chain(sources) {
        std::fs::copy(src.join(file), dir.path(file)).unwrap_or_else(|e| panic!("copy {file}: {e}"));
    }
    let out = Command::new("make").arg("-C").arg(dir.dir()).arg("CFLAGS=-O2").arg(target).output().expect("run make");
    assert!(
        out.status.success(),
        "building the DPDK harness {target} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = dir.path(target);
    assert!(bin.is_file(), "make succeeded but left no {}", bin.display());
    bin
}

/// Runs the built `flowsteer` binary with `args`.
pub fn flowsteer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(args).output().expect("run flowsteer")
}

/// Waits (bounded: 30 s) until a live `flowsteer run` started in namespace
/// B of `lab` receives: its worker threads (`fs-worker-N`) run, which they
/// do only once every socket is open, bound and registered with the XDP
/// program; and the XDP program is attached (`xdp`) or `rings` packet
/// sockets are bound to an interface. Then half a second more.
///
/// Judged by what the run has done, not by a sleep: on a loaded machine a
/// run takes seconds to set up, and a frame sent before its sockets are
/// registered goes to the kernel instead.
#[allow(dead_code)] // only the live tests use it
pub fn wait_receiving(lab: &flowsteer_netns::Lab, child: &std::process::Child, xdp: bool, rings: usize) {
    use flowsteer_netns::Side;
    use std::time::{Duration, Instant};
    let workers = || {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).into_iter().flatten().flatten();
        tasks
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("fs-worker")))
            .count()
    };
    let hooked = || {
        if xdp {
            let out = Command::new("ip").args(["-n", lab.ns(Side::B), "link", "show", lab.dev(Side::B)]).output();
            out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("xdp"))
        } else {
            // `/proc/net/packet`'s `Iface` is 0 until a socket is bound.
            let out = Command::new("ip").args(["netns", "exec", lab.ns(Side::B), "cat", "/proc/net/packet"]).output();
            let bound = out.map_or(0, |o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                text.lines().skip(1).filter(|l| l.split_whitespace().nth(4).is_some_and(|i| i != "0")).count()
            });
            bound >= rings
        }
    };
    let t = Instant::now();
    while !(workers() > 0 && hooked()) && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(workers() > 0 && hooked(), "the run never became ready: {} worker threads", workers());
    std::thread::sleep(Duration::from_millis(500));
}
