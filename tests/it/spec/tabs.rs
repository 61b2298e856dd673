//! A tab in a YAML indentation is reported where the tab is, with the fix
//! ("use spaces"), through `tollgate validate` (exit 2, `error:
//! SPEC:LINE:COL: ...`). The YAML scanner notices some tabs only at the end
//! of the scalar before them and marks that, one line early: a person who
//! goes to the line it names finds nothing wrong there.

use crate::common::*;

const HINT: &str = "tabs are not allowed for indentation in YAML; use spaces";

/// `tollgate validate` on `text`: the one error line it prints, after
/// checking the exit status.
fn validate_error(text: &str) -> (Workspace, String) {
    let ws = Workspace::new(text);
    let out = ws.validate();
    assert_exit(&out, 2);
    let err = stderr(&out);
    (ws, err.trim_end().to_string())
}

#[test]
fn a_tab_is_reported_on_its_own_line_and_column_with_the_fix() {
    let cases = [
        // A whole block indented with tabs.
        (
            "version: 1\nagent: desk\nsteps:\n\t- id: a\n\t  set: {x: 1}\n",
            4,
            1,
        ),
        // A tab after a plain scalar: the scanner marks the end of `a`, on
        // line 4.
        (
            "version: 1\nagent: desk\nsteps:\n  - id: a\n\tset: {x: 1}\n",
            5,
            1,
        ),
        // Deeper, after lines indented right.
        (
            "version: 1\nagent: desk\nsteps:\n  - id: a\n    set:\n      x: 1\n\t  y: 2\n",
            7,
            1,
        ),
        // Spaces, then a tab.
        (
            "version: 1\nagent: desk\nsteps:\n  - id: a\n    set:\n  \tx: 1\n",
            6,
            3,
        ),
        // A top-level key indented with a tab.
        (
            "version: 1\nagent: desk\n\tsteps:\n  - id: a\n    set: {x: 1}\n",
            3,
            1,
        ),
    ];
    for (text, line, column) in cases {
        let (ws, err) = validate_error(text);
        assert_eq!(
            err,
            format!("error: {}:{line}:{column}: {HINT}", ws.spec_arg()),
            "{text:?}"
        );
    }
}

#[test]
fn a_tab_where_yaml_allows_one_is_not_an_error() {
    // Inside a block scalar a tab after the indentation is content. (On
    // the scalar's first line libyaml, and so serde_yaml, refuses a tab
    // while it detects the indentation: the oracle in spec/oracle.rs
    // compares every spec here with serde_yaml, so the tab is on the
    // second line, where both read it as content.)
    let ws = Workspace::new(
        "version: 1\nagent: desk\nsteps:\n  - id: a\n    set:\n      y: |\n        first\n        \tkept\n",
    );
    assert_success(&ws.validate());
}
