-- tollgate schema, version 9 (PostgreSQL): what a waiting gate does by
-- itself (DESIGN §13). The same columns as the SQLite schema's version 8:
-- `on_timeout` (reject, approve, continue; NULL for expire, which the
-- expiry sweep handles) and `next_nudge_at` (the next reminder or
-- escalation due, NULL when none is left). Adding NULL columns is a
-- catalog change only: no table rewrite.
ALTER TABLE tollgate_approvals ADD COLUMN on_timeout text;
ALTER TABLE tollgate_approvals ADD COLUMN next_nudge_at timestamptz;

CREATE INDEX tollgate_approvals_nudge_idx
    ON tollgate_approvals (next_nudge_at)
    WHERE status = 'PENDING' AND next_nudge_at IS NOT NULL;
