-- tollgate schema, version 14 (PostgreSQL): a `run_started` event without
-- the run's input. The same change as the SQLite schema's version 13; see
-- there. No table changes shape: this version marks the new way of writing.
SELECT 1;
