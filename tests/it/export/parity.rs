//! The runtime an export carries is this repository's `vendored/`, byte for
//! byte: the copy embedded in the binary equals the files on disk, and an
//! export's `vendored/` equals both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tollgate::export::{self, ExportOptions};

// The walker build.rs embeds with, so both sides agree on what is ignored.
#[allow(dead_code)]
use crate::export_walk as walk;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Relative path -> bytes of every runtime file under `root/vendored`.
fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walk::runtime_files(root, "vendored")
        .unwrap()
        .files
        .into_iter()
        .map(|f| (f.relative, std::fs::read(&f.absolute).unwrap()))
        .collect()
}

fn assert_same(what: &str, left: &BTreeMap<String, Vec<u8>>, right: &BTreeMap<String, Vec<u8>>) {
    let left_names: Vec<&String> = left.keys().collect();
    let right_names: Vec<&String> = right.keys().collect();
    assert_eq!(left_names, right_names, "{what}: different file sets");
    for (path, bytes) in left {
        assert!(right[path] == *bytes, "{what}: {path} differs");
    }
}

#[test]
fn embedded_runtime_equals_vendored_on_disk() {
    let embedded: BTreeMap<String, Vec<u8>> = export::vendored::FILES
        .iter()
        .map(|(path, bytes)| (path.to_string(), bytes.to_vec()))
        .collect();
    assert!(embedded.contains_key("Cargo.toml") && embedded.contains_key("src/lib.rs"));
    assert_same(
        "embedded copy vs vendored/ (rebuild if vendored/ changed)",
        &embedded,
        &files_under(&repo()),
    );
}

#[test]
fn exported_vendored_equals_repository_vendored() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let plan = export::command::plan_for(&repo().join("examples/refund-desk.yaml")).unwrap();
    export::export(&plan, &out, &ExportOptions::default()).unwrap();

    // Everything under the export's vendored/, nothing filtered.
    let mut exported = BTreeMap::new();
    for entry in walkdir::WalkDir::new(out.join("vendored")) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(out.join("vendored")).unwrap();
            let rel = rel.to_string_lossy().replace('\\', "/");
            exported.insert(rel, std::fs::read(entry.path()).unwrap());
        }
    }
    assert_same(
        "export's vendored/ vs vendored/",
        &exported,
        &files_under(&repo()),
    );
}
