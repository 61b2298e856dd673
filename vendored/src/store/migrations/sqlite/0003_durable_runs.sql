-- tollgate schema, version 3: durable runs between pauses (DESIGN §9).
--
-- A run being executed has an owner (the node id of the process driving
-- it: host, pid and a random part) and a lease. The driver renews the lease
-- while a step is in flight and clears both at each durable point (a
-- pause, an end). A `running` run whose lease_until is past, or NULL (every
-- run stored before this migration), is orphaned: a serving process claims
-- it with one conditional write and resumes it. Timestamps in the same
-- fixed-width UTC text as every other column.
ALTER TABLE tollgate_runs ADD COLUMN owner TEXT;
ALTER TABLE tollgate_runs ADD COLUMN lease_until TEXT;

-- Stuck runs (a step was in flight when its process died) wait for an
-- operator; `approvals list --stuck` and the start-up count find them here.
CREATE INDEX tollgate_runs_stuck_idx ON tollgate_runs (agent_id)
    WHERE status = 'stuck';

-- The journal of side effects: one row per step that calls out or claims
-- (a tool, a model, a dedupe step), written when the step starts (in the
-- commit that stores the run's progress before the call) and again with
-- its output when it completes. Pure steps write nothing: recovery
-- re-evaluates them. A completed row is never executed again; a row still
-- `started` after a crash is an in-doubt step (its `on_crash` decides).
-- WITHOUT ROWID: the table is its key, a run's steps stored together.
CREATE TABLE tollgate_run_steps (
    run_id        TEXT NOT NULL REFERENCES tollgate_runs (id),
    step_index    INTEGER NOT NULL,
    step_id       TEXT NOT NULL,
    status        TEXT NOT NULL,
    output        TEXT,
    at            TEXT NOT NULL,
    PRIMARY KEY (run_id, step_index)
) WITHOUT ROWID;
