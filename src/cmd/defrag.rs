//! `flowsteer defrag` (being written).
use anyhow::Result;
pub fn run(_args: &crate::cli::DefragArgs) -> Result<i32> {
    anyhow::bail!("defrag: not built yet")
}
