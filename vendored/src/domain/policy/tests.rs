use serde_json::json;

use super::*;

fn groups(entries: &[(&str, &[&str])]) -> Groups {
    entries
        .iter()
        .map(|(name, members)| {
            (
                name.to_string(),
                members.iter().map(|m| m.to_string()).collect(),
            )
        })
        .collect()
}

fn rules(entries: &[(&str, u32)]) -> GatePolicy {
    GatePolicy {
        rules: entries
            .iter()
            .map(|(group, min)| RuleSpec {
                group: group.to_string(),
                min: *min,
            })
            .collect(),
        ..GatePolicy::plain()
    }
}

fn finance_and_security() -> Groups {
    groups(&[
        ("finance", &["alice", "bob", "carol"]),
        ("security", &["dave"]),
    ])
}

fn ballot(voter: &str, decision: VoteDecision) -> BallotVote {
    BallotVote {
        input: None,
        voter: voter.into(),
        choice: VoteChoice {
            decision,
            reason: None,
            payload: None,
            channel: Channel::Api,
            payload_digest: payload_digest(&json!({})),
        },
        at: crate::support::time::now(),
    }
}

/// Cast `votes` in order on `roster`, as a store would (applying each
/// cast's supersession and roster), and return the last cast.
fn cast_all(roster: &mut Roster, votes: &[BallotVote]) -> Result<Cast, ApprovalError> {
    let mut ledger: Vec<Vote> = Vec::new();
    let mut last = None;
    for (i, b) in votes.iter().enumerate() {
        let cast = roster.cast("k", b, &ledger)?;
        if cast.supersedes {
            ledger.iter_mut().for_each(|v| v.superseded = true);
        }
        if let Some(next) = &cast.roster {
            *roster = next.clone();
        }
        ledger.push(b.to_vote(i as u32 + 1, cast.rule.clone()));
        last = Some(cast);
    }
    Ok(last.expect("at least one vote"))
}

#[test]
fn two_of_finance_and_one_of_security_settle_only_together() {
    let policy = rules(&[("finance", 2), ("security", 1)]);
    let mut roster = Roster::resolve(&policy, &finance_and_security(), vec!["bot".into()]).unwrap();
    let first = cast_all(&mut roster, &[ballot("alice", VoteDecision::Approve)]).unwrap();
    assert_eq!(first.settles, None);
    assert_eq!(first.rule.as_deref(), Some("finance"));
    assert_eq!(first.tally.summary(), "finance 1 of 2; security 0 of 1");

    let mut roster = Roster::resolve(&policy, &finance_and_security(), vec![]).unwrap();
    let votes = [
        ballot("alice", VoteDecision::Approve),
        ballot("dave", VoteDecision::Approve),
        ballot("bob", VoteDecision::Approve),
    ];
    let last = cast_all(&mut roster, &votes).unwrap();
    assert_eq!(last.tally.summary(), "finance 2 of 2; security 1 of 1");
    assert_eq!(last.settles, Some(Decision::Approve { reason: None }));
}

#[test]
fn a_voter_in_two_groups_counts_once_where_needed() {
    // bob is in both; with him counted for finance, security would need
    // another member. The matching moves him where he is needed.
    let groups = groups(&[
        ("finance", &["alice", "bob"]),
        ("security", &["bob", "erin"]),
    ]);
    let policy = rules(&[("finance", 1), ("security", 1)]);
    let mut roster = Roster::resolve(&policy, &groups, vec![]).unwrap();
    let last = cast_all(
        &mut roster,
        &[
            ballot("bob", VoteDecision::Approve),
            ballot("alice", VoteDecision::Approve),
        ],
    )
    .unwrap();
    assert_eq!(last.tally.outcome, TallyOutcome::Approved);
    assert_eq!(last.tally.rules[0].counted, ["alice"]);
    assert_eq!(last.tally.rules[1].counted, ["bob"]);

    // One vote never fills two rules by default ...
    let mut roster = Roster::resolve(&policy, &groups, vec![]).unwrap();
    let only_bob = cast_all(&mut roster, &[ballot("bob", VoteDecision::Approve)]).unwrap();
    assert_eq!(only_bob.tally.outcome, TallyOutcome::Open);
    // ... unless the gate says a vote counts toward every rule.
    let shared = GatePolicy {
        voter_counts_once: false,
        ..policy
    };
    let mut roster = Roster::resolve(&shared, &groups, vec![]).unwrap();
    let only_bob = cast_all(&mut roster, &[ballot("bob", VoteDecision::Approve)]).unwrap();
    assert_eq!(only_bob.tally.outcome, TallyOutcome::Approved);
}

#[test]
fn a_rule_that_cannot_be_met_is_refused_never_lowered() {
    let groups = groups(&[("finance", &["alice", "bob"]), ("empty", &[])]);
    let too_many = Roster::resolve(&rules(&[("finance", 3)]), &groups, vec![]).unwrap_err();
    assert_eq!(too_many.group, "finance");
    assert!(too_many.message.contains("needs 3"), "{}", too_many.message);
    assert!(Roster::resolve(&rules(&[("empty", 1)]), &groups, vec![]).is_err());
    assert!(Roster::resolve(&rules(&[("nobody", 1)]), &groups, vec![]).is_err());
    // The requester is left out: 2 of {alice, bob} started by alice.
    let self_blocked =
        Roster::resolve(&rules(&[("finance", 2)]), &groups, vec!["alice".into()]).unwrap_err();
    assert!(
        self_blocked.message.contains("alice started or edited"),
        "{}",
        self_blocked.message
    );
    // Two rules over one person who counts once.
    let one = groups_of_one();
    let err = Roster::resolve(&rules(&[("a", 1), ("b", 1)]), &one, vec![]).unwrap_err();
    assert!(err.message.contains("voter_counts_once"), "{}", err.message);
}

fn groups_of_one() -> Groups {
    groups(&[("a", &["zed"]), ("b", &["zed"])])
}

#[test]
fn requesters_and_strangers_may_not_vote_and_a_vote_stands() {
    let policy = rules(&[("finance", 1)]);
    let roster = Roster::resolve(&policy, &finance_and_security(), vec!["alice".into()]).unwrap();
    assert!(matches!(
        roster.cast("k", &ballot("alice", VoteDecision::Approve), &[]),
        Err(ApprovalError::SelfApproval { .. })
    ));
    assert!(matches!(
        roster.cast("k", &ballot("mallory", VoteDecision::Approve), &[]),
        Err(ApprovalError::NotInGroups { .. })
    ));
    let policy = rules(&[("finance", 2)]);
    let roster = Roster::resolve(&policy, &finance_and_security(), vec![]).unwrap();
    let bob = ballot("bob", VoteDecision::Approve).to_vote(1, Some("finance".into()));
    assert!(matches!(
        roster.cast("k", &ballot("bob", VoteDecision::Reject), &[bob]),
        Err(ApprovalError::AlreadyVoted { .. })
    ));
    // allow_self_approval lets the requester vote.
    let open = GatePolicy {
        allow_self_approval: Some(true),
        ..rules(&[("finance", 1)])
    };
    let roster = Roster::resolve(&open, &finance_and_security(), vec!["alice".into()]).unwrap();
    let cast = roster
        .cast("k", &ballot("alice", VoteDecision::Approve), &[])
        .unwrap();
    assert!(cast.settles.is_some());
}

#[test]
fn one_reject_ends_it_by_default_and_when_unreachable_waits_until_it_must() {
    let policy = rules(&[("finance", 2)]);
    let mut roster = Roster::resolve(&policy, &finance_and_security(), vec![]).unwrap();
    let rejected = cast_all(&mut roster, &[ballot("alice", VoteDecision::Reject)]).unwrap();
    assert_eq!(rejected.tally.outcome, TallyOutcome::Rejected);
    assert!(matches!(rejected.settles, Some(Decision::Reject { .. })));

    let patient = GatePolicy {
        reject: RejectWhen::WhenUnreachable,
        ..rules(&[("finance", 2)])
    };
    let mut roster = Roster::resolve(&patient, &finance_and_security(), vec![]).unwrap();
    let one_no = cast_all(&mut roster, &[ballot("alice", VoteDecision::Reject)]).unwrap();
    assert_eq!(one_no.settles, None, "bob and carol can still make 2");
    let mut roster = Roster::resolve(&patient, &finance_and_security(), vec![]).unwrap();
    let two_no = cast_all(
        &mut roster,
        &[
            ballot("alice", VoteDecision::Reject),
            ballot("bob", VoteDecision::Reject),
        ],
    )
    .unwrap();
    assert!(matches!(two_no.settles, Some(Decision::Reject { .. })));
}

#[test]
fn a_modify_supersedes_earlier_votes_and_its_author_may_not_approve_it() {
    let policy = rules(&[("finance", 2)]);
    let mut roster = Roster::resolve(&policy, &finance_and_security(), vec![]).unwrap();
    let mut edit = ballot("bob", VoteDecision::Modify);
    edit.choice.payload = Some(json!({"amount": 5}));
    let votes = [ballot("alice", VoteDecision::Approve), edit];
    let cast = cast_all(&mut roster, &votes).unwrap();
    assert!(cast.supersedes);
    assert_eq!(
        cast.tally.summary(),
        "finance 0 of 2",
        "alice's vote was on the old payload"
    );
    assert_eq!(roster.revised_payload, Some(json!({"amount": 5})));
    assert!(roster.requesters.contains(&"bob".to_string()));
    // alice and carol approve the edit: it settles as a modify.
    let mut ledger = vec![
        votes[0].to_vote(1, Some("finance".into())),
        votes[1].to_vote(2, None),
    ];
    ledger[0].superseded = true;
    let alice_again = roster
        .cast("k", &ballot("alice", VoteDecision::Approve), &ledger)
        .unwrap();
    assert_eq!(alice_again.settles, None);
    ledger.push(ballot("alice", VoteDecision::Approve).to_vote(3, Some("finance".into())));
    let carol = roster
        .cast("k", &ballot("carol", VoteDecision::Approve), &ledger)
        .unwrap();
    assert_eq!(
        carol.settles,
        Some(Decision::Modify {
            payload: json!({"amount": 5}),
            reason: None
        })
    );
    assert!(matches!(
        roster.cast("k", &ballot("bob", VoteDecision::Approve), &ledger),
        Err(ApprovalError::SelfApproval { .. })
    ));
}

#[test]
fn a_reason_can_be_required_to_reject() {
    let policy = GatePolicy {
        require_reason: true,
        ..rules(&[("finance", 1)])
    };
    let roster = Roster::resolve(&policy, &finance_and_security(), vec![]).unwrap();
    assert!(matches!(
        roster.cast("k", &ballot("alice", VoteDecision::Reject), &[]),
        Err(ApprovalError::ReasonRequired { .. })
    ));
    let mut with_reason = ballot("alice", VoteDecision::Reject);
    with_reason.choice.reason = Some("too much".into());
    assert!(roster.cast("k", &with_reason, &[]).is_ok());
}

#[test]
fn the_digest_is_of_the_canonical_json() {
    let a: Value = serde_json::from_str(r#"{"b":1,"a":[1,2]}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{ "a": [1, 2], "b": 1 }"#).unwrap();
    assert_eq!(payload_digest(&a), payload_digest(&b));
    assert!(payload_digest(&a).starts_with("sha256:"));
    assert_eq!(payload_digest(&a).len(), "sha256:".len() + 64);
    assert_ne!(
        payload_digest(&a),
        payload_digest(&json!({"a": [2, 1], "b": 1}))
    );
}

#[test]
fn a_plain_gate_counts_no_votes_and_bars_its_requesters_by_default() {
    assert!(!GatePolicy::plain().counts_votes());
    assert!(!GatePolicy::plain().self_approval_allowed());
    let opted_out = GatePolicy {
        allow_self_approval: Some(true),
        ..GatePolicy::plain()
    };
    assert!(opted_out.self_approval_allowed() && !opted_out.counts_votes());
    let reasons = GatePolicy {
        require_reason: true,
        ..GatePolicy::plain()
    };
    assert!(reasons.counts_votes());
    let roster = Roster::resolve(&reasons, &Groups::new(), vec!["bot".into()]).unwrap();
    assert!(matches!(
        roster.cast("k", &ballot("bot", VoteDecision::Approve), &[]),
        Err(ApprovalError::SelfApproval { .. })
    ));
    let anyone = roster
        .cast("k", &ballot("alice", VoteDecision::Approve), &[])
        .unwrap();
    assert_eq!(anyone.settles, Some(Decision::Approve { reason: None }));
    assert!(rules(&[("finance", 1)]).counts_votes());
    assert!(!rules(&[("finance", 1)]).self_approval_allowed());
}

mod timers {
    use chrono::{DateTime, TimeDelta, Utc};

    use crate::domain::pending_approval::Decision;
    use crate::domain::policy::{
        Escalation, GatePolicy, Groups, NudgeKind, OnTimeout, Roster, schedule,
    };

    fn at(hours: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + TimeDelta::hours(hours)
    }

    fn groups() -> Groups {
        [
            (
                "finance".to_string(),
                vec!["alice".to_string(), "bob".to_string()],
            ),
            (
                "security".to_string(),
                vec!["dave".to_string(), "alice".to_string()],
            ),
        ]
        .into_iter()
        .collect()
    }

    fn policy() -> GatePolicy {
        GatePolicy {
            remind: vec![50, 90],
            escalate: vec![
                Escalation {
                    after: std::time::Duration::from_secs(4 * 3600),
                    add: vec!["security".into()],
                },
                Escalation {
                    after: std::time::Duration::from_secs(20 * 3600),
                    add: vec!["finance".into()],
                },
            ],
            ..GatePolicy::plain()
        }
    }

    #[test]
    fn nudges_are_timed_from_the_pause_in_order_and_only_before_expiry() {
        let nudges = schedule(&policy(), &groups(), at(0), at(10)).unwrap();
        let timed: Vec<(DateTime<Utc>, &NudgeKind)> =
            nudges.iter().map(|n| (n.at, &n.kind)).collect();
        assert_eq!(
            timed,
            [
                (
                    at(4),
                    &NudgeKind::Escalate {
                        groups: vec!["security".into()],
                        members: vec!["dave".into(), "alice".into()],
                    }
                ),
                (at(5), &NudgeKind::Remind { percent: 50 }),
                (at(9), &NudgeKind::Remind { percent: 90 }),
            ],
            "the escalation at 20h of a 10h gate never comes"
        );
        let unknown = GatePolicy {
            escalate: vec![Escalation {
                after: std::time::Duration::from_secs(60),
                add: vec!["legal".into()],
            }],
            ..GatePolicy::plain()
        };
        let error = schedule(&unknown, &groups(), at(0), at(10)).unwrap_err();
        assert_eq!(error.message, "escalate: group \"legal\" is not defined");
    }

    #[test]
    fn an_escalation_adds_deciders_to_every_rule_without_touching_votes() {
        let mut roster = Roster {
            nudges: schedule(&policy(), &groups(), at(0), at(10)).unwrap(),
            ..Roster::sample(&[("finance", 2, &["alice", "bob"])], &[])
        };
        assert!(roster.take_due(at(3)).is_empty());
        assert_eq!(roster.next_nudge_at(), Some(at(4)));
        let taken = roster.take_due(at(6));
        assert_eq!(
            taken.len(),
            2,
            "the escalation at 4h and the reminder at 5h"
        );
        assert_eq!(roster.added, ["dave", "alice"]);
        assert_eq!(
            roster.rules[0].members,
            ["alice", "bob", "dave"],
            "no duplicate"
        );
        assert!(roster.is_member("dave"));
        assert_eq!(roster.next_nudge_at(), Some(at(9)));
        assert_eq!(roster.take_due(at(9)).len(), 1);
        assert_eq!(roster.next_nudge_at(), None);
        let stored: Roster =
            serde_json::from_value(serde_json::to_value(&roster).unwrap()).unwrap();
        assert_eq!(stored, roster, "the roster round-trips as stored");
    }

    #[test]
    fn a_timeout_takes_only_its_own_action_or_a_reject_in_place_of_an_approve() {
        let approve = Decision::Approve { reason: None };
        let reject = Decision::Reject { reason: None };
        assert_eq!(OnTimeout::Expire.decision("r".into()), None);
        assert_eq!(
            OnTimeout::Approve.applied_by(&approve),
            Some(OnTimeout::Approve)
        );
        assert_eq!(
            OnTimeout::Approve.applied_by(&reject),
            Some(OnTimeout::Reject)
        );
        assert_eq!(OnTimeout::Reject.applied_by(&approve), None);
        assert_eq!(
            OnTimeout::Continue.applied_by(&reject),
            Some(OnTimeout::Continue)
        );
        assert_eq!(OnTimeout::Continue.applied_by(&approve), None);
        assert_eq!(OnTimeout::Expire.applied_by(&reject), None);
        let modify = Decision::Modify {
            payload: serde_json::json!({}),
            reason: None,
        };
        assert_eq!(OnTimeout::Approve.applied_by(&modify), None);
    }
}

#[test]
fn the_one_decider_of_a_server_without_tokens_is_never_barred_as_its_requester() {
    // Every caller of such a server is `local`: it starts the run and it
    // must be able to decide it (there is nobody else).
    let reasons = GatePolicy {
        require_reason: true,
        ..GatePolicy::plain()
    };
    let roster = Roster::resolve(&reasons, &Groups::new(), vec![LOCAL_DECIDER.into()]).unwrap();
    let cast = roster
        .cast("k", &ballot(LOCAL_DECIDER, VoteDecision::Approve), &[])
        .unwrap();
    assert_eq!(cast.settles, Some(Decision::Approve { reason: None }));
}
