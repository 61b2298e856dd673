//! The approval page of a gate with rules: each rule's progress and the
//! ledger; the decision forms only for those who may vote, the others told
//! why; a vote by form post is recorded from the inbox, and a form posted
//! after the payload was edited decides nothing.

use serde_json::json;

use super::{approve, paused, spec, tokens};
use crate::common::Workspace;
use crate::common::server::Served;
use crate::ui::client::Client;

fn served(ws: &Workspace) -> Served {
    let tokens = tokens();
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", tokens.as_str()),
            ("TOLLGATE_SESSION_SECRET", "team-secret"),
        ],
        &[],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_page_shows_progress_and_offers_votes_only_to_those_who_may() {
    let ws = Workspace::new(&spec(""));
    let served = served(&ws);
    let (_, key, _) = paused(&served, 30).await;
    let path = format!("/ui/approvals/{key}");

    // bot started the run: no buttons, and why.
    let mut bot = Client::signed_in(&served, "token-bot").await;
    let page = bot.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        !page.has_id("approve") && !page.has_id("reject"),
        "{}",
        page.body
    );
    assert!(
        page.text_of("may-not-vote")
            .contains("separation of duties")
    );
    assert_eq!(
        page.text_of("vote-progress"),
        "finance 0 of 2; security 0 of 1"
    );

    // erin is in no group.
    let mut erin = Client::signed_in(&served, "token-erin").await;
    let page = erin.get(&path).await;
    assert!(
        page.text_of("may-not-vote")
            .contains("not a member of finance or security")
    );

    // alice votes from the inbox.
    let mut alice = Client::signed_in(&served, "token-alice").await;
    let page = alice.get(&path).await;
    assert!(page.has_id("approve"), "{}", page.body);
    let csrf = page.csrf();
    let digest = hidden_digest(&page.body);
    let answer = alice
        .post(
            &path,
            &[
                ("decision", "approve"),
                ("csrf", &csrf),
                ("payload_digest", &digest),
            ],
        )
        .await;
    assert_eq!(
        answer.status, 200,
        "a vote shows the page again: {}",
        answer.body
    );
    assert!(
        answer
            .text_of("vote-recorded")
            .contains("finance 1 of 2; security 0 of 1")
    );
    let page = alice.get(&path).await;
    assert!(page.text_of("may-not-vote").contains("You voted approve"));
    let ledger = page.text_of("ledger");
    assert!(
        ledger.contains("alice voted approve (finance)") && ledger.contains("inbox"),
        "{ledger}"
    );
    let rules = page.text_of("rules");
    assert!(rules.contains("may still vote: bob, carol"), "{rules}");

    // bob edits the payload over the API; carol's page, loaded before,
    // decides nothing.
    let mut carol = Client::signed_in(&served, "token-carol").await;
    let before = carol.get(&path).await;
    let (status, body) = approve(&served, &key, "bob", json!({ "payload": { "amount": 3 } })).await;
    assert_eq!(status, 200, "{body}");
    let answer = carol
        .post(
            &path,
            &[
                ("decision", "approve"),
                ("csrf", &before.csrf()),
                ("payload_digest", &hidden_digest(&before.body)),
            ],
        )
        .await;
    assert_eq!(answer.status, 409, "{}", answer.body);
    assert!(answer.has_id("payload-changed"));
    // The page shown again asks about the edit.
    let raw = answer.text_of("payload-raw");
    assert!(raw.contains("&quot;amount&quot;: 3"), "{raw}");
}

/// The `payload_digest` hidden field of the page's forms.
fn hidden_digest(body: &str) -> String {
    let marker = r#"name="payload_digest" value=""#;
    let start = body.find(marker).expect("a payload_digest field") + marker.len();
    body[start..start + body[start..].find('"').unwrap()].to_string()
}

/// A signed link bound to a member of the gate's groups works even when
/// `approvals.approvers` does not name them (on a gate with rules, the
/// groups say who decides); one bound to an approver outside the groups
/// is refused before anything is shown, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signed_link_admits_the_gates_groups_not_the_approvers_list() {
    const SECRET: &str = "team-link-secret-0b8e2f4a6c1d3e5f7a9b";
    let ws = Workspace::new(&spec("").replace("approvals:\n", "approvals:\n  approvers: [erin]\n"));
    let tokens = tokens();
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", tokens.as_str()),
            ("TOLLGATE_LINK_SECRET", SECRET),
        ],
        &[],
    );
    let (_, key, _) = paused(&served, 30).await;
    let signer = tollgate_runtime::links::LinkSigner::new(SECRET, None).expect("signer");
    // The API shows a link to the groups' members, and none to erin.
    let url = served.url(&format!("/approvals/{key}"));
    let (_, for_alice) = super::as_person("alice").get(&url).await;
    let link = for_alice["link"].as_str().unwrap_or_default();
    assert!(link.ends_with("?as=alice"), "{for_alice}");
    let (_, for_erin) = super::as_person("erin").get(&url).await;
    assert_eq!(for_erin.get("link"), None, "{for_erin}");

    let mut erin = Client::new(&served);
    let refused = erin.get(&signer.path(&key, Some("erin"))).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("erin may not decide: not a member of finance or security"),
        "{}",
        refused.body
    );

    let mut alice = Client::new(&served);
    let path = signer.path(&key, Some("alice"));
    let page = alice.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.has_id("approve"), "{}", page.body);
    let answer = alice
        .post(
            &path,
            &[
                ("decision", "approve"),
                ("csrf", &page.csrf()),
                ("payload_digest", &hidden_digest(&page.body)),
            ],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer
            .text_of("vote-recorded")
            .contains("finance 1 of 2; security 0 of 1"),
        "{}",
        answer.body
    );
    let (_, ledger) = super::as_person("alice")
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    assert_eq!(ledger["votes"][0]["voter"], "alice", "{ledger}");
    assert_eq!(ledger["votes"][0]["channel"], "link", "{ledger}");
}
