//! The names the harness gives what it creates, and whose they are: the
//! namespaces' prefix and the process id in each name (shared by the
//! topologies and the Open vSwitch daemons they host).

/// Prefix of every namespace the harness creates.
pub const NS_PREFIX: &str = "fs2544-";

/// The process that made a harness namespace is gone; `false` for a live
/// one and for a name that carries no process id (not the harness's).
pub(crate) fn owner_gone(ns: &str) -> bool {
    let pid = ns.strip_prefix(NS_PREFIX).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok());
    pid.is_some_and(|p| p != std::process::id() && !std::path::Path::new(&format!("/proc/{p}")).exists())
}
