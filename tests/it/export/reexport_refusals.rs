//! What a re-export refuses, through the `tollgate` binary: a non-empty
//! directory that is not an export and another agent's export (exit 4,
//! naming the directory and the agents, until `--force`), and any write or
//! removal outside the output directory, whether through a symbolic link
//! planted in it or a manifest naming `..` paths (exit 2).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{assert_exit, stderr, stdout};

fn spec_of(agent: &str) -> String {
    format!(
        "version: 1\nagent: {agent}\ndescription: First words.\nsteps:\n  - id: ask\n    approval: {{ message: ok? }}\n"
    )
}

fn export(spec: &Path, out: &Path, flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("export")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(flags)
        .output()
        .unwrap()
}

fn write_spec(dir: &Path, agent: &str) -> PathBuf {
    let path = dir.join(format!("{agent}.yaml"));
    fs::write(&path, spec_of(agent)).unwrap();
    path
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_path_buf(), fs::read(e.path()).unwrap()))
        .collect()
}

fn manifest(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(out.join(".tollgate/export.json")).unwrap()).unwrap()
}

#[test]
fn a_non_empty_directory_that_is_not_an_export_is_refused_until_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = write_spec(tmp.path(), "desk");
    let out = tmp.path().join("project");
    fs::create_dir_all(out.join("src")).unwrap();
    fs::write(out.join("Cargo.toml"), "[package]\nname = \"mine\"\n").unwrap();
    fs::write(out.join("src/main.rs"), "fn main() {}\n").unwrap();
    let before = files(&out);

    let run = export(&spec, &out, &[]);
    assert_exit(&run, 4);
    assert_eq!(
        stderr(&run),
        format!(
            "error: --out {}: is not empty and is not a tollgate export (no .tollgate/export.json; it holds Cargo.toml, src): export into a new or empty directory, or pass --force to export into it anyway (files the export generates are overwritten there, files of yours already there are kept, with the new version beside them as FILE.new)\n",
            out.display()
        )
    );
    assert_eq!(files(&out), before, "nothing written");
    // --check and --dry-run look, and write nothing either.
    assert_exit(&export(&spec, &out, &["--dry-run"]), 4);
    assert_eq!(files(&out), before);

    let run = export(&spec, &out, &["--force"]);
    assert_exit(&run, 0);
    assert!(
        stdout(&run).contains(
            "kept src/main.rs (there before this first export); the new version is src/main.rs.new"
        ),
        "{}",
        stdout(&run)
    );
    assert_eq!(
        fs::read_to_string(out.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert!(out.join("src/main.rs.new").is_file());
    assert!(out.join("Cargo.toml.new").is_file());
    assert_eq!(manifest(&out)["agent"], "desk");
    // An export now: the next one needs no --force.
    assert_exit(&export(&spec, &out, &[]), 0);
}

#[test]
fn an_empty_directory_or_a_fresh_git_repository_needs_no_force() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = write_spec(tmp.path(), "desk");
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert_exit(&export(&spec, &empty, &[]), 0);

    let repo = tmp.path().join("repo");
    fs::create_dir_all(repo.join(".git")).unwrap();
    fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    assert_exit(&export(&spec, &repo, &[]), 0);
    assert!(repo.join(".tollgate/export.json").is_file());
    assert_eq!(
        fs::read_to_string(repo.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
}

#[test]
fn another_agents_export_is_refused_until_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let desk = write_spec(tmp.path(), "desk");
    let other = write_spec(tmp.path(), "other-desk");
    let out = tmp.path().join("server");
    assert_exit(&export(&desk, &out, &[]), 0);
    let before = files(&out);

    let run = export(&other, &out, &[]);
    assert_exit(&run, 4);
    let err = stderr(&run);
    assert!(
        err.starts_with(&format!(
            "error: --out {}: holds the export of agent \"desk\", but this spec is agent \"other-desk\": export it into another directory, or pass --force",
            out.display()
        )),
        "{err}"
    );
    assert_eq!(files(&out), before, "nothing written");

    // An export made before the manifest recorded its agent: the spec in it
    // says whose it is.
    let mut old = manifest(&out);
    old.as_object_mut().unwrap().remove("agent");
    fs::write(
        out.join(".tollgate/export.json"),
        serde_json::to_vec_pretty(&old).unwrap(),
    )
    .unwrap();
    let run = export(&other, &out, &[]);
    assert_exit(&run, 4);
    assert!(stderr(&run).contains("agent \"desk\""), "{}", stderr(&run));
    assert_exit(&export(&desk, &out, &[]), 0);
    assert_eq!(manifest(&out)["agent"], "desk", "recorded from now on");

    let run = export(&other, &out, &["--force"]);
    assert_exit(&run, 0);
    assert_eq!(manifest(&out)["agent"], "other-desk");
    assert!(
        fs::read_to_string(out.join("agent.yaml"))
            .unwrap()
            .contains("agent: other-desk")
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_planted_in_the_export_is_never_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = write_spec(tmp.path(), "desk");
    let out = tmp.path().join("server");
    assert_exit(&export(&spec, &out, &[]), 0);
    // The pristine copies' directory now points outside the export.
    let outside = tmp.path().join("outside");
    fs::rename(out.join(".tollgate/pristine"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, out.join(".tollgate/pristine")).unwrap();
    let outside_before = files(&outside);
    fs::write(
        &spec,
        spec_of("desk").replace("First words.", "Second words."),
    )
    .unwrap();

    for flags in [&[][..], &["--force"][..]] {
        let run = export(&spec, &out, flags);
        assert_exit(&run, 2);
        assert!(
            stderr(&run).starts_with(&format!(
                "error: {}: is a symbolic link; an export writes only inside its own directory",
                out.join(".tollgate/pristine").display()
            )),
            "{}",
            stderr(&run)
        );
        assert_eq!(files(&outside), outside_before, "nothing written outside");
    }
    assert!(
        fs::read_to_string(out.join("README.md"))
            .unwrap()
            .contains("First words.")
    );
}

#[test]
fn a_manifest_naming_paths_outside_the_export_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = write_spec(tmp.path(), "desk");
    let out = tmp.path().join("server");
    assert_exit(&export(&spec, &out, &[]), 0);
    // As if the last export had written ../victim.txt: unedited, so a
    // re-export would remove it as no longer generated.
    let victim = tmp.path().join("victim.txt");
    fs::write(&victim, "precious\n").unwrap();
    for path in ["../victim.txt", &victim.display().to_string()] {
        let mut crafted = manifest(&out);
        crafted["files"][path] = serde_json::json!({
            "role": "generated",
            "sha256": tollgate::export::sha256_hex(b"precious\n"),
        });
        let manifest_path = out.join(".tollgate/export.json");
        let saved = fs::read(&manifest_path).unwrap();
        fs::write(&manifest_path, serde_json::to_vec_pretty(&crafted).unwrap()).unwrap();

        let run = export(&spec, &out, &["--force"]);
        assert_exit(&run, 2);
        assert!(
            stderr(&run).contains(&format!("{path:?}, which is not a path inside the export")),
            "{}",
            stderr(&run)
        );
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        fs::write(&manifest_path, saved).unwrap();
    }
}
