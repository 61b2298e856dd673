//! The votes' SQL: the ledger, and a cast in the writer's transaction.

use super::*;
use crate::domain::policy::Vote;
use crate::store::votes::{
    admit, check_digest, count, counted_outcome, plain_ledger, plain_outcome, vote_event,
};
use crate::store::{CastVote, VoteOutcome};

/// A cast's parameters, encoded: its claim, and its vote but for the seq
/// (the next of the key's, numbered in the insert), the rule (counted
/// inside the transaction) and the time (the claim's `now`).
pub(crate) struct CastRow {
    claim: ClaimRow,
    voter: String,
    decision: &'static str,
    reason: Option<String>,
    payload: Option<String>,
    channel: &'static str,
    payload_digest: String,
    input: Option<String>,
}

impl CastRow {
    pub fn encode(cast: &CastVote) -> StoreResult<CastRow> {
        let (claim, choice) = (&cast.claim, &cast.choice);
        Ok(CastRow {
            claim: ClaimRow::encode(claim)?,
            voter: claim.decided_by.clone(),
            decision: choice.decision.as_str(),
            reason: choice.reason.clone(),
            payload: choice
                .payload
                .as_ref()
                .map(|p| to_json(p, "vote payload"))
                .transpose()?,
            channel: choice.channel.as_str(),
            payload_digest: choice.payload_digest.clone(),
            input: claim
                .input
                .as_ref()
                .map(|i| to_json(i, "vote input"))
                .transpose()?,
        })
    }
}

/// See [`crate::store::Votes::cast_vote`]. The writer's `BEGIN IMMEDIATE`
/// holds every other writer off from the read to the last write; an error
/// rolls back all of the cast.
pub(crate) fn cast_vote(
    conn: &Connection,
    cast: &CastVote,
    row: &CastRow,
) -> StoreResult<VoteOutcome> {
    let found = match read_for_cast(conn, &cast.claim.key)? {
        CastTarget::Counted(found) => found,
        CastTarget::Plain => {
            // The hot path: today's claim (its conditional write is steps 1
            // and 3), the digest of the payload it returned (a mismatch rolls
            // the claim back with the rest), and the channel on the row the
            // claim just wrote: no ledger row (see `votes`). The record is
            // decoded once, from the claim's RETURNING.
            let claimed = claim(conn, &cast.claim, &row.claim)?;
            check_digest(cast, &claimed.record)?;
            let mut stmt = conn
                .prepare_cached("UPDATE tollgate_approvals SET decided_via = ?2 WHERE key = ?1")?;
            stmt.execute((&claimed.record.key, row.channel))?;
            return Ok(plain_outcome(cast.ballot().to_vote(1, None), claimed));
        }
    };
    let record = admit(cast, found.as_deref())?;
    let Some(roster) = &record.roster else {
        // Not reached: it was read as a record whose roster is set.
        return Err(StoreError::Database(format!(
            "approval {} changed its gate while a vote was cast",
            record.key
        )));
    };
    let counted = count(cast, record, roster, &votes(conn, &record.key)?)?;
    if counted.supersedes {
        let mut stmt = conn.prepare_cached(
            "UPDATE tollgate_votes SET superseded = 1 WHERE key = ?1 AND superseded = 0",
        )?;
        stmt.execute([&record.key])?;
    }
    if let Some(revised) = &counted.roster {
        let mut stmt =
            conn.prepare_cached("UPDATE tollgate_approvals SET roster = ?2 WHERE key = ?1")?;
        stmt.execute((&record.key, to_json(revised, "approval roster")?))?;
    }
    let seq = insert_vote(conn, &record.key, row, counted.rule.as_deref())?;
    let vote = cast.ballot().to_vote(seq, counted.rule.clone());
    let event = vote_event(record, &vote, &counted, next_seq(conn, &record.run_id)?);
    append_one(conn, &event)?;
    // The vote that settles the gate is told of by the claim's notice.
    if counted.settles.is_none() {
        notify_change(conn, record, &event)?;
    }
    let claimed = match counted.settles {
        Some(_) => Some(claim(conn, &cast.claim, &row.claim)?),
        None => None,
    };
    Ok(counted_outcome(vote, counted, event, claimed))
}

/// A cast's record, read once, in the writer's transaction.
enum CastTarget {
    /// A plain gate's (no roster): its cast is the claim, whose RETURNING
    /// decodes the record, so nothing is decoded here (the hot path).
    Plain,
    /// A gate that counts votes, decoded; `None` when there is no such
    /// record (the counted path explains the refusal).
    Counted(Option<Box<ApprovalRecord>>),
}

fn read_for_cast(conn: &Connection, key: &str) -> StoreResult<CastTarget> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = ?1"
    ))?;
    let found = query_opt(&mut stmt, [key], |row| {
        if row.get_ref(ROSTER_COLUMN)? == rusqlite::types::ValueRef::Null {
            return Ok(CastTarget::Plain);
        }
        approval_from_row(row).map(|record| CastTarget::Counted(Some(Box::new(record))))
    })?;
    Ok(found.unwrap_or(CastTarget::Counted(None)))
}

/// Append the vote as the key's next; returns its seq.
fn insert_vote(
    conn: &Connection,
    key: &str,
    row: &CastRow,
    rule: Option<&str>,
) -> StoreResult<u32> {
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT INTO tollgate_votes ({VOTE_COLUMNS}) \
         SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?10 \
         FROM tollgate_votes WHERE key = ?1 \
         RETURNING seq"
    ))?;
    let params: [&dyn ToSql; 10] = [
        &key,
        &row.voter,
        &rule,
        &row.decision,
        &row.reason,
        &row.payload,
        &row.channel,
        &row.payload_digest,
        // The vote's time is the claim's.
        &row.claim.now,
        &row.input,
    ];
    let seq: i64 = stmt.query_row(params.as_slice(), |r| r.get(0))?;
    u32::try_from(seq).map_err(|_| StoreError::Database(format!("vote seq {seq} out of range")))
}

/// The ledger of `key`, in seq order: its rows, or, for a plain gate, its
/// one decision as the record holds it.
pub(crate) fn votes(conn: &Connection, key: &str) -> StoreResult<Vec<Vote>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {VOTE_COLUMNS} FROM tollgate_votes WHERE key = ?1 ORDER BY seq"
    ))?;
    let ledger = query_all(&mut stmt, [key], vote_from_row)?;
    if !ledger.is_empty() {
        return Ok(ledger);
    }
    let mut via = conn.prepare_cached(
        "SELECT decided_via FROM tollgate_approvals WHERE key = ?1 AND roster IS NULL",
    )?;
    let Some(channel) =
        query_opt(&mut via, [key], |row| Ok(row.get::<_, Option<String>>(0)?))?.flatten()
    else {
        return Ok(Vec::new());
    };
    match get_approval(conn, key)? {
        Some(record) => plain_ledger(&record, &channel),
        None => Ok(Vec::new()),
    }
}

/// The ledger rows of each of `keys`, by key, in seq order
/// ([`Votes::ledgers`](crate::store::Votes::ledgers)): one statement per
/// [`LEDGERS_CHUNK`] keys.
pub(crate) fn ledgers(
    conn: &Connection,
    keys: &[String],
) -> StoreResult<std::collections::BTreeMap<String, Vec<Vote>>> {
    let mut ledgers: std::collections::BTreeMap<String, Vec<Vote>> = Default::default();
    for chunk in keys.chunks(LEDGERS_CHUNK) {
        let marks = vec!["?"; chunk.len()].join(", ");
        let mut stmt = conn.prepare(&format!(
            "SELECT {VOTE_COLUMNS} FROM tollgate_votes WHERE key IN ({marks}) ORDER BY key, seq"
        ))?;
        let rows = query_all(&mut stmt, rusqlite::params_from_iter(chunk), |row| {
            Ok((row.get::<_, String>(0)?, vote_from_row(row)?))
        })?;
        for (key, vote) in rows {
            ledgers.entry(key).or_default().push(vote);
        }
    }
    Ok(ledgers)
}

/// Keys per statement of [`ledgers`]: well under SQLite's limit on bound
/// parameters.
const LEDGERS_CHUNK: usize = 500;
