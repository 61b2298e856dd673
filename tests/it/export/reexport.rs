//! Re-exporting over an existing export: regenerated files are replaced,
//! edits to them stop the export unless --force, your files are never
//! overwritten once edited (the new version is merged into them, or, in an
//! export made before pristine copies were kept, goes beside them as
//! FILE.new), files no longer generated are removed only when unedited, and
//! --check tells an up-to-date export from a stale one. (Merges, conflicts
//! and refusals through the binary: reexport_merge.rs, reexport_refusals.rs.)

use std::fs;
use std::path::{Path, PathBuf};

use tollgate::export::{
    self, ExportError, ExportOptions, MANIFEST_PATH, Plan, Problem, manifest::Manifest,
};
use tollgate_runtime::Spec;

const SPEC: &str = "version: 1\nagent: desk\ndescription: First words.\nsteps:\n  - id: ask\n    approval: { message: ok? }\n";

fn plan_of(source: &str) -> Plan {
    let spec = Spec::parse(source, "agent.yaml").unwrap();
    export::plan(&spec, source.as_bytes()).unwrap()
}

fn exported(source: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("desk");
    export::export(&plan_of(source), &out, &ExportOptions::default()).unwrap();
    (tmp, out)
}

fn reexport(source: &str, out: &Path, force: bool) -> Result<export::ExportReport, ExportError> {
    export::export(&plan_of(source), out, &ExportOptions { force })
}

fn read(out: &Path, path: &str) -> String {
    fs::read_to_string(out.join(path)).unwrap()
}

fn append(out: &Path, path: &str, text: &str) {
    let mut content = read(out, path);
    content.push_str(text);
    fs::write(out.join(path), content).unwrap();
}

/// Make `out` look like an export from before pristine copies were kept:
/// no `.tollgate/pristine/`, no `pristine` nor `agent` in the manifest.
fn as_an_old_export(out: &Path) {
    fs::remove_dir_all(out.join(export::PRISTINE_DIR)).unwrap();
    let mut manifest = Manifest::read(out).unwrap().unwrap();
    manifest.agent = None;
    for entry in manifest.files.values_mut() {
        entry.pristine = None;
    }
    let text = String::from_utf8(manifest.to_bytes()).unwrap();
    assert!(!text.contains("pristine") && !text.contains("\"agent\""));
    fs::write(out.join(MANIFEST_PATH), text).unwrap();
}

#[test]
fn an_export_keeps_a_pristine_copy_of_each_file_of_yours() {
    let (_tmp, out) = exported(SPEC);
    let manifest = Manifest::read(&out).unwrap().unwrap();
    assert_eq!(manifest.agent.as_deref(), Some("desk"));
    let plan = plan_of(SPEC);
    for (path, file) in &plan.files {
        let entry = &manifest.files[path];
        if file.role.is_yours() {
            let pristine = entry.pristine.as_deref().unwrap();
            assert_eq!(pristine, format!(".tollgate/pristine/{path}"));
            assert_eq!(fs::read(out.join(pristine)).unwrap(), file.bytes.as_ref());
        } else {
            assert_eq!(entry.pristine, None, "{path}");
        }
    }
    // A re-export after an edit keeps the copy as generated, not as edited.
    append(&out, "src/main.rs", "// my route\n");
    reexport(&SPEC.replace("First words.", "Second words."), &out, false).unwrap();
    let pristine = read(&out, ".tollgate/pristine/src/main.rs");
    assert!(pristine.contains("Second words.") && !pristine.contains("my route"));
}

#[test]
fn an_old_export_without_pristine_copies_gets_file_new_beside_an_edited_file() {
    let (_tmp, out) = exported(SPEC);
    as_an_old_export(&out);
    append(&out, "src/main.rs", "// my route\n");
    let mine = read(&out, "src/main.rs");

    // A change that reaches main.rs (its doc names the description).
    let changed = SPEC.replace("First words.", "Second words.");
    let report = reexport(&changed, &out, false).unwrap();
    assert_eq!(report.kept_with_new, vec!["src/main.rs"]);
    assert!(report.merged.is_empty() && report.conflicts.is_empty());
    assert_eq!(read(&out, "src/main.rs"), mine, "your edit is kept");
    let new = read(&out, "src/main.rs.new");
    assert!(new.contains("Second words.") && !new.contains("my route"));
    // Unedited files follow the spec.
    assert!(read(&out, "README.md").contains("Second words."));

    // --force never overwrites a file of yours.
    reexport(&changed, &out, true).unwrap();
    assert_eq!(read(&out, "src/main.rs"), mine);

    // That export kept the pristine copy of what it generated (FILE.new):
    // once you merged FILE.new by hand, the next change is merged for you.
    assert_eq!(read(&out, ".tollgate/pristine/src/main.rs"), new);
    fs::write(out.join("src/main.rs"), format!("{new}// my route\n")).unwrap();
    fs::remove_file(out.join("src/main.rs.new")).unwrap();
    let report = reexport(&SPEC.replace("First words.", "Third words."), &out, false).unwrap();
    assert_eq!(report.merged, vec!["src/main.rs"]);
    let merged = read(&out, "src/main.rs");
    assert!(
        merged.contains("Third words.") && merged.ends_with("// my route\n"),
        "{merged}"
    );
}

#[test]
fn an_old_export_re_exported_unchanged_gets_pristine_copies_to_merge_from_next_time() {
    let (_tmp, out) = exported(SPEC);
    as_an_old_export(&out);
    append(&out, "src/main.rs", "// my route\n");

    // Same spec: nothing new to offer, so nothing beside it; and what the
    // last export generated is what this one does, so it is the base.
    let report = reexport(SPEC, &out, false).unwrap();
    assert_eq!(report.kept_edited, vec!["src/main.rs"]);
    assert!(!out.join("src/main.rs.new").exists());
    assert!(out.join(".tollgate/pristine/src/main.rs").is_file());

    let report = reexport(&SPEC.replace("First words.", "Second words."), &out, false).unwrap();
    assert_eq!(report.merged, vec!["src/main.rs"]);
    let merged = read(&out, "src/main.rs");
    assert!(merged.contains("Second words.") && merged.ends_with("// my route\n"));
}

#[test]
fn a_pristine_copy_that_was_changed_is_not_merged_from() {
    let (_tmp, out) = exported(SPEC);
    append(&out, "src/main.rs", "// my route\n");
    append(
        &out,
        ".tollgate/pristine/src/main.rs",
        "// not what was generated\n",
    );
    let report = reexport(&SPEC.replace("First words.", "Second words."), &out, false).unwrap();
    assert_eq!(report.kept_with_new, vec!["src/main.rs"]);
    assert!(report.merged.is_empty());
}

#[test]
fn an_unedited_file_of_yours_is_replaced() {
    let (_tmp, out) = exported(SPEC);
    let changed = SPEC.replace("First words.", "Second words.");
    let report = reexport(&changed, &out, false).unwrap();
    assert!(report.written.contains(&"src/main.rs".to_string()));
    assert!(read(&out, "src/main.rs").contains("Second words."));
    assert!(!out.join("src/main.rs.new").exists());
}

#[test]
fn an_edited_vendored_file_stops_the_export_unless_forced() {
    let (_tmp, out) = exported(SPEC);
    append(&out, "vendored/src/lib.rs", "// patched\n");
    let generated_before = read(&out, "src/generated.rs");

    let changed = SPEC.replace("ok?", "sure?");
    let err = reexport(&changed, &out, false).unwrap_err();
    assert!(
        matches!(&err, ExportError::EditedFiles { paths } if paths == &["vendored/src/lib.rs"])
    );
    assert_eq!(err.exit_code(), 4);
    assert_eq!(
        err.to_string(),
        "this file was edited since the last export: vendored/src/lib.rs; restore it or re-export with --force to overwrite it"
    );
    // Nothing was written: not even the files that were free to change.
    assert_eq!(read(&out, "src/generated.rs"), generated_before);
    assert!(read(&out, "agent.yaml").contains("ok?"));

    reexport(&changed, &out, true).unwrap();
    let embedded = export::vendored::FILES
        .iter()
        .find(|(p, _)| *p == "src/lib.rs")
        .unwrap()
        .1;
    assert_eq!(fs::read(out.join("vendored/src/lib.rs")).unwrap(), embedded);
    assert!(read(&out, "agent.yaml").contains("sure?"));
}

#[test]
fn an_edited_generated_file_stops_the_export_too() {
    let (_tmp, out) = exported(SPEC);
    append(&out, "src/generated.rs", "// mine\n");
    append(&out, "TOLLGATE.md", "mine\n");
    let err = reexport(SPEC, &out, false).unwrap_err();
    assert!(
        matches!(&err, ExportError::EditedFiles { paths } if paths == &["TOLLGATE.md", "src/generated.rs"])
    );
}

#[test]
fn check_passes_right_after_an_export_and_fails_after_a_spec_change() {
    let (_tmp, out) = exported(SPEC);
    let report = export::check(&plan_of(SPEC), &out).unwrap();
    assert_eq!(report.findings, vec![]);

    // Your edits do not make an export stale.
    append(&out, "src/main.rs", "// mine\n");
    assert_eq!(
        export::check(&plan_of(SPEC), &out).unwrap().findings,
        vec![]
    );

    let changed = SPEC.replace("ok?", "sure?");
    let report = export::check(&plan_of(&changed), &out).unwrap();
    let stale: Vec<(&str, &Problem)> = report
        .findings
        .iter()
        .map(|f| (f.path.as_str(), &f.problem))
        .collect();
    assert_eq!(
        stale,
        vec![
            ("README.md", &Problem::Stale),
            ("agent.yaml", &Problem::Stale),
            // The document names the spec hash.
            ("openapi.json", &Problem::Stale),
            ("src/generated.rs", &Problem::Stale),
        ]
    );

    fs::remove_file(out.join("Dockerfile")).unwrap();
    let report = export::check(&plan_of(SPEC), &out).unwrap();
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.findings[0].path, "Dockerfile");
    assert_eq!(report.findings[0].problem, Problem::Missing);

    // And after exporting the change, it passes again.
    reexport(&changed, &out, false).unwrap();
    assert_eq!(
        export::check(&plan_of(&changed), &out).unwrap().findings,
        vec![]
    );
}

/// An older export wrote files this one no longer generates: pretend so by
/// recording them in the manifest.
fn add_to_manifest(out: &Path, path: &str, content: &str) {
    fs::create_dir_all(out.join(path).parent().unwrap()).unwrap();
    fs::write(out.join(path), content).unwrap();
    let mut manifest = Manifest::read(out).unwrap().unwrap();
    manifest.files.insert(
        path.to_string(),
        export::manifest::ManifestEntry {
            role: export::Role::Generated,
            sha256: export::sha256_hex(content.as_bytes()),
            pristine: None,
        },
    );
    fs::write(out.join(MANIFEST_PATH), manifest.to_bytes()).unwrap();
}

#[test]
fn a_file_no_longer_generated_is_removed_only_if_unedited() {
    let (_tmp, out) = exported(SPEC);
    add_to_manifest(&out, "src/old/routes.rs", "// old\n");
    add_to_manifest(&out, "src/old_edited.rs", "// old\n");
    fs::write(out.join("src/old_edited.rs"), "// old, and mine\n").unwrap();

    let stale = export::check(&plan_of(SPEC), &out).unwrap().findings;
    assert!(
        stale
            .iter()
            .any(|f| f.path == "src/old/routes.rs" && f.problem == Problem::NoLongerGenerated)
    );

    let report = reexport(SPEC, &out, false).unwrap();
    assert_eq!(report.removed, vec!["src/old/routes.rs"]);
    assert_eq!(report.kept_orphans, vec!["src/old_edited.rs"]);
    assert!(
        !out.join("src/old").exists(),
        "the directory it leaves empty goes too"
    );
    assert_eq!(read(&out, "src/old_edited.rs"), "// old, and mine\n");
    // The kept file is yours now: no longer in the manifest, not stale.
    assert_eq!(
        export::check(&plan_of(SPEC), &out).unwrap().findings,
        vec![]
    );
    assert!(
        Manifest::read(&out)
            .unwrap()
            .unwrap()
            .sha256("src/old_edited.rs")
            .is_none()
    );
}

#[test]
fn a_file_of_yours_no_longer_generated_loses_its_pristine_copy() {
    let (_tmp, out) = exported(SPEC);
    // Pretend the last export had one more file of yours.
    fs::write(out.join("src/extra.rs"), "// extra\n").unwrap();
    fs::write(out.join(".tollgate/pristine/src/extra.rs"), "// extra\n").unwrap();
    let mut manifest = Manifest::read(&out).unwrap().unwrap();
    manifest.files.insert(
        "src/extra.rs".into(),
        export::manifest::ManifestEntry {
            role: export::Role::Yours,
            sha256: export::sha256_hex(b"// extra\n"),
            pristine: Some(".tollgate/pristine/src/extra.rs".into()),
        },
    );
    fs::write(out.join(MANIFEST_PATH), manifest.to_bytes()).unwrap();

    let report = reexport(SPEC, &out, false).unwrap();
    assert_eq!(report.removed, vec!["src/extra.rs"]);
    assert!(!out.join("src/extra.rs").exists());
    assert!(!out.join(".tollgate/pristine/src/extra.rs").exists());
    assert!(out.join(".tollgate/pristine/src/main.rs").exists());
}

#[test]
fn exporting_into_a_directory_without_a_manifest_with_force_respects_what_is_there() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("project");
    fs::create_dir_all(out.join("src")).unwrap();
    fs::write(out.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(out.join("notes.txt"), "mine\n").unwrap();

    let err = reexport(SPEC, &out, false).unwrap_err();
    assert!(matches!(err, ExportError::NotAnExport { .. }), "{err}");
    let report = reexport(SPEC, &out, true).unwrap();
    assert!(report.fresh);
    assert_eq!(report.kept_with_new, vec!["src/main.rs"]);
    assert_eq!(read(&out, "src/main.rs"), "fn main() {}\n");
    assert!(out.join("src/main.rs.new").exists());
    assert_eq!(read(&out, "notes.txt"), "mine\n");
    assert!(out.join(MANIFEST_PATH).exists());

    // Without --force, nothing is written into someone else's directory.
    let other = tmp.path().join("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("README.md"), "my readme\n").unwrap();
    let err = reexport(SPEC, &other, false).unwrap_err();
    assert!(matches!(err, ExportError::NotAnExport { .. }));
    assert_eq!(
        fs::read_dir(&other).unwrap().count(),
        1,
        "nothing was written"
    );
}

/// Move `DIR/sub` elsewhere and leave a symbolic link to it in its place.
#[cfg(unix)]
fn link_out(out: &Path, sub: &str, elsewhere: &Path) {
    fs::rename(out.join(sub), elsewhere).unwrap();
    std::os::unix::fs::symlink(elsewhere, out.join(sub)).unwrap();
}

/// Every file under `dir` with its bytes.
#[cfg(unix)]
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_path_buf(), fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

#[cfg(unix)]
#[test]
fn a_symlinked_directory_inside_the_export_is_never_written_through() {
    for sub in ["vendored", "vendored/src", "src", ".tollgate"] {
        let (tmp, out) = exported(SPEC);
        let elsewhere = tmp.path().join("elsewhere");
        link_out(&out, sub, &elsewhere);
        // Something to write into it: an edit to force over (vendored,
        // src) or a manifest to replace (.tollgate).
        let changed = SPEC.replace("ok?", "sure?");
        if sub.starts_with("vendored") {
            append(&out, "vendored/src/lib.rs", "// patched\n");
        }
        let before = snapshot(&elsewhere);

        let err = reexport(&changed, &out, true).unwrap_err();
        assert!(
            matches!(&err, ExportError::LinkInside { path } if path == &out.join(sub)),
            "{sub}: {err}"
        );
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(snapshot(&elsewhere), before, "{sub}: nothing written there");
        let mut leftovers = fs::read_dir(&elsewhere).unwrap().map(|e| e.unwrap().path());
        assert!(
            leftovers.all(|p| !p.to_string_lossy().contains("tollgate-tmp")),
            "{sub}: no temporary file left there"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_file_replaced_by_a_symlink_is_replaced_not_written_through() {
    let (tmp, out) = exported(SPEC);
    let target = tmp.path().join("precious.txt");
    fs::write(&target, "keep me\n").unwrap();
    fs::remove_file(out.join("src/generated.rs")).unwrap();
    std::os::unix::fs::symlink(&target, out.join("src/generated.rs")).unwrap();

    let changed = SPEC.replace("ok?", "sure?");
    reexport(&changed, &out, true).unwrap();
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep me\n");
    let generated = fs::symlink_metadata(out.join("src/generated.rs")).unwrap();
    assert!(generated.is_file(), "the link was replaced by the file");
}
