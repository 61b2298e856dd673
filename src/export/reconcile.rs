//! What a re-export does to each file, decided before anything is written:
//! the plan, the last export's manifest and the disk, in; a list of actions
//! (or the files that stop the export), out.

use super::ExportError;
use super::manifest::Manifest;
use super::plan::{Plan, Role};

/// A path as it is on disk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnDisk {
    Missing,
    /// A file, with the sha256 of its content.
    File(String),
    Directory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the file, or replace one that is still as exported (or, with
    /// --force, an edited vendored or generated one).
    Write(String),
    /// Already what the plan says.
    Unchanged(String),
    /// A file of yours edited since the last export, while the generated
    /// version changed: keep it, and write the new version beside it as
    /// `PATH.new`.
    KeepWriteNew(String),
    /// A file of yours edited since the last export; the generated version
    /// is the one you last saw, so there is nothing new to offer.
    KeepEdited(String),
    /// No longer generated and not edited: remove it.
    Remove(String),
    /// No longer generated, but edited since the last export: keep it.
    KeepOrphan(String),
}

/// Decide every action, or refuse with every edited vendored or generated
/// file (unless `force`) so the user sees them all at once.
pub fn decide(
    plan: &Plan,
    manifest: Option<&Manifest>,
    disk: &dyn Fn(&str) -> OnDisk,
    force: bool,
) -> Result<Vec<Action>, ExportError> {
    let exported = |path: &str| manifest.and_then(|m| m.sha256(path));
    let mut actions = Vec::new();
    let mut edited = Vec::new();

    for (path, file) in &plan.files {
        let planned = file.sha256();
        match disk(path) {
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
                    (Role::Yours, true) => actions.push(Action::KeepWriteNew(path.clone())),
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
            match disk(path) {
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

/// Why `--check` finds a file out of date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Missing,
    /// Differs from what an export would write now.
    Stale,
    /// A file of yours that you edited, while the generated version changed
    /// since the last export: re-export to get `PATH.new` and merge it.
    NewVersionAvailable,
    /// The last export wrote it, the plan no longer has it.
    NoLongerGenerated,
}

impl Problem {
    pub fn describe(&self) -> &'static str {
        match self {
            Problem::Missing => "missing",
            Problem::Stale => "stale",
            Problem::NewVersionAvailable => {
                "edited, and a newer version would be written beside it"
            }
            Problem::NoLongerGenerated => "no longer generated",
        }
    }
}

/// Every path that is not as a fresh export (respecting your edits) would
/// leave it.
pub fn check(
    plan: &Plan,
    manifest: Option<&Manifest>,
    disk: &dyn Fn(&str) -> OnDisk,
) -> Vec<(String, Role, Problem)> {
    let exported = |path: &str| manifest.and_then(|m| m.sha256(path));
    let mut findings = Vec::new();
    for (path, file) in &plan.files {
        let planned = file.sha256();
        let problem = match disk(path) {
            OnDisk::Missing | OnDisk::Directory => Some(Problem::Missing),
            OnDisk::File(current) if current == planned => None,
            OnDisk::File(current) => {
                let is_edited = exported(path) != Some(current.as_str());
                if file.role.is_yours() && is_edited {
                    // Your edit stands as long as the generated version you
                    // last saw is still the current one.
                    (exported(path) != Some(planned.as_str()))
                        .then_some(Problem::NewVersionAvailable)
                } else {
                    Some(Problem::Stale)
                }
            }
        };
        if let Some(problem) = problem {
            findings.push((path.clone(), file.role, problem));
        }
    }
    if let Some(manifest) = manifest {
        for (path, entry) in &manifest.files {
            if !plan.files.contains_key(path) && matches!(disk(path), OnDisk::File(_)) {
                findings.push((path.clone(), entry.role, Problem::NoLongerGenerated));
            }
        }
    }
    findings
}
