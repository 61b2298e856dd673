-- tollgate schema, version 12: delivery lanes of the outbox (DESIGN §14).
--
-- `lane` names the endpoint a notice goes to, without anything secret: a
-- webhook's `scheme://host:port` (never its path or query), an SMTP
-- server's `host:port`, the Slack API's `host:port` (one workspace per
-- server). A delivery worker labels a notice when it first sees it (it
-- resolves the `${NAME}` references a store never does); NULL until then.
-- Workers lease at most a lane's share of notices at once (counting every
-- worker's live leases), so a hanging endpoint holds only its own.
ALTER TABLE tollgate_outbox ADD COLUMN lane TEXT;

-- Notices not labelled yet: what a worker labels before it leases.
CREATE INDEX tollgate_outbox_unlabelled_idx
    ON tollgate_outbox (created_at, id)
    WHERE lane IS NULL AND status IN ('pending', 'failed');
