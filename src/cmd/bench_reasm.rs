//! `flowsteer bench reasm` (being written).
use anyhow::Result;
pub fn run(_args: &crate::cli::BenchReasmArgs) -> Result<i32> {
    anyhow::bail!("bench reasm: not built yet")
}
