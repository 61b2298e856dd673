-- tollgate schema, version 2: the chat message announcing each approval.
--
-- One row per approval key that a notifier (Slack) has worked on. The row
-- holds where the message is (channel + ts, so it can be edited long after
-- Slack's response_url expired), how posting went, whether the message
-- already shows the decision, and a lease so that only one worker in any
-- process posts or edits a given message at a time. No credentials here:
-- tokens are resolved from the environment at call time and never stored.

CREATE TABLE tollgate_notifications (
    key                 TEXT PRIMARY KEY NOT NULL REFERENCES tollgate_approvals (key),
    -- Where the message is: Slack's channel id and message ts. NULL until posted.
    channel             TEXT,
    ts                  TEXT,
    posted_at           TEXT,
    -- Calls made for this message (posts and edits) that failed or succeeded.
    attempts            INTEGER NOT NULL DEFAULT 0,
    -- The last failure, for operators; never contains a token.
    last_error          TEXT,
    -- When the message was edited to show the decision (or the expiry);
    -- NULL while it still shows the buttons.
    decision_posted_at  TEXT,
    -- Until when one worker holds this message; others leave it alone. Also
    -- the backoff after a failure: nobody retries before it.
    lease_until         TEXT
);

-- The repair sweep: posted messages that still show buttons. Partial, so
-- finished messages (the audit trail, which only grows) cost nothing.
CREATE INDEX tollgate_notifications_open_idx
    ON tollgate_notifications (key)
    WHERE ts IS NOT NULL AND decision_posted_at IS NULL;
