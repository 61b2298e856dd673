-- tollgate schema, version 4: listing runs (GET /runs, `tollgate runs
-- list`), newest first by page, reads this index instead of the table.
--
-- One index, on what a run never changes (its agent, when it was created,
-- its id): a status filter walks it newest first and stops at a page, so a
-- run's status changes (several per run) cost no index writes. Stuck runs,
-- the status operators look for, have their own index (version 3).
CREATE INDEX tollgate_runs_by_age_idx
    ON tollgate_runs (agent_id, created_at DESC, id DESC);
