-- tollgate schema, version 6 (PostgreSQL): the history of approvals
-- (decided, expired, cancelled), listed newest first by page. The same
-- indexes as the SQLite schema's version 5.
--
-- A settled record is listed by when it was decided, or when it was created
-- when it never was (an expired one: the sweep sets no decided_at).
-- Partial, on what the pending indexes leave out, so a pending row costs
-- nothing here until it is settled. Pending records are listed through the
-- pending indexes of version 1; a page that wants both merges the two walks
-- (Merge Append) and stops at the page's end.
CREATE INDEX tollgate_approvals_settled_agent_idx
    ON tollgate_approvals (agent_id, (COALESCE(decided_at, created_at)) DESC, key DESC)
    WHERE status <> 'PENDING';

CREATE INDEX tollgate_approvals_settled_idx
    ON tollgate_approvals ((COALESCE(decided_at, created_at)) DESC, key DESC)
    WHERE status <> 'PENDING';
