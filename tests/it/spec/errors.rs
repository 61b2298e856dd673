//! Malformed specs and the exact error each one gets: `FILE:LINE:COL: message`.
//!
//! Every case is a whole spec in its own file, tests/it/spec/fixtures/errors/NAME.yaml,
//! named for what it checks; its error is the insta snapshot
//! tests/it/spec/snapshots/it__spec__errors__error@NAME.yaml.snap, so the line and column
//! can be checked by eye against the file. A new case is a new file: run the
//! test once with `INSTA_UPDATE=always` (or `cargo insta review`) and review
//! the new snapshot. CI sets `INSTA_UPDATE=no`, so a changed message fails.
//! The fixtures carry no explanatory comments, which would move every line
//! number after them: the file name says what the case checks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tollgate_runtime::spec::{Spec, SpecErrorKind};

use crate::common::rng::Rng;

/// Every spec is parsed under this name, so a message does not depend on
/// where the checkout lives (and reads as the CLI prints it for `spec.yaml`).
const FILE: &str = "spec.yaml";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/spec/fixtures/errors")
}

fn snapshots_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/spec/snapshots")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parse the fixture at `path` and return the error, naming the fixture if it
/// parses.
#[track_caller]
fn error_in(path: &Path) -> tollgate_runtime::spec::SpecError {
    match Spec::parse(&read(path), FILE) {
        Ok(_) => panic!("expected an error, the spec parsed: {}", path.display()),
        Err(e) => e,
    }
}

#[test]
fn every_fixture_gets_its_exact_error() {
    insta::glob!("fixtures/errors/*.yaml", |path| {
        insta::assert_snapshot!("error", error_in(path).to_string());
    });
}

/// Faults of the YAML itself, before any spec rule, are `Syntax` errors.
#[test]
fn yaml_level_faults_have_the_syntax_kind() {
    for name in [
        "yaml_syntax_error",
        "tab_indentation",
        "duplicate_mapping_key",
    ] {
        let path = fixtures_dir().join(format!("{name}.yaml"));
        assert_eq!(error_in(&path).kind, SpecErrorKind::Syntax, "{name}");
    }
}

/// `cargo insta test --unreferenced=reject` for this file, without
/// cargo-insta: every `it__spec__errors__` snapshot belongs to a fixture (a
/// deleted or renamed case must take its snapshot along), and every fixture
/// has its snapshot.
#[test]
fn no_snapshot_without_a_fixture() {
    let expected: BTreeSet<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .map(|name| format!("it__spec__errors__error@{name}.snap"))
        .collect();
    assert!(
        expected.len() >= 60,
        "only {} fixtures found in {}",
        expected.len(),
        fixtures_dir().display()
    );
    let mut unreferenced = Vec::new();
    for entry in std::fs::read_dir(snapshots_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        // Pending snapshots of a failed run are reviewed, not committed
        // (.gitignore has *.new).
        if name.ends_with(".snap.new") || name.ends_with(".pending-snap") {
            continue;
        }
        if name.starts_with("it__spec__errors__") && !expected.contains(&name) {
            unreferenced.push(name);
        }
    }
    assert!(
        unreferenced.is_empty(),
        "snapshots no fixture produces (delete them): {unreferenced:?}"
    );
    for name in &expected {
        assert!(
            snapshots_dir().join(name).exists(),
            "missing snapshot {name}"
        );
    }
}

#[test]
fn every_example_parses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).expect("examples/") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        if let Err(e) = Spec::load(&path) {
            panic!("{e}");
        }
        seen += 1;
    }
    assert!(seen >= 3, "expected the example specs, found {seen}");
}

#[test]
fn the_examples_have_the_gates_they_promise() {
    let load = |name: &str| Spec::load(&examples_dir().join(name)).expect(name);
    assert!(load("hello-approval.yaml").has_gate());
    assert!(load("refund-desk.yaml").has_gate());
    assert!(!load("no-gate.yaml").has_gate());
}

fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// Parse and require an answer, never a panic; name the input that panicked.
fn must_not_panic(source: &str) {
    let result = std::panic::catch_unwind(|| {
        let _ = Spec::parse(source, "fuzz.yaml");
    });
    if result.is_err() {
        panic!("Spec::parse panicked on {source:?}");
    }
}

#[test]
fn no_input_makes_the_parser_panic() {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut examples = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).expect("examples/") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("yaml") {
            examples.push(std::fs::read_to_string(&path).expect("read example"));
        }
    }

    // Every truncated prefix of every example.
    for text in &examples {
        for (i, _) in text.char_indices() {
            must_not_panic(&text[..i]);
        }
    }

    // Examples with a few bytes replaced by YAML-significant characters.
    const NOISE: &[u8] = b":-[]{}&*!|>'\"#%@`?,\t\n ${}0aZ.\\~";
    for text in &examples {
        for _ in 0..300 {
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                if let Some(b) = bytes.get_mut(at) {
                    *b = NOISE[rng.below(NOISE.len())];
                }
            }
            must_not_panic(&String::from_utf8_lossy(&bytes));
        }
    }

    // Plain garbage: random bytes of random lengths.
    for _ in 0..500 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        must_not_panic(&String::from_utf8_lossy(&bytes));
    }

    // Pathological shapes: deep nesting and alias bombs end in errors.
    must_not_panic(&"[".repeat(10_000));
    must_not_panic(&"- ".repeat(10_000));
    must_not_panic(&format!(
        "a: {}1{}",
        "{b: ".repeat(5_000),
        "}".repeat(5_000)
    ));
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        bomb.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        ));
    }
    must_not_panic(&bomb);
}
