-- 0016_answers_and_bounds, topic recall (issue 15 item 1): run first on downgrade (the 0015 texts of
-- sql/memory_scoring.sql and sql/memory_verbs.sql are re-run after, giving back dna.recall without decay).
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean);
-- An overload of a name 0015 already had (dna.memory_factors, a new name, is dropped by the revision).
DROP FUNCTION IF EXISTS dna.memory_retention(jsonb, timestamptz, text);
