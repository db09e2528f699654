-- 0022_first_week, topic pagination (issue 27 item 6): run before the plane files. dna.recall and
-- dna.list_memories gain "offset" (integer, default 0): their 0021 signatures go, and the plane files
-- (memory_verbs.sql, memory_lifecycle.sql) create the new ones. dna.search has taken "offset" since 0016.
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer);
DROP FUNCTION IF EXISTS dna.list_memories(text, text[], text, boolean, timestamptz, integer, boolean, jsonb);
