//! Turn the shared RSS flags into an [`RssConfig`], plus the warnings the
//! user must see.
//!
//! The public-key warning is not always one of them: a key that only models
//! a NIC (`hash`, `plan`, `analyze`, `run` on the built-in generator or a
//! capture) harms no one. It is said, once, where the key meets a NIC or
//! real traffic: by `resolve` when `--ethtool-x` shows the NIC itself uses
//! the public key; by the commands whose key reaches a NIC
//! ([`warn_public_key`]: `export`, `udp-gen --spread`); and by
//! `flowsteer_live` for `run`'s live sources.

use crate::cli::RssArgs;
use crate::cmd::usage;
use anyhow::{bail, Context, Result};
use flowsteer_plan::ethtool::parse_ethtool_x;
use flowsteer_rss::{CoreId, HashTypes, Impl, KeyKind, Mapping, Reta, RssConfig, RssKey};

/// Queues when neither --queues nor a command-specific count is given.
pub const DEFAULT_QUEUES: usize = 4;

/// A resolved configuration and the warnings to print once.
pub struct Resolved {
    pub config: RssConfig,
    pub warnings: Vec<String>,
}

/// What `--seed` seeds besides a `--key random` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedUse {
    /// Only the key: `--seed` without `--key random` is an error.
    KeyOnly,
    /// Also the command's traffic generator (`run`): `--seed` is valid alone.
    KeyAndGenerator,
}

pub fn resolve(args: &RssArgs, queues_override: Option<usize>) -> Result<Resolved> {
    resolve_with(args, queues_override, SeedUse::KeyOnly)
}

pub fn resolve_with(args: &RssArgs, queues_override: Option<usize>, seed_use: SeedUse) -> Result<Resolved> {
    if args.seed.is_some() && args.key != "random" && seed_use == SeedUse::KeyOnly {
        return Err(usage(format!(
            "--seed draws a --key random key; --key {} is fixed (drop --seed, or use --key random)",
            args.key
        )));
    }
    let mut warnings = Vec::new();
    let mut types = HashTypes::parse(&args.hash_types).map_err(|e| usage(format!("--hash-types: {e}")))?;
    types.fragments_on_2tuple = !args.frag_4tuple;
    let queues = args.queues.or(queues_override).unwrap_or(DEFAULT_QUEUES);
    if let Some(q) = args.queues.filter(|&q| q > args.reta_size && args.ethtool_x.is_none()) {
        return Err(usage(format!(
            "--queues {q} exceeds --reta-size {}: the table would never name queues {}..{q}",
            args.reta_size, args.reta_size
        )));
    }

    let (key, reta) = match &args.ethtool_x {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --ethtool-x file {}", path.display()))?;
            let parsed = parse_ethtool_x(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            if let Some(f) = &parsed.hash_function {
                if f != "toeplitz" {
                    warnings.push(format!("the NIC uses hash function '{f}', not toeplitz: predictions do not apply"));
                }
            }
            if parsed.symmetric_xor == Some(true) || parsed.symmetric_or_xor == Some(true) {
                warnings.push("the NIC applies a symmetric input transformation that flowsteer does not model".into());
            }
            let key = match parsed.key {
                Some(_) if args.key != "default" => {
                    return Err(usage(format!(
                        "--key {} and --ethtool-x {}: the file gives the NIC's key, which would replace --key; drop one of them",
                        args.key,
                        path.display()
                    )));
                }
                Some(k) => {
                    let key = RssKey::from_bytes(&k).map_err(anyhow::Error::msg)?;
                    // `run` leaves it to its live sources (see the module's comment).
                    if key.is_public() && seed_use == SeedUse::KeyOnly {
                        // Not a model: the NIC itself uses it.
                        warnings.push(format!(
                            "the Microsoft default key is public: anyone can aim traffic at one queue with it, and {} shows \
                             the NIC uses it (put a random key on the NIC: `flowsteer export IFACE --key random`)",
                            path.display()
                        ));
                    }
                    key
                }
                None => {
                    warnings.push(format!(
                        "{}: no RSS key in the file (Operation not supported); using --key",
                        path.display()
                    ));
                    key_from_flag(args)?
                }
            };
            let reta = match parsed.indirection {
                Some(t) => Reta::from_entries(&t).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
                None => {
                    warnings.push(format!(
                        "{}: no indirection table in the file; using --reta-size {} over {queues} queues",
                        path.display(),
                        args.reta_size
                    ));
                    Reta::round_robin(args.reta_size, queues)?
                }
            };
            (key, reta)
        }
        None => (key_from_flag(args)?, Reta::round_robin(args.reta_size, queues)?),
    };

    if matches!(key.kind(), KeyKind::User | KeyKind::Symmetric) {
        let report = flowsteer_rss::quality::spread_test(&key);
        if !report.passed {
            warnings.push(format!(
                "this key spreads tuples badly: chi-square {:.0} / {:.0} (low / high bits) over {} buckets exceeds {:.0} (p = {})",
                report.chi2_low,
                report.chi2_high,
                report.buckets,
                report.critical,
                flowsteer_rss::quality::SPREAD_ALPHA
            ));
        }
    }
    if let KeyKind::Seeded(seed) = key.kind() {
        warnings.push(format!(
            "the key drawn from --seed {seed} is only as secret as the seed: use it to reproduce results, not in production"
        ));
    }
    if key.is_symmetric() {
        warnings
            .push("symmetric key: both directions land together, but only 16 bits of the hash carry entropy".into());
    }
    let mapping = match args.mapping.as_str() {
        "reta" => Mapping::Reta,
        "rps" => Mapping::RpsScale,
        other => return Err(usage(format!("unknown --mapping '{other}' (expected reta or rps)"))),
    };
    let imp = match args.imp.as_str() {
        "auto" => Impl::best(),
        "reference" => Impl::Reference,
        "table" => Impl::Table,
        "gfni" => {
            if !Impl::Gfni.is_available() {
                bail!("--impl gfni: this CPU lacks AVX-512 VBMI/GFNI");
            }
            Impl::Gfni
        }
        other => return Err(usage(format!("unknown --impl '{other}' (expected auto, reference, table or gfni)"))),
    };
    let cpus = args.cpus.iter().copied().map(CoreId).collect();
    let config = RssConfig::new(key, types, reta).with_mapping(mapping).with_impl(imp).with_queue_cpus(cpus);
    Ok(Resolved { config, warnings })
}

/// How every public-key warning starts (`resolve`'s for `--ethtool-x`,
/// [`flowsteer_rss::PUBLIC_KEY_WARNING`], `udp-gen --spread`'s).
pub const PUBLIC_KEY_PREFIX: &str = "the Microsoft default key is public";

/// For the commands whose key reaches a NIC (see the module's comment):
/// adds `text`, a warning starting with [`PUBLIC_KEY_PREFIX`] (the generic
/// one is [`flowsteer_rss::PUBLIC_KEY_WARNING`]), when `key` is public and `warnings` has
/// no public-key warning yet (`resolve` gave one for `--ethtool-x`).
pub fn warn_public_key(warnings: &mut Vec<String>, key: &RssKey, text: &str) {
    if key.is_public() && !warnings.iter().any(|w| w.starts_with(PUBLIC_KEY_PREFIX)) {
        warnings.push(text.to_string());
    }
}

fn key_from_flag(args: &RssArgs) -> Result<RssKey> {
    Ok(match args.key.as_str() {
        "default" | "microsoft" => RssKey::microsoft(),
        "symmetric" => RssKey::symmetric(args.key_len)?,
        "random" => match args.seed {
            Some(seed) => RssKey::from_seed(args.key_len, seed)?,
            None => RssKey::random(args.key_len)?,
        },
        hex => RssKey::parse_hex(hex).map_err(|e| usage(format!("--key: {e}")))?,
    })
}

/// The header line that shows a key drawn by `--key random`, in the form
/// `--key` takes back; `None` for keys the user gave or named.
pub fn drawn_key_line(key: &RssKey) -> Option<String> {
    match key.kind() {
        KeyKind::Random => Some(format!("key (--key random, from OS randomness): {}", key.to_hex())),
        KeyKind::Seeded(seed) => Some(format!("key (--key random --seed {seed}, SplitMix64): {}", key.to_hex())),
        _ => None,
    }
}

/// Add `"key"` (the hex form `--key` takes) and `"key_seed"` (the seed, or
/// null for OS randomness) to a JSON object when `--key random` drew the key.
pub fn add_drawn_key(doc: &mut serde_json::Value, key: &RssKey) {
    let seed = match key.kind() {
        KeyKind::Random => None,
        KeyKind::Seeded(seed) => Some(seed),
        _ => return,
    };
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("key".into(), key.to_hex().into());
        obj.insert("key_seed".into(), seed.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_key_warning_is_said_once() {
        assert!(flowsteer_rss::PUBLIC_KEY_WARNING.starts_with(PUBLIC_KEY_PREFIX));
        let mut w = vec!["something else".to_string()];
        warn_public_key(&mut w, &RssKey::symmetric(40).unwrap(), flowsteer_rss::PUBLIC_KEY_WARNING);
        assert_eq!(w.len(), 1);
        warn_public_key(&mut w, &RssKey::microsoft(), flowsteer_rss::PUBLIC_KEY_WARNING);
        warn_public_key(&mut w, &RssKey::microsoft(), flowsteer_rss::PUBLIC_KEY_WARNING);
        assert_eq!(w, ["something else", flowsteer_rss::PUBLIC_KEY_WARNING]);
    }
}
