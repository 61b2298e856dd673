-- tollgate schema, version 8 (PostgreSQL): team approvals (DESIGN §13).
-- The same column and table as the SQLite schema's version 7.
--
-- `roster` is the gate's policy as resolved when its run paused; NULL for
-- a plain gate (and every record stored before this migration). Adding a
-- NULL column is a catalog change only: no table rewrite. JSON columns
-- are json (the text as written, NUL escapes kept), as since version 3.
ALTER TABLE tollgate_approvals ADD COLUMN roster json;

-- The channel a plain gate's one decision came through, written with the
-- decision: a plain gate's ledger is read from its record, no row is
-- appended for it (see the SQLite schema's version 7).
ALTER TABLE tollgate_approvals ADD COLUMN decided_via text;

-- The ledger: one row per vote, append only but for `superseded` (a later
-- modify replaced the payload the vote was cast on: kept for the audit, no
-- longer counted). `seq` is 1, 2, ... per key in the order cast: a cast
-- holds its approval's row lock (`SELECT ... FOR UPDATE`), so votes of one
-- key are numbered one at a time. What people wrote (`voter`, `reason`) is
-- kept as a JSON string, as `decided_by` is since version 3.
CREATE TABLE tollgate_votes (
    key             text COLLATE "C" NOT NULL REFERENCES tollgate_approvals (key),
    seq             bigint NOT NULL,
    voter           json NOT NULL,
    rule            text,
    decision        text NOT NULL,
    reason          json,
    payload         json,
    channel         text NOT NULL,
    payload_digest  text NOT NULL,
    superseded      boolean NOT NULL DEFAULT false,
    at              timestamptz NOT NULL,
    PRIMARY KEY (key, seq)
);
