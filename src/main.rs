//! flowsteer: the command-line front end. Thin: parse arguments once, call
//! the library crates, print, choose the exit code.
//!
//! Exit codes: 0 success; 1 failure (bad input file, I/O, a device or
//! peer that did not do its part, packets lost where the command's purpose
//! was to deliver them; `bridge-ctl`: the bridge answered an error); 2 usage
//! error (unknown flag, missing argument, a value outside its flag's range,
//! flags that contradict each other: one line on stderr, nothing on
//! stdout); 3 `plan` could not serve every bucket (the plan printed says
//! which and why), `bridge-ctl` could not reach the bridge (no socket,
//! permission denied, no answer); 4 `run` stopped because its live source
//! lost its interface (deleted or set down: the
//! final counters are printed, then the error). SIGINT and SIGTERM stop a
//! running command cleanly, with its final counters, and exit 0; a second
//! signal ends `run` at once, without draining its queues, and it still
//! prints the counters gathered so far (exit 1).

mod cli;
mod cmd;
mod legend;
mod plot;
mod progress;
mod ranges;
mod report;
mod rssopts;
mod sys;

use clap::Parser;

fn main() {
    sys::default_sigpipe();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => usage_exit(e),
    };
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
            cli::BenchWhat::Flows(a) => cmd::bench::flows(a),
            cli::BenchWhat::Reasm(a) => cmd::bench::reasm(a),
            cli::BenchWhat::Offload(a) => cmd::bench::offload(a),
            cli::BenchWhat::Udp(a) => cmd::bench::udp(a),
            cli::BenchWhat::Tcp(a) => cmd::bench::tcp(a),
        },
        cli::Command::UdpEcho(a) => cmd::udp_echo::run(a),
        cli::Command::UdpGen(a) => cmd::udp_gen::run(a),
        cli::Command::Rfc2544(a) => cmd::rfc2544::run(a),
        cli::Command::BridgeCtl(a) => cmd::bridge_ctl::run(a),
        cli::Command::Bridge(a) => cmd::bridge::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line: the chain of causes joined by ": ".
            eprintln!("error: {e:#}");
            std::process::exit(if cmd::is_usage(&e) { 2 } else { 1 });
        }
    }
}

/// A command line clap refused: `--help` and `--version` print as clap
/// prints them; an error is one line on stderr (clap's message with its
/// usage block cut off) and exit code 2.
fn usage_exit(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    eprintln!("{}", one_line(&e.render().to_string()));
    std::process::exit(2);
}

/// clap's multi-line message as one line: the text before its `Usage:`
/// block and `For more information` tip, lines joined by a space.
fn one_line(text: &str) -> String {
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line);
        }
    }
    format!("{} (see --help)", parts.join(" "))
}
