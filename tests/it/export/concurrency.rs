//! Exports into one directory run one at a time: a second export waits for
//! the first (saying so on stderr), then sees its result. Real processes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tollgate::export::lock::ExportLock;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.yaml"))
}

fn spawn_export(spec: &Path, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("export")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn check(spec: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("export")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .arg("--check")
        .output()
        .unwrap()
}

#[test]
fn concurrent_exports_into_one_directory_all_succeed() {
    let spec = example("refund-desk");
    let tmp = tempfile::tempdir().unwrap();
    // Fresh exports race hardest (every process sees no directory and
    // would rename its own into place); a few rounds of four at once.
    for round in 0..5 {
        let out = tmp.path().join(format!("round-{round}"));
        let children: Vec<Child> = (0..4).map(|_| spawn_export(&spec, &out)).collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "round {round}: exit {:?}\n{}{}",
                output.status.code(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let checked = check(&spec, &out);
        assert!(
            checked.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&checked.stdout)
        );
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "lock or staging left: {leftovers:?}");
    }
}

#[test]
fn a_second_export_waits_for_the_lock_and_says_so() {
    let spec = example("no-gate");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("desk");

    let lock = ExportLock::acquire(&out).unwrap();
    assert!(lock.path().exists());
    let mut child = spawn_export(&spec, &out);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("waiting for another export into ") && line.contains("desk"),
        "{line}"
    );
    // Still waiting: nothing written while the lock is held.
    assert!(!out.exists());

    drop(lock);
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(check(&spec, &out).status.success());
}
