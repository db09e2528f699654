-- Undo of topic pagination (revision 0022_first_week): the signatures with "offset" go; the revision
-- then re-runs 0021's memory_verbs.sql and 0019's memory_lifecycle.sql, which create the 0021 signatures
-- of dna.recall and dna.list_memories again (on a database Citus distributes, SELECT dna.distribute()
-- delegates them again: it is idempotent).
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer,
                                   integer, text, double precision);   -- with topic diversity's arguments
DROP FUNCTION IF EXISTS dna.list_memories(text, text[], text, boolean, timestamptz, integer, boolean, jsonb, integer);
