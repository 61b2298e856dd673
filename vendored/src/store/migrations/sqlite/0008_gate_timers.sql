-- tollgate schema, version 8: what a waiting gate does by itself (DESIGN
-- §13): its `on_timeout` when its time runs out, and its reminders and
-- escalations while it waits.
--
-- `on_timeout` is the gate's action when its time runs out (reject,
-- approve, continue), NULL for `expire` (every record stored before this
-- migration): the expiry sweep marks only NULL rows EXPIRED; the others
-- are settled by their action, as a claim by `timeout`.
ALTER TABLE tollgate_approvals ADD COLUMN on_timeout TEXT;

-- When the gate's next reminder or escalation is due (the roster holds
-- the list), NULL when none is left: the sweep finds due ones through the
-- index below and moves this on in the same write that does them, so each
-- is done once across processes. Times in the fixed-width UTC text form.
ALTER TABLE tollgate_approvals ADD COLUMN next_nudge_at TEXT;

-- Partial, as the expiry index: only pending rows with something left to
-- do, so a million plain pending gates cost it nothing.
CREATE INDEX tollgate_approvals_nudge_idx
    ON tollgate_approvals (next_nudge_at)
    WHERE status = 'PENDING' AND next_nudge_at IS NOT NULL;
