//! `tollgate export` through the binary: output, exit statuses and errors.
//! (Needs the `Export` command wired in src/cli.rs and src/main.rs.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tollgate(args: &[&str], extra: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .args(extra)
        .output()
        .unwrap()
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.yaml"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn export(spec: &Path, out: &Path, flags: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command
        .arg("export")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(flags);
    command.output().unwrap()
}

#[test]
fn export_then_check_then_stale_after_a_spec_change() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("agent.yaml");
    std::fs::copy(example("hello-approval"), &spec).unwrap();
    let out = tmp.path().join("server");

    let done = export(&spec, &out, &[]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    assert!(text(&done.stdout).starts_with("exported hello-approval (spec "));
    assert!(out.join("src/generated.rs").is_file());

    let check = export(&spec, &out, &["--check"]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
    assert!(text(&check.stdout).contains("up to date"));

    let changed = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("ttl: 1h", "ttl: 2h");
    std::fs::write(&spec, changed).unwrap();
    let check = export(&spec, &out, &["--check"]);
    assert_eq!(check.status.code(), Some(1));
    let stdout = text(&check.stdout);
    assert!(stdout.contains("agent.yaml: stale (generated)"), "{stdout}");
    assert!(
        stdout.contains("src/generated.rs: stale (generated)"),
        "{stdout}"
    );
    assert!(
        text(&check.stderr).starts_with("error: "),
        "{}",
        text(&check.stderr)
    );
}

#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("server");
    let plan = export(&example("no-gate"), &out, &["--dry-run"]);
    assert_eq!(plan.status.code(), Some(0));
    let stdout = text(&plan.stdout);
    let main = stdout
        .lines()
        .find(|l| l.starts_with("src/main.rs "))
        .unwrap();
    let columns: Vec<&str> = main.split_whitespace().collect();
    assert_eq!(columns[1], "yours");
    assert!(columns[2].parse::<usize>().unwrap() > 0);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("vendored/src/lib.rs ") && l.contains("vendored"))
    );
    assert!(!out.exists());
}

#[test]
fn bad_input_exits_2_with_a_message_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("server");

    let missing = tmp.path().join("missing.yaml");
    let run = export(&missing, &out, &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        text(&run.stderr).starts_with(&format!("error: {}: cannot read spec: ", missing.display())),
        "{}",
        text(&run.stderr)
    );

    let bad = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "version: 1\nagent: a\nsteps:\n  - id: s\n    sett: {}\n",
    )
    .unwrap();
    let run = export(&bad, &out, &[]);
    assert_eq!(run.status.code(), Some(2));
    let validate = tollgate(&["validate"], &[&bad]);
    assert_eq!(
        text(&run.stderr),
        text(&validate.stderr),
        "the same message as validate"
    );
    assert!(text(&run.stderr).starts_with(&format!("error: {}:", bad.display())));

    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let run = export(&example("no-gate"), &file, &[]);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        text(&run.stderr),
        format!(
            "error: --out {}: is a file, not a directory\n",
            file.display()
        )
    );

    assert!(!out.exists());
    let mut left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["bad.yaml", "file"]);
}

#[test]
fn an_edited_regenerated_file_exits_4_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("server");
    assert!(export(&example("no-gate"), &out, &[]).status.success());
    std::fs::write(out.join("TOLLGATE.md"), "mine\n").unwrap();
    let run = export(&example("no-gate"), &out, &[]);
    assert_eq!(run.status.code(), Some(4));
    assert!(
        text(&run.stderr).contains("TOLLGATE.md"),
        "{}",
        text(&run.stderr)
    );
    assert!(
        export(&example("no-gate"), &out, &["--force"])
            .status
            .success()
    );
    assert_ne!(
        std::fs::read_to_string(out.join("TOLLGATE.md")).unwrap(),
        "mine\n"
    );
}
