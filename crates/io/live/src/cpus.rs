//! The CPUs this process may run on, and the two ways Linux writes CPU
//! sets: hex masks (`rps_cpus`) and lists (`smp_affinity_list`, "0-3,8").

/// CPUs this process may run on (its affinity mask); `[0]` when the
/// mask cannot be read.
pub fn available_cpus() -> Vec<u32> {
    core_affinity::get_core_ids().map(|ids| ids.into_iter().map(|c| c.id as u32).collect()).unwrap_or_else(|| vec![0])
}

/// A sysfs CPU mask ("00000000,00000003") as a CPU list; "0" / empty: none.
pub fn parse_mask(mask: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for (word_idx, word) in mask.trim().rsplit(',').enumerate() {
        let Ok(bits) = u32::from_str_radix(word.trim(), 16) else { return Vec::new() };
        for b in 0..32 {
            if bits & (1 << b) != 0 {
                cpus.push(word_idx as u32 * 32 + b);
            }
        }
    }
    cpus.sort_unstable();
    cpus
}

/// A CPU list ("0-3,8") as CPUs.
pub fn parse_list(s: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    v
}

/// "0-3,8" from a sorted CPU list; "-" when empty.
pub fn list_text(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "-".into();
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_lists() {
        assert_eq!(parse_mask("00000000,00000003"), vec![0, 1]);
        assert_eq!(parse_mask("1,00000000"), vec![32]);
        assert_eq!(parse_mask("0"), Vec::<u32>::new());
        assert_eq!(parse_mask("zz"), Vec::<u32>::new());
        assert_eq!(parse_list("0-3,8"), vec![0, 1, 2, 3, 8]);
        assert_eq!(list_text(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(list_text(&[]), "-");
    }
}
