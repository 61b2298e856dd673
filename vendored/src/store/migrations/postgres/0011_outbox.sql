-- tollgate schema, version 11 (PostgreSQL): the outbox of notices (DESIGN
-- §14). The same tables as the SQLite schema's version 10; see there for
-- what each column means. Adding a NULL column is a catalog change only.
ALTER TABLE tollgate_approvals ADD COLUMN notify jsonb;

CREATE TABLE tollgate_outbox (
    id           text COLLATE "C" PRIMARY KEY,
    key          text COLLATE "C" NOT NULL,
    run_id       text COLLATE "C" NOT NULL,
    event        text NOT NULL,
    channel      text NOT NULL,
    target       text NOT NULL,
    body         jsonb NOT NULL,
    status       text NOT NULL,
    attempts     bigint NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL,
    lease_owner  text,
    lease_until  timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL,
    window_from  timestamptz NOT NULL,
    sent_at      timestamptz
);

CREATE INDEX tollgate_outbox_due_idx
    ON tollgate_outbox (next_at, id)
    WHERE status IN ('pending', 'failed');

CREATE INDEX tollgate_outbox_key_idx ON tollgate_outbox (key, created_at, id);

CREATE INDEX tollgate_outbox_trouble_idx
    ON tollgate_outbox (status, created_at, id)
    WHERE status IN ('failed', 'dead');

CREATE TABLE tollgate_outbox_disabled (
    endpoint     text PRIMARY KEY,
    disabled_at  timestamptz NOT NULL,
    reason       text NOT NULL
);
