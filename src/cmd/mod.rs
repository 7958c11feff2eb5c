//! One module per subcommand.

pub mod analyze;
pub mod bench;
pub mod defrag;
pub mod hash;
pub mod plan;
pub mod queues;
pub mod run;
pub mod udp_echo;
pub mod udp_gen;

/// Print warnings once, to stderr.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}
