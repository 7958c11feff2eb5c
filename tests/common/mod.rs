//! Helpers shared by the CLI tests (each test file includes this module
//! with `mod common;`).

use std::path::PathBuf;
use std::process::{Command, Output};

/// A fresh directory per test (`<tmp>/flowsteer-<suite>-<pid>-<name>`),
/// removed when dropped, also when the test fails.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(suite: &str, name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("flowsteer-{suite}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    /// The directory itself.
    #[allow(dead_code)] // not every test file needs it
    pub fn dir(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the built `flowsteer` binary with `args`.
pub fn flowsteer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowsteer")).args(args).output().expect("run flowsteer")
}
