//! Re-export three-way merges files of yours, through the `tollgate`
//! binary: the last export's pristine copy (`.tollgate/pristine/`) is the
//! base, the file on disk yours, the new plan theirs. A clean merge keeps
//! both edits and exits 0; overlapping edits are left between conflict
//! markers, listed on stderr, and the export exits 1; `--check` names every
//! marker left; `--dry-run` says what each file would get and writes
//! nothing.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{assert_exit, stderr, stdout};

const SPEC: &str = "version: 1\nagent: desk\ndescription: First words.\nsteps:\n  - id: ask\n    approval: { message: ok? }\n";

/// A spec file and its export, made through the binary.
struct Project {
    _tmp: tempfile::TempDir,
    spec: PathBuf,
    out: PathBuf,
}

impl Project {
    fn exported() -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let spec = tmp.path().join("desk.yaml");
        fs::write(&spec, SPEC).unwrap();
        let project = Project {
            out: tmp.path().join("desk"),
            spec,
            _tmp: tmp,
        };
        assert_exit(&project.export(&[]), 0);
        project
    }

    fn export(&self, flags: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg("export")
            .arg(&self.spec)
            .arg("--out")
            .arg(&self.out)
            .args(flags)
            .output()
            .unwrap()
    }

    /// Change the spec's description: it appears in main.rs's doc comment
    /// and in Cargo.toml, so both generated versions change there.
    fn describe(&self, description: &str) {
        fs::write(&self.spec, SPEC.replace("First words.", description)).unwrap();
    }

    fn read(&self, path: &str) -> String {
        fs::read_to_string(self.out.join(path)).unwrap()
    }

    fn write(&self, path: &str, text: &str) {
        fs::write(self.out.join(path), text).unwrap();
    }
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

/// The 1-based number of the line of `text` that is `line`.
fn line_of(text: &str, line: &str) -> usize {
    text.lines().position(|l| l == line).unwrap() + 1
}

const ROUTE: &str = "// my route: GET /version\n";

#[test]
fn edits_apart_from_the_change_merge_cleanly_and_exit_0() {
    let p = Project::exported();
    // Yours: a line at the end. New: the doc comment near the top.
    let mine = format!("{}{ROUTE}", p.read("src/main.rs"));
    p.write("src/main.rs", &mine);
    p.describe("Second words.");
    let check = p.export(&["--check"]);
    assert_exit(&check, 1);
    assert!(
        stdout(&check)
            .contains("src/main.rs: edited, and a newer version would be merged into it (yours)"),
        "{}",
        stdout(&check)
    );

    let run = p.export(&[]);
    assert_exit(&run, 0);
    assert!(
        stdout(&run).contains("merged src/main.rs"),
        "{}",
        stdout(&run)
    );
    let merged = p.read("src/main.rs");
    assert!(merged.contains("//! Second words.") && !merged.contains("First words."));
    assert!(merged.ends_with(ROUTE), "your edit is kept:\n{merged}");
    assert_eq!(merged, mine.replace("First words.", "Second words."));
    assert!(!p.out.join("src/main.rs.new").exists());
    // The new pristine copy is what this export generated, without your edit.
    let pristine = p.read(".tollgate/pristine/src/main.rs");
    assert_eq!(format!("{pristine}{ROUTE}"), merged);

    let check = p.export(&["--check"]);
    assert_exit(&check, 0);

    // The next change merges from there.
    p.describe("Third words.");
    assert_exit(&p.export(&[]), 0);
    assert_eq!(
        p.read("src/main.rs"),
        mine.replace("First words.", "Third words.")
    );
}

#[test]
fn overlapping_edits_are_left_as_conflict_markers_listed_and_exit_1() {
    let p = Project::exported();
    let generated = p.read("src/main.rs");
    let mine = format!(
        "{}{ROUTE}",
        generated.replace("//! First words.", "//! First words, as I put them.")
    );
    p.write("src/main.rs", &mine);
    p.describe("Second words.");

    let run = p.export(&[]);
    assert_exit(&run, 1);
    let text = p.read("src/main.rs");
    let start = line_of(&text, "<<<<<<< yours");
    assert_eq!(
        text.lines().skip(start - 1).take(7).collect::<Vec<_>>(),
        [
            "<<<<<<< yours",
            "//! First words, as I put them.",
            "||||||| last export",
            "//! First words.",
            "=======",
            "//! Second words.",
            ">>>>>>> tollgate export",
        ]
    );
    assert!(
        text.ends_with(ROUTE),
        "the edit that did not conflict is kept"
    );
    let err = stderr(&run);
    assert!(
        err.contains(&format!("conflict: src/main.rs:{start}: ")),
        "{err}"
    );
    assert!(
        err.contains("error: 1 file of yours with conflicts: src/main.rs;"),
        "{err}"
    );
    // The rest of the export was written, and the manifest records the new
    // pristine copy, so the next export merges from this one.
    assert!(p.read("README.md").contains("Second words."));
    assert!(
        p.read(".tollgate/pristine/src/main.rs")
            .contains("//! Second words.")
    );

    // --check names every marker line.
    let check = p.export(&["--check"]);
    assert_exit(&check, 1);
    let reported: Vec<String> = stdout(&check).lines().map(String::from).collect();
    let expected: Vec<String> = (0..7)
        .filter(|i| i % 2 == 0)
        .map(|i| {
            format!(
                "src/main.rs:{}: conflict marker left from a merge (yours)",
                start + i
            )
        })
        .collect();
    assert_eq!(reported, expected);
    assert!(
        stderr(&check)
            .contains("conflict markers left from a merge in 1 file of yours: src/main.rs"),
        "{}",
        stderr(&check)
    );

    // Exporting the same spec again does not merge twice.
    assert_exit(&p.export(&[]), 0);
    assert_eq!(p.read("src/main.rs"), text);

    // Resolved: nothing left to report.
    let resolved = mine.replace(
        "First words, as I put them.",
        "Second words, as I put them.",
    );
    p.write("src/main.rs", &resolved);
    assert_exit(&p.export(&["--check"]), 0);
    p.describe("Third words.");
    let run = p.export(&[]);
    assert_exit(&run, 1);
    assert!(
        stderr(&run).contains("src/main.rs"),
        "still yours, still overlapping"
    );
}

#[test]
fn dry_run_shows_the_action_per_file_and_writes_nothing() {
    let p = Project::exported();
    p.write("src/main.rs", &format!("{}{ROUTE}", p.read("src/main.rs")));
    let cargo = p.read("Cargo.toml");
    p.write(
        "Cargo.toml",
        &cargo.replace("description = \"First words.\"", "description = \"Mine.\""),
    );
    p.write("Dockerfile", &format!("{}# mine\n", p.read("Dockerfile")));
    p.describe("Second words.");
    let before = files(&p.out);

    let run = p.export(&["--dry-run"]);
    assert_exit(&run, 0);
    assert_eq!(files(&p.out), before, "nothing written");
    let actions: BTreeMap<String, String> = stdout(&run)
        .lines()
        .map(|line| {
            let columns: Vec<&str> = line.split_whitespace().collect();
            (columns[0].to_string(), columns[3..].join(" "))
        })
        .collect();
    let action = |path: &str| actions.get(path).map(String::as_str).unwrap_or("(none)");
    assert_eq!(action("src/main.rs"), "merge clean");
    assert_eq!(action("Cargo.toml"), "conflict");
    assert_eq!(action("README.md"), "write");
    assert_eq!(action("agent.yaml"), "write");
    assert_eq!(
        action("Dockerfile"),
        "keep (edited)",
        "its generated version did not change"
    );
    assert_eq!(action(".gitignore"), "unchanged");
    assert_eq!(action("vendored/src/lib.rs"), "unchanged");

    // What it said is what the export does.
    let run = p.export(&[]);
    assert_exit(&run, 1);
    assert!(
        stderr(&run).contains("with conflicts: Cargo.toml;"),
        "{}",
        stderr(&run)
    );
    assert!(p.read("src/main.rs").ends_with(ROUTE));
    assert!(p.read("Dockerfile").ends_with("# mine\n"));

    // Into a directory that does not exist: every file would be written,
    // and the directory is not created.
    let fresh = p.out.with_file_name("fresh");
    let run = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("export")
        .arg(&p.spec)
        .arg("--out")
        .arg(&fresh)
        .arg("--dry-run")
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert!(
        stdout(&run).lines().all(|l| l.ends_with("  write")),
        "{}",
        stdout(&run)
    );
    assert!(!fresh.exists());
}

#[test]
fn dry_run_lists_files_to_remove_and_refuses_like_the_export() {
    let p = Project::exported();
    // Pretend the last export wrote a file this one no longer generates.
    p.write("old.txt", "old\n");
    let manifest_path = p.out.join(".tollgate/export.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(&manifest_path).unwrap()).unwrap();
    manifest["files"]["old.txt"] = serde_json::json!({
        "role": "generated",
        "sha256": tollgate::export::sha256_hex(b"old\n"),
    });
    fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();

    let run = p.export(&["--dry-run"]);
    assert_exit(&run, 0);
    let line = stdout(&run)
        .lines()
        .find(|l| l.starts_with("old.txt "))
        .map(String::from)
        .unwrap();
    assert!(line.ends_with("  remove"), "{line}");
    assert!(p.out.join("old.txt").exists());

    // An edited generated file stops the export, and the dry run says so.
    p.write("TOLLGATE.md", "mine\n");
    let run = p.export(&["--dry-run"]);
    assert_exit(&run, 4);
    assert!(stderr(&run).contains("TOLLGATE.md"), "{}", stderr(&run));
    let run = p.export(&["--dry-run", "--force"]);
    assert_exit(&run, 0);
    assert!(
        stdout(&run)
            .lines()
            .any(|l| l.starts_with("TOLLGATE.md ") && l.ends_with("  write"))
    );
    assert_eq!(p.read("TOLLGATE.md"), "mine\n");
}

#[test]
fn a_crlf_checkout_of_a_file_of_yours_merges_and_stays_crlf() {
    let p = Project::exported();
    let mine = format!("{}{ROUTE}", p.read("src/main.rs")).replace('\n', "\r\n");
    p.write("src/main.rs", &mine);
    p.describe("Second words.");
    assert_exit(&p.export(&[]), 0);
    assert_eq!(
        p.read("src/main.rs"),
        mine.replace("First words.", "Second words.")
    );
}
