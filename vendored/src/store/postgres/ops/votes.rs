//! The votes' SQL: the ledger, and a cast in the store's transaction.

use super::*;
use crate::domain::policy::Vote;
use crate::store::votes::{admit, count, counted_outcome, plain_ledger, plain_outcome, vote_event};
use crate::store::{CastVote, VoteOutcome};

/// See [`crate::store::Votes::cast_vote`]. The cast takes the approval's
/// row lock first (`FOR UPDATE`), the lock a claim, a cancel and a move of
/// the key take too (approval, then run: never a deadlock), so casts of
/// one key are serialised with each other and with them: each reads the
/// ledger as the previous one committed it.
pub(crate) async fn cast_vote<C: GenericClient>(
    client: &C,
    cast: &CastVote,
) -> StoreResult<VoteOutcome> {
    let found = query_opt(
        client,
        &format!("SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = $1 FOR UPDATE"),
        &[&cast.claim.key],
        approval_from_row,
    )
    .await?;
    let record = admit(cast, found.as_ref())?;
    let Some(roster) = &record.roster else {
        // The hot path: after the read, today's claim and one insert.
        let claimed = claim(client, &cast.claim).await?;
        // No ledger row: the channel goes on the row the claim just wrote
        // (see `votes`).
        execute(
            client,
            "UPDATE tollgate_approvals SET decided_via = $2 WHERE key = $1",
            &[&record.key, &cast.choice.channel.as_str()],
        )
        .await?;
        return Ok(plain_outcome(cast.ballot().to_vote(1, None), claimed));
    };
    let counted = count(cast, record, roster, &votes(client, &record.key).await?)?;
    if counted.supersedes {
        execute(
            client,
            "UPDATE tollgate_votes SET superseded = true WHERE key = $1 AND NOT superseded",
            &[&record.key],
        )
        .await?;
    }
    if let Some(revised) = &counted.roster {
        let revised = to_json(revised, "approval roster")?;
        execute(
            client,
            "UPDATE tollgate_approvals SET roster = $2 WHERE key = $1",
            &[&record.key, &revised],
        )
        .await?;
    }
    let seq = insert_vote(client, cast, counted.rule.as_deref()).await?;
    let vote = cast.ballot().to_vote(seq, counted.rule.clone());
    let event = vote_event(
        record,
        &vote,
        &counted,
        next_seq(client, &record.run_id).await?,
    );
    insert_events(client, &record.run_id, std::slice::from_ref(&event)).await?;
    let claimed = match counted.settles {
        Some(_) => Some(claim(client, &cast.claim).await?),
        None => {
            // The vote that settles the gate is told of by the claim's
            // notice; this one still leaves it pending.
            notify_change(client, record, &event).await?;
            // Still pending, but its progress changed: other servers'
            // inbox pages and watchers hear of it as of a move's.
            notify::send(client, &record.key, &record.run_id, ApprovalStatus::Pending).await?;
            None
        }
    };
    Ok(counted_outcome(vote, counted, event, claimed))
}

/// Append the cast as the key's next vote, counted toward `rule`;
/// returns its seq. Text people wrote is kept as JSON strings.
async fn insert_vote<C: GenericClient>(
    client: &C,
    cast: &CastVote,
    rule: Option<&str>,
) -> StoreResult<u32> {
    let (claim, choice) = (&cast.claim, &cast.choice);
    if let Some(payload) = &choice.payload {
        checked(payload, "vote payload")?;
    }
    if let Some(input) = &claim.input {
        checked(input, "vote input")?;
    }
    let voter = Value::String(claim.decided_by.clone());
    let reason = text_json(choice.reason.as_deref());
    let sql = format!(
        "INSERT INTO tollgate_votes ({VOTE_COLUMNS}) \
         SELECT $1::text, COALESCE(MAX(seq), 0) + 1, $2::json, $3::text, $4::text, $5::json, \
         $6::json, $7::text, $8::text, false, $9::timestamptz, $10::json \
         FROM tollgate_votes WHERE key = $1 \
         RETURNING seq"
    );
    let params: [Param<'_>; 10] = [
        &claim.key,
        &voter,
        &rule,
        &choice.decision.as_str(),
        &reason,
        &choice.payload,
        &choice.channel.as_str(),
        &choice.payload_digest,
        &claim.now,
        &claim.input,
    ];
    let seq: i64 = query_opt(client, &sql, &params, |row| Ok(row.try_get(0)?))
        .await?
        .ok_or_else(|| StoreError::Database("inserting a vote returned no row".into()))?;
    u32::try_from(seq).map_err(|_| StoreError::Database(format!("vote seq {seq} out of range")))
}

/// The ledger of `key`, in seq order.
pub(crate) async fn votes<C: GenericClient>(client: &C, key: &str) -> StoreResult<Vec<Vote>> {
    let ledger = query_all(
        client,
        &format!("SELECT {VOTE_COLUMNS} FROM tollgate_votes WHERE key = $1 ORDER BY seq"),
        &[&key],
        vote_from_row,
    )
    .await?;
    if !ledger.is_empty() {
        return Ok(ledger);
    }
    // A plain gate's ledger is its one decision, as its record holds it.
    let channel = query_opt(
        client,
        "SELECT decided_via FROM tollgate_approvals WHERE key = $1 AND roster IS NULL",
        &[&key],
        |row| Ok(row.try_get::<_, Option<String>>(0)?),
    )
    .await?
    .flatten();
    let Some(channel) = channel else {
        return Ok(Vec::new());
    };
    match super::get_approval(client, key).await? {
        Some(record) => plain_ledger(&record, &channel),
        None => Ok(Vec::new()),
    }
}

/// The ledger rows of each of `keys`, by key, in seq order
/// ([`Votes::ledgers`](crate::store::Votes::ledgers)), in one statement.
pub(crate) async fn ledgers<C: GenericClient>(
    client: &C,
    keys: &[String],
) -> StoreResult<std::collections::BTreeMap<String, Vec<Vote>>> {
    let rows = query_all(
        client,
        &format!(
            "SELECT {VOTE_COLUMNS} FROM tollgate_votes WHERE key = ANY($1::text[]) ORDER BY key, seq"
        ),
        &[&keys],
        |row| Ok((row.try_get::<_, String>(0)?, vote_from_row(row)?)),
    )
    .await?;
    let mut ledgers: std::collections::BTreeMap<String, Vec<Vote>> = Default::default();
    for (key, vote) in rows {
        ledgers.entry(key).or_default().push(vote);
    }
    Ok(ledgers)
}
