//! `TOLLGATE_API_TOKENS` set to anything unusable stops `tollgate serve` at
//! start-up (exit 2) with a message saying what is wrong, never a token;
//! only an unset variable means no-token loopback mode.

use crate::common;
use crate::common::server;

use common::{GATED_SPEC, Workspace};
use server::{Api, Served};

/// Start with `TOLLGATE_API_TOKENS=value`; it must refuse with exit 2.
fn refused_with(ws: &Workspace, value: &str) -> String {
    let failure = Served::try_start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("TOLLGATE_API_TOKENS", value)],
        &[],
    )
    .err()
    .unwrap_or_else(|| panic!("TOLLGATE_API_TOKENS={value:?} must stop the server"));
    assert_eq!(failure.code, Some(2), "{value:?}: {}", failure.stderr);
    failure.stderr
}

#[test]
fn a_blank_value_is_a_startup_error_not_disabled_auth() {
    let ws = Workspace::new(GATED_SPEC);
    for value in ["", " ", "\t", "  \n "] {
        let err = refused_with(&ws, value);
        assert!(err.contains("TOLLGATE_API_TOKENS"), "{value:?}: {err}");
        assert!(err.contains("blank"), "{value:?}: {err}");
        assert!(err.contains("unset it"), "{value:?}: {err}");
    }
}

#[test]
fn malformed_entries_are_named_by_position_and_problem_never_by_token() {
    let ws = Workspace::new(GATED_SPEC);
    let cases = [
        ("alice-secret-1", "entry 1", "no ':'"),
        ("alice:", "entry 1", "empty token"),
        (":alice-secret-1", "entry 1", "empty name"),
        ("  :alice-secret-1", "entry 1", "empty name"),
        ("alice:alice-secret-1,", "entry 2", "empty"),
        ("alice:alice-secret-1,,bob:bob-secret-2", "entry 2", "empty"),
        (",alice:alice-secret-1", "entry 1", "empty"),
        ("alice:alice-secret-1,bob", "entry 2", "no ':'"),
        (
            "alice:alice-secret-1,alice:bob-secret-2",
            "entry 2",
            "repeats the name",
        ),
        (
            "alice:alice-secret-1,bob:alice-secret-1",
            "entry 2",
            "same token",
        ),
        ("alice:alice secret-1", "entry 1", "whitespace"),
        ("\"alice:alice-secret-1\"", "entry 1", "characters"),
        ("alice:alice-s\u{e9}cret-1", "entry 1", "visible ASCII"),
    ];
    for (value, entry, problem) in cases {
        let err = refused_with(&ws, value);
        assert!(err.contains("TOLLGATE_API_TOKENS"), "{value:?}: {err}");
        assert!(err.contains(entry), "{value:?}: {err}");
        assert!(err.contains(problem), "{value:?}: {err}");
        for secret in [
            "alice-secret-1",
            "bob-secret-2",
            "alice secret-1",
            "s\u{e9}cret",
        ] {
            assert!(!err.contains(secret), "{value:?} echoed a token: {err}");
        }
    }
}

#[tokio::test]
async fn unset_means_no_token_loopback_mode_and_a_good_value_turns_auth_on() {
    let ws = Workspace::new(GATED_SPEC);
    let open = Served::start(&ws.spec, &ws.path().join("open.db"), &[], &[]);
    let (status, _) = Api::new().get(&open.url("/approvals")).await;
    assert_eq!(status, 200, "no tokens: every local caller may read");

    let guarded = Served::start(
        &ws.spec,
        &ws.path().join("guarded.db"),
        &[(
            "TOLLGATE_API_TOKENS",
            " alice:alice-secret-1 , bob:bob-secret-2 ",
        )],
        &[],
    );
    let (status, _) = Api::new().get(&guarded.url("/approvals")).await;
    assert_eq!(status, 401);
    let (status, _) = Api::with_token("bob-secret-2")
        .get(&guarded.url("/approvals"))
        .await;
    assert_eq!(status, 200);
}
