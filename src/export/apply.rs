//! A plan meets the disk: `export` (write, respecting edits) and `check`
//! (compare only).

use std::fs;
use std::path::{Path, PathBuf};

use super::ExportError;
use super::manifest::Manifest;
use super::plan::{Plan, Role, sha256_hex};
use super::reconcile::{self, Action, OnDisk, Problem};
use super::writer::{self, Output};

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Overwrite vendored and generated files even when they were edited
    /// since the last export. Never overwrites a file of yours.
    pub force: bool,
}

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// No export was there before.
    pub fresh: bool,
    pub files: usize,
    pub written: Vec<String>,
    pub unchanged: usize,
    /// Your edited files that were kept, each with `PATH.new` beside it.
    pub kept_with_new: Vec<String>,
    /// Your edited files, kept; the generated version has not changed since
    /// the last export.
    pub kept_edited: Vec<String>,
    /// Files no longer generated, removed.
    pub removed: Vec<String>,
    /// Files no longer generated but edited, kept.
    pub kept_orphans: Vec<String>,
}

/// Write `plan` to `out`, creating it if needed.
pub fn export(
    plan: &Plan,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportReport, ExportError> {
    // Held until the export is done: a concurrent export into `out` waits.
    let _lock = super::lock::ExportLock::acquire(out)?;
    let manifest = Manifest::of(plan);
    let manifest_bytes = manifest.to_bytes();
    let mut report = ExportReport {
        files: plan.files.len(),
        ..ExportReport::default()
    };

    match fs::metadata(out) {
        Ok(meta) if !meta.is_dir() => return Err(ExportError::OutIsFile(out.to_path_buf())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = writer::parent_of(out);
            fs::create_dir_all(&parent)
                .and_then(|()| probe_writable(&parent))
                .map_err(|e| ExportError::Unwritable {
                    path: out.to_path_buf(),
                    source: e,
                })?;
            writer::write_fresh(out, &writer::all_outputs(plan, &manifest_bytes))?;
            report.fresh = true;
            report.written = plan.files.keys().cloned().collect();
            return Ok(report);
        }
        Err(e) => {
            return Err(ExportError::Unwritable {
                path: out.to_path_buf(),
                source: e,
            });
        }
    }
    probe_writable(out).map_err(|e| ExportError::Unwritable {
        path: out.to_path_buf(),
        source: e,
    })?;

    let previous = Manifest::read(out)?;
    report.fresh = previous.is_none();
    let actions = reconcile::decide(plan, previous.as_ref(), &|p| on_disk(out, p), options.force)?;

    let mut outputs = Vec::new();
    let mut removals = Vec::new();
    for action in actions {
        match action {
            Action::Write(path) => {
                outputs.push(Output {
                    bytes: &plan.files[&path].bytes,
                    path: path.clone(),
                });
                report.written.push(path);
            }
            Action::Unchanged(_) => report.unchanged += 1,
            Action::KeepWriteNew(path) => {
                outputs.push(Output {
                    bytes: &plan.files[&path].bytes,
                    path: format!("{path}.new"),
                });
                report.kept_with_new.push(path);
            }
            Action::KeepEdited(path) => report.kept_edited.push(path),
            Action::Remove(path) => {
                removals.push(path.clone());
                report.removed.push(path);
            }
            Action::KeepOrphan(path) => report.kept_orphans.push(path),
        }
    }
    outputs.push(Output {
        path: super::MANIFEST_PATH.to_string(),
        bytes: &manifest_bytes,
    });
    let touched = outputs.iter().map(|o| o.path.as_str());
    refuse_links(out, touched.chain(removals.iter().map(String::as_str)))?;
    writer::write_in_place(out, &outputs, &removals)?;
    Ok(report)
}

/// One file `--check` found out of date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFinding {
    pub path: String,
    pub role: Role,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub files: usize,
    /// Empty when the directory is up to date.
    pub findings: Vec<CheckFinding>,
}

/// Compare `plan` with `out` without writing anything.
pub fn check(plan: &Plan, out: &Path) -> Result<CheckReport, ExportError> {
    if out.exists() && !out.is_dir() {
        return Err(ExportError::OutIsFile(out.to_path_buf()));
    }
    let manifest = if out.is_dir() {
        Manifest::read(out)?
    } else {
        None
    };
    let findings = reconcile::check(plan, manifest.as_ref(), &|p| on_disk(out, p))
        .into_iter()
        .map(|(path, role, problem)| CheckFinding {
            path,
            role,
            problem,
        })
        .collect();
    Ok(CheckReport {
        files: plan.files.len(),
        findings,
    })
}

fn on_disk(out: &Path, path: &str) -> OnDisk {
    let full = out.join(path);
    match fs::symlink_metadata(&full) {
        Ok(meta) if meta.is_dir() => OnDisk::Directory,
        Ok(_) => match fs::read(&full) {
            Ok(bytes) => OnDisk::File(sha256_hex(&bytes)),
            // Unreadable counts as different from anything we would write.
            Err(_) => OnDisk::File(String::new()),
        },
        Err(_) => OnDisk::Missing,
    }
}

/// Refuse to write or remove anything whose path runs through a symbolic
/// link inside `out` (a linked `vendored/`, say): the write would land
/// wherever the link points, outside the export. The last component may be
/// a link: a write renames over it, and a removal removes the link itself.
fn refuse_links<'a>(out: &Path, paths: impl Iterator<Item = &'a str>) -> Result<(), ExportError> {
    let mut checked = std::collections::BTreeSet::new();
    for path in paths {
        let relative = Path::new(path);
        let mut dir = out.to_path_buf();
        for component in relative.parent().into_iter().flat_map(Path::components) {
            dir.push(component);
            if !checked.insert(dir.clone()) {
                continue;
            }
            match fs::symlink_metadata(&dir) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(ExportError::LinkInside { path: dir });
                }
                Ok(_) => {}
                // Nothing there yet: the export creates it as a directory.
                Err(_) => break,
            }
        }
    }
    Ok(())
}

/// Creating (and removing) a file is the only reliable test: permission
/// bits say nothing about root, read-only mounts or ACLs.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let probe: PathBuf = dir.join(format!(".tollgate-probe-{}", std::process::id()));
    fs::File::create(&probe)?;
    fs::remove_file(&probe)
}
