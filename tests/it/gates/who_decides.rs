//! Whoever asks never decides (DESIGN §13, issue 41): a gate request may
//! narrow who decides, never widen it, never approve itself by waiting and
//! never let its requesters vote; whatever it may not set is refused with
//! 400 `invalid_request` naming the field, and nothing is stored.
//!
//! Reproduced first: before, a requester token's `policy.on_timeout:
//! approve` with a `ttl` of 2 s was stored (201) and read `decided,
//! approved: true, by: timeout` after the next sweep; `policy.rules` and
//! `policy.escalate` over a group the approvers leave out let that group
//! decide; 99 reminders were taken; and a full token decided its own plain
//! request.

use serde_json::{Value, json};

use super::{error_of, gate};
use crate::common::Workspace;
use crate::common::server::{Api, Served};

/// alice and carol approve; mallory is in a group but no approver.
const SPEC: &str = r#"version: 1
agent: payouts-desk
approvals:
  approvers: [alice, carol]
  groups: { ops: [mallory], leads: [alice, carol] }
steps:
  - id: note
    set: { ok: true }
"#;

const TOKENS: &str = "alice:tok-alice,carol:tok-carol,mallory:tok-mallory,bot/requester:tok-bot";

fn person(name: &str) -> Api {
    Api::with_token(&format!("tok-{name}"))
}

fn asking(policy: Value) -> Value {
    json!({"message": "Pay 900 EUR?", "payload": {"amount": 900}, "ttl": "2s", "policy": policy})
}

/// `POST /gates` by `api` must be refused 400 `invalid_request`, its
/// message naming `field` and saying `why`.
async fn refused(served: &Served, api: &Api, body: Value, field: &str, why: &str) {
    let (status, answer) = api.post(&served.url("/gates"), body.clone()).await;
    assert_eq!(status, 400, "{body} -> {answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, "invalid_request", "{answer}");
    assert!(message.contains(field), "{field}: {message}");
    assert!(message.contains(why), "{why}: {message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_never_approves_itself_nor_chooses_who_decides() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let bot = person("bot");

    refused(
        &served,
        &bot,
        asking(json!({"on_timeout": "approve"})),
        "policy.on_timeout",
        "allows expire, reject, continue",
    )
    .await;
    refused(
        &served,
        &bot,
        asking(json!({"rules": [{"group": "ops", "min": 1}]})),
        "policy.rules[0].group",
        "leaves out (mallory): a request may narrow who decides, never widen it",
    )
    .await;
    refused(
        &served,
        &bot,
        asking(json!({"escalate": [{"after": "1s", "add": ["ops"]}]})),
        "policy.escalate",
        "may_set allows rules, require_reason, ttl",
    )
    .await;
    let many: Vec<String> = (1..=99).map(|p| format!("{p}%")).collect();
    refused(
        &served,
        &bot,
        asking(json!({"remind": many})),
        "policy.remind",
        "max_reminders is 3",
    )
    .await;
    refused(
        &served,
        &bot,
        asking(json!({"allow_self_approval": true})),
        "policy.allow_self_approval",
        "whoever asks never decides",
    )
    .await;
    // The same through the gate's own timeout: nothing was stored, so no
    // sweep can approve anything.
    let (status, listed) = person("alice").get(&served.url("/approvals")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"], json!([]), "nothing stored: {listed}");

    // Narrowing is a request's to ask: both leads, a reason, a reject on
    // timeout. mallory (no approver) may not decide; the leads settle it.
    let key = super::ask(
        &served,
        &bot,
        json!({
            "message": "Pay 900 EUR?",
            "payload": {"amount": 900},
            "ttl": "1h",
            "policy": {"rules": [{"group": "leads", "min": 2}], "on_timeout": "reject"},
        }),
    )
    .await;
    let approve = |name: &'static str| {
        let served = &served;
        let key = key.clone();
        async move {
            person(name)
                .post(
                    &served.url(&format!("/approvals/{key}/approve")),
                    json!({"reason": "ok"}),
                )
                .await
        }
    };
    let (status, answer) = approve("mallory").await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = approve("alice").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["approval"]["status"], "PENDING",
        "one of two: {answer}"
    );
    let (status, answer) = approve("carol").await;
    assert_eq!(status, 200, "{answer}");
    let (_, view) = gate(&served, &bot, &key, Some("5s")).await;
    assert_eq!(view["approved"], true, "{view}");
    assert_eq!(view["decision"]["by"], "carol", "{view}");

    // A full token's own plain request: carol asks, carol may not decide
    // (told who asked), alice may.
    let carol = person("carol");
    let key = super::ask(
        &served,
        &carol,
        json!({"message": "Pay 50 EUR?", "payload": {"amount": 50}, "requester": "dora"}),
    )
    .await;
    let (status, answer) = carol
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 403, "{answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, "forbidden");
    assert!(
        message.contains("separation of duties") && message.contains("carol, dora"),
        "{message}"
    );
    let (status, answer) = person("alice")
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 200, "{answer}");
}

/// A spec of a single gate, for the self-approval cases.
const GATED: &str = r#"version: 1
agent: refunds
steps:
  - id: confirm
    approval: { message: "Refund {{ input.amount }}?" }
"#;

const LINK_SECRET: &str = "0123456789abcdef0123456789abcdef";

fn serve_gated(ws: &Workspace) -> Served {
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", "agent:tok-agent,alice:tok-alice"),
            ("TOLLGATE_LINK_SECRET", LINK_SECRET),
        ],
        &[],
    )
}

/// Before, the token that started a run approved that run's gate (200,
/// `decided_by: agent`): separation of duties held only on gates with
/// rules. Now every path refuses it, and shows it no link.
#[tokio::test(flavor = "multi_thread")]
async fn whoever_started_a_run_cannot_decide_its_gate_on_any_path() {
    let ws = Workspace::new(GATED);
    let served = serve_gated(&ws);
    let agent = Api::with_token("tok-agent");
    let alice = Api::with_token("tok-alice");
    let paused = agent.pause(&served, json!({"amount": 40})).await;
    let key = &paused.key;

    // No link for the requester; alice's is bound to her.
    let (_, shown) = agent.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(shown["link"], Value::Null, "{shown}");
    let (_, shown) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert!(
        shown["link"].as_str().is_some_and(|l| l.contains("alice")),
        "{shown}"
    );

    let forbidden = |(status, answer): (u16, Value)| {
        assert_eq!(status, 403, "{answer}");
        let (code, message) = error_of(&answer);
        assert_eq!(code, "forbidden", "{answer}");
        assert!(
            message.contains("separation of duties") && message.contains("asked for by agent"),
            "{message}"
        );
    };
    forbidden(
        agent
            .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
            .await,
    );
    forbidden(
        agent
            .post(&served.url(&format!("/approvals/{key}/reject")), json!({}))
            .await,
    );
    forbidden(
        agent
            .post(
                &served.url(&format!("/runs/{}/approve", paused.run_id)),
                json!({"approved": true}),
            )
            .await,
    );
    let (status, batch) = agent
        .post(
            &served.url("/approvals/batch"),
            json!({"decisions": [{"key": key, "decision": "approve"}]}),
        )
        .await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch["results"][0]["error"]["code"], "forbidden", "{batch}");
    // The CLI names its decider with --by: checked the same way (exit 6).
    let out = ws
        .decide("approve", key)
        .args(["--by", "agent"])
        .output()
        .expect("cli");
    crate::common::assert_exit(&out, 6);
    crate::common::assert_stderr_contains(&out, "separation of duties");

    // Someone else decides: the run completes.
    let (status, answer) = alice
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 200, "{answer}");
    alice
        .wait_for_status(&served, &paused.run_id, "completed")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_that_allows_self_approval_lets_the_requester_decide() {
    let ws =
        Workspace::new(&GATED.replace("steps:", "approvals:\n  allow_self_approval: true\nsteps:"));
    let served = serve_gated(&ws);
    let agent = Api::with_token("tok-agent");
    let paused = agent.pause(&served, json!({"amount": 40})).await;
    let (_, shown) = agent
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert!(
        shown["link"].is_string(),
        "a link for who may decide: {shown}"
    );
    let (status, answer) = agent
        .post(
            &served.url(&format!("/approvals/{}/approve", paused.key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["approval"]["decided_by"], "agent", "{answer}");
}

/// Before, approvers with no way to act were silent at start: the gate
/// waited until it expired.
#[tokio::test(flavor = "multi_thread")]
async fn serve_warns_at_start_of_a_gate_nobody_can_decide() {
    let ws = Workspace::new(&GATED.replace("steps:", "approvals:\n  approvers: [alice]\nsteps:"));
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let line = served
        .log_line("nobody can decide them", std::time::Duration::from_secs(20))
        .await;
    assert!(
        line.contains("gates \\\"confirm\\\"") || line.contains("gates \"confirm\""),
        "{line}"
    );
    assert!(
        line.contains("alice") && line.contains("TOLLGATE_API_TOKENS"),
        "{line}"
    );
}
