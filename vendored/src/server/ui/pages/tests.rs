//! Every page, in every state it has, rendered through its typed context
//! and the real templates (strict: an undefined name fails), with
//! assertions on what a person sees. A template typo or a field a
//! template reads but the context lacks fails here, not in a browser.

use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value, json};

use super::approval::{AlreadyDecided, ApprovalPage, Frame, Problem, Seen};
use super::history::{HistoryPage, HistoryRow};
use super::inbox::{InboxPage, InboxRows, Row, RowsFragment};
use super::login::LoginPage;
use super::refusal;
use super::runs::{RunPage, RunRow, RunsPage};
use crate::domain::events::Event;
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, Phase};
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::domain::spec::{OnSpecChange, Outcome};
use crate::server::http::paging::{PageLinks, Position};
use crate::server::ui::render::format;
use crate::server::ui::render::templates::{Chrome, Page, render_page, templates};
use crate::server::ui::staleness::{Effect, Stale};
use crate::service::ApiError;
use crate::service::views::{ApprovalView, RunView};

fn now() -> DateTime<Utc> {
    crate::support::time::parse_utc("2026-12-01T10:00:00Z").unwrap()
}

fn record(status: ApprovalStatus) -> ApprovalRecord {
    let decided = matches!(
        status,
        ApprovalStatus::Approved | ApprovalStatus::Rejected | ApprovalStatus::Modified
    );
    let edited = json!({"amount": 5, "order": "A1"});
    ApprovalRecord {
        key: "k-1".into(),
        run_id: "run-1".into(),
        agent_id: "refunds".into(),
        spec_hash: "0".repeat(64),
        step_index: 1,
        step_id: "pay".into(),
        phase: Phase::Before,
        message: Some("Refund <b>order</b> A1?".into()),
        payload: json!({"amount": 10, "order": "A1", "lines": [1, {"sku": null}], "empty": {}}),
        outputs: Map::from_iter([("draft".to_string(), json!({"text": "hello"}))]),
        input: json!({"customer": "Ada"}).into(),
        trigger: json!({"kind": "api"}),
        status,
        decision_data: match status {
            ApprovalStatus::Modified => Some(json!({"payload": edited, "reason": "too much"})),
            ApprovalStatus::Rejected => Some(json!({"reason": "not this one"})),
            _ => None,
        },
        decided_by: decided.then(|| "alice".to_string()),
        decided_at: decided.then(|| now() - Duration::minutes(5)),
        created_at: now() - Duration::minutes(30),
        expires_at: now() + Duration::hours(2),
        roster: None,
        origin: crate::domain::pending_approval::ApprovalOrigin::Pause,
    }
}

fn event(seq: u64, kind: Value) -> Event {
    let mut value = json!({"run_id": "run-1", "seq": seq, "at": "2026-12-01T09:30:00Z"});
    for (k, v) in kind.as_object().unwrap() {
        value[k] = v.clone();
    }
    serde_json::from_value(value).unwrap()
}

fn events() -> Vec<Event> {
    vec![
        event(
            1,
            json!({"type": "run_started", "agent": "refunds", "spec_hash": "h", "input": {}}),
        ),
        event(
            2,
            json!({"type": "step_completed", "step": "draft", "index": 0, "output": {}}),
        ),
        event(
            3,
            json!({"type": "awaiting_approval", "key": "k-1", "step": "pay", "phase": "before",
            "message": null, "payload": {}, "expires_at": "2026-12-01T12:00:00Z"}),
        ),
    ]
}

fn chrome(title: &str, nav: &'static str) -> Chrome {
    Chrome {
        title: title.into(),
        whoami: Some("alice".into()),
        signed_in: true,
        csrf: Some("tok".into()),
        nav,
        ..Chrome::default()
    }
}

/// The HTML as a browser reads it for these assertions: minijinja escapes
/// `/` as `&#x2f;` (in `action="/ui/..."` too), which reads as `/`.
fn as_read(html: String) -> String {
    html.replace("&#x2f;", "/")
}

/// `page` rendered whole, as the server renders it; a render error fails
/// the test (the error itself is logged by `Templates::render`).
fn render<P: Page>(page: &P, chrome: &Chrome) -> String {
    let html = render_page(page, chrome)
        .unwrap_or_else(|_| panic!("{} does not render (see the logged error)", P::TEMPLATE));
    as_read(html)
}

fn frame(run_link: bool) -> Frame {
    Frame {
        action: "/ui/approvals/k-1".into(),
        csrf: "csrf-token".into(),
        stream: "/ui/runs/run-1/stream".into(),
        raw: "/ui/approvals/k-1/payload".into(),
        chrome: chrome("Approval", "inbox"),
        run_link,
    }
}

fn approval_page(record: &ApprovalRecord, run_link: bool, problem: Problem) -> String {
    approval_page_of(record, run_link, problem, None)
}

fn approval_page_of(
    record: &ApprovalRecord,
    run_link: bool,
    problem: Problem,
    stale: Option<Stale>,
) -> String {
    let events = events();
    let seen = Seen {
        now: now(),
        deciders: "alice, bob".into(),
        run_status: Some(if record.status == ApprovalStatus::Pending {
            "awaiting_approval"
        } else {
            "completed"
        }),
        events: &events,
        stale,
        team: None,
        asked: None,
        form: None,
    };
    let frame = frame(run_link);
    render(
        &ApprovalPage::new(record, seen, &frame, problem),
        &frame.chrome,
    )
}

#[test]
fn the_layout_shows_who_is_deciding_and_the_navigation() {
    let page = LoginPage::new("c".into(), "/ui", None);
    let html = render(&page, &chrome("Inbox", "history"));
    assert!(html.contains("<title>Inbox · tollgate</title>"), "{html}");
    assert!(html.contains(r#"<strong id="whoami">alice</strong>"#));
    assert!(html.contains(r#"<a href="/ui/history" aria-current="page">History</a>"#));
    assert!(html.contains(r#"<form id="sign-out""#));
    assert!(html.contains(r#"name="csrf" value="tok""#));
    assert!(html.contains("/ui/assets/app.css?v="));
    assert!(html.contains(r#"<main id="content""#));
    // Not signed in: no name, no navigation, no sign-out.
    let html = render(
        &page,
        &Chrome {
            title: "Sign in".into(),
            ..Chrome::default()
        },
    );
    assert!(!html.contains("whoami") && !html.contains("sign-out") && !html.contains("<nav"));
}

#[test]
fn login_with_and_without_an_error() {
    let html = render(
        &LoginPage::new("c-1".into(), "/ui/runs", None),
        &Chrome::default(),
    );
    assert!(html.contains(r#"<form id="login""#));
    assert!(html.contains(r#"name="csrf" value="c-1""#));
    assert!(html.contains(r#"name="next" value="/ui/runs""#));
    assert!(!html.contains("login-error"));
    let html = render(
        &LoginPage::new("c-1".into(), "/ui", Some("That token is not valid here.")),
        &Chrome::default(),
    );
    assert!(html.contains(r#"id="login-error""#) && html.contains("That token is not valid here."));
}

fn inbox(rows: Vec<Row>, filtered: bool, links: PageLinks) -> InboxPage {
    InboxPage {
        inbox: InboxRows { rows, filtered },
        steps: vec!["pay".into(), "ship".into()],
        step: filtered.then(|| "pay".to_string()),
        q: None,
        deciders: "anyone with an API token".into(),
        fragment_url: super::inbox::fragment_url(Some("pay"), None),
        links,
    }
}

#[test]
fn the_inbox_empty_with_rows_filtered_and_paged() {
    let c = chrome("Approvals inbox", "inbox");
    let html = render(&inbox(vec![], false, PageLinks::default()), &c);
    assert!(
        html.contains("Nothing is waiting for a decision."),
        "{html}"
    );
    assert!(html.contains(r#"<span id="deciders">anyone with an API token</span>"#));
    assert!(html.contains(r#"data-fragment="/ui?fragment=rows&amp;step=pay""#));
    assert!(!html.contains("prev-page") && !html.contains("next-page"));

    let html = render(&inbox(vec![], true, PageLinks::default()), &c);
    assert!(html.contains("Nothing is waiting for a decision that matches these filters."));
    assert!(
        html.contains(r#"<option value="pay" selected>pay</option>"#),
        "{html}"
    );

    let rows = vec![Row::new(
        &record(ApprovalStatus::Pending),
        now(),
        None,
        "alice, bob".into(),
    )];
    let links = Position::new(Some("c1".into()), Some(String::new())).links(&[], Some("c2"));
    let html = render(&inbox(rows, false, links), &c);
    assert!(
        html.contains(r#"<tr class="approval" data-key="k-1">"#),
        "{html}"
    );
    assert!(html.contains("Refund &lt;b&gt;order&lt;/b&gt; A1?"));
    assert!(html.contains(
        r#"<time datetime="2026-12-01T09:30:00Z" title="2026-12-01T09:30:00Z">30m</time>"#
    ));
    assert!(html.contains(
        r#"<time datetime="2026-12-01T12:00:00Z" title="2026-12-01T12:00:00Z">2h</time>"#
    ));
    assert!(
        html.contains(r#"<td class="deciders votes">alice, bob</td>"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<a id="prev-page" href="/ui?">Newer</a>"#),
        "{html}"
    );
    assert!(html.contains(r#"<a id="next-page" href="/ui?cursor=c2&amp;trail=%0Ac1">Older</a>"#));

    // The rows alone, as the live script fetches them.
    let rows = InboxRows {
        rows: vec![Row::new(
            &record(ApprovalStatus::Pending),
            now(),
            None,
            "alice, bob".into(),
        )],
        filtered: false,
    };
    let html = as_read(
        templates()
            .render("inbox_rows.html", RowsFragment { inbox: &rows })
            .unwrap(),
    );
    assert!(html.contains(r#"<table id="inbox">"#) && !html.contains("<html"));
}

/// finance 2 of {alice, bob, carol}, security 1 of {dave}, started by
/// bot; alice has approved.
fn team_gate() -> (ApprovalRecord, crate::service::votes::ListedLedgers) {
    use crate::domain::policy::{Channel, Roster, Vote, VoteDecision};
    let mut record = record(ApprovalStatus::Pending);
    record.roster = Some(Roster {
        voter_counts_once: false,
        ..Roster::sample(
            &[
                ("finance", 2, &["alice", "bob", "carol"]),
                ("security", 1, &["dave"]),
            ],
            &["bot"],
        )
    });
    let vote = Vote {
        seq: 1,
        voter: "alice".into(),
        rule: Some("finance".into()),
        decision: VoteDecision::Approve,
        reason: None,
        payload: None,
        channel: Channel::Api,
        payload_digest: record.payload_digest(),
        input: None,
        superseded: false,
        at: now(),
    };
    let ledgers = crate::service::votes::ListedLedgers::of(
        [(record.key.clone(), vec![vote])].into_iter().collect(),
    );
    (record, ledgers)
}

/// A gate with `require_reason`: both reason fields say "(required)" and
/// are required (the signed-link page renders the same page); a reject
/// without one comes back to the page with the error by its field, an
/// edit without one keeps the edited text.
#[test]
fn a_gate_that_needs_a_reason_says_so_by_each_reason_field() {
    use super::approval::ReasonMissing;
    let (mut gate, _) = team_gate();
    if let Some(roster) = gate.roster.as_mut() {
        roster.require_reason = true;
    }
    let html = approval_page(&gate, true, Problem::default());
    assert!(
        html.contains(r#"Reason for rejecting <span class="required">(required)</span></label>"#),
        "{html}"
    );
    assert!(html.contains(r#"<textarea name="reason" id="reason" rows="2" required>"#));
    assert!(html.contains(r#"<textarea name="reason" id="modify-reason" rows="2" required>"#));
    assert!(!html.contains("(optional)</label>\n<textarea name=\"reason\" id=\"reason\""));
    assert!(!html.contains("reason-error"));
    let html = approval_page(
        &gate,
        true,
        Problem {
            reason_missing: Some(ReasonMissing::Reject),
            ..Problem::default()
        },
    );
    assert!(
        html.contains(
            r#"<p id="reason-error" class="error" role="alert">This gate needs a reason to reject"#
        ),
        "{html}"
    );
    assert!(html.contains(r#"aria-invalid="true" aria-describedby="reason-error""#));
    let html = approval_page(
        &gate,
        true,
        Problem {
            reason_missing: Some(ReasonMissing::Modify),
            payload_text: Some("{\"amount\": 3}".into()),
            ..Problem::default()
        },
    );
    assert!(html.contains(r#"id="modify-reason-error""#), "{html}");
    assert!(
        html.contains("{&quot;amount&quot;: 3}</textarea>"),
        "{html}"
    );
    // A gate without it: optional, not required.
    let html = approval_page(&record(ApprovalStatus::Pending), true, Problem::default());
    assert!(html.contains(r#"Reason for rejecting (optional)</label>"#));
    assert!(html.contains(r#"<textarea name="reason" id="reason" rows="2"></textarea>"#));
}

#[test]
fn an_inbox_row_shows_a_team_gates_progress_and_why_its_viewer_may_not_vote() {
    let (team, ledgers) = team_gate();
    let row_for = |viewer: &str| {
        let rows = InboxRows {
            rows: vec![
                Row::new(&team, now(), None, "2 of finance".into())
                    .with_votes(&team, &ledgers, viewer),
            ],
            filtered: false,
        };
        as_read(
            templates()
                .render("inbox_rows.html", RowsFragment { inbox: &rows })
                .unwrap(),
        )
    };
    for (viewer, barred) in [
        ("bob", None),
        ("alice", Some("you voted approve")),
        ("bot", Some("your run: you may not vote")),
        ("erin", Some("not in finance or security")),
    ] {
        let html = row_for(viewer);
        assert!(
            html.contains(r#"<span class="progress">finance 1 of 2; security 0 of 1</span>"#),
            "{viewer}: {html}"
        );
        match barred {
            None => assert!(
                html.contains(r#"<tr class="approval" data-key="k-1">"#)
                    && !html.contains("class=\"barred\""),
                "{viewer}: {html}"
            ),
            Some(label) => {
                assert!(
                    html.contains(r#"<tr class="approval barred" data-key="k-1">"#),
                    "{viewer}: {html}"
                );
                assert!(
                    html.contains(&format!(r#"<small class="barred">{label}</small>"#)),
                    "{viewer}: {html}"
                );
            }
        }
    }
    // A plain gate shows neither.
    let plain = record(ApprovalStatus::Pending);
    let row = Row::new(&plain, now(), None, "anyone".into()).with_votes(&plain, &ledgers, "erin");
    let rows = InboxRows {
        rows: vec![row],
        filtered: false,
    };
    let html = as_read(
        templates()
            .render("inbox_rows.html", RowsFragment { inbox: &rows })
            .unwrap(),
    );
    assert!(
        !html.contains("progress") && !html.contains("barred"),
        "{html}"
    );
}

/// A stale pending approval under `effect`, as the pages get it.
fn stale(effect: Effect) -> Stale {
    Stale {
        spec: "0123456789ab".into(),
        approve: Some(effect.sentence()),
        approvable: effect.approvable(),
    }
}

#[test]
fn a_stale_approval_is_marked_and_under_refuse_offers_reject_only() {
    let refused = stale(Effect::Planned(OnSpecChange::Refuse, Outcome::Refused));
    let pending = record(ApprovalStatus::Pending);
    let html = approval_page_of(&pending, true, Problem::default(), Some(refused.clone()));
    assert!(
        html.contains("Requested under an older version of the spec (<code>0123456789ab</code>)."),
        "{html}"
    );
    assert!(html.contains("approve is not possible until the spec is restored; reject is."));
    assert!(html.contains(r#"id="reject-button""#) && html.contains(r#"id="reason""#));
    for gone in ["approve-button", "modify-button", "payload-edit"] {
        assert!(!html.contains(&format!(r#"id="{gone}""#)), "{gone}: {html}");
    }

    // Under pin the forms stay, and the page says where the run resumes.
    let pinned = stale(Effect::Planned(OnSpecChange::Pin, Outcome::Pinned));
    let html = approval_page_of(&pending, true, Problem::default(), Some(pinned));
    assert!(html.contains(r#"id="stale""#));
    assert!(html.contains("approve resumes the run on the version it paused under"));
    for id in ["approve-button", "reject-button", "modify-button"] {
        assert!(html.contains(&format!(r#"id="{id}""#)), "{id}");
    }
    let moved = stale(Effect::Planned(OnSpecChange::Auto, Outcome::MovesToNew));
    let html = approval_page_of(&pending, true, Problem::default(), Some(moved));
    assert!(html.contains("approve moves the run to the current version"));
    let missing = stale(Effect::VersionMissing(OnSpecChange::Pin));
    let html = approval_page_of(&pending, true, Problem::default(), Some(missing));
    assert!(html.contains("that version is not stored here"));

    // A current record is not marked.
    let html = approval_page(&pending, true, Problem::default());
    assert!(!html.contains(r#"id="stale""#) && !html.contains("older version"));

    // The inbox row says it too.
    let rows = InboxRows {
        rows: vec![
            Row::new(&pending, now(), Some(refused), "anyone".into()),
            Row::new(&pending, now(), None, "anyone".into()),
        ],
        filtered: false,
    };
    let html = as_read(
        templates()
            .render("inbox_rows.html", RowsFragment { inbox: &rows })
            .unwrap(),
    );
    assert_eq!(
        html.matches(r#"<small class="stale">"#).count(),
        1,
        "{html}"
    );
    assert!(html.contains(
        "stale (spec <code>0123456789ab</code>): Under on_spec_change: refuse, approve is not possible"
    ));
}

#[test]
fn the_approval_page_in_every_state() {
    // Pending, signed in: the decide forms, the run linked, the payload as tables.
    let html = approval_page(&record(ApprovalStatus::Pending), true, Problem::default());
    assert!(
        html.contains(r#"<h1 id="message">Refund &lt;b&gt;order&lt;/b&gt; A1?</h1>"#),
        "{html}"
    );
    for id in [
        "approve-button",
        "reject-button",
        "modify-button",
        "payload-edit",
    ] {
        assert!(html.contains(&format!(r#"id="{id}""#)), "{id}");
    }
    assert!(html.contains(r#"<form id="approve" method="post" action="/ui/approvals/k-1">"#));
    assert!(html.contains(r#"name="csrf" value="csrf-token""#));
    assert!(html.contains("2h (until 2026-12-01 12:00:00 UTC)"));
    assert!(html.contains(r#"<a href="/ui/runs/run-1"><code>run-1</code></a>"#));
    assert!(html.contains(r#"<th scope="row">amount</th><td><span class="json-number">10</span>"#));
    assert!(html.contains(r#"<span class="json-null">null</span>"#));
    assert!(html.contains(r#"<span class="json-empty">{}</span>"#));
    assert!(html.contains(r#"<p id="payload-error" class="error" role="alert" hidden></p>"#));
    assert!(html.contains(r#"<li class="event" data-kind="awaiting_approval" data-seq="3">"#));
    assert!(html.contains("waiting for approval at pay"));
    assert!(
        html.contains("Earlier steps&#x27; outputs") || html.contains("Earlier steps' outputs")
    );
    assert!(html.contains(r#"<pre id="run-input">"#) && html.contains("Ada"));
    assert!(!html.contains(r#"id="outcome""#));

    // Pending, through a signed link: the run is not linked.
    let html = approval_page(&record(ApprovalStatus::Pending), false, Problem::default());
    assert!(html.contains("<dd><code>run-1</code>") && !html.contains(r#"href="/ui/runs/run-1""#));

    // Each end: the outcome, no forms.
    for (status, words) in [
        (ApprovalStatus::Approved, "APPROVED"),
        (ApprovalStatus::Rejected, "REJECTED"),
        (ApprovalStatus::Modified, "MODIFIED"),
        (ApprovalStatus::Expired, "EXPIRED"),
        (ApprovalStatus::Cancelled, "CANCELLED"),
    ] {
        let html = approval_page(&record(status), true, Problem::default());
        assert!(
            html.contains(&format!(
                r#"class="outcome outcome-{}""#,
                words.to_lowercase()
            )),
            "{html}"
        );
        assert!(
            html.contains(&format!(r#"<strong class="status">{words}</strong>"#)),
            "{words}"
        );
        assert!(!html.contains("approve-button"), "{words}");
        assert!(html.contains("The run is now <strong>completed</strong>"));
        let decided = matches!(
            status,
            ApprovalStatus::Approved | ApprovalStatus::Rejected | ApprovalStatus::Modified
        );
        if decided {
            assert!(
                html.contains(
                    r#"by <span class="decided-by">alice</span> at 2026-12-01 09:55:00 UTC"#
                ),
                "{words}"
            );
        }
    }
    let html = approval_page(&record(ApprovalStatus::Rejected), true, Problem::default());
    assert!(html.contains(r#"Reason: <span class="reason">not this one</span>"#));
    let html = approval_page(&record(ApprovalStatus::Modified), true, Problem::default());
    assert!(html.contains("The payload was changed:"));
    assert!(
        html.contains(r#"<span class="diff-del">-   &quot;amount&quot;: 10,</span>"#),
        "{html}"
    );
    assert!(html.contains(r#"<span class="diff-add">+   &quot;amount&quot;: 5,</span>"#));
    // What was approved is the edit, labelled; the original is kept apart.
    assert!(
        html.contains(
            r#"<h2 id="payload-heading">Payload, as edited by alice: what was approved</h2>"#
        ),
        "{html}"
    );
    let tree = &html[html.find(r#"<div id="payload""#).unwrap_or(0)..];
    let tree = &tree[..tree.find("</div>").unwrap_or(tree.len())];
    assert!(
        tree.contains(r#"<span class="json-number">5</span>"#),
        "{tree}"
    );
    assert!(
        !tree.contains(r#"<span class="json-number">10</span>"#),
        "{tree}"
    );
    assert!(html.contains(r#"<details id="original-payload" class="context">"#));
    assert!(html.contains("Original payload, before the edit"));
    let html = approval_page(&record(ApprovalStatus::Approved), true, Problem::default());
    assert!(html.contains(r#"<h2 id="payload-heading">Payload</h2>"#));
    assert!(!html.contains("original-payload"));

    // Decided by someone else first; a bad edit shown again.
    let problem = Problem {
        already_decided: Some(AlreadyDecided {
            by: "bob".into(),
            at: "2026-12-01 09:59 UTC".into(),
        }),
        ..Problem::default()
    };
    let html = approval_page(&record(ApprovalStatus::Approved), true, problem);
    assert!(
        html.contains("already decided by bob at 2026-12-01 09:59 UTC"),
        "{html}"
    );
    let problem = Problem {
        payload_text: Some("{oops".into()),
        payload_error: Some("This is not valid JSON".into()),
        ..Problem::default()
    };
    let html = approval_page(&record(ApprovalStatus::Pending), true, problem);
    assert!(
        html.contains(r#"aria-invalid="true">{oops</textarea>"#),
        "{html}"
    );
    assert!(html.contains(r#"role="alert">This is not valid JSON</p>"#));
}

#[test]
fn the_history_empty_filtered_with_rows_and_paged() {
    let c = chrome("History", "history");
    let page = |rows: Vec<HistoryRow>, status: Option<&str>, links: PageLinks| HistoryPage {
        rows,
        statuses: super::history::DONE.iter().map(|s| s.as_str()).collect(),
        status: status.map(str::to_string),
        steps: vec!["pay".into()],
        step: None,
        q: None,
        links,
    };
    let html = render(&page(vec![], None, PageLinks::default()), &c);
    assert!(
        html.contains("No decided, expired or cancelled approvals."),
        "{html}"
    );
    let html = render(&page(vec![], Some("REJECTED"), PageLinks::default()), &c);
    assert!(html.contains("approvals match these filters."));
    assert!(
        html.contains(r#"<option value="REJECTED" selected>REJECTED</option>"#),
        "{html}"
    );
    let rows = [
        ApprovalStatus::Modified,
        ApprovalStatus::Rejected,
        ApprovalStatus::Expired,
    ]
    .map(|s| HistoryRow::new(&record(s)))
    .into_iter()
    .collect();
    let links = PageLinks {
        prev: None,
        next: Some("cursor=c2".into()),
    };
    let html = render(&page(rows, None, links), &c);
    assert!(
        html.contains(r#"<td class="status">MODIFIED</td>"#),
        "{html}"
    );
    assert!(html.contains("<summary>Edited payload</summary>"));
    assert!(html.contains(r#"<td class="reason">not this one</td>"#));
    assert!(
        html.contains(r#"<td class="decided-by"></td>"#),
        "expired: nobody decided"
    );
    assert!(html.contains(r#"<a id="next-page" href="/ui/history?cursor=c2">Older</a>"#));
}

fn run_record(status: RunStatus) -> RunRecord {
    serde_json::from_value(json!({
        "id": "run-1", "agent_id": "refunds", "spec_hash": "h", "status": status.as_str(),
        "input": {}, "trigger": {}, "outputs": {}, "error": (status == RunStatus::Failed).then_some("boom"),
        "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T09:30:00Z"
    }))
    .unwrap()
}

#[test]
fn the_runs_list_empty_filtered_and_with_each_status() {
    let c = chrome("Runs", "runs");
    let page = |rows: Vec<RunRow>, status: Option<&'static str>| RunsPage {
        rows,
        statuses: RunStatus::ALL.iter().map(|s| s.as_str()).collect(),
        status,
        q: None,
        links: PageLinks::default(),
    };
    let html = render(&page(vec![], None), &c);
    assert!(html.contains("No runs."), "{html}");
    let html = render(&page(vec![], Some("failed")), &c);
    assert!(html.contains("No runs that match these filters."));
    assert!(html.contains(r#"<option value="failed" selected>failed</option>"#));
    let rows = RunStatus::ALL
        .iter()
        .map(|s| RunRow::new(&run_record(*s), None))
        .collect();
    let html = render(&page(rows, None), &c);
    for status in RunStatus::ALL {
        assert!(
            html.contains(&format!(r#"<td class="status">{}"#, status.as_str())),
            "{status:?}"
        );
    }
    assert!(html.contains(r#"<span class="error-text">boom</span>"#));
}

#[test]
fn the_run_page_with_each_status() {
    for &status in RunStatus::ALL.iter() {
        let waiting = status == RunStatus::AwaitingApproval;
        let run = RunView {
            id: "run-1".into(),
            agent: "refunds".into(),
            spec_hash: record(ApprovalStatus::Pending).spec_hash,
            spec_current: true,
            status,
            outputs: Map::from_iter([("draft".to_string(), json!({"text": "hi"}))]),
            error: (status == RunStatus::Failed).then(|| "boom".to_string()),
            created_at: now(),
            updated_at: now(),
            lease: None,
            pending_approval: waiting.then(|| {
                let pending = record(ApprovalStatus::Pending);
                let served = pending.spec_hash.clone();
                ApprovalView::new(pending, &served)
            }),
        };
        let html = render(
            &RunPage::new(&run, &events(), "t".into()),
            &chrome("Run run-1", "runs"),
        );
        assert!(
            html.contains(&format!(r#"<dd id="run-status">{}</dd>"#, status.as_str())),
            "{html}"
        );
        assert!(html.contains(r#"<ol id="timeline""#) && html.contains("run started"));
        assert!(html.contains("<summary>Outputs</summary>"));
        let shows = |id: &str| html.contains(&format!(r#"<form id="{id}""#));
        let stuck = status == RunStatus::Stuck;
        assert_eq!(
            shows("retry"),
            stuck || status == RunStatus::Failed,
            "{status:?}"
        );
        assert_eq!(shows("fail"), stuck, "{status:?}");
        assert_eq!(
            shows("cancel"),
            waiting || status == RunStatus::Running,
            "{status:?}"
        );
        assert_eq!(
            html.contains(r#"<a href="/ui/approvals/k-1">"#),
            waiting,
            "{status:?}"
        );
        assert_eq!(
            html.contains(r#"<dd class="error-text">boom</dd>"#),
            status == RunStatus::Failed
        );
    }
}

async fn body(response: Response) -> (StatusCode, String) {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, as_read(String::from_utf8(bytes.to_vec()).unwrap()))
}

#[tokio::test]
async fn every_refusal_page() {
    let (status, html) = body(refusal::not_an_approver("mallory")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(html.contains(r#"<main id="forbidden""#), "{html}");
    assert!(html.contains("mallory may not decide"));
    let (status, html) = body(refusal::csrf()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(html.contains(r#"data-reason="csrf""#) && html.contains("Form expired"));
    let (status, html) = body(refusal::not_found()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains(r#"<main id="not-found""#) && html.contains("There is no such page"));
    let (status, html) = body(refusal::method_not_allowed("DELETE")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(html.contains(r#"<main id="refused""#) && html.contains("does not answer DELETE"));
    let (status, html) = body(refusal::bad_link()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains(r#"<main id="bad-link""#) && html.contains("This link is not valid"));
    let (status, html) = body(refusal::unbound_off()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(html.contains(r#"data-reason="unbound""#));
    let (status, html) = body(refusal::from_api(ApiError::Internal(
        "secret detail".into(),
    )))
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(html.contains("Internal error") && !html.contains("secret detail"));
    let (status, html) = body(refusal::from_api(ApiError::invalid("limit <b>"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        html.contains("Not accepted") && html.contains("limit &lt;b&gt;"),
        "{html}"
    );
    // A decision refused says which refusal in its heading, not only in
    // the message under it.
    let voted = crate::domain::pending_approval::ApprovalError::AlreadyVoted {
        key: "k".into(),
        voter: "alice".into(),
        decision: crate::domain::policy::VoteDecision::Approve,
    };
    let (status, html) = body(refusal::from_api(ApiError::Approval(voted))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        html.contains("<h1>Already voted</h1>") && html.contains("alice already voted"),
        "{html}"
    );
}

#[test]
fn a_name_a_template_does_not_define_fails_to_render() {
    // Strict undefined behaviour: a typo is an error, not an empty string.
    let env = templates();
    assert!(env.render("refusal.html", json!({"heading": "h"})).is_err());
    let html = env
        .render(
            "refusal.html",
            json!({
                "chrome": Chrome::default(), "css": "c", "js": "j",
                "heading": "<b>x</b>", "message": "\"><img src=x onerror=alert(1)>"
            }),
        )
        .unwrap();
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("&lt;b&gt;"), "{html}");
}

/// A notice of `record`'s pause to the webhook `${HOOK_OPS}`, as the
/// outbox holds it once its sends came to `status`.
fn outbox_notice(
    id: &str,
    status: crate::domain::notices::NoticeStatus,
    last_error: Option<&str>,
) -> crate::store::OutboxNotice {
    use crate::domain::notices::{NoticeRoutes, WebhookRoute, notices_for};
    let routes = NoticeRoutes {
        webhooks: vec![WebhookRoute {
            url: "${HOOK_OPS}".into(),
            secret: "${HOOK_OPS_SECRET}".into(),
            events: None,
        }],
        ..NoticeRoutes::default()
    };
    let paused = event(
        3,
        json!({"type": "awaiting_approval", "key": "k-1", "step": "pay", "phase": "before",
        "message": null, "payload": {}, "expires_at": "2026-12-01T12:00:00Z"}),
    );
    let mut notices = notices_for(
        &record(ApprovalStatus::Pending),
        &routes,
        &paused,
        &mut || id.to_string(),
    );
    assert_eq!(notices.len(), 1, "one webhook, one notice");
    crate::store::OutboxNotice {
        notice: notices.remove(0),
        status,
        attempts: 4,
        next_at: now() + Duration::minutes(10),
        last_error: last_error.map(str::to_string),
        window_from: now() - Duration::hours(1),
        sent_at: None,
    }
}

#[test]
fn the_notifications_page_lists_failed_and_dead_deliveries_with_their_retries() {
    use super::notifications::NotificationsPage;
    use crate::domain::notices::NoticeStatus;
    let failed = outbox_notice("n-failed", NoticeStatus::Failed, Some("HTTP 503"));
    let dead = outbox_notice("n-dead", NoticeStatus::Dead, Some("HTTP <b>410</b> Gone"));
    let disabled = crate::store::DisabledEndpoint {
        endpoint: "${HOOK_OPS}".into(),
        disabled_at: now(),
        reason: "HTTP 410 Gone".into(),
    };
    let page = NotificationsPage::new(
        &[dead, failed],
        &[disabled],
        "csrf-n".into(),
        PageLinks::default(),
    );
    let html = render(&page, &chrome("Notifications", "notifications"));
    assert!(
        html.contains(r#"<a href="/ui/notifications" aria-current="page">Notifications</a>"#),
        "{html}"
    );
    // Newest first as given, each row with its retry form and CSRF token.
    let dead_at = html.find(r#"data-id="n-dead""#).expect("the dead row");
    let failed_at = html.find(r#"data-id="n-failed""#).expect("the failed row");
    assert!(dead_at < failed_at);
    for id in ["n-dead", "n-failed"] {
        assert!(
            html.contains(&format!(
                r#"<form class="retry" method="post" action="/ui/notifications/{id}/retry">"#
            )),
            "{html}"
        );
    }
    assert!(html.contains(r#"<input type="hidden" name="csrf" value="csrf-n">"#));
    assert!(
        html.contains(r#"<form id="retry-dead" method="post" action="/ui/notifications/retry">"#)
    );
    // What each row says: the event, the approval's link, the target as
    // written, the attempts and the error, escaped.
    for part in [
        "<code>approval.requested</code>",
        r#"<a href="/ui/approvals/k-1"><code>k-1</code></a>"#,
        "<code>${HOOK_OPS}</code>",
        r#"<td class="attempts">4</td>"#,
        "HTTP &lt;b&gt;410&lt;/b&gt; Gone",
        r#"<td class="status">dead</td>"#,
    ] {
        assert!(html.contains(part), "{part} in {html}");
    }
    // A failed one shows its next try; a dead one waits for a person.
    let next = format::time(now() + Duration::minutes(10));
    assert_eq!(html.matches(&next).count(), 1, "{html}");
    assert!(html.contains(r#"<table id="disabled-endpoints">"#));
    assert!(html.contains("HTTP 410 Gone"));
}

#[test]
fn the_notifications_page_says_when_nothing_needs_a_person() {
    use super::notifications::NotificationsPage;
    let page = NotificationsPage::new(&[], &[], "csrf-n".into(), PageLinks::default());
    let html = render(&page, &chrome("Notifications", "notifications"));
    assert!(html.contains(r#"<p id="notices-empty">No failed or dead deliveries.</p>"#));
    assert!(html.contains(r#"id="disabled-empty""#));
    assert!(!html.contains("retry-dead"), "{html}");
    // Only failed ones: no "Retry all dead".
    let failed = outbox_notice("n-1", crate::domain::notices::NoticeStatus::Failed, None);
    let page = NotificationsPage::new(&[failed], &[], "c".into(), PageLinks::default());
    let html = render(&page, &chrome("Notifications", "notifications"));
    assert!(!html.contains("retry-dead") && html.contains(r#"data-id="n-1""#));
}
