-- The chat message (Slack) announcing each approval: where it was posted,
-- whether its decision was shown, and a lease so that one worker in any
-- process posts or edits it.
CREATE TABLE tollgate_notifications (
    key                 text COLLATE "C" PRIMARY KEY REFERENCES tollgate_approvals (key),
    channel             text,
    ts                  text,
    posted_at           timestamptz,
    attempts            integer NOT NULL DEFAULT 0,
    last_error          text,
    decision_posted_at  timestamptz,
    lease_until         timestamptz
);

CREATE INDEX tollgate_notifications_open_idx ON tollgate_notifications (key)
    WHERE ts IS NOT NULL AND decision_posted_at IS NULL;
