//! Output files written in full or not at all, never over their own input.
//!
//! Every command that writes a file (a capture, a chart, a generated
//! capture kept for later) goes through [`OutputFile`]:
//!
//! 1. [`OutputFile::create`] refuses an output that is the same file as one
//!    of the inputs ([`OutputError::SameAsInput`]): the same path, the
//!    same path through symbolic links or `..`, a hard link (same device
//!    and inode), a symbolic link to an input, or an input that is a
//!    symbolic link to the output. Reading a file while truncating it would
//!    lose it (`defrag trace.pcap -o trace.pcap` kept 391 of 5,140 packets).
//!    [`check_not_input`] does the same check alone, for a command that
//!    wants to refuse before its work starts.
//! 2. The bytes go to a temporary file in the destination's directory
//!    (`.NAME.PID-N.tmp`, created exclusively, with the mode of any new
//!    file: `0666` less the umask), so the destination is untouched while
//!    the command runs.
//! 3. [`OutputFile::commit`] flushes it to disk (`fsync`), renames it over
//!    the destination (atomic within one file system) and syncs the
//!    directory. An output that was a symbolic link stays one: the file it
//!    points to is replaced. Other hard links of a replaced file keep the
//!    old content, and the new file has a new file's owner and mode.
//! 4. Dropped without a commit (an error, a panic, a stop flag), the
//!    temporary file is removed and a previous output stays as it was.
//!    Only a process killed outright (SIGKILL, or a second Ctrl-C) can
//!    leave the hidden temporary file behind; never a half-written output.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Symbolic links followed when resolving the destination (as Linux's
/// `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;
/// Names tried for the temporary file before giving up.
const TEMP_ATTEMPTS: u32 = 64;

/// Why an output could not be written.
#[derive(Debug)]
#[non_exhaustive]
pub enum OutputError {
    /// The output is the same file as an input.
    SameAsInput {
        /// The output, as given.
        output: PathBuf,
        /// The input it is, as given.
        input: PathBuf,
    },
    /// The output names a directory.
    IsDirectory {
        /// The output, as given.
        output: PathBuf,
    },
    /// The output's path could not be resolved (a symbolic link loop, an
    /// unreadable link).
    Resolve {
        /// The output, as given.
        output: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// No temporary file could be created beside the output.
    CreateTemp {
        /// The output, as given.
        output: PathBuf,
        /// The directory the temporary file was to be created in.
        dir: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// Writing, syncing or renaming the temporary file failed.
    Write {
        /// The output, as given.
        output: PathBuf,
        /// The temporary file (removed).
        temp: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputError::SameAsInput { output, input } => write!(
                f,
                "{}: the output is the input {} (the same file); writing it would destroy what is being read",
                output.display(),
                input.display()
            ),
            OutputError::IsDirectory { output } => write!(f, "{}: the output is a directory", output.display()),
            OutputError::Resolve { output, source } => {
                write!(f, "{}: cannot resolve the output path: {source}", output.display())
            }
            OutputError::CreateTemp { output, dir, source } => write!(
                f,
                "{}: cannot create a temporary file in {}: {source}",
                output.display(),
                if dir.as_os_str().is_empty() { Path::new(".") } else { dir }.display()
            ),
            OutputError::Write { output, temp, source } => {
                write!(f, "{}: cannot write (through {}): {source}", output.display(), temp.display())
            }
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OutputError::Resolve { source, .. }
            | OutputError::CreateTemp { source, .. }
            | OutputError::Write { source, .. } => Some(source),
            OutputError::SameAsInput { .. } | OutputError::IsDirectory { .. } => None,
        }
    }
}

/// Refuses `output` when it is the same file as one of `inputs` (see the
/// [module docs](self)): compared by canonical path and, for files that
/// exist, by device and inode (which catches hard links), both through
/// symbolic links. Inputs that do not exist are skipped (opening them
/// fails on its own).
pub fn check_not_input(output: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    let out_id = fs::metadata(output).ok().map(|m| (m.dev(), m.ino()));
    let out_canon = canonical_even_if_missing(output);
    for &input in inputs {
        let same_inode = match (out_id, fs::metadata(input)) {
            (Some(o), Ok(m)) => o == (m.dev(), m.ino()),
            _ => false,
        };
        let same_path = match (&out_canon, fs::canonicalize(input)) {
            (Some(o), Ok(i)) => *o == i,
            _ => false,
        };
        if same_inode || same_path {
            return Err(OutputError::SameAsInput { output: output.to_path_buf(), input: input.to_path_buf() });
        }
    }
    Ok(())
}

/// The canonical form of `path`; for a path that does not exist (yet), the
/// canonical form of its directory joined with its name.
fn canonical_even_if_missing(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::canonicalize(dir).ok().map(|d| d.join(name))
}

/// Where the bytes of `output` land: `output` itself, or the file a
/// symbolic link (chain) points to, which may not exist yet.
fn resolve(output: &Path) -> io::Result<PathBuf> {
    let mut p = output.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("more than {MAX_SYMLINKS} symbolic links")))
}

/// Makes temporary names unique within the process (the pid makes them
/// unique between processes; exclusive creation settles the rest).
static TEMP_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A file being written: bytes go to a temporary file beside the
/// destination, which [`OutputFile::commit`] renames into place; dropped
/// uncommitted, the temporary file is removed (see the [module docs](self)).
///
/// Not thread-safe to share (`&mut` to write), like a [`File`].
#[derive(Debug)]
pub struct OutputFile {
    /// The destination as given (for messages).
    output: PathBuf,
    /// Where the bytes land (the destination with symbolic links resolved).
    dest: PathBuf,
    temp: PathBuf,
    file: Option<File>,
}

impl OutputFile {
    /// Checks that `output` is none of `inputs` and is not a directory,
    /// then creates the temporary file beside it. Nothing is written to
    /// `output` itself until [`OutputFile::commit`].
    pub fn create(output: &Path, inputs: &[&Path]) -> Result<OutputFile, OutputError> {
        check_not_input(output, inputs)?;
        let dest = resolve(output).map_err(|source| OutputError::Resolve { output: output.to_path_buf(), source })?;
        if fs::metadata(&dest).is_ok_and(|m| m.is_dir()) {
            return Err(OutputError::IsDirectory { output: output.to_path_buf() });
        }
        let dir = dest.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = match dest.file_name() {
            Some(n) => n.to_string_lossy().into_owned(),
            None => return Err(OutputError::IsDirectory { output: output.to_path_buf() }),
        };
        let pid = std::process::id();
        let mut last = io::Error::other("no temporary name tried");
        for _ in 0..TEMP_ATTEMPTS {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let temp = dir.join(format!(".{name}.{pid}-{n}.tmp"));
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => return Ok(OutputFile { output: output.to_path_buf(), dest, temp, file: Some(file) }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(source) => return Err(OutputError::CreateTemp { output: output.to_path_buf(), dir, source }),
            }
        }
        Err(OutputError::CreateTemp { output: output.to_path_buf(), dir, source: last })
    }

    /// The output as given to [`OutputFile::create`].
    pub fn path(&self) -> &Path {
        &self.output
    }

    /// The temporary file the bytes go to until the commit.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    fn write_err(&self, source: io::Error) -> OutputError {
        OutputError::Write { output: self.output.clone(), temp: self.temp.clone(), source }
    }

    /// Syncs the bytes to disk and renames the temporary file over the
    /// destination. On error the temporary file is removed and the
    /// destination is as it was.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let Some(mut file) = self.file.take() else {
            return Err(self.write_err(io::Error::other("already committed")));
        };
        if let Err(e) = file.flush().and_then(|()| file.sync_all()) {
            self.file = Some(file);
            return Err(self.write_err(e));
        }
        drop(file);
        if let Err(e) = fs::rename(&self.temp, &self.dest) {
            // `file` is gone: Drop removes the temporary by name.
            return Err(self.write_err(e));
        }
        // The rename is done: nothing for Drop to remove.
        self.temp = PathBuf::new();
        // Make the rename itself durable. Best effort: some file systems
        // refuse to sync a directory, and the data is already on disk.
        let dir = match self.dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.file.as_mut() {
            Some(f) => f.write(buf),
            None => Err(io::Error::other("output already committed")),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.write_all(buf),
            None => Err(io::Error::other("output already committed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        drop(self.file.take());
        if !self.temp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// A fresh directory, removed on drop (with what is in it).
    struct Dir(tempfile::TempDir);

    impl Dir {
        fn new(tag: &str) -> Dir {
            Dir(tempfile::Builder::new().prefix(&format!("fs-{tag}-")).tempdir().unwrap())
        }

        fn join(&self, name: &str) -> std::path::PathBuf {
            self.0.path().join(name)
        }

        fn names(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(self.0.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
    }

    fn write(path: &Path, inputs: &[&Path], bytes: &[u8]) -> Result<(), OutputError> {
        let mut f = OutputFile::create(path, inputs)?;
        f.write_all(bytes).unwrap();
        f.commit()
    }

    #[test]
    fn commit_replaces_and_leaves_no_temporary() {
        let d = Dir::new("commit");
        let out = d.join("out.bin");
        write(&out, &[], b"first").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"first");
        write(&out, &[], b"second, longer").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"second, longer");
        assert_eq!(d.names(), ["out.bin"]);
    }

    #[test]
    fn nothing_reaches_the_output_before_the_commit() {
        let d = Dir::new("pending");
        let out = d.join("out.bin");
        fs::write(&out, b"old").unwrap();
        let mut f = OutputFile::create(&out, &[]).unwrap();
        f.write_all(b"new bytes").unwrap();
        f.flush().unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"old");
        let temp = f.temp_path().to_path_buf();
        assert!(temp.starts_with(d.0.path()) && temp.exists(), "{}", temp.display());
        assert!(temp.file_name().unwrap().to_string_lossy().starts_with(".out.bin."));
        drop(f);
        assert_eq!(fs::read(&out).unwrap(), b"old", "an uncommitted output leaves the old one");
        assert_eq!(d.names(), ["out.bin"], "and no temporary file");
    }

    #[test]
    fn temporary_has_the_mode_of_a_new_file() {
        let d = Dir::new("mode");
        let plain = d.join("plain");
        File::create(&plain).unwrap();
        let out = d.join("out.bin");
        write(&out, &[], b"x").unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&out), mode(&plain));
    }

    #[test]
    fn refuses_every_spelling_of_the_input() {
        let d = Dir::new("same");
        let input = d.join("in.pcap");
        fs::write(&input, b"precious").unwrap();
        let hard = d.join("hard.pcap");
        fs::hard_link(&input, &hard).unwrap();
        let link = d.join("link.pcap");
        symlink(&input, &link).unwrap();
        let sub = d.join("sub");
        fs::create_dir(&sub).unwrap();
        let dotted = sub.join("..").join("in.pcap");
        for out in [&input, &hard, &link, &dotted] {
            match write(out, &[&input], b"clobbered") {
                Err(OutputError::SameAsInput { output, input: i }) => {
                    assert_eq!((&output, &i), (out, &input));
                }
                other => panic!("{}: {other:?}", out.display()),
            }
        }
        // The input given through the link, the output by its real name.
        assert!(matches!(write(&input, &[&link], b"x"), Err(OutputError::SameAsInput { .. })));
        assert_eq!(fs::read(&input).unwrap(), b"precious");
        assert_eq!(d.names(), ["hard.pcap", "in.pcap", "link.pcap", "sub"]);
        let msg = write(&hard, &[&input], b"x").unwrap_err().to_string();
        assert!(msg.contains(&*hard.to_string_lossy()) && msg.contains(&*input.to_string_lossy()), "{msg}");
        // Another file is fine.
        write(&d.join("other.pcap"), &[&input, &link], b"ok").unwrap();
    }

    #[test]
    fn an_output_symlink_is_kept_and_its_target_replaced() {
        let d = Dir::new("symout");
        let target = d.join("target.bin");
        fs::write(&target, b"old").unwrap();
        let link = d.join("link.bin");
        symlink("target.bin", &link).unwrap();
        write(&link, &[], b"new").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // A dangling link creates its target.
        let dangling = d.join("dangling.bin");
        symlink("later.bin", &dangling).unwrap();
        write(&dangling, &[], b"made").unwrap();
        assert_eq!(fs::read(d.join("later.bin")).unwrap(), b"made");
        assert_eq!(d.names(), ["dangling.bin", "later.bin", "link.bin", "target.bin"]);
    }

    #[test]
    fn directories_and_missing_directories_are_errors() {
        let d = Dir::new("dirs");
        assert!(matches!(write(d.0.path(), &[], b"x"), Err(OutputError::IsDirectory { .. })));
        let missing = d.join("no-such-dir").join("out.bin");
        let err = write(&missing, &[], b"x").unwrap_err();
        assert!(matches!(err, OutputError::CreateTemp { .. }), "{err:?}");
        assert!(err.to_string().starts_with(&*missing.to_string_lossy()), "{err}");
        let looping = d.join("loop");
        symlink("loop", &looping).unwrap();
        assert!(matches!(write(&looping, &[], b"x"), Err(OutputError::Resolve { .. })));
        assert_eq!(d.names(), ["loop"]);
    }
}
