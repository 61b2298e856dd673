//! What a re-export does to each file, decided before anything is written:
//! the plan, the last export's manifest and the disk, in; a list of actions
//! (or the files that stop the export), out.

use super::ExportError;
use super::manifest::Manifest;
use super::merge::{self, Merged};
use super::plan::{Plan, Role, sha256_hex};
use super::upgrade;

/// A path as it is on disk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnDisk {
    Missing,
    /// A file, with the sha256 of its content.
    File(String),
    Directory,
}

/// What reconciling reads of the export directory: a path's state and,
/// for a merge, its bytes.
pub trait Disk {
    fn state(&self, path: &str) -> OnDisk;
    /// The content of a regular file, or None (missing, unreadable).
    fn read(&self, path: &str) -> Option<Vec<u8>>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the file, or replace one that is still as exported (or, with
    /// --force, an edited vendored or generated one).
    Write(String),
    /// Already what the plan says.
    Unchanged(String),
    /// A file of yours edited since the last export, while the generated
    /// version changed: your edits and the new version merged cleanly.
    Merge { path: String, bytes: Vec<u8> },
    /// As `Merge`, but both changed the same lines: the file is written with
    /// conflict markers, the first of each conflict at `lines` (1-based).
    Conflict {
        path: String,
        bytes: Vec<u8>,
        lines: Vec<usize>,
    },
    /// A file of yours edited since the last export, while the generated
    /// version changed, and no pristine copy to merge from (an export made
    /// before they were kept): keep it, and write the new version beside it
    /// as `PATH.new`.
    KeepWriteNew(String),
    /// A file of yours edited since the last export; the generated version
    /// is the one you last saw, so there is nothing new to offer.
    KeepEdited(String),
    /// No longer generated and not edited: remove it.
    Remove(String),
    /// No longer generated, but edited since the last export: keep it.
    KeepOrphan(String),
}

impl Action {
    pub fn path(&self) -> &str {
        match self {
            Action::Write(path)
            | Action::Unchanged(path)
            | Action::KeepWriteNew(path)
            | Action::KeepEdited(path)
            | Action::Remove(path)
            | Action::KeepOrphan(path)
            | Action::Merge { path, .. }
            | Action::Conflict { path, .. } => path,
        }
    }

    /// What `--dry-run` prints for it.
    pub fn describe(&self) -> &'static str {
        match self {
            Action::Write(_) => "write",
            Action::Unchanged(_) => "unchanged",
            Action::Merge { .. } => "merge clean",
            Action::Conflict { .. } => "conflict",
            Action::KeepWriteNew(_) => "keep, new version as FILE.new",
            Action::KeepEdited(_) => "keep (edited)",
            Action::Remove(_) => "remove",
            Action::KeepOrphan(_) => "keep (edited, no longer generated)",
        }
    }
}

/// The pristine copy of the file of yours at `path`: what the last export
/// generated. None when the manifest has none, or the copy is missing or no
/// longer the content the manifest recorded (then nothing says what the
/// base was, and merging from it would be a guess).
fn pristine(manifest: Option<&Manifest>, disk: &dyn Disk, path: &str) -> Option<Vec<u8>> {
    let entry = manifest?.files.get(path)?;
    let bytes = disk.read(entry.pristine.as_deref()?)?;
    (sha256_hex(&bytes) == entry.sha256).then_some(bytes)
}

/// Decide every action, or refuse with every edited vendored or generated
/// file (unless `force`) so the user sees them all at once.
pub fn decide(
    plan: &Plan,
    manifest: Option<&Manifest>,
    disk: &dyn Disk,
    force: bool,
) -> Result<Vec<Action>, ExportError> {
    let exported = |path: &str| manifest.and_then(|m| m.sha256(path));
    let mut actions = Vec::new();
    let mut edited = Vec::new();

    for (path, file) in &plan.files {
        let planned = file.sha256();
        match disk.state(path) {
            OnDisk::Missing => actions.push(Action::Write(path.clone())),
            OnDisk::Directory => {
                return Err(ExportError::DirectoryInTheWay { path: path.clone() });
            }
            OnDisk::File(current) if current == planned => {
                actions.push(Action::Unchanged(path.clone()))
            }
            OnDisk::File(current) => {
                // Without a manifest entry nothing proves the file is ours to
                // replace, so it counts as edited.
                let is_edited = exported(path) != Some(current.as_str());
                match (file.role, is_edited) {
                    (_, false) => actions.push(Action::Write(path.clone())),
                    (Role::Yours, true) if exported(path) == Some(planned.as_str()) => {
                        actions.push(Action::KeepEdited(path.clone()))
                    }
                    (Role::Yours, true) => {
                        actions.push(upgrade_or_merge(path, &file.bytes, manifest, disk))
                    }
                    (Role::Vendored | Role::Generated, true) if force => {
                        actions.push(Action::Write(path.clone()))
                    }
                    (Role::Vendored | Role::Generated, true) => edited.push(path.clone()),
                }
            }
        }
    }

    if let Some(manifest) = manifest {
        for (path, entry) in &manifest.files {
            if plan.files.contains_key(path) {
                continue;
            }
            match disk.state(path) {
                OnDisk::Missing | OnDisk::Directory => {}
                OnDisk::File(current) if current == entry.sha256 => {
                    actions.push(Action::Remove(path.clone()))
                }
                OnDisk::File(_) => actions.push(Action::KeepOrphan(path.clone())),
            }
        }
    }

    if edited.is_empty() {
        Ok(actions)
    } else {
        Err(ExportError::EditedFiles { paths: edited })
    }
}

/// A file of yours you edited, whose generated version changed: a tool
/// file from before the tool registry gets its constructor appended
/// ([`upgrade`]), and any other is merged ([`merge_yours`]).
fn upgrade_or_merge(
    path: &str,
    new: &[u8],
    manifest: Option<&Manifest>,
    disk: &dyn Disk,
) -> Action {
    let upgraded = disk
        .read(path)
        .and_then(|yours| upgrade::add_constructor(path, &yours));
    match upgraded {
        Some(bytes) => Action::Merge {
            path: path.to_string(),
            bytes,
        },
        None => merge_yours(path, new, manifest, disk),
    }
}

/// A file of yours you edited, whose generated version changed: merge the
/// new version into it when the last export's is at hand, else offer it as
/// `PATH.new`.
fn merge_yours(path: &str, new: &[u8], manifest: Option<&Manifest>, disk: &dyn Disk) -> Action {
    let (Some(base), Some(yours)) = (pristine(manifest, disk, path), disk.read(path)) else {
        return Action::KeepWriteNew(path.to_string());
    };
    let Merged { bytes, conflicts } = merge::merge3(&base, &yours, new);
    let path = path.to_string();
    if !conflicts.is_empty() {
        Action::Conflict {
            path,
            bytes,
            lines: conflicts,
        }
    } else if bytes == yours {
        // Your file already has what changed.
        Action::KeepEdited(path)
    } else {
        Action::Merge { path, bytes }
    }
}

/// Why `--check` finds a file out of date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Missing,
    /// Differs from what an export would write now.
    Stale,
    /// A file of yours that you edited, while the generated version changed
    /// since the last export: a re-export merges the new version into it.
    NewVersionToMerge,
    /// As above, in an export that kept no pristine copy to merge from: a
    /// re-export writes `PATH.new` to merge by hand.
    NewVersionAvailable,
    /// The last export wrote it, the plan no longer has it.
    NoLongerGenerated,
    /// A file of yours still holds conflict markers (at these 1-based
    /// lines) from a merge.
    ConflictMarkers(Vec<usize>),
}

impl Problem {
    pub fn describe(&self) -> &'static str {
        match self {
            Problem::Missing => "missing",
            Problem::Stale => "stale",
            Problem::NewVersionToMerge => "edited, and a newer version would be merged into it",
            Problem::NewVersionAvailable => {
                "edited, and a newer version would be written beside it"
            }
            Problem::NoLongerGenerated => "no longer generated",
            Problem::ConflictMarkers(_) => "conflict marker left from a merge",
        }
    }
}

/// Every path that is not as a fresh export (respecting your edits) would
/// leave it, and every file of yours with conflict markers left in it.
pub fn check(
    plan: &Plan,
    manifest: Option<&Manifest>,
    disk: &dyn Disk,
) -> Vec<(String, Role, Problem)> {
    let exported = |path: &str| manifest.and_then(|m| m.sha256(path));
    let mut findings = Vec::new();
    for (path, file) in &plan.files {
        let planned = file.sha256();
        let problem = match disk.state(path) {
            OnDisk::Missing | OnDisk::Directory => Some(Problem::Missing),
            OnDisk::File(current) if current == planned => None,
            OnDisk::File(current) => {
                let is_edited = exported(path) != Some(current.as_str());
                if file.role.is_yours() && is_edited {
                    // Your edit stands as long as the generated version you
                    // last saw is still the current one.
                    (exported(path) != Some(planned.as_str())).then(|| {
                        if pristine(manifest, disk, path).is_some() {
                            Problem::NewVersionToMerge
                        } else {
                            Problem::NewVersionAvailable
                        }
                    })
                } else {
                    Some(Problem::Stale)
                }
            }
        };
        if let Some(problem) = problem {
            findings.push((path.clone(), file.role, problem));
        }
        if file.role.is_yours() {
            let lines = disk
                .read(path)
                .map(|bytes| merge::conflict_marker_lines(&bytes))
                .unwrap_or_default();
            if !lines.is_empty() {
                findings.push((path.clone(), file.role, Problem::ConflictMarkers(lines)));
            }
        }
    }
    if let Some(manifest) = manifest {
        for (path, entry) in &manifest.files {
            if !plan.files.contains_key(path) && matches!(disk.state(path), OnDisk::File(_)) {
                findings.push((path.clone(), entry.role, Problem::NoLongerGenerated));
            }
        }
    }
    findings
}
