//! The outbox (DESIGN §14): every change to an approval writes its notices
//! in its own transaction, one per channel and recipient, to the routes
//! stored with the pause; workers lease due notices (one sender at a time
//! across handles), settle them, and operators list and retry them.

use std::collections::BTreeMap;

use super::fixtures::*;
use super::prelude::*;
use super::votes::{finance_and_security, vote_on};
use tollgate_runtime::notices::{
    EmailRoute, NoticeChannel, NoticeEvent, NoticeStatus, WebhookRoute,
};
use tollgate_runtime::policy::{Nudge, NudgeKind, VoteDecision};
use tollgate_runtime::store::{
    DisabledEndpoint, LaneLimits, NoticeQuery, NoticeWrite, OutboxNotice, RetryNotices,
};

/// Two webhooks: `${HOOK_ALL}` takes every event, `${HOOK_DONE}` only
/// approvals and rejections.
fn two_hooks() -> NoticeRoutes {
    NoticeRoutes {
        webhooks: vec![
            WebhookRoute {
                url: "${HOOK_ALL}".into(),
                secret: "${HOOK_ALL_SECRET}".into(),
                events: None,
            },
            WebhookRoute {
                url: "${HOOK_DONE}".into(),
                secret: "${HOOK_DONE_SECRET}".into(),
                events: Some(vec![NoticeEvent::Approved, NoticeEvent::Rejected]),
            },
        ],
        ..NoticeRoutes::default()
    }
}

/// One webhook taking every event.
fn one_hook() -> NoticeRoutes {
    NoticeRoutes {
        webhooks: two_hooks().webhooks[..1].to_vec(),
        ..NoticeRoutes::default()
    }
}

/// A run paused at `key` at `created`, its notices going to `routes`,
/// its record shaped by `shape`.
async fn paused_routed(
    store: &dyn StateStore,
    key: &str,
    created: u64,
    routes: NoticeRoutes,
    shape: impl FnOnce(&mut ApprovalRecord),
) -> ApprovalRecord {
    let run_id = format!("run-{key}");
    let run = run_record(&run_id, "agent", created);
    store
        .create_run(&run, &[event(&run_id, 1, created, started(&run))])
        .await
        .expect("create run");
    let mut record = pending_record(key, &run_id, "agent", created);
    shape(&mut record);
    pause_routed(store, &record, 2, routes).await;
    record
}

/// Every notice of `key`, oldest first.
async fn notices_of(store: &dyn StateStore, key: &str) -> Vec<OutboxNotice> {
    let mut all = store
        .list_notices(&NoticeQuery {
            key: Some(key.into()),
            limit: 500,
            ..NoticeQuery::default()
        })
        .await
        .expect("list notices");
    all.reverse();
    all
}

/// (event, channel, target) of each notice, sorted.
fn summary(notices: &[OutboxNotice]) -> Vec<(NoticeEvent, NoticeChannel, String)> {
    let mut out: Vec<_> = notices
        .iter()
        .map(|n| (n.notice.event, n.notice.channel, n.notice.target.clone()))
        .collect();
    out.sort_by(|a, b| (a.0.as_str(), a.2.as_str()).cmp(&(b.0.as_str(), b.2.as_str())));
    out
}

fn hook(event: NoticeEvent, target: &str) -> (NoticeEvent, NoticeChannel, String) {
    (event, NoticeChannel::Webhook, target.to_string())
}

pub async fn a_gate_without_routes_writes_no_notice(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    assert_eq!(store.routes_of("k").await.expect("routes"), None);
    store.claim(&approve("k", "alice", 5)).await.expect("claim");
    assert_eq!(notices_of(store.as_ref(), "k").await, vec![]);
    let stats = store.outbox_stats().await.expect("stats");
    assert_eq!(
        (stats.pending, stats.sent, stats.oldest_undelivered),
        (0, 0, None)
    );
}

pub async fn each_change_writes_its_notices_in_its_own_transaction(store: SharedStore) {
    let record = paused_routed(store.as_ref(), "k", 0, two_hooks(), |_| {}).await;
    assert_eq!(
        store.routes_of("k").await.expect("routes"),
        Some(two_hooks()),
        "stored with the pause, as written"
    );
    assert_eq!(store.routes_of("no-such-key").await.expect("routes"), None);
    let paused = notices_of(store.as_ref(), "k").await;
    assert_eq!(
        summary(&paused),
        vec![hook(NoticeEvent::Requested, "${HOOK_ALL}")],
        "the filtered hook does not take the request"
    );
    let requested = &paused[0];
    assert_eq!(requested.status, NoticeStatus::Pending);
    assert_eq!((requested.attempts, requested.sent_at), (0, None));
    assert_eq!(requested.next_at, at::<chrono::DateTime<chrono::Utc>>(0));
    assert_eq!(requested.window_from, requested.notice.created_at);
    let body = &requested.notice.body;
    assert_eq!(body.event, NoticeEvent::Requested);
    assert_eq!(body.data.key, "k");
    assert_eq!(body.data.run_id, record.run_id);
    assert_eq!(body.data.step, "refund");
    assert_eq!(body.data.message.as_deref(), Some("Refund 30 EUR to c-1?"));
    assert_eq!(body.data.status, ApprovalStatus::Pending);
    assert_eq!(body.data.expires_at, record.expires_at);
    assert_eq!(
        body.data.payload_digest,
        tollgate_runtime::policy::payload_digest(&record.payload)
    );
    assert!(body.data.payload_preview.contains("\"amount\": 30"));
    assert_eq!(
        body.data.link, None,
        "links are made at send time, never stored"
    );

    store.claim(&approve("k", "alice", 5)).await.expect("claim");
    let all = notices_of(store.as_ref(), "k").await;
    assert_eq!(
        summary(&all),
        vec![
            hook(NoticeEvent::Approved, "${HOOK_ALL}"),
            hook(NoticeEvent::Approved, "${HOOK_DONE}"),
            hook(NoticeEvent::Requested, "${HOOK_ALL}"),
        ]
    );
    let ids: HashSet<&str> = all.iter().map(|n| n.notice.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "every notice has its own id");
    let approved = all
        .iter()
        .find(|n| n.notice.event == NoticeEvent::Approved)
        .expect("approved notice");
    assert_eq!(approved.notice.body.data.status, ApprovalStatus::Approved);
    assert_eq!(approved.notice.body.data.by.as_deref(), Some("alice"));
    assert_eq!(
        approved.notice.body.data.reason.as_deref(),
        Some("looks right")
    );
    assert_eq!(
        approved.notice.created_at,
        at::<chrono::DateTime<chrono::Utc>>(5)
    );
}

pub async fn a_refused_change_writes_no_notice(store: SharedStore) {
    paused_routed(store.as_ref(), "k", 0, one_hook(), |_| {}).await;
    store.claim(&approve("k", "alice", 5)).await.expect("claim");
    let before = notices_of(store.as_ref(), "k").await.len();
    let late = store.claim(&approve("k", "bob", 6)).await;
    assert!(late.is_err(), "a second claim loses");
    assert_eq!(
        notices_of(store.as_ref(), "k").await.len(),
        before,
        "a change that did not happen tells nobody"
    );
    // The run goes on after the decision: cancelling it cancels no
    // approval, so it tells the approval's routes nothing.
    let cancelled = store
        .cancel_run(&cancel("run-k", "ops", 7))
        .await
        .expect("cancel");
    assert_eq!(cancelled.approval, None);
    assert_eq!(notices_of(store.as_ref(), "k").await.len(), before);
    // A pause refused as a whole stores no notice either.
    let record = pending_record("k2", "run-missing", "agent", 0);
    let refused = store
        .pause_run(
            &Pause {
                record,
                at: at(0),
                owner: None,
                routes: one_hook(),
            },
            &[],
        )
        .await;
    assert!(refused.is_err(), "no such run");
    assert_eq!(notices_of(store.as_ref(), "k2").await, vec![]);
}

pub async fn votes_expiry_cancels_and_nudges_write_their_notices(store: SharedStore) {
    // A vote that leaves the gate open, then the one that settles it.
    let routes = one_hook();
    let team = paused_routed(store.as_ref(), "team", 0, routes.clone(), |r| {
        r.roster = Some(finance_and_security(&["rita"]));
    })
    .await;
    let requested = notices_of(store.as_ref(), "team").await;
    assert_eq!(
        requested[0].notice.body.data.progress.as_deref(),
        Some("finance 0 of 2; security 0 of 1")
    );
    for (voter, now) in [("alice", 5), ("bob", 6), ("dave", 7)] {
        let record = store
            .get_approval("team")
            .await
            .expect("get")
            .expect("record");
        store
            .cast_vote(&vote_on(&record, voter, VoteDecision::Approve, now))
            .await
            .expect("vote");
    }
    let events: Vec<NoticeEvent> = notices_of(store.as_ref(), "team")
        .await
        .iter()
        .map(|n| n.notice.event)
        .collect();
    assert_eq!(
        events,
        vec![
            NoticeEvent::Requested,
            NoticeEvent::Voted,
            NoticeEvent::Voted,
            NoticeEvent::Approved,
        ],
        "the deciding vote is told of once, as the approval"
    );
    let voted = &notices_of(store.as_ref(), "team").await[1];
    assert_eq!(voted.notice.body.data.by.as_deref(), Some("alice"));
    assert_eq!(
        voted.notice.body.data.progress.as_deref(),
        Some("finance 1 of 2; security 0 of 1")
    );
    assert_eq!(team.key, "team");

    // Expiry.
    paused_routed(store.as_ref(), "late", 0, routes.clone(), |_| {}).await;
    store.expire_due(at(TTL + 1)).await.expect("sweep");
    let late = notices_of(store.as_ref(), "late").await;
    assert_eq!(
        late.last().map(|n| n.notice.event),
        Some(NoticeEvent::Expired)
    );
    assert_eq!(
        late.last().map(|n| n.notice.body.data.status),
        Some(ApprovalStatus::Expired)
    );

    // Cancel.
    paused_routed(store.as_ref(), "gone", 0, routes.clone(), |_| {}).await;
    store
        .cancel_run(&cancel("run-gone", "ops", 10))
        .await
        .expect("cancel");
    let gone = notices_of(store.as_ref(), "gone").await;
    let last = gone.last().expect("notice");
    assert_eq!(last.notice.event, NoticeEvent::Cancelled);
    assert_eq!(last.notice.body.data.by.as_deref(), Some("ops"));

    // A reminder and an escalation, each once.
    paused_routed(store.as_ref(), "slow", 0, routes, |r| {
        let mut roster = finance_and_security(&["rita"]);
        roster.nudges = vec![
            Nudge {
                at: at(100),
                kind: NudgeKind::Remind { percent: 50 },
            },
            Nudge {
                at: at(200),
                kind: NudgeKind::Escalate {
                    groups: vec!["leads".into()],
                    members: vec!["lena".into()],
                },
            },
        ];
        r.roster = Some(roster);
    })
    .await;
    store.nudge_due(at(150), 10).await.expect("nudge");
    store.nudge_due(at(150), 10).await.expect("nudge again");
    store.nudge_due(at(250), 10).await.expect("escalate");
    let slow: Vec<_> = notices_of(store.as_ref(), "slow")
        .await
        .into_iter()
        .map(|n| {
            (
                n.notice.event,
                n.notice.body.data.percent,
                n.notice.body.data.added,
            )
        })
        .collect();
    assert_eq!(
        slow,
        vec![
            (NoticeEvent::Requested, None, vec![]),
            (NoticeEvent::Reminded, Some(50), vec![]),
            (NoticeEvent::Escalated, None, vec!["lena".to_string()]),
        ]
    );
}

pub async fn mail_goes_to_each_decider_mail_can_reach(store: SharedStore) {
    let mail = |approvers: Option<Vec<&str>>| NoticeRoutes {
        email: Some(EmailRoute {
            smtp_url: "${SMTP_URL}".into(),
            from: "tollgate@example.com".into(),
            to: BTreeMap::from([
                ("alice".to_string(), "alice@example.com".to_string()),
                ("bob".to_string(), "${BOB_MAIL}".to_string()),
                ("zed".to_string(), "zed@example.com".to_string()),
            ]),
            approvers: approvers.map(|a| a.into_iter().map(String::from).collect()),
            events: None,
        }),
        ..NoticeRoutes::default()
    };
    let targets = |notices: &[OutboxNotice]| -> Vec<String> {
        let mut t: Vec<String> = notices.iter().map(|n| n.notice.target.clone()).collect();
        t.sort();
        t
    };
    // A plain gate with an allow-list: the listed deciders mail reaches,
    // and an approver whose name is an address.
    paused_routed(
        store.as_ref(),
        "plain",
        0,
        mail(Some(vec!["alice", "bob", "carol@example.com"])),
        |_| {},
    )
    .await;
    let plain = notices_of(store.as_ref(), "plain").await;
    assert!(
        plain
            .iter()
            .all(|n| n.notice.channel == NoticeChannel::Email)
    );
    assert_eq!(
        targets(&plain),
        vec!["alice", "bob", "carol@example.com"],
        "zed may not decide: no mail"
    );
    // A gate with rules: its members.
    paused_routed(store.as_ref(), "team", 0, mail(None), |r| {
        r.roster = Some(finance_and_security(&["rita"]));
    })
    .await;
    assert_eq!(
        targets(&notices_of(store.as_ref(), "team").await),
        vec!["alice", "bob"],
        "carol and dave have no address; zed is no member"
    );
}

/// One notice of a run paused at `key` with one webhook; its id.
async fn one_notice(store: &dyn StateStore, key: &str, created: u64) -> String {
    paused_routed(store, key, created, one_hook(), |_| {}).await;
    notices_of(store, key).await[0].notice.id.clone()
}

fn ids(notices: &[OutboxNotice]) -> Vec<String> {
    notices.iter().map(|n| n.notice.id.clone()).collect()
}

pub async fn a_leased_notice_has_one_sender_until_its_lease_runs_out(store: SharedStore) {
    let id = one_notice(store.as_ref(), "k", 0).await;
    let a = store
        .lease_notices("worker-a", at(1), at(61), 10)
        .await
        .expect("lease");
    assert_eq!(ids(&a), vec![id.clone()]);
    let b = store
        .lease_notices("worker-b", at(30), at(90), 10)
        .await
        .expect("lease");
    assert_eq!(b, vec![], "leased by a until 61");
    // a dies; its lease runs out and b takes the notice over.
    let b = store
        .lease_notices("worker-b", at(61), at(121), 10)
        .await
        .expect("lease");
    assert_eq!(ids(&b), vec![id.clone()]);
    let sent = NoticeWrite::Sent { at: at(70) };
    assert!(
        !store
            .settle_notice(&id, "worker-a", &sent)
            .await
            .expect("settle"),
        "a lost lease records nothing"
    );
    assert!(
        store
            .settle_notice(&id, "worker-b", &sent)
            .await
            .expect("settle")
    );
    let notice = store.get_notice(&id).await.expect("get").expect("notice");
    assert_eq!(notice.status, NoticeStatus::Sent);
    assert_eq!((notice.attempts, notice.sent_at), (1, Some(at(70))));
    assert_eq!(
        store
            .lease_notices("worker-c", at(500), at(560), 10)
            .await
            .expect("lease"),
        vec![],
        "a sent notice is never due again"
    );
    assert_eq!(store.get_notice("no-such-id").await.expect("get"), None);
}

pub async fn failed_notices_come_due_again_and_dead_ones_wait_for_an_operator(store: SharedStore) {
    let first = one_notice(store.as_ref(), "k1", 0).await;
    let second = one_notice(store.as_ref(), "k2", 1).await;
    let leased = store
        .lease_notices("w", at(2), at(62), 10)
        .await
        .expect("lease");
    assert_eq!(
        ids(&leased),
        vec![first.clone(), second.clone()],
        "oldest due first"
    );
    let failed = NoticeWrite::Failed {
        error: "HTTP 503: busy".into(),
        next_at: at(100),
    };
    assert!(
        store
            .settle_notice(&first, "w", &failed)
            .await
            .expect("settle")
    );
    let dead = NoticeWrite::Dead {
        error: "HTTP 410: gone".into(),
        at: at(3),
    };
    assert!(
        store
            .settle_notice(&second, "w", &dead)
            .await
            .expect("settle")
    );

    let notice = store
        .get_notice(&first)
        .await
        .expect("get")
        .expect("notice");
    assert_eq!(notice.status, NoticeStatus::Failed);
    assert_eq!(notice.attempts, 1);
    assert_eq!(notice.last_error.as_deref(), Some("HTTP 503: busy"));
    assert_eq!(
        store
            .lease_notices("w", at(99), at(159), 10)
            .await
            .expect("lease"),
        vec![],
        "not due before its next time"
    );
    let again = store
        .lease_notices("w", at(100), at(160), 10)
        .await
        .expect("lease");
    assert_eq!(
        ids(&again),
        vec![first.clone()],
        "due again; the dead one is not"
    );

    let stats = store.outbox_stats().await.expect("stats");
    assert_eq!(
        (stats.pending, stats.failed, stats.dead, stats.sent),
        (0, 1, 1, 0)
    );
    assert_eq!(stats.oldest_undelivered, Some(at(0)));

    assert_eq!(
        store
            .retry_notices(&RetryNotices::AllDead, at(200))
            .await
            .expect("retry"),
        1
    );
    let retried = store
        .get_notice(&second)
        .await
        .expect("get")
        .expect("notice");
    assert_eq!(retried.status, NoticeStatus::Pending);
    assert_eq!((retried.next_at, retried.window_from), (at(200), at(200)));
    assert_eq!(retried.attempts, 1, "attempts are kept for the record");
    assert_eq!(
        store
            .retry_notices(&RetryNotices::One("no-such-id".into()), at(200))
            .await
            .expect("retry"),
        0
    );
    let sent = NoticeWrite::Sent { at: at(201) };
    let both = store
        .lease_notices("w2", at(200), at(260), 10)
        .await
        .expect("lease");
    assert_eq!(
        both.len(),
        2,
        "the failed one (its lease ran out) and the retried one"
    );
    for notice in &both {
        assert!(
            store
                .settle_notice(&notice.notice.id, "w2", &sent)
                .await
                .expect("settle")
        );
    }
    assert_eq!(
        store
            .retry_notices(&RetryNotices::One(first.clone()), at(300))
            .await
            .expect("retry"),
        0,
        "a sent notice is not sent again"
    );
    let stats = store.outbox_stats().await.expect("stats");
    assert_eq!(
        (stats.pending, stats.failed, stats.dead, stats.sent),
        (0, 0, 0, 2)
    );
    assert_eq!(stats.oldest_undelivered, None);
}

pub async fn notices_are_listed_newest_first_by_status_key_and_page(store: SharedStore) {
    let mut made = Vec::new();
    for i in 0..5u64 {
        made.push(one_notice(store.as_ref(), &format!("k{i}"), i).await);
    }
    let leased = store
        .lease_notices("w", at(10), at(70), 2)
        .await
        .expect("lease");
    assert_eq!(ids(&leased), made[..2].to_vec());
    let dead = NoticeWrite::Dead {
        error: "no".into(),
        at: at(11),
    };
    for id in &made[..2] {
        store.settle_notice(id, "w", &dead).await.expect("settle");
    }
    let page = |statuses: Vec<NoticeStatus>, limit: usize, before: Option<&OutboxNotice>| {
        let store = store.clone();
        let before = before.map(|n| (n.notice.created_at, n.notice.id.clone()));
        async move {
            store
                .list_notices(&NoticeQuery {
                    statuses,
                    limit,
                    before,
                    ..NoticeQuery::default()
                })
                .await
                .expect("list")
        }
    };
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    let first = page(vec![], 3, None).await;
    assert_eq!(ids(&first), newest_first[..3].to_vec());
    let rest = page(vec![], 3, first.last()).await;
    assert_eq!(ids(&rest), newest_first[3..].to_vec());
    let dead_ones = page(vec![NoticeStatus::Dead], 10, None).await;
    assert_eq!(ids(&dead_ones), vec![made[1].clone(), made[0].clone()]);
    let open = page(vec![NoticeStatus::Pending, NoticeStatus::Failed], 10, None).await;
    assert_eq!(open.len(), 3);
    let by_channel = store
        .list_notices(&NoticeQuery {
            channel: Some(NoticeChannel::Email),
            limit: 10,
            ..NoticeQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(by_channel, vec![]);
}

pub async fn a_disabled_endpoint_takes_notices_again_after_a_retry(store: SharedStore) {
    let id = one_notice(store.as_ref(), "k", 0).await;
    let gone = DisabledEndpoint {
        endpoint: "${HOOK_ALL}".into(),
        disabled_at: at(5),
        reason: "HTTP 410 Gone".into(),
    };
    store.disable_endpoint(&gone).await.expect("disable");
    store.disable_endpoint(&gone).await.expect("disable twice");
    assert_eq!(store.disabled_endpoints().await.expect("list"), vec![gone]);
    store
        .lease_notices("w", at(5), at(65), 1)
        .await
        .expect("lease");
    let dead = NoticeWrite::Dead {
        error: "endpoint disabled".into(),
        at: at(6),
    };
    store.settle_notice(&id, "w", &dead).await.expect("settle");
    assert_eq!(
        store
            .retry_notices(&RetryNotices::One(id.clone()), at(7))
            .await
            .expect("retry"),
        1
    );
    assert_eq!(
        store.disabled_endpoints().await.expect("list"),
        vec![],
        "retrying a notice to it enables the endpoint again"
    );
}

pub async fn workers_on_three_handles_lease_each_notice_once(handles: Vec<SharedStore>) {
    let first = handles[0].as_ref();
    let mut made = HashSet::new();
    for i in 0..24u64 {
        made.insert(one_notice(first, &format!("k{i}"), i).await);
    }
    let tasks: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(n, store)| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let owner = format!("worker-{n}");
                let mut mine = Vec::new();
                loop {
                    let leased = store
                        .lease_notices(&owner, at(100), at(160), 3)
                        .await
                        .expect("lease");
                    if leased.is_empty() {
                        return mine;
                    }
                    for notice in leased {
                        let sent = NoticeWrite::Sent { at: at(101) };
                        assert!(
                            store
                                .settle_notice(&notice.notice.id, &owner, &sent)
                                .await
                                .expect("settle"),
                            "its own lease"
                        );
                        mine.push(notice.notice.id);
                    }
                }
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.extend(task.await.expect("worker"));
    }
    let unique: HashSet<String> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), unique.len(), "no notice sent twice");
    assert_eq!(unique, made, "every notice sent");
}

/// `n` notices labelled with `lane`, created at 0, 1, ... (keys `{prefix}{i}`).
async fn laned(store: &dyn StateStore, prefix: &str, n: u64, lane: &str) -> Vec<String> {
    let mut made = Vec::new();
    for i in 0..n {
        made.push(one_notice(store, &format!("{prefix}{i}"), i).await);
    }
    let unlabelled = store.unlabelled_notices(1000).await.expect("unlabelled");
    let labels: Vec<(String, String)> = unlabelled
        .iter()
        .filter(|u| made.contains(&u.id))
        .map(|u| (u.id.clone(), lane.to_string()))
        .collect();
    assert_eq!(labels.len(), made.len(), "every new notice is unlabelled");
    store.label_notices(&labels).await.expect("label");
    made
}

fn lanes(per_lane: usize, total: usize) -> LaneLimits {
    LaneLimits { per_lane, total }
}

pub async fn lanes_lease_their_share_and_open_the_retry_window_at_the_first_lease(
    store: SharedStore,
) {
    let s = store.as_ref();
    let unlabelled = one_notice(s, "u", 0).await;
    let stuck = laned(s, "a", 6, "http://stuck.example:80").await;
    let healthy = laned(s, "b", 2, "https://ok.example:443").await;
    // A worker holding 4 of the stuck lane's notices leaves it no slot, and
    // the healthy lane's notices are leased beside them; an unlabelled
    // notice waits for its label.
    let first = s
        .lease_lane_notices("w1", at(1000), at(1060), lanes(4, 10))
        .await
        .expect("lease");
    let mut expected: Vec<String> = stuck[..4].iter().chain(&healthy).cloned().collect();
    expected.sort();
    let mut got = ids(&first);
    got.sort();
    assert_eq!(got, expected, "4 of the stuck lane, both healthy ones");
    assert!(!got.contains(&unlabelled));
    for notice in &first {
        assert_eq!(
            notice.window_from,
            at::<chrono::DateTime<chrono::Utc>>(1000),
            "a pending notice's retry window opens when it is first leased, not at its creation"
        );
    }
    let second = s
        .lease_lane_notices("w2", at(1001), at(1061), lanes(4, 10))
        .await
        .expect("lease");
    assert_eq!(second, vec![], "every slot of the stuck lane is held");
    let stats = s.lane_stats(at(1001)).await.expect("lane stats");
    let stuck_lane = stats
        .iter()
        .find(|l| l.endpoint == "http://stuck.example:80")
        .expect("the stuck lane");
    assert_eq!(
        (
            stuck_lane.channel,
            stuck_lane.waiting,
            stuck_lane.in_flight,
            stuck_lane.failing
        ),
        (NoticeChannel::Webhook, 2, 4, 0)
    );
    assert_eq!(stuck_lane.state(), "queued");
    assert_eq!(
        stuck_lane.oldest_waiting,
        Some(at(4)),
        "due since its creation"
    );
    // One send of the stuck lane fails: a slot frees and goes to the
    // lane's oldest due notice, whose window opens then.
    let failed = NoticeWrite::Failed {
        error: "HTTP 500".into(),
        next_at: at(1002),
    };
    assert!(
        s.settle_notice(&stuck[0], "w1", &failed)
            .await
            .expect("settle")
    );
    let third = s
        .lease_lane_notices("w2", at(1003), at(1063), lanes(4, 10))
        .await
        .expect("lease");
    assert_eq!(ids(&third), vec![stuck[4].clone()], "oldest due first");
    assert_eq!(
        third[0].window_from,
        at::<chrono::DateTime<chrono::Utc>>(1003)
    );
    let stats = s.lane_stats(at(1003)).await.expect("lane stats");
    let stuck_lane = stats
        .iter()
        .find(|l| l.endpoint == "http://stuck.example:80")
        .expect("the stuck lane");
    assert_eq!(
        (stuck_lane.failing, stuck_lane.in_flight, stuck_lane.state()),
        (1, 4, "failing")
    );
    // Three sends end: the failed notice is leased again, keeping the
    // window its first attempt opened.
    for id in &stuck[1..4] {
        let sent = NoticeWrite::Sent { at: at(1004) };
        assert!(s.settle_notice(id, "w1", &sent).await.expect("settle"));
    }
    let fourth = s
        .lease_lane_notices("w2", at(1005), at(1065), lanes(4, 10))
        .await
        .expect("lease");
    let mut got = ids(&fourth);
    got.sort();
    let mut expected = vec![stuck[0].clone(), stuck[5].clone()];
    expected.sort();
    assert_eq!(got, expected);
    let again = fourth
        .iter()
        .find(|n| n.notice.id == stuck[0])
        .expect("the failed notice");
    assert_eq!(
        (again.window_from, again.attempts),
        (at::<chrono::DateTime<chrono::Utc>>(1000), 1),
        "a failed notice keeps its window"
    );
    // A lane limit of 0 or a worker without a free slot leases nothing.
    assert_eq!(
        s.lease_lane_notices("w3", at(1100), at(1160), lanes(4, 0))
            .await
            .expect("lease"),
        vec![]
    );
}

pub async fn workers_on_three_handles_keep_a_lane_to_its_share(handles: Vec<SharedStore>) {
    let first = handles[0].as_ref();
    let made = laned(first, "k", 12, "http://one.example:80").await;
    // Three workers lease at once, none settling: the lane's share holds
    // across them.
    let tasks: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(n, store)| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let owner = format!("worker-{n}");
                // One at a time, many times: the leases of the three
                // handles interleave.
                let mut mine = Vec::new();
                for _ in 0..20 {
                    let leased = store
                        .lease_lane_notices(&owner, at(100), at(160), lanes(4, 1))
                        .await
                        .expect("lease");
                    mine.extend(ids(&leased));
                }
                mine
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.extend(task.await.expect("worker"));
    }
    let unique: HashSet<String> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), unique.len(), "no notice leased twice");
    assert_eq!(
        seen.len(),
        4,
        "the lane's share across every worker: {seen:?}"
    );
    assert!(unique.iter().all(|id| made.contains(id)));
}

/// A notice leased while its lane is held is put back untried: due at the
/// hold's end, its status, attempts, error and retry window as they were
/// (a pending one's window opens at the lease that sends it).
/// Routes to Slack (`#approvals`) and one webhook.
fn slack_and_a_hook() -> NoticeRoutes {
    NoticeRoutes {
        slack: Some("#approvals".into()),
        ..one_hook()
    }
}

pub async fn an_approvals_slack_notices_are_leased_one_at_a_time_in_order(store: SharedStore) {
    let s = store.as_ref();
    paused_routed(s, "k", 0, slack_and_a_hook(), |_| {}).await;
    paused_routed(s, "other", 1, slack_and_a_hook(), |_| {}).await;
    s.claim(&approve("k", "alice", 5)).await.expect("claim");
    let of = |notices: &[OutboxNotice], key: &str, channel: NoticeChannel| -> Vec<NoticeEvent> {
        let mut events: Vec<NoticeEvent> = notices
            .iter()
            .filter(|n| n.notice.key == key && n.notice.channel == channel)
            .map(|n| n.notice.event)
            .collect();
        events.sort_by_key(|e| e.as_str());
        events
    };
    let all = notices_of(s, "k").await;
    assert_eq!(
        of(&all, "k", NoticeChannel::Slack),
        vec![NoticeEvent::Approved, NoticeEvent::Requested],
        "the pause and the decision each wrote a Slack notice"
    );
    // Both of k's Slack notices are due, but the decision's waits for the
    // pause's: one message, posted before it is changed. The webhook's
    // go as they are due, and another approval's Slack notice is free.
    let first = s
        .lease_notices("w1", at(10), at(70), 10)
        .await
        .expect("lease");
    assert_eq!(
        of(&first, "k", NoticeChannel::Slack),
        vec![NoticeEvent::Requested]
    );
    assert_eq!(
        of(&first, "k", NoticeChannel::Webhook),
        vec![NoticeEvent::Approved, NoticeEvent::Requested]
    );
    assert_eq!(
        of(&first, "other", NoticeChannel::Slack),
        vec![NoticeEvent::Requested]
    );
    let requested = first
        .iter()
        .find(|n| n.notice.key == "k" && n.notice.channel == NoticeChannel::Slack)
        .expect("k's Slack request")
        .notice
        .id
        .clone();
    // Still waiting while the first is leased, and while it is failed and
    // due again later: a retry keeps the order.
    assert_eq!(
        s.lease_notices("w2", at(11), at(71), 10)
            .await
            .expect("lease"),
        vec![]
    );
    let failed = NoticeWrite::Failed {
        error: "Slack answered 500".into(),
        next_at: at(30),
    };
    assert!(
        s.settle_notice(&requested, "w1", &failed)
            .await
            .expect("settle")
    );
    assert_eq!(
        s.lease_notices("w2", at(20), at(80), 10)
            .await
            .expect("lease"),
        vec![],
        "the failed post is due at 30; the edit waits for it"
    );
    let again = s
        .lease_notices("w2", at(30), at(90), 10)
        .await
        .expect("lease");
    assert_eq!(
        ids(&again),
        vec![requested.clone()],
        "the post again, alone"
    );
    assert!(
        s.settle_notice(&requested, "w2", &NoticeWrite::Sent { at: at(31) })
            .await
            .expect("settle")
    );
    // Sent: the decision's notice is leased next, by lanes as well.
    let labels: Vec<(String, String)> = s
        .unlabelled_notices(100)
        .await
        .expect("unlabelled")
        .into_iter()
        .map(|u| (u.id, "slack-workspace".to_string()))
        .collect();
    s.label_notices(&labels).await.expect("label");
    let last = s
        .lease_lane_notices("w3", at(32), at(92), lanes(4, 10))
        .await
        .expect("lease");
    assert_eq!(
        of(&last, "k", NoticeChannel::Slack),
        vec![NoticeEvent::Approved]
    );
}

pub async fn a_postponed_notice_counts_no_attempt_and_keeps_its_window(store: SharedStore) {
    type Time = chrono::DateTime<chrono::Utc>;
    let s = store.as_ref();
    let id = laned(s, "held", 1, "slack.example:443").await.remove(0);
    let leased = s
        .lease_lane_notices("w1", at(1000), at(1060), lanes(4, 10))
        .await
        .expect("lease");
    assert_eq!(ids(&leased), vec![id.clone()]);
    let until = NoticeWrite::Postponed { next_at: at(1002) };
    assert!(
        !s.settle_notice(&id, "w2", &until).await.expect("settle"),
        "only the lease's owner puts it back"
    );
    assert!(s.settle_notice(&id, "w1", &until).await.expect("settle"));
    let notice = s.get_notice(&id).await.expect("get").expect("notice");
    assert_eq!(
        (
            notice.status,
            notice.attempts,
            notice.last_error.clone(),
            notice.next_at
        ),
        (NoticeStatus::Pending, 0, None, at(1002)),
        "untried, due at the hold's end"
    );
    assert_eq!(
        s.lease_lane_notices("w1", at(1001), at(1061), lanes(4, 10))
            .await
            .expect("lease"),
        vec![],
        "not due before the hold ends, and its lease was released"
    );
    let sent_at = s
        .lease_lane_notices("w2", at(1002), at(1062), lanes(4, 10))
        .await
        .expect("lease");
    assert_eq!(ids(&sent_at), vec![id.clone()]);
    assert_eq!(
        sent_at[0].window_from,
        at::<Time>(1002),
        "the window opens at the lease that sends it"
    );

    // A failed notice put back keeps its attempts, error and window.
    let failed = NoticeWrite::Failed {
        error: "Slack answered 429".into(),
        next_at: at(1005),
    };
    assert!(s.settle_notice(&id, "w2", &failed).await.expect("settle"));
    let again = s
        .lease_lane_notices("w1", at(1005), at(1065), lanes(4, 10))
        .await
        .expect("lease");
    assert_eq!(ids(&again), vec![id.clone()]);
    let until = NoticeWrite::Postponed { next_at: at(1010) };
    assert!(s.settle_notice(&id, "w1", &until).await.expect("settle"));
    let notice = s.get_notice(&id).await.expect("get").expect("notice");
    assert_eq!(
        (
            notice.status,
            notice.attempts,
            notice.last_error.as_deref(),
            notice.next_at,
            notice.window_from
        ),
        (
            NoticeStatus::Failed,
            1,
            Some("Slack answered 429"),
            at(1010),
            at::<Time>(1002)
        )
    );
}
