//! How the JSON documents show Rust values: every duration a number of
//! seconds (its key ends in `_s`), never a `Duration`'s `{secs, nanos}`.

/// Serializes a [`std::time::Duration`] as seconds, a number: the JSON
/// documents' durations are numbers, their keys end in `_s`.
pub(crate) fn secs<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Where a JSON document shows a Rust type's serde form instead of a plain
/// value: a `Duration`'s `secs`/`nanos`, an enum variant's capitalised
/// name as a key (`{"Fixed": 64}`) or as a string (`"Auto"`). Empty: none.
#[cfg(test)]
pub(crate) fn rust_forms(v: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
        let variant =
            |s: &str| s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric());
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if k == "secs" || k == "nanos" || variant(k) {
                        out.push(format!("{at}.{k}"));
                    }
                    walk(v, &format!("{at}.{k}"), out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(v, &format!("{at}[{i}]"), out);
                }
            }
            serde_json::Value::String(s) if variant(s) => out.push(format!("{at} = {s:?}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn rust_forms_finds_durations_and_enum_variants() {
        let v1 = json!({"trial": {"secs": 2, "nanos": 0}, "sizes": [{"Fixed": 64}, "Imix"], "io": "auto",
                        "cpu_model": "Intel(R) Xeon(R)", "trial_s": 2.0});
        assert_eq!(
            super::rust_forms(&v1),
            [".sizes[0].Fixed", ".sizes[1] = \"Imix\"", ".trial.nanos", ".trial.secs"].map(String::from)
        );
    }
}
