//! The read model that the API, the inbox, the CLI and `GET /metrics` read:
//! runs and pending approvals by page, approvals of any status (the inbox
//! and its history) filtered by status, step and text, counts, and decided
//! runs that never finished. Every listing is newest first, pages with a
//! cursor, and refuses a cursor it did not write.

use super::fixtures::*;
use super::prelude::*;

pub async fn pending_pages_are_newest_first_without_duplicates(store: SharedStore) {
    // Three records share each created_at, so the key breaks the tie.
    let mut expected = Vec::new();
    for i in 0..25u64 {
        let key = format!("key-{i:02}");
        paused_run(store.as_ref(), &key, "agent", i / 3).await;
        expected.push((i / 3, key));
    }
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = expected.into_iter().map(|(_, k)| k).collect();

    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_pending(&PendingQuery {
                agent_id: None,
                now: at(100),
                limit: 10,
                cursor: cursor.clone(),
            })
            .await
            .expect("page");
        sizes.push(page.approvals.len());
        seen.extend(keys(&page.approvals));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        25,
        "no duplicates"
    );
    assert_eq!(seen, expected, "newest first by (created_at, key)");
}

pub async fn pending_list_filters_by_agent(store: SharedStore) {
    paused_run(store.as_ref(), "a1", "alpha", 1).await;
    paused_run(store.as_ref(), "b1", "beta", 2).await;
    paused_run(store.as_ref(), "a2", "alpha", 3).await;
    assert_eq!(
        all_pending(store.as_ref(), 10, Some("alpha")).await,
        vec!["a2", "a1"]
    );
    assert_eq!(
        all_pending(store.as_ref(), 10, Some("beta")).await,
        vec!["b1"]
    );
    assert!(
        all_pending(store.as_ref(), 10, Some("gamma"))
            .await
            .is_empty()
    );
    assert_eq!(
        all_pending(store.as_ref(), 10, None).await,
        vec!["a2", "b1", "a1"]
    );

    // A cursor keeps the filter's order too.
    let first = store
        .list_pending(&PendingQuery {
            agent_id: Some("alpha".into()),
            now: at(10),
            limit: 1,
            cursor: None,
        })
        .await
        .expect("page 1");
    let second = store
        .list_pending(&PendingQuery {
            agent_id: Some("alpha".into()),
            now: at(10),
            limit: 1,
            cursor: first.next_cursor.clone(),
        })
        .await
        .expect("page 2");
    assert_eq!(
        (keys(&first.approvals), keys(&second.approvals)),
        (vec!["a2".into()], vec!["a1".into()])
    );
    assert_eq!(second.next_cursor, None);
}

/// What `GET /metrics` reads: one agent's unexpired PENDING records by
/// step; decided, expired and other agents' records are not counted.
pub async fn pending_approvals_are_counted_by_step(store: SharedStore) {
    let store = store.as_ref();
    paused_run(store, "a1", "alpha", 1).await;
    paused_run(store, "a2", "alpha", 2).await;
    store
        .claim(&approve("a2", "alice", 5))
        .await
        .expect("claim a2");
    paused_run(store, "a3", "alpha", 3).await;
    let run = run_record("run-r1", "alpha", 4);
    store
        .create_run(&run, &[event("run-r1", 1, 4, started(&run))])
        .await
        .expect("create run");
    let mut review = pending_record("r1", "run-r1", "alpha", 4);
    review.step_id = "review".into();
    review.step_index = 3;
    pause(store, &review, 2).await;
    paused_run(store, "b1", "beta", 5).await;

    let counts = |agent: &'static str, now: u64| async move {
        store
            .count_pending_by_step(agent, at(now))
            .await
            .expect("count pending")
            .into_iter()
            .collect::<Vec<(String, u64)>>()
    };
    let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    };
    assert_eq!(
        counts("alpha", 10).await,
        named(&[("refund", 2), ("review", 1)])
    );
    assert_eq!(counts("beta", 10).await, named(&[("refund", 1)]));
    assert_eq!(counts("gamma", 10).await, named(&[]));
    // a1 expires at 1 + TTL: past it, a1 is no longer counted.
    assert_eq!(
        counts("alpha", 1 + TTL).await,
        named(&[("refund", 1), ("review", 1)])
    );
}

pub async fn malformed_cursor_is_rejected(store: SharedStore) {
    let result = store
        .list_pending(&PendingQuery {
            agent_id: None,
            now: at(0),
            limit: 10,
            cursor: Some("not-a-cursor".into()),
        })
        .await;
    assert!(
        matches!(result, Err(StoreError::InvalidCursor(_))),
        "{result:?}"
    );
}

pub async fn stuck_lists_decided_runs_that_never_finished(store: SharedStore) {
    // Claimed, never ended: stuck.
    paused_run(store.as_ref(), "stuck", "alpha", 0).await;
    store
        .claim(&approve("stuck", "alice", 10))
        .await
        .expect("claim");
    // Claimed and ended: fine.
    paused_run(store.as_ref(), "done", "alpha", 0).await;
    store
        .claim(&approve("done", "alice", 11))
        .await
        .expect("claim");
    store
        .end_run(
            &RunEnd {
                run_id: "run-done".into(),
                status: RunStatus::Completed,
                outputs: Map::new(),
                error: None,
                at: at(12),
                owner: None,
            },
            &[],
        )
        .await
        .expect("end");
    // Still waiting: fine.
    paused_run(store.as_ref(), "waiting", "alpha", 0).await;
    // Claimed, then paused again at a later gate which was claimed too and
    // never finished: only the latest record is stuck.
    let first = paused_run(store.as_ref(), "twice-1", "beta", 0).await;
    store
        .claim(&approve("twice-1", "bob", 20))
        .await
        .expect("claim");
    let second = pending_record("twice-2", &first.run_id, "beta", 30);
    pause(store.as_ref(), &second, 4).await;
    store
        .claim(&approve("twice-2", "bob", 40))
        .await
        .expect("claim");
    // Claimed, then paused again and waiting: the run is not running.
    paused_run(store.as_ref(), "again-1", "beta", 0).await;
    store
        .claim(&approve("again-1", "bob", 20))
        .await
        .expect("claim");
    let again = pending_record("again-2", "run-again-1", "beta", 30);
    pause(store.as_ref(), &again, 4).await;

    let stuck = store.list_stuck(None, at(1_000)).await.expect("stuck");
    let found: Vec<(String, RunStatus)> = stuck
        .iter()
        .map(|s| (s.record.key.clone(), s.run_status))
        .collect();
    assert_eq!(
        found,
        vec![
            ("twice-2".into(), RunStatus::Running),
            ("stuck".into(), RunStatus::Running)
        ],
        "most recently decided first"
    );
    assert_eq!(Some(stuck[1].run_updated_at), Some(at(10)));
    assert_eq!(stuck[1].record.decided_by.as_deref(), Some("alice"));

    let alpha = store
        .list_stuck(Some("alpha"), at(1_000))
        .await
        .expect("stuck");
    assert_eq!(
        alpha
            .iter()
            .map(|s| s.record.key.as_str())
            .collect::<Vec<_>>(),
        ["stuck"]
    );
}

pub async fn runs_are_counted_by_status(store: SharedStore) {
    for (i, status) in [RunStatus::Stuck, RunStatus::Stuck, RunStatus::Failed]
        .into_iter()
        .enumerate()
    {
        let id = format!("r{i}");
        store
            .create_run(&run_record(&id, "agent", 0), &[])
            .await
            .expect("create");
        let end = RunEnd {
            run_id: id,
            status,
            outputs: Map::new(),
            error: Some("why".into()),
            at: at(1),
            owner: None,
        };
        store.end_run(&end, &[]).await.expect("end");
    }
    store
        .create_run(&run_record("elsewhere", "other", 0), &[])
        .await
        .expect("create");
    let count = |status| {
        let store = Arc::clone(&store);
        async move { store.count_runs("agent", status).await.expect("count") }
    };
    assert_eq!(count(RunStatus::Stuck).await, 2);
    assert_eq!(count(RunStatus::Failed).await, 1);
    assert_eq!(count(RunStatus::Running).await, 0);
    // All at once (GET /metrics): every status, in order, zeros included.
    let all = store
        .count_runs_by_status("agent")
        .await
        .expect("count all");
    let expected: Vec<(RunStatus, u64)> = RunStatus::ALL
        .iter()
        .map(|&s| {
            let n = match s {
                RunStatus::Stuck => 2,
                RunStatus::Failed => 1,
                _ => 0,
            };
            (s, n)
        })
        .collect();
    assert_eq!(all, expected);
    let other = store
        .count_runs_by_status("other")
        .await
        .expect("count other");
    assert_eq!(
        other.iter().filter(|(_, n)| *n > 0).collect::<Vec<_>>(),
        vec![&(RunStatus::Running, 1)]
    );
}

async fn listed(store: &dyn StateStore, query: RunQuery) -> Vec<String> {
    let mut ids = Vec::new();
    let mut query = query;
    loop {
        let page = store.list_runs(&query).await.expect("list runs");
        ids.extend(page.runs.iter().map(|r| r.id.clone()));
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return ids,
        }
    }
}

pub async fn runs_are_listed_newest_first_by_page_and_filtered_by_agent_and_status(
    store: SharedStore,
) {
    // Five running runs of "a" (two created in the same instant: the id
    // orders them), one of "b", and one of "a" waiting on an approval.
    for (id, agent, created) in [
        ("r1", "a", 10),
        ("r2", "a", 20),
        ("r3b", "a", 30),
        ("r3a", "a", 30),
        ("r4", "b", 40),
        ("r5", "a", 50),
    ] {
        let run = run_record(id, agent, created);
        store
            .create_run(&run, &[event(id, 1, created, started(&run))])
            .await
            .expect("create run");
    }
    paused_run(store.as_ref(), "k", "a", 60).await;
    let query = |agent: Option<&str>, status: Option<RunStatus>, limit: usize| RunQuery {
        agent_id: agent.map(str::to_string),
        status,
        limit,
        cursor: None,
        text: None,
    };
    let everything = vec!["run-k", "r5", "r4", "r3b", "r3a", "r2", "r1"];
    assert_eq!(
        listed(store.as_ref(), query(None, None, 2)).await,
        everything
    );
    assert_eq!(
        listed(store.as_ref(), query(None, None, 100)).await,
        everything
    );
    assert_eq!(
        listed(store.as_ref(), query(Some("a"), None, 3)).await,
        vec!["run-k", "r5", "r3b", "r3a", "r2", "r1"]
    );
    assert_eq!(
        listed(
            store.as_ref(),
            query(Some("a"), Some(RunStatus::AwaitingApproval), 1)
        )
        .await,
        vec!["run-k"]
    );
    assert_eq!(
        listed(store.as_ref(), query(None, Some(RunStatus::Cancelled), 10)).await,
        Vec::<String>::new()
    );
    let first = store
        .list_runs(&query(Some("a"), Some(RunStatus::Running), 2))
        .await
        .expect("page");
    assert_eq!(first.runs.len(), 2);
    assert_eq!(first.runs[0], run_record("r5", "a", 50), "every field");
    assert!(first.next_cursor.is_some());
    let last = store
        .list_runs(&query(Some("a"), Some(RunStatus::Running), 5))
        .await
        .expect("page");
    assert_eq!(last.runs.len(), 5);
    assert_eq!(last.next_cursor, None, "no cursor past the last page");
}

pub async fn a_malformed_runs_cursor_is_rejected(store: SharedStore) {
    let result = store
        .list_runs(&RunQuery {
            agent_id: None,
            status: None,
            limit: 10,
            cursor: Some("not-a-cursor".into()),
            text: None,
        })
        .await;
    assert!(
        matches!(result, Err(StoreError::InvalidCursor(_))),
        "{result:?}"
    );
}

/// Every status, no filter, one agent's or every agent's records at `now`.
/// The inbox's runs search (`RunQuery::text`): a case-insensitive
/// substring of the run id, the agent, the input (JSON text, quotes and
/// all), the trigger (who started it) or a gate's step id or message, with
/// LIKE's metacharacters matched literally; pages follow a cursor within
/// the matches.
pub async fn runs_are_searched_by_id_agent_input_trigger_and_their_gates(store: SharedStore) {
    let store = store.as_ref();
    let mut plain = run_record("run-plain", "desk", 1);
    plain.input = json!({"customer": "Ada \"The Countess\" Lovelace", "rate": "50%"}).into();
    plain.trigger = json!({"kind": "api", "started_by": "robot-7"});
    store.create_run(&plain, &[]).await.expect("create run");
    for (n, key) in ["g1", "g2", "g3"].iter().enumerate() {
        paused_with(store, key, "desk", 2 + n as u64, |r| {
            r.step_id = format!("review-{key}");
            r.message = Some(format!("Ship crate {key} to Oslo?"));
        })
        .await;
    }
    paused_run(store, "other", "elsewhere", 9).await;
    let search = |text: &str, limit: usize| RunQuery {
        agent_id: Some("desk".into()),
        status: None,
        limit,
        cursor: None,
        text: Some(text.into()),
    };
    let found = |text: &'static str| async move { listed(store, search(text, 10)).await };
    assert_eq!(found("RUN-PLAIN").await, ["run-plain"], "the id, any case");
    assert_eq!(
        found("the countess\"").await,
        ["run-plain"],
        "the input, quotes"
    );
    assert_eq!(found("50%").await, ["run-plain"], "% matched literally");
    assert!(found("5_%").await.is_empty(), "_ matched literally");
    assert_eq!(found("robot-7").await, ["run-plain"], "who started it");
    assert_eq!(found("review-g2").await, ["run-g2"], "a gate's step");
    assert_eq!(
        found("crate g3 to oslo").await,
        ["run-g3"],
        "a gate's message"
    );
    assert_eq!(
        found("oslo").await,
        ["run-g3", "run-g2", "run-g1"],
        "newest first"
    );
    assert_eq!(found("desk").await.len(), 4, "the agent");
    assert!(found("nowhere at all").await.is_empty());
    assert_eq!(found("  ").await.len(), 4, "blank filters nothing");
    // Another agent's run is never found, even by its own id.
    assert!(found("run-other").await.is_empty());
    // Pages of the matches, through the cursor.
    assert_eq!(
        listed(store, search("oslo", 2)).await,
        ["run-g3", "run-g2", "run-g1"]
    );
    let first = store.list_runs(&search("oslo", 2)).await.expect("page");
    assert_eq!(first.runs.len(), 2);
    assert!(first.next_cursor.is_some());
}

/// The inbox's text search (`text_in_context`) also reads the agent, the
/// run's input and its trigger (who started it), the last two as JSON
/// text: a quote in the text matches a quote in the input, and a settled
/// record is found the same way as a pending one. Without it (the API's
/// `q`), none of those is searched.
pub async fn approvals_are_searched_by_agent_input_and_who_started_them(store: SharedStore) {
    let s = store.as_ref();
    paused_with(s, "ada", "desk", 1, |r| {
        r.input = json!({"customer": "Ada \"The Countess\" Lovelace"}).into();
        r.trigger = json!({"kind": "api", "started_by": "robot-7"});
    })
    .await;
    paused_run(s, "plain", "desk", 2).await;
    paused_with(s, "done", "desk", 3, |r| {
        r.input = json!({"address": "7 Compiler Lane"}).into();
    })
    .await;
    s.claim(&approve("done", "alice", 5)).await.expect("claim");
    let search = |text: &'static str, in_context: bool| async move {
        listed_keys(
            s,
            ApprovalQuery {
                agent_id: Some("desk".into()),
                text: Some(text.into()),
                text_in_context: in_context,
                ..approvals_at(10)
            },
        )
        .await
    };
    let found = |text: &'static str| search(text, true);
    assert_eq!(found("the countess\"").await, ["ada"], "the input, quotes");
    assert_eq!(found("ROBOT-7").await, ["ada"], "who started it, any case");
    assert_eq!(found("compiler lane").await, ["done"], "a settled one");
    assert_eq!(found("DESK").await.len(), 3, "the agent");
    assert!(found("nowhere").await.is_empty());
    for text in ["the countess", "robot-7", "compiler lane", "desk"] {
        assert!(search(text, false).await.is_empty(), "{text}: not searched");
    }
}

fn approvals_at(now: u64) -> ApprovalQuery {
    ApprovalQuery {
        agent_id: None,
        statuses: Vec::new(),
        step_id: None,
        text: None,
        now: at(now),
        limit: 100,
        cursor: None,
        ..Default::default()
    }
}

/// Every page of `query`, as (key, status) in the order listed.
async fn approvals_listed(
    store: &dyn StateStore,
    query: ApprovalQuery,
) -> Vec<(String, ApprovalStatus)> {
    let mut query = query;
    let mut listed = Vec::new();
    loop {
        let page = store.list_approvals(&query).await.expect("list approvals");
        assert!(page.unreadable.is_empty(), "{:?}", page.unreadable);
        listed.extend(page.approvals.iter().map(|r| (r.key.clone(), r.status)));
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return listed,
        }
    }
}

async fn listed_keys(store: &dyn StateStore, query: ApprovalQuery) -> Vec<String> {
    approvals_listed(store, query)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

fn decide(key: &str, decision: Decision, by: &str, now: u64) -> Claim {
    claim(key, decision, by, now, SPEC)
}

pub async fn approvals_are_listed_newest_first_by_decision_else_creation(store: SharedStore) {
    use ApprovalStatus::*;
    let s = store.as_ref();
    paused_run(s, "p1", "agent", 10).await;
    paused_run(s, "d1", "agent", 1).await;
    s.claim(&approve("d1", "alice", 20))
        .await
        .expect("approve d1");
    paused_run(s, "d2", "agent", 5).await;
    let reject = Decision::Reject {
        reason: Some("no".into()),
    };
    s.claim(&decide("d2", reject, "bob", 15))
        .await
        .expect("reject d2");
    paused_run(s, "p2", "agent", 12).await;
    // Expired by the sweep at 3: listed by its created_at (no decided_at).
    paused_with(s, "x1", "agent", 0, |r| r.expires_at = at(2)).await;
    assert_eq!(keys(&s.expire_due(at(3)).await.expect("sweep")), vec!["x1"]);
    paused_run(s, "c1", "agent", 3).await;
    s.cancel_run(&cancel("run-c1", "carol", 18))
        .await
        .expect("cancel c1");

    let expected: Vec<(String, ApprovalStatus)> = [
        ("d1", Approved),
        ("c1", Cancelled),
        ("d2", Rejected),
        ("p2", Pending),
        ("p1", Pending),
        ("x1", Expired),
    ]
    .into_iter()
    .map(|(k, st)| (k.to_string(), st))
    .collect();
    assert_eq!(approvals_listed(s, approvals_at(100)).await, expected);

    // The records come back whole, as get_approval reads them.
    let page = s.list_approvals(&approvals_at(100)).await.expect("list");
    for record in &page.approvals {
        let stored = s
            .get_approval(&record.key)
            .await
            .expect("get")
            .expect("record");
        assert_eq!(record, &stored);
    }
}

pub async fn approval_pages_follow_a_cursor_across_equal_times(store: SharedStore) {
    let s = store.as_ref();
    // 25 records created in one instant; the odd ones decided in three
    // instants: every order time is shared, so the key breaks the ties.
    let mut expected = Vec::new();
    for i in 0..25u64 {
        let key = format!("key-{i:02}");
        paused_run(s, &key, "agent", 0).await;
        let order = if i % 2 == 1 {
            let when = 40 + i % 3;
            s.claim(&approve(&key, "alice", when))
                .await
                .expect("approve");
            when
        } else {
            0
        };
        expected.push((order, key));
    }
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = expected.into_iter().map(|(_, k)| k).collect();

    let mut query = ApprovalQuery {
        limit: 10,
        ..approvals_at(100)
    };
    let (mut seen, mut sizes) = (Vec::new(), Vec::new());
    loop {
        let page = s.list_approvals(&query).await.expect("page");
        sizes.push(page.approvals.len());
        seen.extend(keys(&page.approvals));
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        25,
        "no duplicates"
    );
    assert_eq!(
        seen, expected,
        "newest first by (decided_at else created_at, key)"
    );

    // Paging one status keeps its order too: the decided ones, four a page.
    let approved: Vec<String> = expected
        .iter()
        .filter(|k| k[4..].parse::<u64>().is_ok_and(|i| i % 2 == 1))
        .cloned()
        .collect();
    let query = ApprovalQuery {
        statuses: vec![ApprovalStatus::Approved],
        limit: 4,
        ..approvals_at(100)
    };
    assert_eq!(listed_keys(s, query).await, approved);
    // And the pending ones, through the same cursor form.
    let pending: Vec<String> = expected
        .iter()
        .filter(|k| !approved.contains(k))
        .cloned()
        .collect();
    let query = ApprovalQuery {
        statuses: vec![ApprovalStatus::Pending],
        limit: 3,
        ..approvals_at(100)
    };
    assert_eq!(listed_keys(s, query).await, pending);
}

/// Five records: alpha (pending, refund), bravo (approved by alice),
/// charlie (rejected by bob, review), delta (pending, review, mentions
/// Carol), echo (modified by carol, no message). Listed e, c, b, d, a.
async fn five_records(s: &dyn StateStore) {
    paused_with(s, "k-alpha", "agent", 1, |_| {}).await;
    paused_with(s, "k-bravo", "agent", 2, |r| {
        r.message = Some("Refund 99 EUR to c-2?".into());
    })
    .await;
    s.claim(&approve("k-bravo", "alice", 10))
        .await
        .expect("approve");
    paused_with(s, "k-charlie", "agent", 3, |r| {
        r.step_id = "review".into();
        r.message = Some("Review the wording".into());
    })
    .await;
    let reject = Decision::Reject {
        reason: Some("tone".into()),
    };
    s.claim(&decide("k-charlie", reject, "bob", 11))
        .await
        .expect("reject");
    paused_with(s, "k-delta", "agent", 4, |r| {
        r.step_id = "review".into();
        r.message = Some("Escalate to Carol".into());
    })
    .await;
    paused_with(s, "k-echo", "agent", 5, |r| r.message = None).await;
    let modify = Decision::Modify {
        payload: json!({"amount": 10}),
        reason: None,
    };
    s.claim(&decide("k-echo", modify, "carol", 12))
        .await
        .expect("modify");
}

pub async fn approvals_filter_by_status_step_and_text_alone_and_combined(store: SharedStore) {
    use ApprovalStatus::*;
    let s = store.as_ref();
    five_records(s).await;
    let q = |statuses: Vec<ApprovalStatus>, step: Option<&str>, text: Option<&str>| ApprovalQuery {
        statuses,
        step_id: step.map(str::to_string),
        text: text.map(str::to_string),
        ..approvals_at(100)
    };
    let list = |query: ApprovalQuery| async move { listed_keys(s, query).await };
    let ks = |names: &[&str]| -> Vec<String> { names.iter().map(|n| format!("k-{n}")).collect() };

    // Statuses: none given lists every one; each alone; several.
    assert_eq!(
        list(q(vec![], None, None)).await,
        ks(&["echo", "charlie", "bravo", "delta", "alpha"])
    );
    assert_eq!(
        list(q(vec![Pending], None, None)).await,
        ks(&["delta", "alpha"])
    );
    assert_eq!(list(q(vec![Approved], None, None)).await, ks(&["bravo"]));
    assert_eq!(list(q(vec![Rejected], None, None)).await, ks(&["charlie"]));
    assert_eq!(list(q(vec![Modified], None, None)).await, ks(&["echo"]));
    assert!(
        list(q(vec![Expired, Cancelled], None, None))
            .await
            .is_empty()
    );
    assert_eq!(
        list(q(vec![Rejected, Modified, Pending], None, None)).await,
        ks(&["echo", "charlie", "delta", "alpha"])
    );

    // The step alone.
    assert_eq!(
        list(q(vec![], Some("review"), None)).await,
        ks(&["charlie", "delta"])
    );
    assert_eq!(
        list(q(vec![], Some("refund"), None)).await,
        ks(&["echo", "bravo", "alpha"])
    );
    assert!(
        list(q(vec![], Some("revie"), None)).await.is_empty(),
        "a step is matched whole"
    );

    // The text alone, case-insensitive, in each searched field: the
    // message, the step id, the key, the run id, decided_by.
    assert_eq!(
        list(q(vec![], None, Some("eur"))).await,
        ks(&["bravo", "alpha"])
    );
    assert_eq!(
        list(q(vec![], None, Some("CAROL"))).await,
        ks(&["echo", "delta"])
    );
    assert_eq!(
        list(q(vec![], None, Some("REVIEW"))).await,
        ks(&["charlie", "delta"])
    );
    assert_eq!(list(q(vec![], None, Some("k-del"))).await, ks(&["delta"]));
    assert_eq!(
        list(q(vec![], None, Some("run-k-ch"))).await,
        ks(&["charlie"])
    );
    assert_eq!(list(q(vec![], None, Some("Alice"))).await, ks(&["bravo"]));
    assert!(list(q(vec![], None, Some("nowhere"))).await.is_empty());
    // An empty text filters nothing.
    assert_eq!(list(q(vec![], None, Some(""))).await.len(), 5);

    // Combined: every filter applies.
    assert_eq!(
        list(q(vec![Pending], Some("review"), Some("carol"))).await,
        ks(&["delta"])
    );
    assert_eq!(
        list(q(vec![Pending], None, Some("eur"))).await,
        ks(&["alpha"])
    );
    assert_eq!(
        list(q(vec![], Some("refund"), Some("alice"))).await,
        ks(&["bravo"])
    );
    assert!(list(q(vec![Rejected], None, Some("eur"))).await.is_empty());
    assert!(
        list(q(vec![Approved], Some("review"), None))
            .await
            .is_empty()
    );
}

pub async fn an_overdue_pending_approval_is_listed_as_expired(store: SharedStore) {
    use ApprovalStatus::*;
    let s = store.as_ref();
    paused_run(s, "due", "agent", 0).await;
    paused_run(s, "fresh", "agent", 100).await;
    let q = |statuses: Vec<ApprovalStatus>, now: u64| ApprovalQuery {
        statuses,
        ..approvals_at(now)
    };
    let pair = |k: &str, st| (k.to_string(), st);

    // Before its expiry: PENDING.
    assert_eq!(
        approvals_listed(s, q(vec![Pending], TTL - 1)).await,
        vec![pair("fresh", Pending), pair("due", Pending)]
    );
    // Past it, not yet swept: EXPIRED, for the listing and for its filter.
    let now = TTL + 1;
    for round in ["unswept", "swept"] {
        assert_eq!(
            approvals_listed(s, q(vec![Pending], now)).await,
            vec![pair("fresh", Pending)],
            "{round}"
        );
        assert_eq!(
            approvals_listed(s, q(vec![Expired], now)).await,
            vec![pair("due", Expired)],
            "{round}"
        );
        assert_eq!(
            approvals_listed(s, q(vec![], now)).await,
            vec![pair("fresh", Pending), pair("due", Expired)],
            "{round}"
        );
        assert_eq!(
            approvals_listed(s, q(vec![Pending, Expired], now)).await,
            vec![pair("fresh", Pending), pair("due", Expired)],
            "{round}"
        );
        assert!(
            approvals_listed(s, q(vec![Approved, Rejected, Modified, Cancelled], now))
                .await
                .is_empty(),
            "{round}"
        );
        // The other filters apply to it as to any record.
        let query = ApprovalQuery {
            text: Some("RUN-DUE".into()),
            step_id: Some("refund".into()),
            ..q(vec![Expired], now)
        };
        assert_eq!(
            approvals_listed(s, query).await,
            vec![pair("due", Expired)],
            "{round}"
        );
        s.expire_due(at(now)).await.expect("sweep");
    }
}

pub async fn like_metacharacters_in_the_text_are_matched_literally(store: SharedStore) {
    let s = store.as_ref();
    // Keys and run ids ("run-k-N") and the step ("refund") hold none of
    // the needles below but the ones noted.
    let messages = [
        ("k-1", "50% off"),
        ("k-2", "500 off"),
        ("k-3", "a_b"),
        ("k-4", "axb"),
        ("k-5", "back\\slash"),
        ("k-6", "backslash"),
        ("k-7", "a\tb"),
        ("k-8", "tip"),
        ("k-9", "nul\u{0}here"),
        ("k-10", "say \" here"),
    ];
    for (i, (key, message)) in messages.iter().enumerate() {
        paused_with(s, key, "agent", i as u64, |r| {
            r.message = Some(message.to_string())
        })
        .await;
    }
    let find = |text: &str| {
        let query = ApprovalQuery {
            text: Some(text.to_string()),
            ..approvals_at(100)
        };
        async move { listed_keys(s, query).await }
    };
    assert_eq!(find("50%").await, vec!["k-1"]);
    assert_eq!(find("%").await, vec!["k-1"]);
    assert_eq!(find("a_b").await, vec!["k-3"]);
    assert_eq!(find("_").await, vec!["k-3"]);
    assert_eq!(find("\\").await, vec!["k-5"]);
    assert_eq!(find("k\\s").await, vec!["k-5"]);
    assert_eq!(find("AXB").await, vec!["k-4"]);
    // A control character is text like any other, and the letters of its
    // escape in stored JSON (`\t`) are not in the message.
    assert_eq!(find("\t").await, vec!["k-7"]);
    assert_eq!(find("t").await, vec!["k-8"]);
    assert_eq!(find("\"").await, vec!["k-10"]);
    // A NUL is kept and matched, and never skipped over.
    assert_eq!(find("\u{0}h").await, vec!["k-9"]);
    assert_eq!(find("here").await, vec!["k-10", "k-9"]);
    assert!(find("lh").await.is_empty());
    // SQL quoting in the needle is only text.
    assert!(find("' OR '1'='1").await.is_empty());
}

pub async fn a_text_filter_fills_its_pages_past_rows_only_its_sql_let_through(store: SharedStore) {
    let s = store.as_ref();
    // Three real matches, oldest; newer rows that a store's SQL may let
    // through for these needles (a tab escaped `\t` in JSON, a NUL a SQL
    // LIKE ignores) but that do not hold them.
    for i in 0..3u64 {
        paused_with(s, &format!("k-{i}"), "agent", i, |r| {
            r.message = Some("taby".into());
        })
        .await;
    }
    for i in 3..8u64 {
        paused_with(s, &format!("k-{i}"), "agent", i, |r| {
            r.message = Some("x\ty".into());
        })
        .await;
    }
    for i in 8..13u64 {
        paused_with(s, &format!("k-{i}"), "agent", i, |r| {
            r.message = Some("a\u{0}b".into());
        })
        .await;
    }
    for needle in ["t", "ab"] {
        let mut query = ApprovalQuery {
            text: Some(needle.into()),
            limit: 2,
            ..approvals_at(100)
        };
        let mut pages = Vec::new();
        loop {
            let page = s.list_approvals(&query).await.expect("page");
            pages.push(keys(&page.approvals));
            match page.next_cursor {
                Some(next) => query.cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(
            pages,
            vec![vec!["k-2".to_string(), "k-1".into()], vec!["k-0".into()]],
            "{needle:?}"
        );
    }
}

pub async fn another_agents_approvals_are_not_listed(store: SharedStore) {
    let s = store.as_ref();
    paused_run(s, "a1", "alpha", 1).await;
    paused_run(s, "b1", "beta", 2).await;
    paused_run(s, "a2", "alpha", 3).await;
    paused_run(s, "b2", "beta", 4).await;
    s.claim(&approve("a1", "alice", 5))
        .await
        .expect("approve a1");
    s.claim(&approve("b1", "alice", 6))
        .await
        .expect("approve b1");
    let of = |agent: Option<&str>, statuses: Vec<ApprovalStatus>| ApprovalQuery {
        agent_id: agent.map(str::to_string),
        statuses,
        limit: 1,
        ..approvals_at(100)
    };
    assert_eq!(
        listed_keys(s, of(Some("alpha"), vec![])).await,
        vec!["a1", "a2"]
    );
    assert_eq!(
        listed_keys(s, of(Some("beta"), vec![])).await,
        vec!["b1", "b2"]
    );
    assert_eq!(
        listed_keys(s, of(Some("alpha"), vec![ApprovalStatus::Pending])).await,
        vec!["a2"]
    );
    assert_eq!(
        listed_keys(s, of(Some("beta"), vec![ApprovalStatus::Approved])).await,
        vec!["b1"]
    );
    assert!(listed_keys(s, of(Some("gamma"), vec![])).await.is_empty());
    assert_eq!(
        listed_keys(s, of(None, vec![])).await,
        vec!["b1", "a1", "b2", "a2"]
    );
    // The text filter never reaches another agent's records.
    let query = ApprovalQuery {
        text: Some("b".into()),
        ..of(Some("alpha"), vec![])
    };
    assert!(listed_keys(s, query).await.is_empty());
}

pub async fn a_malformed_approvals_cursor_is_rejected(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    for bad in ["not-a-cursor", "2026-03-01T09:00:00Z|", "yesterday|k", "|k"] {
        let query = ApprovalQuery {
            cursor: Some(bad.into()),
            ..approvals_at(10)
        };
        match store.list_approvals(&query).await {
            Err(e @ StoreError::InvalidCursor(_)) => {
                assert!(e.to_string().contains("malformed cursor"), "{e}");
                assert!(e.to_string().contains(bad), "{e}");
            }
            other => panic!("{bad:?}: expected InvalidCursor, got {other:?}"),
        }
    }
}

/// A third version whose hash shares its first 8 characters with
/// `OTHER_SPEC`'s: a prefix of 8 names both, one of 9 only `OTHER_SPEC`.
const THIRD_SPEC: &str = "bbbbbbbbcccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// Records on three versions, `SPEC` being the served one: c1, c2 on
/// `SPEC`; o1, o2 (o2 rejected) on `OTHER_SPEC`; t1 on `THIRD_SPEC`; x1
/// of another agent on `OTHER_SPEC`. Listed newest first.
async fn on_three_versions(store: &dyn StateStore) {
    let on = |hash: &'static str| move |r: &mut ApprovalRecord| r.spec_hash = hash.into();
    paused_with(store, "c1", "alpha", 1, on(SPEC)).await;
    paused_with(store, "o1", "alpha", 2, on(OTHER_SPEC)).await;
    paused_with(store, "t1", "alpha", 3, on(THIRD_SPEC)).await;
    paused_with(store, "c2", "alpha", 4, on(SPEC)).await;
    paused_with(store, "o2", "alpha", 5, on(OTHER_SPEC)).await;
    paused_with(store, "x1", "beta", 6, on(OTHER_SPEC)).await;
    // A reject is allowed under another spec: o2 is settled, on OTHER_SPEC.
    store
        .claim(&claim(
            "o2",
            Decision::Reject { reason: None },
            "bob",
            7,
            SPEC,
        ))
        .await
        .expect("reject o2");
}

pub async fn approvals_filter_by_spec_version_current_stale_and_hash(store: SharedStore) {
    let s = store.as_ref();
    on_three_versions(s).await;
    let q = |spec: SpecFilter, statuses: Vec<ApprovalStatus>| ApprovalQuery {
        agent_id: Some("alpha".into()),
        statuses,
        spec: Some(spec),
        ..approvals_at(10)
    };
    let pending = || vec![ApprovalStatus::Pending];
    let ks = |names: &[&str]| -> Vec<String> { names.iter().map(|n| n.to_string()).collect() };

    // Current: the served hash exactly; stale: every other one.
    assert_eq!(
        listed_keys(s, q(SpecFilter::Is(SPEC.into()), pending())).await,
        ks(&["c2", "c1"])
    );
    assert_eq!(
        listed_keys(s, q(SpecFilter::IsNot(SPEC.into()), pending())).await,
        ks(&["t1", "o1"])
    );
    // With every status, the settled record on an older version too.
    assert_eq!(
        listed_keys(s, q(SpecFilter::IsNot(SPEC.into()), Vec::new())).await,
        ks(&["o2", "t1", "o1"])
    );
    // A full hash, and prefixes: 8 characters name both b-versions, 9 one.
    assert_eq!(
        listed_keys(s, q(SpecFilter::Is(OTHER_SPEC.into()), Vec::new())).await,
        ks(&["o2", "o1"])
    );
    assert_eq!(
        listed_keys(s, q(SpecFilter::Prefix("bbbbbbbb".into()), pending())).await,
        ks(&["t1", "o1"])
    );
    assert_eq!(
        listed_keys(s, q(SpecFilter::Prefix("bbbbbbbbb".into()), pending())).await,
        ks(&["o1"])
    );
    assert!(
        listed_keys(s, q(SpecFilter::Prefix("cccccccc".into()), Vec::new()))
            .await
            .is_empty()
    );
    // With the step and text filters, and page by page (a cursor keeps it).
    let narrowed = ApprovalQuery {
        step_id: Some("refund".into()),
        text: Some("REFUND".into()),
        limit: 1,
        ..q(SpecFilter::IsNot(SPEC.into()), pending())
    };
    assert_eq!(listed_keys(s, narrowed).await, ks(&["t1", "o1"]));
    let other_step = ApprovalQuery {
        step_id: Some("review".into()),
        ..q(SpecFilter::IsNot(SPEC.into()), pending())
    };
    assert!(listed_keys(s, other_step).await.is_empty());
    // Every agent: the other agent's stale record too.
    let everyone = ApprovalQuery {
        agent_id: None,
        ..q(SpecFilter::IsNot(SPEC.into()), pending())
    };
    assert_eq!(listed_keys(s, everyone).await, ks(&["x1", "t1", "o1"]));
    // An overdue record past its TTL is listed as EXPIRED, filtered the same.
    assert_eq!(
        approvals_listed(
            s,
            ApprovalQuery {
                statuses: vec![ApprovalStatus::Expired],
                now: at(2 + TTL),
                ..q(SpecFilter::IsNot(SPEC.into()), Vec::new())
            }
        )
        .await,
        vec![("o1".to_string(), ApprovalStatus::Expired)]
    );
}

pub async fn pending_approvals_are_counted_by_spec_version(store: SharedStore) {
    let s = store.as_ref();
    on_three_versions(s).await;
    let counts = |agent: &'static str, now: u64| async move {
        s.count_pending_by_spec(agent, at(now))
            .await
            .expect("count pending by spec")
            .into_iter()
            .collect::<Vec<(String, u64)>>()
    };
    let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(h, n)| (h.to_string(), *n)).collect()
    };
    // o2 is decided: not counted; x1 is another agent's.
    assert_eq!(
        counts("alpha", 10).await,
        named(&[(SPEC, 2), (OTHER_SPEC, 1), (THIRD_SPEC, 1)])
    );
    assert_eq!(counts("beta", 10).await, named(&[(OTHER_SPEC, 1)]));
    assert_eq!(counts("gamma", 10).await, named(&[]));
    // Past the expiry of c1 and o1 (created at 1 and 2), they are not.
    assert_eq!(
        counts("alpha", 2 + TTL).await,
        named(&[(SPEC, 1), (THIRD_SPEC, 1)])
    );
}
