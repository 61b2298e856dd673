-- tollgate schema, version 7 (PostgreSQL): every spec version a run started
-- under, kept once per hash. The same table as the SQLite schema's version 6.
--
-- `canonical` is the canonical JSON the hash is of, kept as text (the exact
-- text that was hashed, which `json` would keep too but `jsonb` would not);
-- `source` the YAML as written (the spec parser refuses a NUL, so `text`
-- holds every source). Secrets are `${NAME}` references in both, never
-- their values. A row is written once per hash; a later record of the same
-- hash only moves `last_seen`.
CREATE TABLE tollgate_specs (
    hash        text COLLATE "C" PRIMARY KEY,
    agent_id    text COLLATE "C" NOT NULL,
    canonical   text NOT NULL,
    source      text NOT NULL,
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL
);

CREATE INDEX tollgate_specs_agent_idx ON tollgate_specs (agent_id, first_seen);
