//! A plan meets the disk: `export` (write, respecting and merging edits),
//! `preview` (what export would do, writing nothing) and `check` (compare
//! only).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::ExportError;
use super::guard;
use super::manifest::{self, Manifest};
use super::plan::{Plan, Role, sha256_hex};
use super::reconcile::{self, Action, Disk, OnDisk, Problem};
use super::writer::{self, Output};

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Overwrite vendored and generated files even when they were edited
    /// since the last export, and export into a directory that is not an
    /// export or holds another agent's. Never overwrites a file of yours.
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
    /// Your edited files the new version was merged into cleanly.
    pub merged: Vec<String>,
    /// Your edited files where your edits and the new version overlap:
    /// written with conflict markers, the first of each at these lines.
    pub conflicts: Vec<(String, Vec<usize>)>,
    /// Your edited files that were kept, each with `PATH.new` beside it
    /// (no pristine copy to merge from: an export made before they were
    /// kept).
    pub kept_with_new: Vec<String>,
    /// Your edited files, kept; the generated version has not changed since
    /// the last export.
    pub kept_edited: Vec<String>,
    /// Files no longer generated, removed.
    pub removed: Vec<String>,
    /// Files no longer generated but edited, kept.
    pub kept_orphans: Vec<String>,
}

/// What an export would do, file by file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// No export is there yet.
    pub fresh: bool,
    pub actions: Vec<Action>,
}

/// The export directory as reconciling sees it.
struct Dir<'a>(&'a Path);

impl Disk for Dir<'_> {
    fn state(&self, path: &str) -> OnDisk {
        let full = self.0.join(path);
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

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        let full = self.0.join(path);
        let meta = fs::symlink_metadata(&full).ok()?;
        // A link is not read through: a pristine copy or a file of yours
        // that points elsewhere is not the export's to merge from.
        if !meta.is_file() {
            return None;
        }
        fs::read(full).ok()
    }
}

/// Decide what exporting `plan` into the existing directory `out` does, or
/// refuse.
fn decide(
    plan: &Plan,
    out: &Path,
    options: &ExportOptions,
) -> Result<(Option<Manifest>, Vec<Action>), ExportError> {
    let previous = Manifest::read(out)?;
    guard::refuse_foreign(out, previous.as_ref(), plan, options.force)?;
    let actions = reconcile::decide(plan, previous.as_ref(), &Dir(out), options.force)?;
    Ok((previous, actions))
}

/// What `export` would do, without writing anything (not even `out`'s
/// parent); the same refusals.
pub fn preview(plan: &Plan, out: &Path, options: &ExportOptions) -> Result<Preview, ExportError> {
    guard::plan_paths_inside(plan)?;
    match fs::metadata(out) {
        Ok(meta) if !meta.is_dir() => Err(ExportError::OutIsFile(out.to_path_buf())),
        Ok(_) => {
            let (previous, actions) = decide(plan, out, options)?;
            Ok(Preview {
                fresh: previous.is_none(),
                actions,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Preview {
            fresh: true,
            actions: plan.files.keys().cloned().map(Action::Write).collect(),
        }),
        Err(e) => Err(ExportError::Unwritable {
            path: out.to_path_buf(),
            source: e,
        }),
    }
}

/// Write `plan` to `out`, creating it if needed.
pub fn export(
    plan: &Plan,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportReport, ExportError> {
    guard::plan_paths_inside(plan)?;
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

    let (previous, actions) = decide(plan, out, options)?;
    report.fresh = previous.is_none();

    let mut outputs = Vec::new();
    let mut removals = Vec::new();
    for action in &actions {
        match action {
            Action::Write(path) => {
                outputs.push(Output {
                    bytes: &plan.files[path].bytes,
                    path: path.clone(),
                });
                report.written.push(path.clone());
            }
            Action::Unchanged(_) => report.unchanged += 1,
            Action::Merge { path, bytes } => {
                outputs.push(Output {
                    bytes,
                    path: path.clone(),
                });
                report.merged.push(path.clone());
            }
            Action::Conflict { path, bytes, lines } => {
                outputs.push(Output {
                    bytes,
                    path: path.clone(),
                });
                report.conflicts.push((path.clone(), lines.clone()));
            }
            Action::KeepWriteNew(path) => {
                outputs.push(Output {
                    bytes: &plan.files[path].bytes,
                    path: format!("{path}.new"),
                });
                report.kept_with_new.push(path.clone());
            }
            Action::KeepEdited(path) => report.kept_edited.push(path.clone()),
            Action::Remove(path) => {
                removals.push(path.clone());
                report.removed.push(path.clone());
            }
            Action::KeepOrphan(path) => report.kept_orphans.push(path.clone()),
        }
    }
    let (pristine_outputs, pristine_removals) = pristine_changes(plan, previous.as_ref(), out);
    outputs.extend(pristine_outputs);
    removals.extend(pristine_removals);
    outputs.push(Output {
        path: super::MANIFEST_PATH.to_string(),
        bytes: &manifest_bytes,
    });
    let touched = outputs.iter().map(|o| o.path.as_str());
    guard::refuse_links(out, touched.chain(removals.iter().map(String::as_str)))?;
    writer::write_in_place(out, &outputs, &removals)?;
    Ok(report)
}

/// The pristine copies to (re)write, one per file of yours in the plan, and
/// those of the last export that no file of yours needs any more. Whatever
/// the merge did, the new pristine copy is the plan's content: the next
/// re-export merges from what this one generated.
fn pristine_changes<'a>(
    plan: &'a Plan,
    previous: Option<&Manifest>,
    out: &Path,
) -> (Vec<Output<'a>>, Vec<String>) {
    let dir = Dir(out);
    let mut outputs = Vec::new();
    let mut kept = BTreeSet::new();
    for (path, file) in plan.files.iter().filter(|(_, f)| f.role == Role::Yours) {
        let pristine = manifest::pristine_path(path);
        if dir.state(&pristine) != OnDisk::File(file.sha256()) {
            outputs.push(Output {
                path: pristine.clone(),
                bytes: &file.bytes,
            });
        }
        kept.insert(pristine);
    }
    let removals = previous
        .into_iter()
        .flat_map(|m| m.files.values())
        .filter_map(|entry| entry.pristine.clone())
        .filter(|pristine| !kept.contains(pristine))
        .filter(|pristine| matches!(dir.state(pristine), OnDisk::File(_)))
        .collect();
    (outputs, removals)
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
    let findings = reconcile::check(plan, manifest.as_ref(), &Dir(out))
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

/// Creating (and removing) a file is the only reliable test: permission
/// bits say nothing about root, read-only mounts or ACLs.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let probe: PathBuf = dir.join(format!(".tollgate-probe-{}", std::process::id()));
    fs::File::create(&probe)?;
    fs::remove_file(&probe)
}
