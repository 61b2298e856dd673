//! Putting decided actions on disk without leaving anything half-written.
//!
//! A first export is written into a temporary directory beside `--out` and
//! renamed into place. A re-export first writes every new file to a
//! temporary file next to its target; only when all of them are written are
//! they renamed over their targets, then stale files removed, then the
//! manifest written last. If staging fails, the temporary files are removed
//! and the export is left as it was.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::ExportError;
use super::plan::Plan;

/// A file to write: its path relative to the export and its bytes.
pub struct Output<'a> {
    pub path: String,
    pub bytes: &'a [u8],
}

/// Write `outputs` into a directory that does not exist yet.
pub fn write_fresh(out: &Path, outputs: &[Output<'_>]) -> Result<(), ExportError> {
    let parent = parent_of(out);
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".to_string());
    let staging = parent.join(format!(".{name}.tollgate-export-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let result = (|| {
        for output in outputs {
            write_file(&staging.join(&output.path), output.bytes)?;
        }
        fs::rename(&staging, out).map_err(|e| ExportError::Write {
            path: out.to_path_buf(),
            source: e,
        })
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result
}

/// Write `outputs` into an existing export, then remove `removals`.
pub fn write_in_place(
    out: &Path,
    outputs: &[Output<'_>],
    removals: &[String],
) -> Result<(), ExportError> {
    let suffix = format!(".tollgate-tmp-{}", std::process::id());
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut created_dirs: Vec<PathBuf> = Vec::new();
    for output in outputs {
        let target = out.join(&output.path);
        let temp = PathBuf::from(format!("{}{suffix}", target.display()));
        let staging = create_parents(&target, &mut created_dirs)
            .and_then(|()| write_file(&temp, output.bytes));
        if let Err(e) = staging {
            let _ = fs::remove_file(&temp);
            for (temp, _) in &staged {
                let _ = fs::remove_file(temp);
            }
            for dir in created_dirs.iter().rev() {
                let _ = fs::remove_dir(dir);
            }
            return Err(e);
        }
        staged.push((temp, target));
    }
    // Renames within a directory are atomic; the manifest is the last output,
    // so an interrupted export is redone (not misread) by the next one.
    for (temp, target) in &staged {
        fs::rename(temp, target).map_err(|e| ExportError::Write {
            path: target.clone(),
            source: e,
        })?;
    }
    for path in removals {
        let target = out.join(path);
        fs::remove_file(&target).map_err(|e| ExportError::Write {
            path: target.clone(),
            source: e,
        })?;
        remove_empty_parents(out, &target);
    }
    Ok(())
}

/// The directory a fresh export is staged in: `--out`'s parent.
pub fn parent_of(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn create_parents(target: &Path, created: &mut Vec<PathBuf>) -> Result<(), ExportError> {
    let Some(parent) = target.parent() else {
        return Ok(());
    };
    let mut missing = Vec::new();
    let mut dir = parent;
    while !dir.exists() {
        missing.push(dir.to_path_buf());
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    for dir in missing.into_iter().rev() {
        fs::create_dir(&dir).map_err(|e| ExportError::Write {
            path: dir.clone(),
            source: e,
        })?;
        created.push(dir);
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let fail = |e| ExportError::Write {
        path: path.to_path_buf(),
        source: e,
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(fail)?;
    }
    // No fsync: an export is regenerated from the spec at will, and syncing
    // every file would cost more than the whole export. A fresh file only
    // (create_new: a link left at the temporary name is never followed); a
    // leftover of an interrupted export of the same pid goes first.
    let _ = fs::remove_file(path);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(fail)?;
    file.write_all(bytes).map_err(fail)
}

/// After removing a file, remove the directories it leaves empty, up to
/// (not including) the export's root.
fn remove_empty_parents(root: &Path, removed: &Path) {
    let mut dir = removed.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// The outputs of a whole plan (a first export): every file, the pristine
/// copy of each file of yours, and the manifest last.
pub fn all_outputs<'a>(plan: &'a Plan, manifest: &'a [u8]) -> Vec<Output<'a>> {
    let mut outputs: Vec<Output<'a>> = plan
        .files
        .iter()
        .map(|(path, file)| Output {
            path: path.clone(),
            bytes: &file.bytes,
        })
        .collect();
    outputs.extend(
        plan.files
            .iter()
            .filter(|(_, file)| file.role.is_yours())
            .map(|(path, file)| Output {
                path: super::manifest::pristine_path(path),
                bytes: &file.bytes,
            }),
    );
    outputs.push(Output {
        path: super::MANIFEST_PATH.to_string(),
        bytes: manifest,
    });
    outputs
}
