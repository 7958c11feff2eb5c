//! Open vSwitch as a device under test: its userspace datapath
//! (`datapath_type=netdev`, no kernel module) with AF_XDP ports on `dut0`
//! and `dut1` and the NORMAL action (MAC learning: the one flow of a new
//! bridge without a controller), its PMD thread pinned to the DUT's CPU at
//! the flowsteer bridge worker's nice ([`crate::bridge::WORKER_NICE`]).
//!
//! Measured on this machine's Open vSwitch 3.1 (Debian): `ovs-vswitchd`
//! cannot raise `RLIMIT_MEMLOCK` here and logs an error, harmless (the
//! kernel charges AF_XDP memory to the cgroup); inside `ip netns exec`
//! there is no bpffs, so libxdp loads its program without the dispatcher
//! (one XDP program per port, which is all this needs).
//!
//! The harness runs daemons of its own, never the system's: a directory
//! per topology (`TMPDIR/fs2544-PID-N-ovs`, mode 0700) holds the database,
//! the control sockets, the pid files and the logs (`OVS_RUNDIR`,
//! `OVS_DBDIR`, `OVS_LOGDIR` and `OVS_SYSCONFDIR` all point there).
//!
//! ```text
//! ovsdb-tool create DIR/conf.db vswitch.ovsschema
//! ovsdb-server DIR/conf.db --remote=punix:DIR/db.sock ...          (caller's namespace)
//! ovs-vsctl --no-wait init -- set Open_vSwitch . other_config:pmd-cpu-mask=MASK ...
//! nice -n -10 ip netns exec NS ovs-vswitchd unix:DIR/db.sock --disable-system ...  (DUT namespace)
//! ovs-vsctl add-br br0 -- set Bridge br0 datapath_type=netdev
//!           -- add-port br0 dut0 -- set Interface dut0 type=afxdp options:xdp-mode=native
//!           -- add-port br0 dut1 -- ...
//! ```
//!
//! Stopping ([`OvsDut::stop`], also on drop, hence on a panic): `ovs-appctl
//! exit --cleanup` to `ovs-vswitchd` (its ports and XDP programs removed),
//! `ovs-appctl exit` to `ovsdb-server`, each followed by SIGTERM after
//! [`EXIT_LIMIT`] and SIGKILL after [`TERM_LIMIT`]; then the directory is
//! removed. The topology (`dut::Topology`) does this before it removes the
//! namespaces. Every command the harness runs is killed at [`COMMAND_LIMIT`].
//!
//! A killed harness: the daemons are started under `setpriv --pdeathsig
//! KILL` (util-linux) when it is installed, from a thread that lives as
//! long as the [`OvsDut`], so they die with the process; what is left
//! anyway (no setpriv) is stopped and removed by [`cleanup`] (`flowsteer
//! rfc2544 --cleanup`), which finds the daemons by their pid files and
//! kills only a process whose command line names the directory.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Error;

/// The programs the `ovs` DUT runs; without any of them it is skipped.
pub const PROGRAMS: [&str; 5] = ["ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl"];

/// Where Debian's `openvswitch-common` installs the database schema
/// (`OVS_PKGDATADIR` overrides the directory).
pub const SCHEMA_DIR: &str = "/usr/share/openvswitch";

/// Longest any one command may run (`ovsdb-tool`, `ovs-vsctl`, which
/// waits for `ovs-vswitchd` to apply a change, `ovs-appctl`, `kill`)
/// before it is killed.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// How long a daemon may take to open its control socket after it starts.
pub const START_LIMIT: Duration = Duration::from_secs(10);
/// How long a daemon may take to exit after `ovs-appctl exit`; then SIGTERM.
pub const EXIT_LIMIT: Duration = Duration::from_secs(5);
/// How long a daemon may take to exit after SIGTERM; then SIGKILL.
pub const TERM_LIMIT: Duration = Duration::from_secs(2);

/// The OVS bridge's name (in the DUT namespace; in the netdev datapath its
/// local port is a tap device of that name, left down).
pub const BRIDGE: &str = "br0";

/// Ending of the harness's OVS directories (`fs2544-PID-N-ovs`).
const DIR_SUFFIX: &str = "-ovs";

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// Why the `ovs` DUT cannot run here (a program missing from `PATH`, or
/// the schema), or `None`.
pub fn skip_reason() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing = missing_programs(&path);
    if !missing.is_empty() {
        return Some(format!(
            "Open vSwitch is not installed ({} not in PATH); Debian: apt-get install openvswitch-switch",
            missing.join(", ")
        ));
    }
    let schema = schema_path();
    (!schema.is_file()).then(|| format!("Open vSwitch's schema {} is missing", schema.display()))
}

/// The [`PROGRAMS`] not found as files in the directories of `path` (a
/// `PATH` value).
pub fn missing_programs(path: &OsStr) -> Vec<&'static str> {
    PROGRAMS.iter().copied().filter(|p| !std::env::split_paths(path).any(|d| d.join(p).is_file())).collect()
}

fn schema_path() -> PathBuf {
    let dir = std::env::var_os("OVS_PKGDATADIR").map_or_else(|| PathBuf::from(SCHEMA_DIR), PathBuf::from);
    dir.join("vswitch.ovsschema")
}

/// `other_config:pmd-cpu-mask`'s value for one CPU: hex, no `0x`.
pub fn pmd_mask(cpu: usize) -> String {
    let mut digits = vec![0u8; cpu / 4 + 1];
    digits[cpu / 4] = 1 << (cpu % 4);
    digits.iter().rev().map(|d| format!("{d:x}")).collect()
}

/// What a bounded command printed, or why it failed.
fn run(program: &str, args: &[&str], env: &[(&str, &Path)], limit: Duration) -> Result<String, String> {
    let line = || format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", line()))?;
    let collect = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = collect(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = collect(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let end = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() < end => std::thread::sleep(POLL),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    match status {
        Some(st) if st.success() => Ok(out),
        Some(st) => Err(format!("{}: {st}: {}", line(), err.trim())),
        None => Err(format!("{}: no answer within {limit:?}, killed", line())),
    }
}

/// The last lines of a daemon's log, for an error message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
    if tail.is_empty() {
        String::new()
    } else {
        format!(" ({}: {tail})", path.display())
    }
}

/// A process to start (data, so it can cross to the spawning thread).
struct Spawn {
    program: String,
    args: Vec<String>,
    env: Vec<(String, PathBuf)>,
    stderr: PathBuf,
}

type SpawnRequest = (Spawn, mpsc::Sender<std::io::Result<Child>>);

/// Starts processes on a thread that lives as long as the [`OvsDut`]:
/// `PR_SET_PDEATHSIG` (set by `setpriv`) fires when the *thread* that
/// started a child ends, so the daemons must not be started by a caller's
/// thread that may end first.
struct Spawner {
    tx: Option<mpsc::Sender<SpawnRequest>>,
    thread: Option<JoinHandle<()>>,
}

impl Spawner {
    fn new() -> Result<Spawner, Error> {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let setpriv = which("setpriv");
        let thread = std::thread::Builder::new()
            .name("fs-2544-ovs".into())
            .spawn(move || {
                for (s, reply) in rx {
                    let mut cmd = match &setpriv {
                        Some(sp) => {
                            let mut c = Command::new(sp);
                            c.args(["--pdeathsig", "KILL", "--"]).arg(&s.program);
                            c
                        }
                        None => Command::new(&s.program),
                    };
                    let started = File::create(&s.stderr).and_then(|err| {
                        cmd.args(&s.args)
                            .envs(s.env.iter().map(|(k, v)| (k, v)))
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(err)
                            .spawn()
                    });
                    let _ = reply.send(started);
                }
            })
            .map_err(|e| Error::Thread(e.to_string()))?;
        Ok(Spawner { tx: Some(tx), thread: Some(thread) })
    }

    fn spawn(&self, s: Spawn) -> Result<Child, String> {
        let what = s.program.clone();
        let (reply, answer) = mpsc::channel();
        self.tx.as_ref().ok_or("spawner stopped")?.send((s, reply)).map_err(|_| "spawner thread gone".to_string())?;
        answer.recv().map_err(|_| "spawner thread gone".to_string())?.map_err(|e| format!("{what}: {e}"))
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// One of the two daemons, our child.
#[derive(Debug)]
struct Daemon {
    name: &'static str,
    child: Child,
    /// Its control socket (`--unixctl`).
    ctl: PathBuf,
    log: PathBuf,
    stderr: PathBuf,
}

impl Daemon {
    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until it exits or `limit` passes; whether it exited.
    fn wait_exit(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while !self.exited() {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    }

    /// What it said before it failed.
    fn said(&self) -> String {
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let err = err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").to_string();
        let err = if err.is_empty() { String::new() } else { format!(": {err}") };
        format!("{err}{}", log_tail(&self.log))
    }

    /// Waits for its control socket; an error if it exits or takes longer
    /// than [`START_LIMIT`].
    fn wait_ready(&mut self, socket: &Path) -> Result<(), String> {
        let end = Instant::now() + START_LIMIT;
        while !socket.exists() {
            if self.exited() {
                return Err(format!("{} exited at start{}", self.name, self.said()));
            }
            if Instant::now() >= end {
                return Err(format!(
                    "{} did not open {} within {START_LIMIT:?}{}",
                    self.name,
                    socket.display(),
                    self.said()
                ));
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    }

    /// `ovs-appctl exit ARGS`, then SIGTERM, then SIGKILL, each bounded;
    /// reaped at the end.
    fn stop(&mut self, exit_args: &[&str]) {
        if !self.exited() {
            let ctl = self.ctl.to_string_lossy().into_owned();
            let timeout = format!("--timeout={}", EXIT_LIMIT.as_secs());
            let mut args = vec!["-t", ctl.as_str(), timeout.as_str(), "exit"];
            args.extend_from_slice(exit_args);
            let _ = run("ovs-appctl", &args, &[], EXIT_LIMIT + Duration::from_secs(1));
        }
        if !self.wait_exit(EXIT_LIMIT) {
            // Our child, not yet reaped: its pid is still ours to signal.
            let pid = self.child.id().to_string();
            let _ = run("sh", &["-c", "kill -TERM \"$0\"", &pid], &[], COMMAND_LIMIT);
            if !self.wait_exit(TERM_LIMIT) {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }

    /// Its threads' CPU time so far, ns (`/proc/PID/task/*/schedstat`).
    fn cpu_ns(&self) -> u64 {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else { return 0 };
        dir.flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
            .sum()
    }
}

/// A running Open vSwitch between `dut0` and `dut1`; stopped on drop.
#[derive(Debug)]
pub struct OvsDut {
    dir: PathBuf,
    db: Option<Daemon>,
    vswitchd: Option<Daemon>,
    spawner: Option<SpawnerHandle>,
}

/// [`Spawner`] behind `Debug`.
struct SpawnerHandle(Spawner);

impl std::fmt::Debug for SpawnerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spawner")
    }
}

impl OvsDut {
    /// Starts `ovsdb-server` and, in namespace `ns`, `ovs-vswitchd`, with
    /// a directory of their own named after `base` (the topology's
    /// namespace prefix, `fs2544-PID-N`), a netdev bridge with AF_XDP
    /// ports (native XDP) on `ifaces`, and the PMD thread pinned to
    /// `cpus[0]` when given. On an error what was started is stopped and
    /// the directory removed.
    pub fn start(base: &str, ns: &str, ifaces: &[&str], cpus: &[usize]) -> Result<OvsDut, Error> {
        if let Some(why) = skip_reason() {
            return Err(Error::Unavailable(why));
        }
        let dir = std::env::temp_dir().join(format!("{base}{DIR_SUFFIX}"));
        // A directory of a killed run whose pid came round again.
        if dir.exists() {
            stop_leftover(&dir);
        }
        create_private_dir(&dir).map_err(|e| Error::Ovs(format!("{}: {e}", dir.display())))?;
        let mut ovs = OvsDut { dir, db: None, vswitchd: None, spawner: None };
        ovs.spawner = Some(SpawnerHandle(Spawner::new()?));
        ovs.setup(ns, ifaces, cpus).map_err(Error::Ovs)?;
        Ok(ovs)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn env(&self) -> Vec<(&'static str, &Path)> {
        ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"]
            .into_iter()
            .map(|k| (k, self.dir.as_path()))
            .collect()
    }

    /// `ovs-vsctl` on our database; it waits for `ovs-vswitchd` to apply
    /// the change unless `--no-wait` is among `args`.
    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.path("db.sock").display());
        let timeout = format!("--timeout={}", COMMAND_LIMIT.as_secs().saturating_sub(5));
        let mut all = vec![db.as_str(), timeout.as_str()];
        all.extend_from_slice(args);
        run("ovs-vsctl", &all, &self.env(), COMMAND_LIMIT)
    }

    fn daemon(&self, name: &'static str, program: Vec<String>) -> Result<Daemon, String> {
        let spawner = self.spawner.as_ref().ok_or("stopped")?;
        let ctl = self.dir.join(format!("{name}.ctl"));
        let log = self.dir.join(format!("{name}.log"));
        let stderr = self.dir.join(format!("{name}.stderr"));
        let mut args = program;
        args.extend([
            format!("--unixctl={}", ctl.display()),
            format!("--pidfile={}", self.dir.join(format!("{name}.pid")).display()),
            format!("--log-file={}", log.display()),
            "-vconsole:warn".into(),
        ]);
        let program = args.remove(0);
        let env = self.env().into_iter().map(|(k, v)| (k.to_string(), v.to_path_buf())).collect();
        let child = spawner.0.spawn(Spawn { program, args, env, stderr: stderr.clone() })?;
        Ok(Daemon { name, child, ctl, log, stderr })
    }

    fn setup(&mut self, ns: &str, ifaces: &[&str], cpus: &[usize]) -> Result<(), String> {
        let db = self.path("conf.db");
        let schema = schema_path();
        run("ovsdb-tool", &["create", &db.to_string_lossy(), &schema.to_string_lossy()], &self.env(), COMMAND_LIMIT)?;
        let sock = self.path("db.sock");
        let d = self.daemon(
            "ovsdb-server",
            vec!["ovsdb-server".into(), db.to_string_lossy().into(), format!("--remote=punix:{}", sock.display())],
        )?;
        let d = self.db.insert(d);
        d.wait_ready(&sock)?;
        let mut init = vec!["--no-wait", "init", "--", "set", "Open_vSwitch", ".", "other_config:dpdk-init=false"];
        let mask = cpus.first().map(|&c| format!("other_config:pmd-cpu-mask={}", pmd_mask(c)));
        init.extend(mask.as_deref());
        self.vsctl(&init)?;
        // At the flowsteer bridge worker's nice: the PMD thread (created by
        // ovs-vswitchd, it inherits the value) is not left a fair share of
        // its CPU when other work lands there.
        let d = self.daemon(
            "ovs-vswitchd",
            vec![
                "nice".into(),
                "-n".into(),
                crate::bridge::WORKER_NICE.to_string(),
                "ip".into(),
                "netns".into(),
                "exec".into(),
                ns.into(),
                "ovs-vswitchd".into(),
                format!("unix:{}", sock.display()),
                "--disable-system".into(),
            ],
        )?;
        let ctl = d.ctl.clone();
        self.vswitchd.insert(d).wait_ready(&ctl)?;
        let mut add = vec!["add-br", BRIDGE, "--", "set", "Bridge", BRIDGE, "datapath_type=netdev"];
        for iface in ifaces {
            add.extend(["--", "add-port", BRIDGE, iface, "--", "set", "Interface", iface]);
            add.extend(["type=afxdp", "options:xdp-mode=native"]);
        }
        let added = self.vsctl(&add);
        // A port that did not open has ofport -1 and says why in `error`.
        for iface in ifaces {
            let ofport = self.vsctl(&["get", "Interface", iface, "ofport"]).unwrap_or_default();
            if ofport.trim().parse::<i64>().is_ok_and(|p| p > 0) {
                continue;
            }
            let error = self.vsctl(&["get", "Interface", iface, "error"]).unwrap_or_default();
            let types = self.vsctl(&["get", "Open_vSwitch", ".", "iface_types"]).unwrap_or_default();
            let hint = if types.contains("afxdp") { "" } else { " (this ovs-vswitchd has no afxdp port type)" };
            let log = self.vswitchd.as_ref().map(|d| log_tail(&d.log)).unwrap_or_default();
            return Err(format!("port {iface} did not open: {}{hint}{log}", error.trim()));
        }
        added.map(|_| ())
    }

    /// The directory of its database, sockets, pid files and logs (gone
    /// once stopped).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The daemons' process ids (`ovsdb-server`, `ovs-vswitchd`) while they run.
    pub fn pids(&self) -> Vec<u32> {
        self.db.iter().chain(&self.vswitchd).map(|d| d.child.id()).collect()
    }

    /// CPU time of `ovs-vswitchd`'s threads so far, ns (its PMD thread
    /// busy-polls: it counts all the time, not only per frame).
    pub fn cpu_ns(&self) -> u64 {
        self.vswitchd.as_ref().map_or(0, Daemon::cpu_ns)
    }

    /// Stops both daemons (bounded: `exit`, SIGTERM, SIGKILL) and removes
    /// the directory; done on drop too.
    pub fn stop(&mut self) {
        if let Some(mut d) = self.vswitchd.take() {
            d.stop(&["--cleanup"]);
        }
        if let Some(mut d) = self.db.take() {
            d.stop(&[]);
        }
        drop(self.spawner.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for OvsDut {
    fn drop(&mut self) {
        self.stop();
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// The harness's OVS directories that exist now (`TMPDIR/fs2544-*-ovs`).
pub fn leftovers() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else { return Vec::new() };
    let mut v: Vec<PathBuf> = dir
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(crate::names::NS_PREFIX) && n.ends_with(DIR_SUFFIX)
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// A process whose command line names `dir` (so a pid that came round
/// again to another program is left alone).
fn names_dir(pid: u32, dir: &Path) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let want = dir.to_string_lossy();
    String::from_utf8_lossy(&cmdline).split('\0').any(|a| a.contains(want.as_ref()))
}

/// Stops the daemons a pid file in `dir` names (SIGTERM, SIGKILL after
/// [`TERM_LIMIT`]) and removes `dir`.
fn stop_leftover(dir: &Path) {
    for name in ["ovs-vswitchd", "ovsdb-server"] {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.pid"))) else { continue };
        let Ok(pid) = text.trim().parse::<u32>() else { continue };
        if !names_dir(pid, dir) {
            continue;
        }
        let p = pid.to_string();
        let _ = run("sh", &["-c", "kill -TERM \"$0\"", &p], &[], COMMAND_LIMIT);
        let end = Instant::now() + TERM_LIMIT;
        while names_dir(pid, dir) && Instant::now() < end {
            std::thread::sleep(POLL);
        }
        if names_dir(pid, dir) {
            let _ = run("sh", &["-c", "kill -KILL \"$0\"", &p], &[], COMMAND_LIMIT);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Stops the daemons of harness runs that are gone (killed before they
/// could clean up) and removes their directories; returns the
/// directories. Those of a run still going are left alone.
pub fn cleanup() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for dir in leftovers() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if crate::names::owner_gone(&name) {
            stop_leftover(&dir);
            removed.push(dir);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmd_masks_are_plain_hex_of_one_cpu() {
        assert_eq!(pmd_mask(0), "1");
        assert_eq!(pmd_mask(1), "2");
        assert_eq!(pmd_mask(3), "8");
        assert_eq!(pmd_mask(4), "10");
        assert_eq!(pmd_mask(9), "200");
        assert_eq!(pmd_mask(64), "10000000000000000");
    }

    #[test]
    fn programs_missing_from_a_path_are_named() {
        let empty = std::env::temp_dir().join(format!("fs2544-ovs-path-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        assert_eq!(missing_programs(empty.as_os_str()), PROGRAMS.to_vec());
        for p in &PROGRAMS[..4] {
            std::fs::write(empty.join(p), "").unwrap();
        }
        let path = std::env::join_paths([Path::new("/nonexistent"), &empty]).unwrap();
        assert_eq!(missing_programs(&path), vec!["ovs-appctl"]);
        std::fs::remove_dir_all(&empty).unwrap();
    }

    #[test]
    fn a_bounded_command_is_killed_at_its_limit() {
        let t = Instant::now();
        let e = run("sleep", &["10"], &[], Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("killed"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(run("sh", &["-c", "echo hi"], &[], COMMAND_LIMIT).unwrap(), "hi\n");
        assert!(run("sh", &["-c", "echo no >&2; exit 3"], &[], COMMAND_LIMIT).unwrap_err().contains("no"));
    }
}
