//! Which files under `vendored/` make up the runtime an export copies.
//!
//! Shared, through `#[path]`, by `build.rs` (which embeds these files in the
//! binary) and by the parity test (which checks an export against them), so
//! both agree on one rule: every file, except `target/`, `.git/` and what a
//! `.gitignore` (the repository's or one inside `vendored/`) ignores.
//!
//! The `.gitignore` support is deliberately small: blank lines and comments,
//! `name`, `dir/`, `/anchored`, `a/b` and the globs `*`, `?` and `**`.
//! Negations (`!pattern`) are not supported and are reported as an error,
//! so a rule this walker cannot honour is never silently misread.

use std::io;
use std::path::{Path, PathBuf};

/// One ignore rule, with the directory (relative to the repository root,
/// '/'-separated, "" for the root) whose `.gitignore` declared it.
#[derive(Debug, Clone)]
struct Rule {
    base: String,
    glob: String,
    anchored: bool,
    dir_only: bool,
}

/// A file to embed: its path relative to `vendored/` ('/'-separated) and
/// its absolute path on disk.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuntimeFile {
    pub relative: String,
    pub absolute: PathBuf,
}

/// What the walk found: the files (sorted by relative path), every
/// directory visited and every `.gitignore` read (for rebuild tracking).
#[derive(Debug, Default)]
pub struct Walk {
    pub files: Vec<RuntimeFile>,
    pub dirs: Vec<PathBuf>,
    pub ignore_files: Vec<PathBuf>,
}

/// Walk `repo_root/vendored_name`.
pub fn runtime_files(repo_root: &Path, vendored_name: &str) -> io::Result<Walk> {
    let mut walk = Walk::default();
    let mut rules = Vec::new();
    read_ignore_file(repo_root, "", &mut rules, &mut walk)?;
    let vendored = repo_root.join(vendored_name);

    let mut entries = walkdir::WalkDir::new(&vendored)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = entries.next() {
        let entry = entry.map_err(io::Error::other)?;
        let path = entry.path();
        let rel_root = relative(repo_root, path);
        let is_dir = entry.file_type().is_dir();
        if entry.depth() > 0 && is_ignored(&rules, &rel_root, is_dir) {
            if is_dir {
                entries.skip_current_dir();
            }
            continue;
        }
        if is_dir {
            walk.dirs.push(path.to_path_buf());
            read_ignore_file(path, &rel_root, &mut rules, &mut walk)?;
        } else if entry.file_type().is_file() {
            walk.files.push(RuntimeFile {
                relative: relative(&vendored, path),
                absolute: path.to_path_buf(),
            });
        }
        // Symlinks and other special files are not part of the runtime.
    }
    walk.files.sort();
    Ok(walk)
}

fn relative(base: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn read_ignore_file(
    dir: &Path,
    base: &str,
    rules: &mut Vec<Rule>,
    walk: &mut Walk,
) -> io::Result<()> {
    let path = dir.join(".gitignore");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    walk.ignore_files.push(path.clone());
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('!') {
            return Err(io::Error::other(format!(
                "{}: negated pattern {line:?} is not supported by the export's vendored/ walker",
                path.display()
            )));
        }
        let dir_only = line.ends_with('/');
        let pattern = line.trim_end_matches('/');
        let anchored = pattern.contains('/');
        rules.push(Rule {
            base: base.to_string(),
            glob: pattern.trim_start_matches('/').to_string(),
            anchored,
            dir_only,
        });
    }
    Ok(())
}

/// `path` is relative to the repository root.
fn is_ignored(rules: &[Rule], path: &str, is_dir: bool) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    if is_dir && (name == "target" || name == ".git") {
        return true;
    }
    rules.iter().any(|rule| {
        if rule.dir_only && !is_dir {
            return false;
        }
        let Some(below) = below(&rule.base, path) else {
            return false;
        };
        if rule.anchored {
            glob_match(rule.glob.as_bytes(), below.as_bytes())
        } else {
            glob_match(rule.glob.as_bytes(), name.as_bytes())
        }
    })
}

/// `path` relative to `base`, when it is below it.
fn below<'a>(base: &str, path: &'a str) -> Option<&'a str> {
    if base.is_empty() {
        return Some(path);
    }
    path.strip_prefix(base)?.strip_prefix('/')
}

/// `*` and `?` stop at '/', `**` crosses it.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) if rest.first() == Some(&b'*') => {
            let rest = rest[1..].strip_prefix(b"/").unwrap_or(&rest[1..]);
            (0..=text.len()).any(|i| glob_match(rest, &text[i..]))
        }
        Some((b'*', rest)) => {
            let limit = text.iter().position(|&c| c == b'/').unwrap_or(text.len());
            (0..=limit).any(|i| glob_match(rest, &text[i..]))
        }
        Some((b'?', rest)) => {
            matches!(text.split_first(), Some((c, tail)) if *c != b'/' && glob_match(rest, tail))
        }
        Some((c, rest)) => {
            matches!(text.split_first(), Some((t, tail)) if t == c && glob_match(rest, tail))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(b"*.new", b"main.rs.new"));
        assert!(!glob_match(b"*.new", b"a/b.new"));
        assert!(glob_match(b"**/x", b"a/b/x"));
        assert!(glob_match(b"**/x", b"x"));
        assert!(glob_match(b"a?c", b"abc"));
        assert!(!glob_match(b"a?c", b"a/c"));
    }

    #[test]
    fn rules_apply_below_their_base() {
        let rules = vec![
            Rule {
                base: String::new(),
                glob: "target".into(),
                anchored: true,
                dir_only: true,
            },
            Rule {
                base: "vendored".into(),
                glob: "*.tmp".into(),
                anchored: false,
                dir_only: false,
            },
        ];
        assert!(is_ignored(&rules, "vendored/src/x.tmp", false));
        assert!(!is_ignored(&rules, "other/x.tmp", false));
        assert!(!is_ignored(&rules, "vendored/target", false));
        assert!(
            is_ignored(&rules, "vendored/deep/target", true),
            "target is always skipped"
        );
    }
}
