-- tollgate schema, version 4 (PostgreSQL): durable runs between pauses
-- (DESIGN §9). The same columns and table as the SQLite schema's version 3.
--
-- A run being executed has an owner (the node id of the process driving
-- it) and a lease, renewed while a step is in flight and cleared at each
-- durable point. A `running` run whose lease_until is past, or NULL (every
-- run stored before this migration), is orphaned: a serving process claims
-- it with one conditional write and resumes it. Adding NULL columns is a
-- catalog change only: no table rewrite.
ALTER TABLE tollgate_runs
    ADD COLUMN owner text,
    ADD COLUMN lease_until timestamptz;

-- Stuck runs wait for an operator; `approvals list --stuck` and the
-- start-up count find them here.
CREATE INDEX tollgate_runs_stuck_idx ON tollgate_runs (agent_id)
    WHERE status = 'stuck';

-- The journal of side effects: one row per step that calls out or claims,
-- written when it starts and again with its output when it completes. A
-- row still `started` after a crash is an in-doubt step. `output` is json
-- (the text as written, NUL escapes kept), as every JSON column since v3.
CREATE TABLE tollgate_run_steps (
    run_id        text COLLATE "C" NOT NULL REFERENCES tollgate_runs (id),
    step_index    bigint NOT NULL,
    step_id       text NOT NULL,
    status        text NOT NULL,
    output        json,
    at            timestamptz NOT NULL,
    PRIMARY KEY (run_id, step_index)
);
