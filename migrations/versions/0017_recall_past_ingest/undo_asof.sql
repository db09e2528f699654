-- Undo of topic "asof" (revision 0017_recall_past_ingest): the functions that take or return
-- dna.past_text, then the type; the revision then re-runs 0016's search.sql and memory_verbs.sql
-- (dna.search with 23 arguments, dna.recall building its past texts itself).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                                   double precision, boolean, timestamptz, boolean, boolean, integer, double precision,
                                   double precision, boolean, text, double precision, boolean, jsonb, dna.past_text[]);
DROP FUNCTION IF EXISTS dna.as_of_past_texts(text, timestamptz, text, text[], text);
DROP FUNCTION IF EXISTS dna.as_of_report(text, timestamptz, text[], text, jsonb, dna.past_text[]);
DROP TYPE IF EXISTS dna.past_text;
DROP INDEX IF EXISTS dna.dna_versions_scope_id_version;
