-- tollgate schema, version 6: every spec version a run started under, kept
-- once per hash, so a pause that waits across a deploy still names the
-- version it paused under (`tollgate specs list|show`).
--
-- `canonical` is the canonical JSON the hash is of; `source` the YAML as
-- written. Secrets are `${NAME}` references in both, never their values.
-- Times in the fixed-width UTC text form of version 1. A row is written
-- once per hash; a later record of the same hash only moves `last_seen`.
CREATE TABLE tollgate_specs (
    hash        TEXT PRIMARY KEY NOT NULL,
    agent_id    TEXT NOT NULL,
    canonical   TEXT NOT NULL,
    source      TEXT NOT NULL,
    first_seen  TEXT NOT NULL,
    last_seen   TEXT NOT NULL
);

-- `specs list --agent A`, newest first.
CREATE INDEX tollgate_specs_agent_idx ON tollgate_specs (agent_id, first_seen);
