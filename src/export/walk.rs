//! Which files under `vendored/` make up the runtime an export copies.
//!
//! Shared, through `#[path]`, by `build.rs` (which embeds these files in the
//! binary) and by the parity test (which checks an export against them), so
//! both agree on one rule: every regular file, except what the explicit
//! lists below name. An explicit list rather than `.gitignore` rules: the
//! runtime is a source tree with nothing to ignore but build output and
//! tollgate's own leftovers, and a list cannot be misread.

use std::io;
use std::path::{Path, PathBuf};

/// Directories skipped wherever they are: cargo's build output, git's
/// metadata, and the local store `tollgate run` creates (`.tollgate/`).
pub const EXCLUDED_DIRS: &[&str] = &["target", ".git", ".tollgate"];

/// File-name endings skipped: the `FILE.new` an export leaves beside a file
/// of yours it would not overwrite.
pub const EXCLUDED_SUFFIXES: &[&str] = &[".new"];

/// A file to embed: its path relative to `vendored/` ('/'-separated) and
/// its absolute path on disk.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuntimeFile {
    pub relative: String,
    pub absolute: PathBuf,
}

/// What the walk found: the files (sorted by relative path) and every
/// directory visited (for rebuild tracking).
#[derive(Debug, Default)]
pub struct Walk {
    pub files: Vec<RuntimeFile>,
    pub dirs: Vec<PathBuf>,
}

/// Walk `repo_root/vendored_name`.
pub fn runtime_files(repo_root: &Path, vendored_name: &str) -> io::Result<Walk> {
    let mut walk = Walk::default();
    let vendored = repo_root.join(vendored_name);

    let mut entries = walkdir::WalkDir::new(&vendored)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = entries.next() {
        let entry = entry.map_err(io::Error::other)?;
        let path = entry.path();
        let is_dir = entry.file_type().is_dir();
        let name = entry.file_name().to_string_lossy();
        if entry.depth() > 0 && is_excluded(&name, is_dir) {
            if is_dir {
                entries.skip_current_dir();
            }
            continue;
        }
        if is_dir {
            walk.dirs.push(path.to_path_buf());
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

/// Whether an entry with this file name is left out of the runtime.
pub fn is_excluded(name: &str, is_dir: bool) -> bool {
    if is_dir {
        EXCLUDED_DIRS.contains(&name)
    } else {
        EXCLUDED_SUFFIXES.iter().any(|s| name.ends_with(s))
    }
}

fn relative(base: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_names_are_left_out() {
        assert!(is_excluded("target", true));
        assert!(is_excluded(".git", true));
        assert!(is_excluded(".tollgate", true));
        assert!(is_excluded("main.rs.new", false));
        assert!(
            !is_excluded("target", false),
            "a file named target is source"
        );
        assert!(!is_excluded("news.rs", false));
        assert!(!is_excluded("new", false));
        // Names a gitignore engine would read as patterns are plain names.
        assert!(!is_excluded("[abc].rs", false));
        assert!(!is_excluded("src", true));
    }

    #[test]
    fn the_walk_skips_excluded_entries_at_any_depth() {
        let root = tempfile::tempdir().unwrap();
        let v = root.path().join("vendored");
        for dir in [
            "src/deep",
            "target/debug",
            "src/target",
            "src/.tollgate",
            ".git",
        ] {
            std::fs::create_dir_all(v.join(dir)).unwrap();
        }
        for file in [
            "Cargo.toml",
            "src/lib.rs",
            "src/lib.rs.new",
            "src/a.rs",
            "src/[abc].rs",
            "src/deep/b.rs",
            "target/debug/x",
            "src/target/y.rs",
            "src/.tollgate/store.db",
            ".git/HEAD",
        ] {
            std::fs::write(v.join(file), file).unwrap();
        }
        let walk = runtime_files(root.path(), "vendored").unwrap();
        let names: Vec<_> = walk.files.iter().map(|f| f.relative.as_str()).collect();
        assert_eq!(
            names,
            [
                "Cargo.toml",
                "src/[abc].rs",
                "src/a.rs",
                "src/deep/b.rs",
                "src/lib.rs"
            ]
        );
        assert!(walk.dirs.iter().all(|d| !d.ends_with("target")));
    }
}
