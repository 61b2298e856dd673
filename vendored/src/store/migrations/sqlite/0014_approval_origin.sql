-- tollgate schema, version 14: every approval says what asked for it
-- (issue 43).
--
-- `origin` is `pause` (a workflow run paused at a gate: `spec_hash` and
-- `step_id` say under which version and where) or `request` (a gate
-- request made through the gate API, `POST /gates` or MCP: who asked and
-- its fingerprint are in its `trigger`). Before this version a request was
-- told apart by a made-up `spec_hash` of 64 zeros; it belongs to no spec
-- version, so its `spec_hash` (and its run's) is now empty. The column
-- stays NOT NULL: SQLite cannot drop that without rebuilding the table,
-- and nothing reads a request's hash, since `origin` says it has none.
ALTER TABLE tollgate_approvals ADD COLUMN origin TEXT NOT NULL DEFAULT 'pause'
    CHECK (origin IN ('pause', 'request'));

-- The old marker, spelled out once here for the backfill: 64 zeros.
UPDATE tollgate_approvals SET origin = 'request', spec_hash = ''
    WHERE spec_hash = printf('%064d', 0);

UPDATE tollgate_runs SET spec_hash = ''
    WHERE spec_hash = printf('%064d', 0) AND agent_id LIKE 'gate:%';
