//! Bad input stops an export before anything is written, with a message
//! that says what was wrong and where, and exit status 2.

use std::fs;
use std::path::{Path, PathBuf};

use tollgate::export::{self, ExportError, ExportOptions};
use tollgate_runtime::Spec;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.yaml"))
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_missing_spec_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("nope.yaml");
    let err = export::command::plan_for(&spec).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read spec: ", spec.display())),
        "{err}"
    );
}

#[test]
fn an_invalid_spec_reports_file_line_and_column_like_validate() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("bad.yaml");
    fs::write(
        &spec,
        "version: 1\nagent: a\nsteps:\n  - id: s\n    tool: missing\n",
    )
    .unwrap();
    let err = export::command::plan_for(&spec).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let expected = Spec::load(&spec).unwrap_err().to_string();
    assert_eq!(err.to_string(), expected);
    assert!(
        expected.starts_with(&format!("{}:5:11: ", spec.display())),
        "{expected}"
    );
}

#[test]
fn out_that_is_a_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    fs::write(&out, "not a directory\n").unwrap();
    let plan = export::command::plan_for(&example("no-gate")).unwrap();

    let err = export::export(&plan, &out, &ExportOptions::default()).unwrap_err();
    assert!(matches!(err, ExportError::OutIsFile(_)));
    assert_eq!(err.exit_code(), 2);
    assert_eq!(
        err.to_string(),
        format!("--out {}: is a file, not a directory", out.display())
    );
    assert_eq!(fs::read_to_string(&out).unwrap(), "not a directory\n");
    assert_eq!(entries(tmp.path()), vec!["out"]);

    let err = export::check(&plan, &out).unwrap_err();
    assert!(matches!(err, ExportError::OutIsFile(_)));
}

#[test]
fn out_below_a_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("file"), "x").unwrap();
    let out = tmp.path().join("file/export");
    let plan = export::command::plan_for(&example("no-gate")).unwrap();
    let err = export::export(&plan, &out, &ExportOptions::default()).unwrap_err();
    assert!(matches!(err, ExportError::Unwritable { .. }), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .starts_with(&format!("--out {}: cannot write there: ", out.display())),
        "{err}"
    );
    assert_eq!(entries(tmp.path()), vec!["file"]);
}

/// A directory this process cannot write to. Permission bits do not stop
/// root, so as root use a read-only filesystem (/sys) instead.
fn unwritable_dir(tmp: &Path) -> Option<PathBuf> {
    let dir = tmp.join("locked");
    fs::create_dir(&dir).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
    }
    if fs::write(dir.join("probe"), "").is_err() {
        return Some(dir);
    }
    let _ = fs::remove_file(dir.join("probe"));
    let sys = PathBuf::from("/sys");
    (sys.is_dir() && fs::write(sys.join("tollgate-probe"), "").is_err()).then_some(sys)
}

#[test]
fn an_unwritable_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(locked) = unwritable_dir(tmp.path()) else {
        eprintln!("skipped: no unwritable directory on this machine");
        return;
    };
    let plan = export::command::plan_for(&example("no-gate")).unwrap();
    let before = entries(&locked);

    for out in [locked.join("export"), locked.clone()] {
        let err = export::export(&plan, &out, &ExportOptions::default()).unwrap_err();
        assert!(matches!(err, ExportError::Unwritable { .. }), "{err}");
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .starts_with(&format!("--out {}: cannot write there: ", out.display())),
            "{err}"
        );
        assert_eq!(entries(&locked), before, "nothing was written");
    }

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmp.path().join("locked");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
}
