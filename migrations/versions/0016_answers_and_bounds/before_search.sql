-- 0016_answers_and_bounds, topic search (issue 15 items 3-5): run before the plane files.
-- dna.search gains offset, min_similarity, min_lexical_score, exact, fusion and dense_weight: the old signature (0013_passages) goes.
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean);
-- (and the intermediate signature of this session's first edges commit, never released)
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean,
                                   integer, double precision, double precision, boolean);
-- The hit says whether the dense lane was an exact scan and how many candidates each relevance floor removed.
ALTER TYPE dna.search_hit ADD ATTRIBUTE dense_exact boolean, ADD ATTRIBUTE floor_removed_dense integer,
    ADD ATTRIBUTE floor_removed_lexical integer;
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = the fused score (RRF); similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); scores rounded to 12 significant digits; 1-based lane ranks; degraded = no usable query embedding (NULL or the zero vector: lexical only); personal = the hit is in a personal partition (tenant personal:<oid>); exact = the lexical lane''s list is provably the exhaustive BM25 ranking; passage, heading, char_start, char_end = the passage that answers (its ordinal, heading path, span in the parent''s text); highlight = that passage around the query''s lexemes, matches marked «like this» (« and », not Markdown''s ** that documents hold themselves); dense_exact = the dense lane was an exact scan (true) or HNSW (false), NULL when degraded; floor_removed_dense / floor_removed_lexical = candidates the relevance floor (min_similarity / min_lexical_score) removed from that lane, NULL without that floor.';
