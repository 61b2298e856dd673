-- tollgate schema, version 3 (PostgreSQL): keep every value as it was
-- given, NUL characters included, as the SQLite store does.
--
-- jsonb refuses a string holding \u0000 and a text column refuses a NUL
-- byte, so a run input, a payload, a reason or a message with one could not
-- be stored at all. `json` keeps the JSON text as written (\u0000 escaped),
-- and object keys in their written order. The text columns that carry
-- what people and downstreams wrote (a gate's message, who decided, a run's
-- error, a chat API's last error) now hold that text as a JSON string. The conversion keeps every
-- existing value (a jsonb value as its JSON text, a text as a JSON string);
-- it rewrites the three tables once, so on a large store it takes a while
-- under an exclusive lock: run it (start one node) at a quiet time.

ALTER TABLE tollgate_runs
    ALTER COLUMN input TYPE json USING input::json,
    ALTER COLUMN "trigger" TYPE json USING "trigger"::json,
    ALTER COLUMN outputs TYPE json USING outputs::json,
    ALTER COLUMN error TYPE json USING to_json(error);

ALTER TABLE tollgate_run_events
    ALTER COLUMN event TYPE json USING event::json;

ALTER TABLE tollgate_approvals
    ALTER COLUMN message TYPE json USING to_json(message),
    ALTER COLUMN payload TYPE json USING payload::json,
    ALTER COLUMN outputs TYPE json USING outputs::json,
    ALTER COLUMN input TYPE json USING input::json,
    ALTER COLUMN "trigger" TYPE json USING "trigger"::json,
    ALTER COLUMN decision_data TYPE json USING decision_data::json,
    ALTER COLUMN decided_by TYPE json USING to_json(decided_by);

ALTER TABLE tollgate_notifications
    ALTER COLUMN last_error TYPE json USING to_json(last_error);
