-- tollgate schema, version 15: Slack messages are kept in line by the
-- outbox alone (issue 43).
--
-- Until this version a server also followed its own run events, the
-- store's changes and a repair sweep to post and edit Slack messages;
-- from now on only the outbox's notices do. An approval paused before the
-- outbox (version 10) has no notice and no stored routes (`notify` NULL),
-- so nothing would post its message, edit it to show votes, or show how
-- it was settled. For each such approval whose message still needs work
-- this writes one Slack notice, and stores Slack as its route so that the
-- changes still to come (votes, the decision, the expiry) write theirs:
--
-- - pending, never posted: `approval.requested` (posts it). A pending
--   approval with no message row at all counts only when its agent's
--   other approvals have one (a server with Slack served that agent);
-- - pending, posted, on a gate that counts votes: `approval.voted` (shows
--   the ledger as it is now);
-- - settled, posted, still showing its buttons: the outcome's event.
--
-- The spec's channel as written is not in the store: the channel the
-- message was posted in stands in for the notice's target, or '' before it
-- is posted (a Slack notice's target is informational; the served spec's
-- channel is where a post goes). The body says what the store holds; the
-- payload's digest is left empty, since SQL cannot hash it canonically
-- (the Slack sender renders the message from the approval itself).
WITH
    now (at) AS (
        SELECT strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.'
            || substr(strftime('%f', 'now'), 4, 3) || '000Z'
    ),
    slack_agents (agent_id) AS (
        SELECT DISTINCT a.agent_id
        FROM tollgate_notifications n JOIN tollgate_approvals a ON a.key = n.key
    ),
    todo (key, run_id, agent_id, step_id, phase, message, status, expires_at,
          payload, target, event) AS (
        SELECT a.key, a.run_id, a.agent_id, a.step_id, a.phase, a.message,
            a.status, a.expires_at, a.payload, COALESCE(n.channel, ''),
            CASE
                WHEN a.status = 'PENDING' AND n.ts IS NULL THEN 'approval.requested'
                WHEN a.status = 'PENDING' THEN 'approval.voted'
                WHEN a.status IN ('APPROVED', 'MODIFIED') THEN 'approval.approved'
                WHEN a.status = 'REJECTED' THEN 'approval.rejected'
                WHEN a.status = 'EXPIRED' THEN 'approval.expired'
                ELSE 'approval.cancelled'
            END
        FROM tollgate_approvals a
        LEFT JOIN tollgate_notifications n ON n.key = a.key
        WHERE a.notify IS NULL
          AND NOT EXISTS (SELECT 1 FROM tollgate_outbox o WHERE o.key = a.key)
          AND (
                (a.status = 'PENDING' AND n.ts IS NULL
                    AND (n.key IS NOT NULL
                         OR a.agent_id IN (SELECT agent_id FROM slack_agents)))
             OR (a.status = 'PENDING' AND n.ts IS NOT NULL AND a.roster IS NOT NULL)
             OR (a.status <> 'PENDING' AND n.ts IS NOT NULL
                    AND n.decision_posted_at IS NULL)
          )
    )
INSERT INTO tollgate_outbox (id, key, run_id, event, channel, target, body, status,
                             attempts, next_at, created_at, window_from)
SELECT
    -- A UUID v4, as every notice's id.
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
        || substr(lower(hex(randomblob(2))), 2) || '-'
        || substr('89ab', 1 + (abs(random()) % 4), 1)
        || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))),
    todo.key, todo.run_id, todo.event, 'slack', todo.target,
    json_object(
        'type', todo.event,
        'timestamp', now.at,
        'data', json_object(
            'key', todo.key,
            'run_id', todo.run_id,
            'agent', todo.agent_id,
            'step', todo.step_id,
            'phase', todo.phase,
            'message', todo.message,
            'status', todo.status,
            'expires_at', todo.expires_at,
            'payload_digest', '',
            'payload_preview', substr(todo.payload, 1, 500)
        )
    ),
    'pending', 0, now.at, now.at, now.at
FROM todo, now;

-- Slack as the route of the approvals just given a notice (no approval
-- without routes had a notice before), so their next changes write one.
UPDATE tollgate_approvals
SET notify = json_object('slack', (SELECT o.target FROM tollgate_outbox o
                                   WHERE o.key = tollgate_approvals.key
                                     AND o.channel = 'slack' LIMIT 1))
WHERE notify IS NULL
  AND key IN (SELECT key FROM tollgate_outbox WHERE channel = 'slack');
