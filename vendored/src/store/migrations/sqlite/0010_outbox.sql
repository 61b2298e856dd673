-- tollgate schema, version 10: the outbox of notices (DESIGN §14).
--
-- Where a gate's notices go, resolved at its pause from the spec's
-- `approvals.notify` and the gate's own `notify:` (JSON of
-- `notices::NoticeRoutes`, values as written: `${NAME}` references stay
-- references). NULL when the gate notifies nobody, and for every record
-- stored before this migration.
ALTER TABLE tollgate_approvals ADD COLUMN notify TEXT;

-- One row per notice: written in the transaction of the change it tells
-- of (a pause, a vote, a decision, an expiry, a cancel, a reminder, an
-- escalation), delivered at least once by a leased worker, kept after
-- delivery as the record of what was sent.
--
-- `id` is the notice's id for every delivery of it (a webhook's
-- `webhook-id`, a mail's Message-ID). `target` is where it goes as the
-- spec wrote it (a webhook URL's `${NAME}` reference, a decider's name, a
-- Slack channel), never a resolved secret. `status`: pending, failed
-- (retried at `next_at`), sent, dead. `lease_owner`/`lease_until`: the
-- worker sending it now. `window_from`: when its retry window opened (its
-- creation, or an operator's retry). Times in the fixed-width UTC text form.
CREATE TABLE tollgate_outbox (
    id           TEXT PRIMARY KEY NOT NULL,
    key          TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    event        TEXT NOT NULL,
    channel      TEXT NOT NULL,
    target       TEXT NOT NULL,
    body         TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      TEXT NOT NULL,
    lease_owner  TEXT,
    lease_until  TEXT,
    last_error   TEXT,
    created_at   TEXT NOT NULL,
    window_from  TEXT NOT NULL,
    sent_at      TEXT
) WITHOUT ROWID;

-- The workers' query: due notices, oldest due first. Partial, so the
-- delivered notices (which only grow) cost it nothing.
CREATE INDEX tollgate_outbox_due_idx
    ON tollgate_outbox (next_at, id)
    WHERE status IN ('pending', 'failed');

-- An approval's notices (`notifications list --key`).
CREATE INDEX tollgate_outbox_key_idx ON tollgate_outbox (key, created_at, id);

-- The operators' lists: failed and dead notices, newest first.
CREATE INDEX tollgate_outbox_trouble_idx
    ON tollgate_outbox (status, created_at, id)
    WHERE status IN ('failed', 'dead');

-- Webhook endpoints that answered 410 Gone: no notice is sent to them
-- until an operator retries one (which enables the endpoint again).
-- `endpoint` is the URL as written (normally a `${NAME}` reference).
CREATE TABLE tollgate_outbox_disabled (
    endpoint     TEXT PRIMARY KEY NOT NULL,
    disabled_at  TEXT NOT NULL,
    reason       TEXT NOT NULL
) WITHOUT ROWID;
