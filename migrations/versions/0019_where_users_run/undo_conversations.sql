-- Undo of topic conversations (revision 0019_where_users_run): dna.recall with context goes (the revision
-- re-runs 0018's text after the undo fragments), and the Kinds Turn and Episode are unregistered (their
-- records, if any, stay: records of a Kind no longer registered, which no verb reads as memories).
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer);
DELETE FROM dna.dna_kinds AS k WHERE k.kind IN ('Turn', 'Episode');
