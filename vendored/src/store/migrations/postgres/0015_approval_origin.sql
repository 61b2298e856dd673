-- tollgate schema, version 15 (PostgreSQL): every approval says what asked
-- for it. The same change as the SQLite schema's version 14; see there.
-- `spec_hash` stays NOT NULL as on SQLite, so both stores hold the same
-- rows: a gate request's is empty, and `origin` says it has none.
ALTER TABLE tollgate_approvals ADD COLUMN origin text NOT NULL DEFAULT 'pause'
    CONSTRAINT tollgate_approvals_origin_kind CHECK (origin IN ('pause', 'request'));

-- The old marker, spelled out once here for the backfill: 64 zeros.
UPDATE tollgate_approvals SET origin = 'request', spec_hash = ''
    WHERE spec_hash = repeat('0', 64);

UPDATE tollgate_runs SET spec_hash = ''
    WHERE spec_hash = repeat('0', 64) AND agent_id LIKE 'gate:%';
