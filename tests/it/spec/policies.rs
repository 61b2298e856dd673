//! Team approval policy (DESIGN §13) through the real `tollgate validate`:
//! rules the groups cannot meet, and settings this version does not
//! enforce yet, are refused with exit status 2 and `FILE:LINE:COL`.

use std::path::PathBuf;
use std::process::{Command, Output};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_tollgate");

/// `tollgate validate` on `source` written as `spec.yaml`, with the file's
/// path.
fn validate(source: &str) -> (TempDir, PathBuf, Output) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, source).expect("write spec");
    let out = Command::new(BIN)
        .arg("validate")
        .arg(&path)
        .output()
        .expect("run tollgate validate");
    (dir, path, out)
}

/// The refusal of `source`: exit status 2 and one `error: FILE:LINE:COL:
/// message` line, returned from the line on.
#[track_caller]
fn refused(source: &str) -> String {
    let (_dir, path, out) = validate(source);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let prefix = format!("error: {}:", path.display());
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no positioned error in: {stderr}"));
    line[prefix.len()..].to_string()
}

const TEAM: &str = r#"version: 1
agent: refunds
approvals:
  groups: { finance: [alice, bob, carol], security: [dave] }
steps:
  - id: check
    approval:
      message: "Refund {{ input.amount }}?"
      rules: [{ group: finance, min: 2 }, { group: security, min: 1 }]
      reject: any
      on_timeout: expire
"#;

#[test]
fn a_team_gate_the_runtime_enforces_validates() {
    let (_dir, _path, out) = validate(TEAM);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_rule_its_groups_can_never_meet_is_refused_at_rules() {
    // dave is security's only member and one of two in finance; counted
    // once, he cannot give finance its second vote and security its first.
    let spec = TEAM.replace("[alice, bob, carol]", "[alice, dave]");
    assert_eq!(
        refused(&spec),
        "9:14: \"rules\" in the approval of step \"check\": rule security of 1 can never be met: it needs 1 vote(s) and at most 0 member(s) can give one (a voter counts toward one rule only: voter_counts_once)"
    );
    let too_many = TEAM.replace("min: 2", "min: 4");
    assert_eq!(
        refused(&too_many),
        "9:38: \"min\" in rule 1 in the approval of step \"check\" is 4 but group \"finance\" has 3 member(s): the rule could never be met"
    );
}

#[test]
fn every_timeout_is_accepted_and_continue_only_where_a_step_can_go_on() {
    for action in ["expire", "reject", "approve", "continue"] {
        let spec = TEAM.replace("on_timeout: expire", &format!("on_timeout: {action}"));
        let (_dir, _path, out) = validate(&spec);
        assert!(
            out.status.success(),
            "{action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `tollgate validate --env` on `TEAM` with `vars` set (and every other
/// group variable unset).
fn validate_env(vars: &[(&str, &str)]) -> (TempDir, PathBuf, Output) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, TEAM).expect("write spec");
    let mut command = Command::new(BIN);
    command
        .args(["validate", "--env"])
        .arg(&path)
        .env_remove("TOLLGATE_GROUP_FINANCE")
        .env_remove("TOLLGATE_GROUP_SECURITY");
    for (name, value) in vars {
        command.env(name, value);
    }
    let out = command.output().expect("run tollgate validate --env");
    (dir, path, out)
}

#[test]
fn validate_env_checks_the_group_overrides() {
    let (_dir, _path, out) = validate_env(&[
        ("TOLLGATE_GROUP_FINANCE", "frank, gina"),
        ("TOLLGATE_GROUP_LEGAL", ""),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (value, error) in [
        (
            " ",
            "TOLLGATE_GROUP_FINANCE is set but empty: it would leave group \"finance\" without members (unset it to use the members the spec lists)",
        ),
        (
            "frank",
            "TOLLGATE_GROUP_FINANCE has 1 member but step \"check\" needs 2 of finance",
        ),
    ] {
        let (_dir, path, out) = validate_env(&[("TOLLGATE_GROUP_FINANCE", value)]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!("error: {}: {error}", path.display()),
            "{value:?}"
        );
    }
}
