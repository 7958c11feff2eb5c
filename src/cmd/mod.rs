//! One module per subcommand.

pub mod analyze;
pub mod bench;
pub mod bench_reasm;
pub mod bench_steer;
pub mod defrag;
pub mod hash;
pub mod plan;
pub mod run;

/// Print warnings once, to stderr.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}
