-- tollgate schema, version 17: a Slack message's row keeps only where the
-- message is (issue 43).
--
-- Since version 16 the outbox alone posts and edits Slack messages, and it
-- hands a worker one notice of an approval at a time, in order; how each
-- call went (attempts, the last error, when to try again) is the notice's.
-- The message's own lease and failure count are left over from the
-- notifier that worked beside the outbox, and go.
ALTER TABLE tollgate_notifications DROP COLUMN IF EXISTS attempts;
ALTER TABLE tollgate_notifications DROP COLUMN IF EXISTS last_error;
ALTER TABLE tollgate_notifications DROP COLUMN IF EXISTS lease_until;
