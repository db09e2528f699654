-- Undo of topic diversity (revision 0022_first_week): the signatures with the diversity arguments go; the
-- revision then re-runs 0021's texts of search.sql and memory_verbs.sql (the 0021 signatures of dna.search and
-- dna.recall) and 0018's fusion.sql, and drops the functions 0022 added (dna.diversify, dna.text_key,
-- dna.check_diversity, dna.default_duplicate_similarity, dna.default_mmr_lambda).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                                   double precision, boolean, timestamptz, boolean, boolean, integer, double precision,
                                   double precision, boolean, text, double precision, boolean, jsonb, dna.past_text[], jsonb,
                                   text, double precision, double precision);
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer,
                                   integer, text, double precision);   -- with topic pagination's "offset"
