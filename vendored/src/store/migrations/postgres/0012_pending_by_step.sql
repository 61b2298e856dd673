-- tollgate schema, version 12 (PostgreSQL): the approvals waiting at one
-- step of an agent (`GET /approvals?step=`, `tollgate approvals list
-- --step`), newest first by page. The same index as the SQLite schema's
-- version 12.
--
-- Without it such a page walks the agent's pending index and tests each
-- row's step, so a step few approvals wait at reads every pending row of
-- the agent before the page is full (or found empty). With it, the page is
-- a walk down the step's own rows that stops at the page's end. Partial,
-- as the other pending indexes: a pause writes one entry here and its
-- decision or expiry removes it. Built without CONCURRENTLY (migrations
-- run in a transaction), so on a large store it holds writes to the
-- approvals for the time of one pass over the pending rows.
CREATE INDEX tollgate_approvals_pending_step_idx
    ON tollgate_approvals (agent_id, step_id, created_at DESC, key DESC)
    WHERE status = 'PENDING';
