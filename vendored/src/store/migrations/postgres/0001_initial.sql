-- tollgate schema, version 1 (PostgreSQL): runs, their events, pending
-- approvals, claims. The same tables and columns as the SQLite schema.
--
-- Every object has the `tollgate_` prefix so the database can be shared with
-- other software; nothing here touches anything else. Times are timestamptz
-- (an instant: the session's TimeZone never changes what is stored or read),
-- JSON columns are jsonb. Keys and ids are COLLATE "C" so that ordering (the
-- newest-first page cursor) is by bytes, as in SQLite, whatever the
-- database's default collation. "trigger" is quoted: it is an SQL keyword.

CREATE TABLE tollgate_runs (
    id          text COLLATE "C" PRIMARY KEY,
    agent_id    text COLLATE "C" NOT NULL,
    spec_hash   text NOT NULL,
    status      text NOT NULL,
    input       jsonb NOT NULL,
    "trigger"   jsonb NOT NULL,
    outputs     jsonb NOT NULL,
    error       text,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- list_stuck starts from the runs that are still running.
CREATE INDEX tollgate_runs_running_idx ON tollgate_runs (agent_id)
    WHERE status = 'running';

CREATE TABLE tollgate_run_events (
    run_id  text COLLATE "C" NOT NULL REFERENCES tollgate_runs (id),
    seq     bigint NOT NULL,
    event   jsonb NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE tollgate_approvals (
    key            text COLLATE "C" PRIMARY KEY,
    run_id         text COLLATE "C" NOT NULL REFERENCES tollgate_runs (id),
    agent_id       text COLLATE "C" NOT NULL,
    spec_hash      text NOT NULL,
    step_index     bigint NOT NULL,
    step_id        text NOT NULL,
    phase          text NOT NULL,
    message        text,
    payload        jsonb NOT NULL,
    outputs        jsonb NOT NULL,
    input          jsonb NOT NULL,
    "trigger"      jsonb NOT NULL,
    status         text NOT NULL,
    decision_data  jsonb,
    decided_by     text,
    decided_at     timestamptz,
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL
);

-- Listing pending approvals newest first with a (created_at, key) cursor.
-- Partial, so decided records (the audit trail, which only grows) do not
-- slow it down.
CREATE INDEX tollgate_approvals_pending_idx
    ON tollgate_approvals (created_at DESC, key DESC)
    WHERE status = 'PENDING';

CREATE INDEX tollgate_approvals_pending_agent_idx
    ON tollgate_approvals (agent_id, created_at DESC, key DESC)
    WHERE status = 'PENDING';

-- A run's records: pending_for_run and the latest record of a stuck run.
CREATE INDEX tollgate_approvals_run_idx ON tollgate_approvals (run_id, created_at);

-- The expiry sweep: overdue PENDING rows only.
CREATE INDEX tollgate_approvals_expiry_idx
    ON tollgate_approvals (expires_at)
    WHERE status = 'PENDING';

CREATE TABLE tollgate_claims (
    key         text COLLATE "C" PRIMARY KEY,
    owner       text NOT NULL,
    expires_at  timestamptz NOT NULL
);
