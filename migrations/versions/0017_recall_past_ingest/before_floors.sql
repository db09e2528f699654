-- 0017_recall_past_ingest, topic floors (issue 15 item 3, for recall): run before the plane files.
-- dna.recall gains min_similarity and min_lexical_score: the 0016 signature goes (sql/memory_verbs.sql
-- creates the new one).
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean);
