-- tollgate schema, version 1: runs, their events, pending approvals, claims.
--
-- Every table has the `tollgate_` prefix so the file can be shared with other
-- software. Timestamps are TEXT in one fixed-width UTC form
-- (2026-01-01T00:00:00.000000Z), so they sort and compare correctly as text.
-- JSON columns hold serde_json text. "trigger" is quoted because it is an SQL
-- keyword.

CREATE TABLE tollgate_runs (
    id          TEXT PRIMARY KEY NOT NULL,
    agent_id    TEXT NOT NULL,
    spec_hash   TEXT NOT NULL,
    status      TEXT NOT NULL,
    input       TEXT NOT NULL,
    "trigger"   TEXT NOT NULL,
    outputs     TEXT NOT NULL,
    error       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

-- list_stuck starts from the runs that are still running. Partial: the index
-- stays as small as the set of running runs, and a status change touches at
-- most one of its pages.
CREATE INDEX tollgate_runs_running_idx ON tollgate_runs (agent_id)
    WHERE status = 'running';

-- WITHOUT ROWID: the table is its primary key, so appending an event writes
-- one b-tree instead of a table and its key index, and a run's events are
-- stored together in seq order.
CREATE TABLE tollgate_run_events (
    run_id  TEXT NOT NULL REFERENCES tollgate_runs (id),
    seq     INTEGER NOT NULL,
    event   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE tollgate_approvals (
    key            TEXT PRIMARY KEY NOT NULL,
    run_id         TEXT NOT NULL REFERENCES tollgate_runs (id),
    agent_id       TEXT NOT NULL,
    spec_hash      TEXT NOT NULL,
    step_index     INTEGER NOT NULL,
    step_id        TEXT NOT NULL,
    phase          TEXT NOT NULL,
    message        TEXT,
    payload        TEXT NOT NULL,
    outputs        TEXT NOT NULL,
    input          TEXT NOT NULL,
    "trigger"      TEXT NOT NULL,
    status         TEXT NOT NULL,
    decision_data  TEXT,
    decided_by     TEXT,
    decided_at     TEXT,
    created_at     TEXT NOT NULL,
    expires_at     TEXT NOT NULL
);

-- Listing pending approvals newest first with a (created_at, key) cursor:
-- a walk down this index, however many rows are pending. Partial, so decided
-- records (the audit trail, which only grows) do not slow it down. The
-- queries must spell status = 'PENDING' literally for SQLite to use it.
CREATE INDEX tollgate_approvals_pending_idx
    ON tollgate_approvals (created_at DESC, key DESC)
    WHERE status = 'PENDING';

-- The same walk for one agent (`--agent`, a server that shares the store).
CREATE INDEX tollgate_approvals_pending_agent_idx
    ON tollgate_approvals (agent_id, created_at DESC, key DESC)
    WHERE status = 'PENDING';

-- A run's records: pending_for_run and the latest record of a stuck run.
CREATE INDEX tollgate_approvals_run_idx ON tollgate_approvals (run_id, created_at);

-- The expiry sweep: overdue PENDING rows only. Partial rather than
-- (status, expires_at): with `status` as a leading column the planner would
-- pick this index for the page query too and sort every pending row.
CREATE INDEX tollgate_approvals_expiry_idx
    ON tollgate_approvals (expires_at)
    WHERE status = 'PENDING';

CREATE TABLE tollgate_claims (
    key         TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
