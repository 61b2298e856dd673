-- tollgate schema, version 5: the history of approvals (decided, expired,
-- cancelled), listed newest first by page (the approvals inbox and history
-- pages, `StateStore::list_approvals`).
--
-- A settled record is listed by when it was decided, or when it was created
-- when it never was (an expired one: the sweep sets no decided_at). Partial,
-- on what the pending indexes leave out, so a pending row costs nothing
-- here until it is settled, and a page is a walk down the index that stops
-- at the page's end. Pending records are listed through the pending indexes
-- of version 1. The queries must spell status <> 'PENDING' and the
-- COALESCE expression literally for SQLite to use these.
CREATE INDEX tollgate_approvals_settled_agent_idx
    ON tollgate_approvals (agent_id, COALESCE(decided_at, created_at) DESC, key DESC)
    WHERE status <> 'PENDING';

-- The same walk over every agent sharing the file.
CREATE INDEX tollgate_approvals_settled_idx
    ON tollgate_approvals (COALESCE(decided_at, created_at) DESC, key DESC)
    WHERE status <> 'PENDING';
