//! The layout holds what ARCHITECTURE.md says of it:
//!
//! * crates depend on crates of their own group or of a group below it
//!   (lab < datapath < io < tools < apps < bench < the CLI), never upward;
//! * ARCHITECTURE.md's dependency list is the one in the manifests (the
//!   test prints the list to paste when they differ);
//! * no two files of one crate import each other, directly or round a
//!   circle, through `crate::`/`super::` paths;
//! * no file of the CLI's `src/cmd/` imports another command's module.
//!
//! It reads the manifests and sources as text: no cargo, no network.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const GROUPS: [&str; 6] = ["lab", "datapath", "io", "tools", "apps", "bench"];

struct Crate {
    name: String,
    group: String,
    dir: PathBuf,
    deps: BTreeSet<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `flowsteer-*` names in the `[dependencies]` table (not dev or build).
fn deps_of(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && line.starts_with("flowsteer-") {
            let name: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            deps.insert(name);
        }
    }
    deps
}

fn package_name(manifest: &str) -> Option<String> {
    let line = manifest.lines().find(|l| l.trim_start().starts_with("name = "))?;
    Some(line.split('"').nth(1)?.to_string())
}

fn crates() -> Vec<Crate> {
    let mut out = Vec::new();
    for group in fs::read_dir(root().join("crates")).expect("crates/").flatten() {
        let group_name = group.file_name().to_string_lossy().into_owned();
        for dir in fs::read_dir(group.path()).expect("group folder").flatten() {
            let Ok(manifest) = fs::read_to_string(dir.path().join("Cargo.toml")) else { continue };
            let name = package_name(&manifest).expect("package name");
            out.push(Crate { name, group: group_name.clone(), dir: dir.path(), deps: deps_of(&manifest) });
        }
    }
    out.sort_by(|a, b| (rank(&a.group), &a.name).cmp(&(rank(&b.group), &b.name)));
    out
}

fn rank(group: &str) -> usize {
    GROUPS.iter().position(|g| *g == group).unwrap_or(usize::MAX)
}

#[test]
fn every_crate_sits_in_a_known_group() {
    for c in crates() {
        assert!(rank(&c.group) != usize::MAX, "{} is in crates/{}/, not one of {GROUPS:?}", c.name, c.group);
    }
}

#[test]
fn dependencies_point_down_the_groups() {
    let all = crates();
    let group_of: BTreeMap<&str, &str> = all.iter().map(|c| (c.name.as_str(), c.group.as_str())).collect();
    let mut wrong = Vec::new();
    for c in &all {
        for d in &c.deps {
            let Some(g) = group_of.get(d.as_str()) else {
                wrong.push(format!("{} depends on {d}, which is no crate under crates/", c.name));
                continue;
            };
            if rank(g) > rank(&c.group) {
                wrong.push(format!("{} ({}) depends on {d} ({g}), a group above it", c.name, c.group));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The dependency list as ARCHITECTURE.md carries it.
fn dependency_list() -> String {
    let mut s = String::new();
    let mut group = String::new();
    for c in crates() {
        if c.group != group {
            group = c.group.clone();
            s.push_str(&format!("{group}:\n"));
        }
        let deps: Vec<&str> = c.deps.iter().map(|d| d.trim_start_matches("flowsteer-")).collect();
        let short = c.name.trim_start_matches("flowsteer-");
        if deps.is_empty() {
            s.push_str(&format!("  {short}\n"));
        } else {
            s.push_str(&format!("  {short} <- {}\n", deps.join(", ")));
        }
    }
    s
}

#[test]
fn architecture_md_lists_the_real_dependencies() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let begin = "<!-- dependencies: begin (checked by tests/architecture.rs) -->\n```\n";
    let end = "```\n<!-- dependencies: end -->";
    let (Some(a), Some(b)) = (doc.find(begin), doc.find(end)) else {
        panic!("ARCHITECTURE.md has no dependency block; add:\n{begin}{}{end}", dependency_list());
    };
    let listed = &doc[a + begin.len()..b];
    assert_eq!(
        listed,
        dependency_list(),
        "ARCHITECTURE.md's dependency block is stale; it should read:\n{}",
        dependency_list()
    );
}

/// Module path of a source file under `src` ("" for the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "lib" | "main" | "mod") {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text a file contributes edges from: comments dropped, nothing after
/// its inline test module, and `super::` inside an inline module (which
/// names the file itself, or a module within it) taken out.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    let mut depth = 0i64;
    let mut inline_mods: Vec<i64> = Vec::new();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|n| n.trim_start().starts_with("mod ")) {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let line = line.split(" //").next().unwrap_or("");
        let decl = t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(crate) ")).unwrap_or(t);
        if decl.starts_with("mod ") && decl.trim_end().ends_with('{') {
            inline_mods.push(depth);
        }
        if inline_mods.is_empty() {
            code.push_str(line);
        } else {
            code.push_str(&line.replace("super::", "self::"));
        }
        code.push('\n');
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        while inline_mods.last().is_some_and(|&d| depth <= d) {
            inline_mods.pop();
        }
    }
    code
}

/// Paths after `crate::` or `super::` in `code`, as segment lists; a `use`
/// group (`crate::a::{b, c}`) gives its prefix only.
fn paths(code: &str, anchor: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(anchor) {
        let before = rest[..i].chars().last();
        rest = &rest[i + anchor.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut segs = Vec::new();
        let mut s = rest;
        loop {
            let seg: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if seg.is_empty() {
                break;
            }
            s = &s[seg.len()..];
            segs.push(seg);
            match s.strip_prefix("::") {
                Some(t) => s = t,
                None => break,
            }
        }
        out.push(segs);
    }
    out
}

/// The module a path names: its longest prefix that is a file of the crate.
fn resolve(modules: &BTreeSet<String>, base: &[String], segs: &[String]) -> Option<String> {
    let mut full: Vec<String> = base.to_vec();
    full.extend(segs.iter().cloned());
    (0..=full.len()).rev().map(|n| full[..n].join("::")).find(|m| modules.contains(m))
}

/// The module a module is declared in (`None` for the crate root).
fn parent_of(m: &str) -> Option<&str> {
    if m.is_empty() {
        return None;
    }
    Some(m.rsplit_once("::").map_or("", |(p, _)| p))
}

/// Import edges between the files of the crate whose sources are in `src`.
fn import_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_of(src, f);
        let code = code_of(&fs::read_to_string(f).expect("source"));
        let mut targets = BTreeSet::new();
        for segs in paths(&code, "crate::") {
            targets.extend(resolve(&modules, &[], &segs));
        }
        let mut parent: Vec<String> =
            if me.is_empty() { Vec::new() } else { me.split("::").map(String::from).collect() };
        parent.pop();
        for segs in paths(&code, "super::") {
            if segs.is_empty() {
                continue; // `super::*` or `super::{..}`: a test module's view of its parent
            }
            targets.extend(resolve(&modules, &parent, &segs));
        }
        // A child module named by its relative path (`source::open`, `pub use source::X`).
        for child in modules.iter().filter(|m| parent_of(m) == Some(me.as_str())) {
            let seg = child.rsplit("::").next().unwrap_or(child);
            if !paths(&code, &format!("{seg}::")).is_empty() {
                targets.insert(child.clone());
            }
        }
        targets.remove(&me);
        edges.entry(me).or_default().extend(targets);
    }
    edges
}

/// A circle in `edges`, as the modules round it, if there is one.
fn find_circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, edges, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

fn show(m: &str) -> &str {
    if m.is_empty() {
        "(crate root)"
    } else {
        m
    }
}

#[test]
fn no_import_circle_within_a_crate() {
    let mut dirs: Vec<(String, PathBuf)> = crates().into_iter().map(|c| (c.name, c.dir.join("src"))).collect();
    dirs.push(("flowsteer (CLI)".into(), root().join("src")));
    let mut circles = Vec::new();
    for (name, src) in dirs {
        if let Some(c) = find_circle(&import_edges(&src)) {
            circles.push(format!("{name}: {}", c.iter().map(|m| show(m)).collect::<Vec<_>>().join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

#[test]
fn no_command_imports_another() {
    let src = root().join("src");
    let edges = import_edges(&src);
    let mut wrong = Vec::new();
    for (from, tos) in &edges {
        let Some(cmd) = from.strip_prefix("cmd::") else { continue };
        for to in tos {
            if let Some(other) = to.strip_prefix("cmd::") {
                if other != cmd && !other.starts_with(&format!("{cmd}::")) {
                    wrong.push(format!("src/cmd/{cmd}.rs uses src/cmd/{other}.rs"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_circle_finder_finds_circles() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_circle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_circle(&edges).map(|c| c.len()), Some(4));
    let code = code_of(
        "use crate::x::{y, z};\nuse super::w::V;\n// use crate::q;\n#[cfg(test)]\nmod tests {\n use crate::t;\n}\n",
    );
    assert_eq!(paths(&code, "crate::"), vec![vec!["x".to_string()]]);
    assert_eq!(paths(&code, "super::"), vec![vec!["w".to_string(), "V".to_string()]]);
}
