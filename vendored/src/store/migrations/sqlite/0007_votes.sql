-- tollgate schema, version 7: team approvals (DESIGN §13): the roster a
-- gate with rules paused with, and the ledger of votes on it.
--
-- `roster` is the gate's policy as resolved when its run paused (each
-- rule with its members, who may not vote, the payload as a vote last
-- edited it), serde_json text; NULL for a plain gate, which the first
-- allowed decision settles (every record stored before this migration).
ALTER TABLE tollgate_approvals ADD COLUMN roster TEXT;

-- The channel a plain gate's one decision came through (api, cli, inbox,
-- link, slack, gate), written by the decision's own transaction on the
-- row the claim just changed: a plain gate's ledger is that decision, read
-- from the record (`Votes::votes`), so deciding it appends no row.
ALTER TABLE tollgate_approvals ADD COLUMN decided_via TEXT;

-- The ledger: one row per vote, append only but for `superseded` (a later
-- modify replaced the payload the vote was cast on: kept for the audit, no
-- longer counted). `seq` is 1, 2, ... per key in the order cast; `rule` the
-- rule the vote counted toward (approvals on a gate with rules), `payload`
-- the edit of a modify, `payload_digest` the payload the voter saw.
-- `superseded` is 0 or 1. Times in the fixed-width UTC text form of
-- version 1. WITHOUT ROWID: the table is its key, a gate's votes stored
-- together in seq order.
CREATE TABLE tollgate_votes (
    key             TEXT NOT NULL REFERENCES tollgate_approvals (key),
    seq             INTEGER NOT NULL,
    voter           TEXT NOT NULL,
    rule            TEXT,
    decision        TEXT NOT NULL,
    reason          TEXT,
    payload         TEXT,
    channel         TEXT NOT NULL,
    payload_digest  TEXT NOT NULL,
    superseded      INTEGER NOT NULL DEFAULT 0,
    at              TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;
