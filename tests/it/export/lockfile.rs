//! The Cargo.lock an export ships is the one cargo itself writes for it.
//!
//! `tollgate export` never runs cargo (exports are fast and offline), so the
//! lockfile comes from `templates/Cargo.lock.in`. This test exports a spec,
//! lets cargo prune this repository's Cargo.lock down to what the export
//! needs (same versions, the export's own dependency edges), and requires
//! the shipped lockfile to be exactly that. When the runtime's dependencies
//! change it fails and says how to regenerate the template.
//!
//! cargo resolves with `cargo update --workspace`: it keeps every locked
//! version and needs only the registry index, not the crates themselves, so
//! the test passes on a fresh machine with an empty CARGO_HOME (no `cargo
//! fetch` first). Offline, with a warm cache, set CARGO_NET_OFFLINE=true as
//! for any cargo command.

use std::path::{Path, PathBuf};
use std::process::Command;

use tollgate::export::{self, ExportOptions, lockfile};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cargo(dir: &Path, args: &[&str]) -> std::process::Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    Command::new(cargo)
        .args(args)
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("run cargo")
}

#[test]
fn shipped_lockfile_is_what_cargo_writes_for_an_export() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("export");
    let plan = export::command::plan_for(&repo().join("examples/with-rust-tools.yaml")).unwrap();
    export::export(&plan, &out, &ExportOptions::default()).unwrap();
    let shipped = plan.text("Cargo.lock").unwrap().to_string();

    // cargo accepts the shipped lockfile as it is: `--locked` refuses any
    // change it would make.
    let accepted = cargo(&out, &["update", "--workspace", "--locked"]);

    // What cargo writes, starting from this repository's versions: the
    // workspace members are re-resolved, every other locked version kept,
    // and what the export does not use is pruned.
    std::fs::copy(repo().join("Cargo.lock"), out.join("Cargo.lock")).unwrap();
    let pruned = cargo(&out, &["update", "--workspace"]);
    assert!(
        pruned.status.success(),
        "cargo update --workspace: {}",
        String::from_utf8_lossy(&pruned.stderr)
    );
    let written = std::fs::read_to_string(out.join("Cargo.lock")).unwrap();
    let template = lockfile::without_package(&written, &plan.package);

    if template != lockfile::template() {
        let path = repo().join("templates/Cargo.lock.in");
        if std::env::var("UPDATE_EXPORT_LOCK").as_deref() == Ok("1") {
            std::fs::write(&path, &template).unwrap();
            panic!(
                "{} regenerated: run the test again to check it",
                path.display()
            );
        }
        panic!(
            "templates/Cargo.lock.in no longer matches what cargo writes for an export \
             (the runtime's dependencies, or this repository's Cargo.lock, changed).\n\
             Regenerate it with\n    UPDATE_EXPORT_LOCK=1 cargo test --test it export::lockfile\n\
             then run the tests again and commit templates/Cargo.lock.in."
        );
    }
    assert_eq!(
        shipped, written,
        "the export's own entry is not where cargo puts it"
    );
    assert!(
        accepted.status.success(),
        "cargo update --workspace --locked refused the shipped lockfile: {}",
        String::from_utf8_lossy(&accepted.stderr)
    );
}

/// url (via reqwest) does IDNA through `idna_adapter`, whose locked version
/// picks the Unicode back end: 1.2 is ICU4X, some twenty crates with their
/// own proc macros; 1.1 is unicode-rs, a few small ones, the same UTS 46
/// processing (slower only for non-ASCII host names). The export ships 1.1
/// for its build time; a `cargo update` here would quietly undo that.
#[test]
fn exports_lock_the_unicode_rs_idna_back_end() {
    let locked = lockfile::template()
        .split("[[package]]\n")
        .find(|block| block.starts_with("name = \"idna_adapter\"\n"))
        .expect("idna_adapter is locked");
    assert!(
        locked.contains("\nversion = \"1.1."),
        "templates/Cargo.lock.in locks {locked:?}: pin the unicode-rs back end again with\n    \
         cargo update -p idna_adapter --precise 1.1.0\n\
         then UPDATE_EXPORT_LOCK=1 cargo test --test it export::lockfile"
    );
}
