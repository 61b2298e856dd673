-- tollgate schema, version 13 (PostgreSQL): delivery lanes of the outbox
-- (DESIGN §14). The same column and index as the SQLite schema's version
-- 12; see there for what `lane` means. Adding a NULL column is a catalog
-- change only.
ALTER TABLE tollgate_outbox ADD COLUMN lane text;

CREATE INDEX tollgate_outbox_unlabelled_idx
    ON tollgate_outbox (created_at, id)
    WHERE lane IS NULL AND status IN ('pending', 'failed');
