//! What an export refuses before it decides anything: a directory that is
//! not an export, another agent's export (both unless `--force`), and any
//! write that would land outside the output directory.

use std::fs;
use std::path::Path;

use tollgate_runtime::Spec;

use super::manifest::{self, Manifest};
use super::plan::Plan;
use super::{ExportError, SPEC_FILE};

/// Entries a fresh export may find in its directory and still call it
/// empty: `git init DIR && tollgate export SPEC --out DIR` is a way to
/// start.
const IGNORED_ENTRIES: &[&str] = &[".git"];

/// Refuse, unless `force`, to export into `out` when it is not empty and
/// has no manifest (the export would mix its files with someone else's
/// without a word), or when it holds the export of another agent.
pub fn refuse_foreign(
    out: &Path,
    previous: Option<&Manifest>,
    plan: &Plan,
    force: bool,
) -> Result<(), ExportError> {
    if force {
        return Ok(());
    }
    match previous {
        None => match entries(out)? {
            found if found.is_empty() => Ok(()),
            found => Err(ExportError::NotAnExport {
                dir: out.to_path_buf(),
                found: summary(&found),
            }),
        },
        Some(manifest) => {
            // An export made before the manifest recorded the agent has
            // its spec beside it.
            let previous_agent = manifest.agent.clone().or_else(|| agent_on_disk(out));
            match previous_agent {
                Some(agent) if agent != plan.agent => Err(ExportError::OtherAgent {
                    dir: out.to_path_buf(),
                    previous: agent,
                    agent: plan.agent.clone(),
                }),
                _ => Ok(()),
            }
        }
    }
}

/// The names in `dir`, sorted, without the ones an empty directory may hold.
fn entries(dir: &Path) -> Result<Vec<String>, ExportError> {
    let read = |e| ExportError::Read {
        path: dir.to_path_buf(),
        source: e,
    };
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(read)? {
        let name = entry
            .map_err(read)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !IGNORED_ENTRIES.contains(&name.as_str()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// `a, b, c and 4 more`.
fn summary(names: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut text = names
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// The agent id of the spec an export holds, if it still parses.
fn agent_on_disk(out: &Path) -> Option<String> {
    let bytes = fs::read(out.join(SPEC_FILE)).ok()?;
    Spec::parse_bytes(&bytes, SPEC_FILE)
        .ok()
        .map(|spec| spec.agent)
}

/// Every path of the plan is inside the export: the plan is the exporter's
/// own, so one that is not is a bug, caught before anything is written.
pub fn plan_paths_inside(plan: &Plan) -> Result<(), ExportError> {
    match plan.files.keys().find(|path| !manifest::is_inside(path)) {
        Some(path) => Err(ExportError::internal(path, "not a path inside the export")),
        None => Ok(()),
    }
}

/// Refuse to write or remove anything whose path runs through a symbolic
/// link inside `out` (a linked `vendored/`, say): the write would land
/// wherever the link points, outside the export. The last component may be
/// a link: a write renames over it, and a removal removes the link itself.
pub fn refuse_links<'a>(
    out: &Path,
    paths: impl Iterator<Item = &'a str>,
) -> Result<(), ExportError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_the_first_few_entries() {
        let names = |n: usize| (0..n).map(|i| format!("f{i}")).collect::<Vec<_>>();
        assert_eq!(summary(&names(1)), "f0");
        assert_eq!(summary(&names(3)), "f0, f1, f2");
        assert_eq!(summary(&names(5)), "f0, f1, f2 and 2 more");
    }

    #[test]
    fn a_directory_with_only_git_metadata_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(".git")).unwrap();
        assert_eq!(entries(dir.path()).unwrap(), Vec::<String>::new());
        fs::write(dir.path().join("notes.txt"), "x").unwrap();
        assert_eq!(entries(dir.path()).unwrap(), vec!["notes.txt"]);
    }
}
