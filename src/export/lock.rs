//! One export at a time per output directory.
//!
//! Two exports into one directory would race: both see it missing and both
//! try to rename their staging directory into place, or both rewrite files
//! and the manifest. An export holds an advisory lock (`flock`, released by
//! the kernel when the process ends, so a crash leaves no stale lock) on a
//! file beside the directory: a first export has no directory yet, and is
//! renamed into place whole, so the lock cannot live inside it. Its staging
//! directory goes beside it too. A second export waits for the first, then
//! sees its result.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::ExportError;
use super::writer;

/// Held for the whole export; dropping it removes the lock file, then
/// releases the lock.
#[derive(Debug)]
pub struct ExportLock {
    path: PathBuf,
    /// Only held: Drop removes the file first, then this field's drop
    /// closes it, which releases the lock.
    _file: File,
}

impl ExportLock {
    /// Lock the output directory `out`, waiting while another export holds
    /// it (saying so on stderr). Creates `out`'s parent if needed.
    pub fn acquire(out: &Path) -> Result<ExportLock, ExportError> {
        let path = lock_path(out)?;
        let unwritable = |e| ExportError::Unwritable {
            path: out.to_path_buf(),
            source: e,
        };
        let mut announced = false;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(unwritable)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    if !announced {
                        eprintln!(
                            "waiting for another export into {} to finish (it holds {})",
                            out.display(),
                            path.display()
                        );
                        announced = true;
                    }
                    file.lock().map_err(unwritable)?;
                }
                Err(TryLockError::Error(e)) => return Err(unwritable(e)),
            }
            // The holder we waited for removed the file as it finished; a
            // third export may have created and locked a new one since.
            // Only the lock on the file now at `path` counts.
            if same_file(&file, &path) {
                return Ok(ExportLock { path, _file: file });
            }
        }
    }

    /// The lock file (beside the output directory).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ExportLock {
    fn drop(&mut self) {
        // Removed while still locked, so no one locks a file about to go.
        let _ = fs::remove_file(&self.path);
    }
}

/// `PARENT/.NAME.tollgate-lock` for `--out PARENT/NAME`, with PARENT
/// resolved, so that two spellings of one directory share one lock.
fn lock_path(out: &Path) -> Result<PathBuf, ExportError> {
    let unwritable = |e| ExportError::Unwritable {
        path: out.to_path_buf(),
        source: e,
    };
    let absolute = if out.exists() {
        fs::canonicalize(out).map_err(unwritable)?
    } else {
        let parent = writer::parent_of(out);
        fs::create_dir_all(&parent).map_err(unwritable)?;
        let name = out.file_name().ok_or_else(|| {
            unwritable(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a directory name",
            ))
        })?;
        fs::canonicalize(&parent).map_err(unwritable)?.join(name)
    };
    Ok(match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => {
            parent.join(format!(".{}.tollgate-lock", name.to_string_lossy()))
        }
        // `--out /`: nothing beside it; the directory exists, lock inside.
        _ => absolute.join(".tollgate-lock"),
    })
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Elsewhere an open file cannot be removed, so the path still names it.
#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}
