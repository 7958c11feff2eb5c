//! Pure helpers for what the commands print: the loss line (apart from the
//! conservation check, which says only that the counters add up) and the
//! label of `--interval` reports (the interval arithmetic is the engine's:
//! `Snapshot::interval_since`, `interval_rate`).

/// Drop reasons shown on the loss line, heaviest first.
pub const TOP_REASONS: usize = 3;

/// The loss summary when anything was lost: `loss: N of M UNIT (x %)` and,
/// when reasons are known, the heaviest [`TOP_REASONS`] on their own line.
/// Empty when nothing was lost. `what` completes the first line, e.g.
/// `"received packets dropped"`.
pub fn loss_lines<'a>(
    lost: u64,
    of: u64,
    what: &str,
    reasons: impl IntoIterator<Item = (&'a str, u64)>,
) -> Vec<String> {
    if lost == 0 {
        return Vec::new();
    }
    let mut lines = vec![format!("loss: {lost} of {of} {what} ({})", percent(lost, of))];
    let mut reasons: Vec<(&str, u64)> = reasons.into_iter().filter(|(_, n)| *n > 0).collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if !reasons.is_empty() {
        let more = reasons.len().saturating_sub(TOP_REASONS);
        let top: Vec<String> =
            reasons.iter().take(TOP_REASONS).map(|(r, n)| format!("{r} {n} ({})", percent(*n, of))).collect();
        let tail = if more > 0 {
            format!(", and {} other {}", more, if more == 1 { "reason" } else { "reasons" })
        } else {
            String::new()
        };
        lines.push(format!("  top reasons: {}{tail}", top.join(", ")));
    }
    lines
}

/// A count with its noun, singular for one: `count(1, "packet", "packets")`
/// is `1 packet`, `count(3, "entry", "entries")` is `3 entries`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `n` as a share of `of`, e.g. `29.0 %` (`<0.1 %` for a small non-zero share).
pub fn percent(n: u64, of: u64) -> String {
    if of == 0 {
        return "-".into();
    }
    let p = n as f64 * 100.0 / of as f64;
    if n > 0 && p < 0.1 {
        "<0.1 %".into()
    } else {
        format!("{p:.1} %")
    }
}

/// The elapsed-time column of an interval line, as iperf3 prints it:
/// `[  1.00-2.00 s]`.
pub fn interval_label(from_s: f64, to_s: f64) -> String {
    format!("[{from_s:>6.2}-{to_s:.2} s]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loss_no_line() {
        assert!(loss_lines(0, 100, "received packets dropped", [("queue_full", 0)]).is_empty());
    }

    #[test]
    fn loss_line_has_count_share_and_top_reasons_heaviest_first() {
        let l = loss_lines(
            300,
            1000,
            "received packets dropped",
            [("a", 10), ("queue_full", 200), ("no_listener", 50), ("b", 40), ("zero", 0)],
        );
        assert_eq!(l[0], "loss: 300 of 1000 received packets dropped (30.0 %)");
        assert_eq!(
            l[1],
            "  top reasons: queue_full 200 (20.0 %), no_listener 50 (5.0 %), b 40 (4.0 %), and 1 other reason"
        );
        assert_eq!(loss_lines(1, 100_000, "x", []).len(), 1);
        assert_eq!(percent(1, 100_000), "<0.1 %");
    }

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count(1, "packet", "packets"), "1 packet");
        assert_eq!(count(0, "packet", "packets"), "0 packets");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
        let l = loss_lines(5, 10, "x", [("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1)]);
        assert!(l[1].ends_with(", and 2 other reasons"), "{}", l[1]);
    }

    #[test]
    fn interval_label_reads_as_iperf3() {
        assert_eq!(interval_label(1.0, 2.0), "[  1.00-2.00 s]");
    }
}
