-- 0016_answers_and_bounds, topic search: run first on downgrade (the 0013 text of sql/search.sql is re-run after).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean,
                                   integer, double precision, double precision, boolean, text, double precision, boolean);
ALTER TYPE dna.search_hit DROP ATTRIBUTE explain, DROP ATTRIBUTE floor_removed_lexical, DROP ATTRIBUTE floor_removed_dense,
    DROP ATTRIBUTE dense_exact;
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = RRF; similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); 1-based lane ranks; degraded = no query embedding; personal = the hit is in a personal partition (tenant personal:<oid>); exact = the lexical lane''s list is provably the exhaustive BM25 ranking; passage, heading, char_start, char_end = the passage that answers (its ordinal, heading path, span in the parent''s text); highlight = that passage around the query''s lexemes, matches marked «like this» (« and », not Markdown''s ** that documents hold themselves).';
DROP FUNCTION IF EXISTS dna.search_config(text);            -- 0013's bm25.sql re-creates both
DROP FUNCTION IF EXISTS dna.set_search_config(text, regconfig, double precision, double precision,
                                              double precision[], double precision, integer, integer, boolean,
                                              text, double precision);
ALTER TABLE dna.dna_search_config DROP COLUMN dense_weight, DROP COLUMN fusion;
DROP FUNCTION IF EXISTS dna.register_model(text, integer, text, text, text);
ALTER TABLE dna.dna_models DROP COLUMN document_prefix, DROP COLUMN query_prefix;
