//! flowsteer: the command-line front end. Thin: parse arguments once, call
//! the library crates, print, choose the exit code.
//!
//! Exit codes: 0 success; 1 error (bad input file, bad value, I/O); 2 usage
//! error (unknown flag, missing argument: clap's code); 3 `plan` could not
//! serve every bucket (the plan printed says which and why); 4 `run` stopped
//! because its live source lost its interface (deleted or set down: the
//! final counters are printed, then the error). SIGINT and SIGTERM stop a
//! running command cleanly, with its final counters, and exit 0.

mod cli;
mod cmd;
mod plot;
mod rssopts;
mod sys;

use clap::Parser;

fn main() {
    sys::default_sigpipe();
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        cli::Command::Hash(a) => cmd::hash::run(a),
        cli::Command::Plan(a) => cmd::plan::run(a),
        cli::Command::Analyze(a) => cmd::analyze::run(a),
        cli::Command::Export(a) => cmd::export::run(a),
        cli::Command::Run(a) => cmd::run::run(a),
        cli::Command::Defrag(a) => cmd::defrag::run(a),
        cli::Command::Queues(a) => cmd::queues::run(a),
        cli::Command::Bench(b) => match &b.what {
            cli::BenchWhat::Hash(a) => cmd::bench::hash(a),
            cli::BenchWhat::Analyze(a) => cmd::bench::analyze(a),
            cli::BenchWhat::Steer(a) => cmd::bench::steer(a),
            cli::BenchWhat::Reasm(a) => cmd::bench::reasm(a),
            cli::BenchWhat::Udp(a) => cmd::bench::udp(a),
        },
        cli::Command::UdpEcho(a) => cmd::udp_echo::run(a),
        cli::Command::UdpGen(a) => cmd::udp_gen::run(a),
        cli::Command::Rfc2544(a) => cmd::rfc2544::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line: the chain of causes joined by ": ".
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
