-- tollgate schema, version 5 (PostgreSQL): listing runs (GET /runs,
-- `tollgate runs list`), newest first by page, reads this index instead of
-- the table. The same index as the SQLite schema's version 4.
--
-- One index, on what a run never changes (its agent, when it was created,
-- its id): a status filter walks it newest first and stops at a page, so a
-- run's status changes cost no index writes. Stuck runs have their own
-- index (version 4).
CREATE INDEX tollgate_runs_by_age_idx
    ON tollgate_runs (agent_id, created_at DESC, id DESC);
