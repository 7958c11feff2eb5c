//! What an interface must be to become a member port, checked by
//! [`port`](crate::port) before it opens anything (at start and on
//! `bridge-ctl port add`):
//!
//! * **Ethernet, not loopback.** The interface's link type must be
//!   `ARPHRD_ETHER` (veth, tap, dummy, bond, VLAN devices and NICs are),
//!   and it must not be a loopback (`IFF_LOOPBACK`): the namespace's own
//!   loopback traffic would flood the segment and hosts' MACs would move
//!   onto it; a tun device or an IP tunnel (ipip, gre, sit, wireguard)
//!   carries no Ethernet header to learn from or forward by. Read over
//!   rtnetlink in the calling thread's network namespace (sysfs shows the
//!   namespace it was mounted in). A missing interface passes here: the
//!   port's opening says it is missing.
//! * **One bridge per interface.** Two bridges on one AF_PACKET port both
//!   receive every frame and both forward it: every frame is delivered
//!   twice. A bridge holds an advisory lock (`flock`, exclusive) on
//!   [`LOCK_DIR`]`/bridge-port-<netns>-<ifindex>.lock` for as long as the
//!   interface is its member (`<netns>`: the inode of the network
//!   namespace, so that two namespaces' `veth0` are two locks; the index,
//!   so that a renamed interface is still the same one). The file holds
//!   the holder's pid and the interface's name. The kernel drops the lock
//!   when its process dies, so a crash leaves a file but no lock; a port
//!   removed or a bridge stopped removes the file. Without the right to
//!   create the directory or the file (not root), ports are not locked
//!   and the bridge says so (a warning).
//!
//! Nothing here prints: refusals are `Err(String)`, as the port's own
//! errors are, and warnings are returned.

use flowsteer_live::link::{LinkInfo, LinkReader, ARPHRD_ETHER, IFF_LOOPBACK};
use rustix::fs::{flock, FlockOperation};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the member ports' lock files are.
pub const LOCK_DIR: &str = "/run/flowsteer";
/// The calling thread's network namespace (`/proc/self` would be the main
/// thread's: the bridge may open ports from a thread that entered another).
const NETNS: &str = "/proc/thread-self/ns/net";
/// How often taking a lock is tried when its file was replaced meanwhile
/// (another bridge released it, removing the file, between our open and
/// our lock).
const LOCK_TRIES: usize = 8;

/// The lock of one member interface: held until dropped (when no worker
/// holds the port's sockets any longer), then the file is removed.
#[derive(Debug)]
pub struct PortLock {
    path: PathBuf,
    /// Holds the `flock` (never read); closing it releases the lock.
    _file: File,
}

impl PortLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PortLock {
    fn drop(&mut self) {
        // Removed while still locked: a bridge that opened the file before
        // the removal and locks it after the close sees that the path no
        // longer names its file and starts over (see `acquire`).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What [`admit`] found: the port's lock (`None`: not locked, or the
/// interface is missing) and what to tell the user.
#[derive(Debug, Default)]
pub(crate) struct Admitted {
    pub lock: Option<Arc<PortLock>>,
    pub warnings: Vec<String>,
}

/// Checks that `iface` (in the calling thread's network namespace) may be
/// a member port, and takes its lock. `Err`: why not, for people.
pub(crate) fn admit(iface: &str) -> Result<Admitted, String> {
    let Some(link) = read_link(iface)? else { return Ok(Admitted::default()) };
    if let Some(why) = refusal(iface, &link) {
        return Err(why);
    }
    let netns = match netns_inode() {
        Ok(ino) => ino,
        Err(e) => {
            return Ok(Admitted {
                lock: None,
                warnings: vec![format!("{iface}: not locked against a second bridge ({NETNS}: {e})")],
            })
        }
    };
    match acquire(Path::new(LOCK_DIR), &lock_name(netns, link.ifindex), iface)? {
        Lock::Held(l) => Ok(Admitted { lock: Some(Arc::new(l)), warnings: Vec::new() }),
        Lock::Skipped(why) => {
            Ok(Admitted { lock: None, warnings: vec![format!("{iface}: not locked against a second bridge ({why})")] })
        }
    }
}

/// The lock file of `iface` in the calling thread's network namespace,
/// held or not; `None` when the interface or the namespace cannot be read.
pub fn lock_path(iface: &str) -> Option<PathBuf> {
    let link = read_link(iface).ok()??;
    Some(Path::new(LOCK_DIR).join(lock_name(netns_inode().ok()?, link.ifindex)))
}

/// `iface` as rtnetlink describes it in the calling thread's namespace;
/// `None` when there is no such interface.
fn read_link(iface: &str) -> Result<Option<LinkInfo>, String> {
    LinkReader::new()
        .and_then(|mut r| r.read_name(iface))
        .map_err(|e| format!("reading {iface}'s link type over netlink: {e}"))
}

/// Why `link` cannot be a member port, or `None`.
fn refusal(iface: &str, link: &LinkInfo) -> Option<String> {
    if link.flags & IFF_LOOPBACK != 0 {
        return Some(format!(
            "{iface} is a loopback interface, not a bridge port: the namespace's own loopback traffic would flood \
             the segment and the hosts' MACs would be learned on it (a port must be an Ethernet interface)"
        ));
    }
    if link.link_type != ARPHRD_ETHER {
        let kind = if link.kind.is_empty() { String::new() } else { format!("{} device, ", link.kind) };
        return Some(format!(
            "{iface} is not an Ethernet interface ({kind}link type {}{}): its frames have no Ethernet header to \
             learn from or forward by (a port must be Ethernet, ARPHRD_ETHER = 1: veth, tap, dummy, bond, VLAN, a NIC)",
            link.link_type,
            arphrd_name(link.link_type).map_or(String::new(), |n| format!(", {n}")),
        ));
    }
    None
}

/// Names of the link types one may meet instead of Ethernet.
fn arphrd_name(t: u16) -> Option<&'static str> {
    Some(match t {
        32 => "InfiniBand",
        280 => "CAN",
        512 => "PPP",
        519 => "raw IP",
        768 => "IPIP tunnel",
        769 => "IPv6-in-IPv6 tunnel",
        772 => "loopback",
        776 => "SIT tunnel",
        778 => "GRE tunnel",
        823 => "IPv6 GRE tunnel",
        65534 => "none",
        _ => return None,
    })
}

/// The inode of the calling thread's network namespace.
fn netns_inode() -> std::io::Result<u64> {
    Ok(std::fs::metadata(NETNS)?.ino())
}

fn lock_name(netns: u64, ifindex: u32) -> String {
    format!("bridge-port-{netns}-{ifindex}.lock")
}

enum Lock {
    Held(PortLock),
    /// Not locked, and why (no right to create the file, ...).
    Skipped(String),
}

/// Takes the exclusive lock of `dir/name` for interface `iface`, without
/// waiting. `Err`: another holds it (the message names its pid when the
/// file says).
fn acquire(dir: &Path, name: &str, iface: &str) -> Result<Lock, String> {
    if let Err(e) = DirBuilder::new().recursive(true).mode(0o755).create(dir) {
        return Ok(Lock::Skipped(format!("{}: {e}", dir.display())));
    }
    let path = dir.join(name);
    for _ in 0..LOCK_TRIES {
        let mut file =
            match OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o644).open(&path) {
                Ok(f) => f,
                Err(e) => return Ok(Lock::Skipped(format!("{}: {e}", path.display()))),
            };
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = match text.lines().next().and_then(|l| l.trim().parse::<u32>().ok()) {
                    Some(pid) => format!("another flowsteer bridge (pid {pid})"),
                    None => "another flowsteer bridge".to_string(),
                };
                return Err(format!(
                    "{holder} serves {iface}: two bridges on one interface would each forward every frame (it holds \
                     {}); stop it or remove {iface} from it first",
                    path.display()
                ));
            }
            Err(e) => return Ok(Lock::Skipped(format!("flock {}: {e}", path.display()))),
        }
        // Still the file the path names? A holder removes it when it lets
        // go: a lock on a removed file would lock nothing.
        let same = match (file.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if !same {
            continue;
        }
        let _ = file.set_len(0).and_then(|()| file.write_all(format!("{}\n{iface}\n", std::process::id()).as_bytes()));
        return Ok(Lock::Held(PortLock { path, _file: file }));
    }
    Ok(Lock::Skipped(format!("{} was replaced {LOCK_TRIES} times while being locked", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(link_type: u16, flags: u32, kind: &str) -> LinkInfo {
        LinkInfo { link_type, flags, kind: kind.into(), ..LinkInfo::default() }
    }

    #[test]
    fn loopback_and_non_ethernet_links_are_refused_with_the_reason() {
        let lo = refusal("lo", &link(772, IFF_LOOPBACK | 1, "")).unwrap();
        assert!(lo.contains("lo is a loopback interface") && lo.contains("flood"), "{lo}");
        let tun = refusal("tun0", &link(65534, 1, "tun")).unwrap();
        assert!(tun.contains("tun0 is not an Ethernet interface (tun device, link type 65534, none"), "{tun}");
        let gre = refusal("gre1", &link(778, 1, "gre")).unwrap();
        assert!(gre.contains("GRE tunnel") && gre.contains("ARPHRD_ETHER"), "{gre}");
        let odd = refusal("x", &link(9999, 0, "")).unwrap();
        assert!(odd.contains("(link type 9999)"), "{odd}");
        // An Ethernet device that says it is a loopback is still refused.
        assert!(refusal("odd", &link(1, IFF_LOOPBACK, "")).is_some());
        for kind in ["veth", "dummy", "tun", ""] {
            assert_eq!(refusal("eth", &link(ARPHRD_ETHER, 1, kind)), None);
        }
    }

    #[test]
    fn a_lock_is_exclusive_names_its_holder_and_goes_with_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let Ok(Lock::Held(first)) = acquire(&run, "p.lock", "veth0") else { panic!("not locked") };
        let text = std::fs::read_to_string(first.path()).unwrap();
        assert_eq!(text, format!("{}\nveth0\n", std::process::id()));
        // Another open file (as another process would have) is refused.
        let Err(e) = acquire(&run, "p.lock", "veth0") else { panic!("locked twice") };
        assert!(e.contains(&format!("another flowsteer bridge (pid {}) serves veth0", std::process::id())), "{e}");
        assert!(e.contains(&first.path().display().to_string()), "{e}");
        // Another name is another lock.
        let Ok(Lock::Held(_other)) = acquire(&run, "q.lock", "veth1") else { panic!("not locked") };
        let path = first.path().to_path_buf();
        drop(first);
        assert!(!path.exists(), "lock file left behind");
        let Ok(Lock::Held(again)) = acquire(&run, "p.lock", "veth0") else { panic!("not locked after release") };
        drop(again);
        // A file left by a holder that died (the kernel dropped its lock)
        // is taken over.
        std::fs::write(&path, "4194304\nveth0\n").unwrap();
        let Ok(Lock::Held(taken)) = acquire(&run, "p.lock", "veth0") else { panic!("stale file not taken over") };
        assert_eq!(std::fs::read_to_string(taken.path()).unwrap(), format!("{}\nveth0\n", std::process::id()));
    }

    #[test]
    fn no_right_to_the_directory_skips_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        // A directory that cannot be made: its parent is a file.
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let Ok(Lock::Skipped(why)) = acquire(&file.join("run"), "p.lock", "veth0") else { panic!("locked") };
        assert!(why.contains("file/run"), "{why}");
    }

    #[test]
    fn names_key_on_the_namespace_and_the_index() {
        assert_eq!(lock_name(4026531840, 3), "bridge-port-4026531840-3.lock");
        assert!(netns_inode().unwrap() > 0);
    }
}
