-- tollgate schema, version 11: the approvals waiting at one step of an
-- agent (`GET /approvals?step=`, `tollgate approvals list --step`), newest
-- first by page.
--
-- Without it such a page walks the agent's pending index and tests each
-- row's step, so a step few approvals wait at reads every pending row of
-- the agent before the page is full (or found empty): seconds with a
-- million pending. With it, the page is a walk down the step's own rows
-- that stops at the page's end. Partial, as the other pending indexes: a
-- pause writes one entry here and its decision or expiry removes it. The
-- queries must spell status = 'PENDING' literally for SQLite to use it.
CREATE INDEX tollgate_approvals_pending_step_idx
    ON tollgate_approvals (agent_id, step_id, created_at DESC, key DESC)
    WHERE status = 'PENDING';
