-- 0017_recall_past_ingest, topic floors: run first on downgrade (0016's sql/memory_verbs.sql is re-run
-- after, giving back dna.recall without the floors).
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision);
