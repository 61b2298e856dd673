//! `approvals list --quiet` and `runs list --quiet`: the keys (run ids)
//! alone, newest first, one per line, nothing else, so that a shell takes
//! one with `$(... --quiet | head -n1)`.

use crate::common::*;

fn quiet_lines(ws: &Workspace, args: &[&str]) -> Vec<String> {
    let out = ws
        .tollgate()
        .args(args)
        .args(["--spec", ws.spec_arg(), "--quiet"])
        .output()
        .expect("run tollgate");
    assert_success(&out);
    assert_eq!(stderr(&out), "", "--quiet prints nothing on stderr");
    let text = stdout(&out);
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "one per line: {text:?}"
    );
    text.lines().map(str::to_string).collect()
}

#[test]
fn approvals_list_quiet_prints_the_pending_keys_newest_first_and_nothing_else() {
    let ws = Workspace::new(GATED_SPEC);
    let keys: Vec<String> = (0..3)
        .map(|n| ws.pause_run(&format!(r#"{{"order_id": "Q-{n}"}}"#)))
        .collect();
    let decided = ws
        .decide("approve", &keys[1])
        .args(["--by", "alice"])
        .output()
        .expect("approve");
    assert_success(&decided);

    let newest_first = vec![keys[2].clone(), keys[0].clone()];
    assert_eq!(quiet_lines(&ws, &["approvals", "list"]), newest_first);
    // The same order and the same records as the JSON listing.
    let listed: Vec<String> = ws.list_json()["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .map(|a| a["key"].as_str().expect("key").to_string())
        .collect();
    assert_eq!(listed, newest_first);
    // Filters and --limit apply as to the table.
    assert_eq!(
        quiet_lines(&ws, &["approvals", "list", "--limit", "1"]),
        [keys[2].clone()]
    );
    assert_eq!(
        quiet_lines(&ws, &["approvals", "list", "--query", "Q-0"]),
        [keys[0].clone()]
    );
    assert_eq!(
        quiet_lines(&ws, &["approvals", "list", "--query", "no such order"]),
        Vec::<String>::new(),
        "an empty listing prints nothing"
    );
}

#[test]
fn runs_list_quiet_prints_the_run_ids_newest_first_and_nothing_else() {
    let ws = Workspace::new(GATED_SPEC);
    let keys: Vec<String> = (0..3)
        .map(|n| ws.pause_run(&format!(r#"{{"order_id": "R-{n}"}}"#)))
        .collect();
    let run_ids: Vec<String> = ws.list_json()["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .map(|a| a["run_id"].as_str().expect("run_id").to_string())
        .collect();
    assert_eq!(run_ids.len(), 3);
    let decided = ws
        .decide("approve", &keys[0])
        .args(["--by", "alice"])
        .output()
        .expect("approve");
    assert_success(&decided);

    // Every run, newest first (the pending listing is newest first too).
    assert_eq!(quiet_lines(&ws, &["runs", "list"]), run_ids);
    assert_eq!(
        quiet_lines(&ws, &["runs", "list", "--status", "completed"]),
        [run_ids[2].clone()]
    );
    assert_eq!(
        quiet_lines(&ws, &["runs", "list", "--limit", "1"]),
        [run_ids[0].clone()]
    );
    assert_eq!(
        quiet_lines(&ws, &["runs", "list", "--status", "failed"]),
        Vec::<String>::new(),
        "an empty listing prints nothing"
    );
}

#[test]
fn quiet_and_json_together_are_a_usage_error() {
    let ws = Workspace::new(GATED_SPEC);
    ws.pause_run(r#"{"order_id": "U-1"}"#);
    for command in [["approvals", "list"], ["runs", "list"]] {
        let out = ws
            .tollgate()
            .args(command)
            .args(["--spec", ws.spec_arg(), "--quiet", "--json"])
            .output()
            .expect("run tollgate");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "--quiet");
        assert_eq!(stdout(&out), "");
    }
}

#[test]
fn the_help_describes_quiet() {
    let ws = Workspace::new(GATED_SPEC);
    for command in [["approvals", "list"], ["runs", "list"]] {
        let out = ws
            .tollgate()
            .args(command)
            .arg("--help")
            .output()
            .expect("run tollgate");
        assert_success(&out);
        let help = stdout(&out);
        let line = help
            .lines()
            .skip_while(|l| !l.contains("--quiet"))
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            line.contains("newest first, one per line"),
            "{command:?} --help: {help}"
        );
    }
}
