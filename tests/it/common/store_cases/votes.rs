//! Votes (DESIGN §13): the roster a gate with rules pauses with, the
//! ledger of votes on it, and the vote that settles it: one transaction
//! per vote, serialised with claims, cancels and the other votes of its
//! key, so a gate is settled once however many voters vote at once.

use super::fixtures::*;
use super::prelude::*;
use tollgate_runtime::policy::{
    Channel, GatePolicy, Groups, Roster, RuleSpec, Vote, VoteChoice, VoteDecision, payload_digest,
};
use tollgate_runtime::store::{CastVote, VoteOutcome};

/// What `bob` edits the payload to in the modify cases.
fn edit() -> serde_json::Value {
    json!({"amount": 25, "currency": "EUR"})
}

/// finance: at least 2 of alice, bob, carol; security: dave. The run was
/// started by `requesters`.
pub(super) fn finance_and_security(requesters: &[&str]) -> Roster {
    let groups: Groups = [
        ("finance", vec!["alice", "bob", "carol"]),
        ("security", vec!["dave"]),
    ]
    .into_iter()
    .map(|(name, members)| {
        (
            name.to_string(),
            members.into_iter().map(String::from).collect(),
        )
    })
    .collect();
    let policy = GatePolicy {
        rules: vec![
            RuleSpec {
                group: "finance".into(),
                min: 2,
            },
            RuleSpec {
                group: "security".into(),
                min: 1,
            },
        ],
        ..GatePolicy::plain()
    };
    Roster::resolve(
        &policy,
        &groups,
        requesters.iter().map(|r| r.to_string()).collect(),
    )
    .expect("a roster its members can meet")
}

/// A run paused at `key` with `roster`, started by "rita".
pub(super) async fn paused_with_roster(
    store: &dyn StateStore,
    key: &str,
    roster: Roster,
) -> ApprovalRecord {
    paused_with(store, key, "agent", 0, |r| r.roster = Some(roster)).await
}

/// `voter`'s vote on `record` as it is stored now, at `now`: on the payload
/// the gate asks about, its claim planned as the settlement the vote would
/// make (a reject with a reason; approving an edited payload settles it
/// MODIFIED with the edit; bob's modify is [`edit`]).
pub(super) fn vote_on(
    record: &ApprovalRecord,
    voter: &str,
    decision: VoteDecision,
    now: u64,
) -> CastVote {
    let reason = (decision == VoteDecision::Reject).then(|| format!("{voter} says no"));
    let revised = record
        .roster
        .as_ref()
        .and_then(|r| r.revised_payload.clone());
    let (payload, planned) = match decision {
        VoteDecision::Approve => match revised {
            Some(payload) => (
                None,
                Decision::Modify {
                    payload,
                    reason: reason.clone(),
                },
            ),
            None => (
                None,
                Decision::Approve {
                    reason: reason.clone(),
                },
            ),
        },
        VoteDecision::Reject => (
            None,
            Decision::Reject {
                reason: reason.clone(),
            },
        ),
        VoteDecision::Modify => (
            Some(edit()),
            Decision::Modify {
                payload: edit(),
                reason: reason.clone(),
            },
        ),
    };
    CastVote {
        claim: claim(&record.key, planned, voter, now, SPEC),
        choice: VoteChoice {
            decision,
            reason,
            payload,
            channel: Channel::Api,
            payload_digest: record.payload_digest(),
        },
    }
}

/// Read `key` and cast `voter`'s vote on it at `now`.
async fn vote(
    store: &dyn StateStore,
    key: &str,
    voter: &str,
    decision: VoteDecision,
    now: u64,
) -> Result<VoteOutcome, StoreError> {
    let record = store.get_approval(key).await.expect("get").expect("record");
    store
        .cast_vote(&vote_on(&record, voter, decision, now))
        .await
}

fn refusal(result: Result<VoteOutcome, StoreError>) -> ApprovalError {
    match result {
        Err(StoreError::Approval(e)) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn recorded(result: Result<VoteOutcome, StoreError>) -> (Vote, String, Event) {
    match result {
        Ok(VoteOutcome::Recorded { vote, tally, event }) => (vote, tally.summary(), event),
        other => panic!("expected a recorded vote, got {other:?}"),
    }
}

fn settled(
    result: Result<VoteOutcome, StoreError>,
) -> (Vote, Option<Event>, ApprovalRecord, Event) {
    match result {
        Ok(VoteOutcome::Settled {
            vote,
            vote_event,
            claimed,
        }) => (vote, vote_event, claimed.record, claimed.event),
        other => panic!("expected the settling vote, got {other:?}"),
    }
}

fn event_names(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

pub async fn a_pause_keeps_its_roster(store: SharedStore) {
    let mut roster = finance_and_security(&["rita"]);
    roster.revised_payload = Some(json!({"kept": ["as", "written"], "ünï": "✓"}));
    let record = paused_with_roster(store.as_ref(), "k", roster.clone()).await;
    let stored = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(stored, record, "every field, the roster included");
    assert_eq!(stored.roster.as_ref(), Some(&roster));
    let pending = store
        .pending_for_run("run-k", at(1))
        .await
        .expect("pending")
        .expect("record");
    assert_eq!(pending, record);

    // A run stored at its first pause (as the gate API's request is).
    let run = run_record("run-first", "agent", 0);
    let mut first = pending_record("first", "run-first", "agent", 0);
    first.roster = Some(roster);
    let pause = Pause {
        record: first.clone(),
        at: at(0),
        owner: None,
        routes: Default::default(),
    };
    store
        .create_run_at(
            &run,
            FirstWrite::Pause(&pause),
            &[event("run-first", 1, 0, started(&run))],
        )
        .await
        .expect("create at pause");
    let stored = store
        .get_approval("first")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(stored, first);

    let plain = paused_run(store.as_ref(), "plain", "agent", 0).await;
    let stored = store
        .get_approval("plain")
        .await
        .expect("get")
        .expect("record");
    assert_eq!((stored.roster, plain.roster), (None, None));
}

pub async fn a_plain_gates_vote_settles_it_at_once_as_a_claim_would(store: SharedStore) {
    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    paused_run(store.as_ref(), "twin", "agent", 0).await;
    let cast = vote_on(&record, "alice", VoteDecision::Approve, 10);
    let (entry, vote_event, decided, resolved) = settled(store.cast_vote(&cast).await);
    assert_eq!(entry, cast.ballot().to_vote(1, None), "seq 1, no rule");
    assert_eq!(
        vote_event, None,
        "a plain gate's decision is its approval_resolved alone"
    );
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("alice"));
    assert_eq!(store.votes("k").await.expect("votes"), vec![entry]);

    // The same events, run and record as the claim it replaces.
    let claimed = store
        .claim(&Claim {
            input: None,
            key: "twin".into(),
            ..cast.claim.clone()
        })
        .await
        .expect("claim the twin");
    let events = store.run_events("run-k", 0).await.expect("events");
    let twin = store.run_events("run-twin", 0).await.expect("events");
    assert_eq!(events.last(), Some(&resolved));
    assert_eq!(event_names(&events), event_names(&twin));
    assert_eq!(
        resolved.kind,
        EventKind::ApprovalResolved {
            key: "k".into(),
            decision: "approve".into(),
            decided_by: "alice".into(),
            reason: None,
            input: None,
            pinned_to: None,
        }
    );
    assert_eq!(resolved.seq, claimed.event.seq);
    assert_eq!(
        decided,
        ApprovalRecord {
            key: "k".into(),
            run_id: "run-k".into(),
            ..claimed.record
        }
    );
    let run = store.get_run("run-k").await.expect("run").expect("stored");
    assert_eq!(run.status, RunStatus::Running);

    let again = refusal(vote(store.as_ref(), "k", "bob", VoteDecision::Approve, 11).await);
    assert_eq!(again.code(), "already_resolved", "{again}");
    assert_eq!(store.votes("k").await.expect("votes").len(), 1);
}

pub async fn two_of_finance_and_one_of_security_settle_with_the_third_vote_then_refuse(
    store: SharedStore,
) {
    paused_with_roster(store.as_ref(), "k", finance_and_security(&["rita"])).await;
    let (first, progress, event) =
        recorded(vote(store.as_ref(), "k", "alice", VoteDecision::Approve, 10).await);
    assert_eq!((first.seq, first.rule.as_deref()), (1, Some("finance")));
    assert_eq!(progress, "finance 1 of 2; security 0 of 1");
    assert_eq!((event.seq, event.at), (3, at(10)));
    assert_eq!(
        event.kind,
        EventKind::ApprovalVote {
            key: "k".into(),
            voter: "alice".into(),
            decision: VoteDecision::Approve,
            rule: Some("finance".into()),
            reason: None,
            channel: Channel::Api,
            payload_digest: first.payload_digest.clone(),
            input: None,
            supersedes: false,
            progress: "finance 1 of 2; security 0 of 1".into(),
        }
    );
    let pending = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(
        pending.status,
        ApprovalStatus::Pending,
        "one vote decides nothing"
    );

    let (second, progress, _) =
        recorded(vote(store.as_ref(), "k", "dave", VoteDecision::Approve, 11).await);
    assert_eq!((second.seq, second.rule.as_deref()), (2, Some("security")));
    assert_eq!(progress, "finance 1 of 2; security 1 of 1");

    let (third, vote_event, decided, resolved) =
        settled(vote(store.as_ref(), "k", "bob", VoteDecision::Approve, 12).await);
    assert_eq!((third.seq, third.rule.as_deref()), (3, Some("finance")));
    let vote_event = vote_event.expect("the settling vote's own event");
    assert_eq!(
        (vote_event.seq, resolved.seq),
        (5, 6),
        "the vote, then the decision"
    );
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("bob"));

    let fourth = refusal(vote(store.as_ref(), "k", "carol", VoteDecision::Approve, 13).await);
    assert!(
        matches!(fourth, ApprovalError::AlreadyResolved { ref decided_by, .. } if decided_by.as_deref() == Some("bob")),
        "{fourth:?}"
    );

    let ledger = store.votes("k").await.expect("votes");
    assert_eq!(ledger, vec![first, second, third]);
    let events = store.run_events("run-k", 0).await.expect("events");
    assert_eq!(
        event_names(&events),
        [
            "run_started",
            "awaiting_approval",
            "approval_vote",
            "approval_vote",
            "approval_vote",
            "approval_resolved"
        ]
    );
    assert_eq!(events[4], vote_event);
    assert_eq!(events[5], resolved);
}

/// A gate of finance 2 and security 1 paused at `key`, started by rita
/// (for the notification cases).
pub async fn paused_team_gate(store: &dyn StateStore, key: &str) -> ApprovalRecord {
    paused_with_roster(store, key, finance_and_security(&["rita"])).await
}

/// `voter` approves `key` at `now`; the vote does not settle it.
pub async fn vote_recorded(store: &dyn StateStore, key: &str, voter: &str, now: u64) {
    recorded(vote(store, key, voter, VoteDecision::Approve, now).await);
}

/// A list reads the ledgers of a whole page at once: each key's votes as
/// `votes` has them, keys without votes (and unknown keys) absent.
pub async fn ledgers_of_many_gates_are_read_at_once(store: SharedStore) {
    for key in ["k1", "k2", "k3"] {
        paused_with_roster(store.as_ref(), key, finance_and_security(&["rita"])).await;
    }
    recorded(vote(store.as_ref(), "k1", "alice", VoteDecision::Approve, 10).await);
    recorded(vote(store.as_ref(), "k2", "dave", VoteDecision::Approve, 11).await);
    recorded(vote(store.as_ref(), "k1", "dave", VoteDecision::Approve, 12).await);
    let keys: Vec<String> = ["k1", "k2", "k3", "nope"].map(String::from).to_vec();
    let ledgers = store.ledgers(&keys).await.expect("ledgers");
    assert_eq!(
        ledgers.keys().map(String::as_str).collect::<Vec<_>>(),
        ["k1", "k2"]
    );
    for key in ["k1", "k2"] {
        assert_eq!(
            ledgers[key],
            store.votes(key).await.expect("votes"),
            "{key}"
        );
    }
    assert_eq!(
        ledgers["k1"].iter().map(|v| v.seq).collect::<Vec<_>>(),
        [1, 2],
        "in the order cast"
    );
    assert!(store.ledgers(&[]).await.expect("none").is_empty());
}

pub async fn a_requester_a_non_member_and_a_second_vote_are_refused_writing_nothing(
    store: SharedStore,
) {
    paused_with_roster(store.as_ref(), "k", finance_and_security(&["carol"])).await;
    let own = refusal(vote(store.as_ref(), "k", "carol", VoteDecision::Approve, 10).await);
    assert!(
        matches!(own, ApprovalError::SelfApproval { ref voter, .. } if voter == "carol"),
        "{own:?}"
    );
    let stranger = refusal(vote(store.as_ref(), "k", "mallory", VoteDecision::Approve, 10).await);
    assert!(
        matches!(stranger, ApprovalError::NotInGroups { ref voter, .. } if voter == "mallory"),
        "{stranger:?}"
    );
    recorded(vote(store.as_ref(), "k", "alice", VoteDecision::Approve, 11).await);
    let twice = refusal(vote(store.as_ref(), "k", "alice", VoteDecision::Reject, 12).await);
    assert_eq!(
        twice,
        ApprovalError::AlreadyVoted {
            key: "k".into(),
            voter: "alice".into(),
            decision: VoteDecision::Approve,
        }
    );
    assert_eq!(
        store.votes("k").await.expect("votes").len(),
        1,
        "alice's vote only"
    );
    assert_eq!(event_seqs(store.as_ref(), "run-k").await, vec![1, 2, 3]);
    let record = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(record.status, ApprovalStatus::Pending);
}

pub async fn a_reject_settles_a_gate_with_rules(store: SharedStore) {
    paused_with_roster(store.as_ref(), "k", finance_and_security(&["rita"])).await;
    recorded(vote(store.as_ref(), "k", "alice", VoteDecision::Approve, 10).await);
    let (no, vote_event, decided, resolved) =
        settled(vote(store.as_ref(), "k", "dave", VoteDecision::Reject, 11).await);
    assert_eq!(
        (no.seq, no.rule),
        (2, None),
        "a reject counts toward no rule"
    );
    assert_eq!(decided.status, ApprovalStatus::Rejected);
    assert_eq!(decided.reason(), Some("dave says no"));
    assert_eq!(vote_event.map(|e| e.seq), Some(4));
    assert_eq!(resolved.seq, 5);
    assert!(
        matches!(&resolved.kind, EventKind::ApprovalResolved { decision, .. } if decision == "reject"),
        "{resolved:?}"
    );
}

pub async fn a_vote_on_another_payload_is_payload_changed_and_writes_nothing(store: SharedStore) {
    let plain = paused_run(store.as_ref(), "plain", "agent", 0).await;
    let counted = paused_with_roster(store.as_ref(), "k", finance_and_security(&["rita"])).await;
    let seen = payload_digest(&json!({"amount": 3000, "currency": "EUR"}));
    for record in [plain, counted] {
        let mut cast = vote_on(&record, "alice", VoteDecision::Approve, 10);
        cast.choice.payload_digest = seen.clone();
        let refused = refusal(store.cast_vote(&cast).await);
        assert_eq!(
            refused,
            ApprovalError::PayloadChanged {
                key: record.key.clone(),
                given: seen.clone(),
                current: record.payload_digest(),
            }
        );
        assert_eq!(refused.code(), "payload_changed");
        assert!(store.votes(&record.key).await.expect("votes").is_empty());
        assert_eq!(event_seqs(store.as_ref(), &record.run_id).await, vec![1, 2]);
        let stored = store
            .get_approval(&record.key)
            .await
            .expect("get")
            .expect("record");
        assert_eq!(stored, record, "left as it was");
    }
}

pub async fn a_modify_supersedes_the_votes_before_it_and_settles_with_the_edit(store: SharedStore) {
    let original = paused_with_roster(store.as_ref(), "k", finance_and_security(&["rita"])).await;
    recorded(vote(store.as_ref(), "k", "alice", VoteDecision::Approve, 10).await);
    let (edited, progress, event) =
        recorded(vote(store.as_ref(), "k", "bob", VoteDecision::Modify, 11).await);
    assert_eq!(edited.payload, Some(edit()));
    assert_eq!(
        progress, "finance 0 of 2; security 0 of 1",
        "the edit asks again"
    );
    assert!(
        matches!(
            event.kind,
            EventKind::ApprovalVote {
                supersedes: true,
                ..
            }
        ),
        "{event:?}"
    );
    let record = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(
        record.current_payload(),
        &edit(),
        "the gate asks about the edit"
    );
    assert_eq!(record.payload, original.payload, "the original stays");
    let roster = record.roster.clone().expect("roster");
    assert!(roster.requesters.contains(&"bob".to_string()), "{roster:?}");
    let ledger = store.votes("k").await.expect("votes");
    assert_eq!(
        ledger
            .iter()
            .map(|v| (v.voter.as_str(), v.superseded))
            .collect::<Vec<_>>(),
        [("alice", true), ("bob", false)],
        "alice's vote is kept for the audit, no longer counted"
    );

    // A vote on the payload before the edit no longer counts.
    let stale = refusal(
        store
            .cast_vote(&vote_on(&original, "carol", VoteDecision::Approve, 12))
            .await,
    );
    assert_eq!(stale.code(), "payload_changed");
    let editor = refusal(vote(store.as_ref(), "k", "bob", VoteDecision::Approve, 12).await);
    assert!(
        matches!(editor, ApprovalError::SelfApproval { .. }),
        "{editor:?}"
    );

    recorded(vote(store.as_ref(), "k", "alice", VoteDecision::Approve, 13).await);
    recorded(vote(store.as_ref(), "k", "carol", VoteDecision::Approve, 14).await);
    let (_, _, decided, resolved) =
        settled(vote(store.as_ref(), "k", "dave", VoteDecision::Approve, 15).await);
    assert_eq!(decided.status, ApprovalStatus::Modified);
    assert_eq!(
        decided.decision_data,
        Decision::Modify {
            payload: edit(),
            reason: None
        }
        .data()
    );
    assert!(
        matches!(&resolved.kind, EventKind::ApprovalResolved { decision, .. } if decision == "modify"),
        "{resolved:?}"
    );
    assert_eq!(store.votes("k").await.expect("votes").len(), 5);
}

pub async fn a_vote_on_an_expired_record_is_approval_expired(store: SharedStore) {
    let plain = paused_run(store.as_ref(), "plain", "agent", 0).await;
    let counted = paused_with_roster(store.as_ref(), "k", finance_and_security(&["rita"])).await;
    for record in [plain, counted] {
        let late = refusal(
            store
                .cast_vote(&vote_on(&record, "alice", VoteDecision::Approve, TTL))
                .await,
        );
        assert_eq!(
            late,
            ApprovalError::Expired {
                key: record.key.clone(),
                expired_at: record.expires_at,
            }
        );
        assert!(store.votes(&record.key).await.expect("votes").is_empty());
        assert_eq!(event_seqs(store.as_ref(), &record.run_id).await, vec![1, 2]);
    }
}

/// Several rounds of deciding votes cast at once, one task per vote, each
/// on its own handle (its own connections, as another process has): the
/// three votes 2-of-3 + 1-of-1 needs at once, then, after alice's, bob,
/// carol and dave at once. Exactly one vote settles the gate; the others
/// are recorded before it or refused after it.
pub async fn concurrent_deciding_votes_from_three_handles_settle_once(handles: Vec<SharedStore>) {
    for round in 0..6 {
        let key = format!("k{round}");
        let first = handles[0].as_ref();
        paused_with_roster(first, &key, finance_and_security(&["rita"])).await;
        let voters = if round % 2 == 0 {
            ["alice", "bob", "dave"]
        } else {
            recorded(vote(first, &key, "alice", VoteDecision::Approve, 5).await);
            ["bob", "carol", "dave"]
        };
        let record = first
            .get_approval(&key)
            .await
            .expect("get")
            .expect("record");
        let tasks: Vec<_> = voters
            .iter()
            .zip(&handles)
            .map(|(voter, store)| {
                let (store, cast) = (
                    Arc::clone(store),
                    vote_on(&record, voter, VoteDecision::Approve, 10),
                );
                tokio::spawn(async move { store.cast_vote(&cast).await })
            })
            .collect();
        let (mut settles, mut recorded_votes, mut late) = (0, 0, 0);
        for task in tasks {
            match task.await.expect("vote task") {
                Ok(VoteOutcome::Settled { .. }) => settles += 1,
                Ok(VoteOutcome::Recorded { .. }) => recorded_votes += 1,
                Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. })) => late += 1,
                Err(other) => panic!("round {round}: a vote is counted or told why, got {other:?}"),
            }
        }
        assert_eq!(settles, 1, "round {round}: exactly one settlement");
        let last = handles[2].as_ref();
        let decided = last.get_approval(&key).await.expect("get").expect("record");
        assert_eq!(decided.status, ApprovalStatus::Approved, "round {round}");
        let ledger = last.votes(&key).await.expect("votes");
        let cast_before = usize::from(round % 2 == 1);
        assert_eq!(
            ledger.len(),
            cast_before + settles + recorded_votes,
            "round {round}: a refused vote leaves no row ({late} refused)"
        );
        assert_eq!(
            ledger.iter().map(|v| v.seq).collect::<Vec<_>>(),
            (1..=ledger.len() as u32).collect::<Vec<_>>(),
            "round {round}: one seq per vote, no gaps"
        );
        let events = last
            .run_events(&format!("run-{key}"), 0)
            .await
            .expect("events");
        let names = event_names(&events);
        assert_eq!(
            names.iter().filter(|n| **n == "approval_resolved").count(),
            1,
            "round {round}: {names:?}"
        );
        assert_eq!(
            names.iter().filter(|n| **n == "approval_vote").count(),
            ledger.len(),
            "round {round}: an event per vote"
        );
        assert_eq!(names.last(), Some(&"approval_resolved"), "round {round}");
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=events.len() as u64).collect::<Vec<_>>(),
            "round {round}: no gaps"
        );
    }
}

/// The vote that would settle a gate, and a cancel of its run, at once
/// on two handles: exactly one of them takes the approval.
pub async fn a_vote_racing_a_cancel_has_exactly_one_winner(handles: Vec<SharedStore>) {
    for round in 0..6 {
        let key = format!("k{round}");
        let run_id = format!("run-{key}");
        let first = handles[0].as_ref();
        paused_with_roster(first, &key, finance_and_security(&["rita"])).await;
        recorded(vote(first, &key, "alice", VoteDecision::Approve, 5).await);
        recorded(vote(first, &key, "dave", VoteDecision::Approve, 6).await);
        let record = first
            .get_approval(&key)
            .await
            .expect("get")
            .expect("record");
        let cast = vote_on(&record, "bob", VoteDecision::Approve, 10);
        let (voter, canceller) = (Arc::clone(&handles[1]), Arc::clone(&handles[2]));
        let stop = cancel(&run_id, "ops", 10);
        let voting = async move { voter.cast_vote(&cast).await };
        let cancelling = async move { canceller.cancel_run(&stop).await };
        // Either one starts first, round by round.
        let (voted, cancelled) = if round % 2 == 0 {
            let voted = tokio::spawn(voting);
            let cancelled = tokio::spawn(cancelling);
            (voted.await, cancelled.await)
        } else {
            let cancelled = tokio::spawn(cancelling);
            let voted = tokio::spawn(voting);
            (voted.await, cancelled.await)
        };
        let (voted, cancelled) = (voted.expect("vote task"), cancelled.expect("cancel task"));

        let decided = first
            .get_approval(&key)
            .await
            .expect("get")
            .expect("record");
        let run = first.get_run(&run_id).await.expect("run").expect("stored");
        let ledger = first.votes(&key).await.expect("votes");
        match decided.status {
            ApprovalStatus::Cancelled => {
                let refused = refusal(voted);
                assert_eq!(
                    refused.code(),
                    "already_resolved",
                    "round {round}: {refused}"
                );
                let cancelled = cancelled.expect("the cancel won");
                assert_eq!(cancelled.was, RunStatus::AwaitingApproval);
                assert_eq!(
                    ledger.len(),
                    2,
                    "round {round}: the losing vote left no row"
                );
            }
            ApprovalStatus::Approved => {
                settled(voted);
                assert_eq!(ledger.len(), 3, "round {round}");
                // A cancel after the decision may still end the running run.
                if let Ok(cancelled) = cancelled {
                    assert_eq!(cancelled.was, RunStatus::Running, "round {round}");
                    assert_eq!(run.status, RunStatus::Cancelled);
                }
            }
            other => panic!("round {round}: the approval ended {other:?}"),
        }
        let seqs = event_seqs(first, &run_id).await;
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "round {round}: no gaps"
        );
    }
}

/// The approver's input (a gate with a `form:`) is part of the decision:
/// on a plain gate in the record's `decision_data.input` (and its one-entry
/// ledger), on a gate with rules on each vote (`tollgate_votes.input`),
/// the settling one's also in the record; in the events either way. Text
/// of any kind round-trips as written.
pub async fn an_approvers_input_is_kept_with_the_decision_and_each_vote(store: SharedStore) {
    let input = |note: &str| json!({ "note": note, "amount": 7, "ok": true, "ünï": "✓ \"q\" \\" });

    // A plain gate.
    let record = paused_run(store.as_ref(), "plain", "agent", 0).await;
    let mut cast = vote_on(&record, "alice", VoteDecision::Approve, 10);
    cast.claim.input = Some(input("plain"));
    let (entry, _, decided, resolved) = settled(store.cast_vote(&cast).await);
    assert_eq!(entry.input, Some(input("plain")));
    assert_eq!(decided.approver_input(), Some(&input("plain")));
    let stored = store
        .get_approval("plain")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(stored.approver_input(), Some(&input("plain")), "{stored:?}");
    assert_eq!(stored, decided);
    let ledger = store.votes("plain").await.expect("votes");
    assert_eq!(
        ledger[0].input,
        Some(input("plain")),
        "read from the record"
    );
    assert!(
        matches!(&resolved.kind, EventKind::ApprovalResolved { input: Some(i), .. } if *i == input("plain")),
        "{resolved:?}"
    );
    let events = store.run_events("run-plain", 0).await.expect("events");
    assert_eq!(events.last(), Some(&resolved), "stored as announced");

    // A gate with rules: each vote keeps its own.
    paused_with_roster(store.as_ref(), "k", finance_and_security(&["rita"])).await;
    let cast_with = |record: &ApprovalRecord, voter: &str, note: &str, now: u64| {
        let mut cast = vote_on(record, voter, VoteDecision::Approve, now);
        cast.claim.input = Some(input(note));
        cast
    };
    let record = store.get_approval("k").await.expect("get").expect("record");
    let (first, _, event) = recorded(
        store
            .cast_vote(&cast_with(&record, "alice", "first", 10))
            .await,
    );
    assert_eq!(first.input, Some(input("first")));
    assert!(
        matches!(&event.kind, EventKind::ApprovalVote { input: Some(i), .. } if *i == input("first")),
        "{event:?}"
    );
    // A vote without input keeps none.
    let (second, _, _) =
        recorded(vote(store.as_ref(), "k", "bob", VoteDecision::Approve, 11).await);
    assert_eq!(second.input, None);
    let record = store.get_approval("k").await.expect("get").expect("record");
    let (third, _, decided, _) = settled(
        store
            .cast_vote(&cast_with(&record, "dave", "third", 12))
            .await,
    );
    assert_eq!(third.input, Some(input("third")));
    assert_eq!(
        decided.approver_input(),
        Some(&input("third")),
        "the settling vote's"
    );
    let ledger = store.votes("k").await.expect("votes");
    let inputs: Vec<Option<serde_json::Value>> = ledger.iter().map(|v| v.input.clone()).collect();
    assert_eq!(inputs, [Some(input("first")), None, Some(input("third"))]);
    let reopened = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(reopened.approver_input(), Some(&input("third")));
}
