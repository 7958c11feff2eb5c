//! Every `--flag` that a subcommand's `--help` or a table legend
//! (src/legend.rs) names exists: for that subcommand (or a parent of it,
//! whose options come before it), or for the subcommand the text names
//! right before the flag (`run --rx-queues`, `flowsteer bridge --ctl`).
//! Subcommands are found from the `Commands:` sections of the help, so a
//! new one is covered without a change here.

#[allow(dead_code)] // only `flowsteer` is used here
mod common;

use common::flowsteer;
use std::collections::BTreeMap;

/// A subcommand's words on the command line (`["bench", "steer"]`).
type Path = Vec<String>;

fn help(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let o = flowsteer(&args);
    assert_eq!(o.status.code(), Some(0), "{args:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The subcommands listed in a help text's `Commands:` section (not `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut in_commands = false;
    let mut v = Vec::new();
    for line in help.lines() {
        if line == "Commands:" {
            in_commands = true;
            continue;
        }
        if in_commands {
            if !line.starts_with("  ") {
                break;
            }
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                v.push(name.to_string());
            }
        }
    }
    v
}

/// Every subcommand path, parents included, with its help text.
fn all_commands() -> BTreeMap<Path, String> {
    let mut found = BTreeMap::new();
    let mut todo: Vec<Path> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let text = help(&path);
        for sub in subcommands(&text) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        found.insert(path, text);
    }
    found
}

/// The options a help text lists (`-x, --flag` or `--flag` at the start of
/// an indented line).
fn options(help: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut in_options = false;
    for line in help.lines() {
        if line.ends_with("Options:") {
            in_options = true;
            continue;
        }
        if in_options && !line.starts_with(' ') {
            in_options = false;
        }
        if !in_options {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let flag = match words.as_slice() {
            [short, long, ..] if short.len() == 3 && short.ends_with(',') => *long,
            [long, ..] => *long,
            _ => continue,
        };
        if let Some(name) = flag.strip_prefix("--") {
            let name: String = name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            v.push(format!("--{name}"));
        }
    }
    v
}

/// `(byte offset, flag)` of every `--flag` a text names.
fn mentions(text: &str) -> Vec<(usize, String)> {
    let b = text.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-' && b[i + 1] == b'-' && b[i + 2].is_ascii_lowercase();
        let after_word = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if starts && !after_word {
            let end = (i + 2..b.len()).find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'-')).unwrap_or(b.len());
            let flag = text[i..end].trim_end_matches('-').to_string();
            v.push((i, flag));
            i = end;
        } else {
            i += 1;
        }
    }
    v
}

/// The subcommands `text` names before byte `at` on the same line: every
/// path whose last word stands there as a word (disambiguated by the word
/// before it when it names a parent, as in `bench steer`), the nearest
/// first (a summary line of `flowsteer --help` starts with its command's
/// name, and may name other commands' words before the flag).
fn named_before<'a>(text: &str, at: usize, commands: &'a BTreeMap<Path, Vec<String>>) -> Vec<&'a Path> {
    let mut all = Vec::new();
    let mut end = at;
    loop {
        let found = named_last_before(text, end, commands);
        let Some((word_at, paths)) = found else { return all };
        all.extend(paths);
        end = word_at;
    }
}

/// The subcommands named last before byte `at` on its line, and where that word starts.
fn named_last_before<'a>(
    text: &str,
    at: usize,
    commands: &'a BTreeMap<Path, Vec<String>>,
) -> Option<(usize, Vec<&'a Path>)> {
    let line_start = text[..at].rfind('\n').map_or(0, |p| p + 1);
    let before = &text[line_start..at];
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in before.char_indices().chain(std::iter::once((before.len(), ' '))) {
        let part = c.is_ascii_alphanumeric() || c == '-';
        match (part, start) {
            (true, None) => start = Some(i),
            (false, Some(s0)) => {
                let w = &before[s0..i];
                if !w.starts_with('-') {
                    words.push((s0, w));
                }
                start = None;
            }
            _ => {}
        }
    }
    for (k, (pos, word)) in words.iter().enumerate().rev() {
        let candidates: Vec<&Path> = commands.keys().filter(|p| p.last().is_some_and(|l| l == word)).collect();
        if candidates.is_empty() {
            continue;
        }
        let prev = k.checked_sub(1).map(|j| words[j].1);
        let exact: Vec<&Path> =
            candidates.iter().copied().filter(|p| p.len() >= 2 && prev == Some(p[p.len() - 2].as_str())).collect();
        return Some((line_start + pos, if exact.is_empty() { candidates } else { exact }));
    }
    None
}

/// The flags valid for `path`: its own and its parents'.
fn valid_for(path: &Path, commands: &BTreeMap<Path, Vec<String>>) -> Vec<String> {
    (0..=path.len()).filter_map(|n| commands.get(&path[..n].to_vec())).flatten().cloned().collect()
}

/// What is wrong with the flags `text` (shown for `path`) names.
fn check(path: &Path, text: &str, commands: &BTreeMap<Path, Vec<String>>, what: &str) -> Vec<String> {
    let own = valid_for(path, commands);
    let mut errors = Vec::new();
    for (at, flag) in mentions(text) {
        if own.contains(&flag) {
            continue;
        }
        let named = named_before(text, at, commands);
        if named.iter().any(|p| valid_for(p, commands).contains(&flag)) {
            continue;
        }
        let line_start = text[..at].rfind('\n').map_or(0, |p| p + 1);
        let line_end = text[at..].find('\n').map_or(text.len(), |p| at + p);
        errors.push(format!(
            "{what} of `{}` names {flag}, which is not a flag of it{}: {}",
            path.join(" "),
            if named.is_empty() {
                String::new()
            } else {
                format!(" nor of `{}`", named.iter().map(|p| p.join(" ")).collect::<Vec<_>>().join("`, `"))
            },
            text[line_start..line_end].trim()
        ));
    }
    errors
}

#[test]
fn every_flag_a_help_text_names_exists() {
    let helps = all_commands();
    assert!(helps.len() > 25, "{} subcommands found", helps.len());
    let flags: BTreeMap<Path, Vec<String>> = helps.iter().map(|(p, h)| (p.clone(), options(h))).collect();
    assert!(flags[&vec!["run".to_string()]].contains(&"--rx-queues".to_string()));
    let mut errors = Vec::new();
    for (path, text) in &helps {
        errors.extend(check(path, text, &flags, "--help"));
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

/// The legends as src/legend.rs has them: `(constant, its text)`.
fn legends() -> Vec<(String, String)> {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/legend.rs")).unwrap();
    let mut v: Vec<(String, String)> = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in src.lines() {
        if let Some(rest) = line.strip_prefix("pub const ") {
            if let Some((name, _)) = rest.split_once(": Legend") {
                current = Some((name.to_string(), String::new()));
                continue;
            }
        }
        if let Some((_, text)) = current.as_mut() {
            if line.starts_with("];") {
                v.extend(current.take());
            } else {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    v
}

/// The subcommand a legend constant belongs to: the longest whose words,
/// joined by `-`, begin its name (`BENCH_STEER` -> `bench steer`,
/// `UDP_ECHO_XDP` -> `udp-echo`, `ANALYZE_ENCAP` -> `analyze`).
fn legend_command<'a>(name: &str, commands: &'a BTreeMap<Path, Vec<String>>) -> Option<&'a Path> {
    let name = name.to_lowercase().replace('_', "-");
    commands
        .keys()
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let joined = p.join("-");
            name == joined || name.starts_with(&format!("{joined}-"))
        })
        .max_by_key(|p| p.len())
}

#[test]
fn every_flag_a_legend_names_exists() {
    let helps = all_commands();
    let flags: BTreeMap<Path, Vec<String>> = helps.iter().map(|(p, h)| (p.clone(), options(h))).collect();
    let legends = legends();
    assert!(legends.len() >= 17, "{} legends found in src/legend.rs", legends.len());
    let mut errors = Vec::new();
    for (name, text) in &legends {
        let path = legend_command(name, &flags).unwrap_or_else(|| panic!("legend {name}: no subcommand of that name"));
        errors.extend(check(path, text, &flags, &format!("legend {name}")));
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn the_checker_catches_a_flag_of_another_command() {
    let mut flags: BTreeMap<Path, Vec<String>> = BTreeMap::new();
    flags.insert(vec![], vec!["--help".into()]);
    flags.insert(vec!["queues".into()], vec!["--queue-cpus".into()]);
    flags.insert(vec!["hash".into()], vec!["--cpus".into()]);
    let queues = vec!["queues".to_string()];
    assert_eq!(check(&queues, "pinned to (--cpus)\n", &flags, "x").len(), 1);
    assert!(check(&queues, "pinned to (--queue-cpus)\n", &flags, "x").is_empty());
    assert!(check(&queues, "the map of `hash --cpus`\n", &flags, "x").is_empty());
    assert_eq!(check(&queues, "the map of `hash --bogus`\n", &flags, "x").len(), 1);
}
