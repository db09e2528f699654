-- 0016_answers_and_bounds, topic recall (issue 15 item 1): run before the plane files.
-- dna.recall gains decay and explain: the 0015 signature goes (sql/memory_verbs.sql creates the new one).
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean);
