-- tollgate schema, version 9: the approver's input given with a vote on a
-- gate with a `form:` (DESIGN §13), serde_json text of the object as
-- checked against the form (defaults filled in); NULL for a vote without
-- input (every vote stored before this migration). A plain gate's input is
-- its record's `decision_data.input`.
ALTER TABLE tollgate_votes ADD COLUMN input TEXT;
