-- 0016_answers_and_bounds, topic search (issue 15 items 3-5): run before the plane files.
-- dna.search gains offset, min_similarity, min_lexical_score, exact, fusion, dense_weight and explain: the old signature (0013_passages) goes.
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean);
-- (and the intermediate signatures of this session's commits, never released)
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean,
                                   integer, double precision, double precision, boolean);
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer,
                                   double precision[], double precision, boolean, timestamptz, boolean, boolean,
                                   integer, double precision, double precision, boolean, text, double precision);
-- The hit says whether the dense lane was an exact scan and how many candidates each relevance floor removed.
ALTER TYPE dna.search_hit ADD ATTRIBUTE dense_exact boolean, ADD ATTRIBUTE floor_removed_dense integer,
    ADD ATTRIBUTE floor_removed_lexical integer, ADD ATTRIBUTE explain jsonb;
COMMENT ON TYPE dna.search_hit IS 'One hit of dna.search: score = the fused score (by default the convex combination of the min-max normalised lane scores, in [0, 1]; RRF with fusion => rrf); similarity = cosine in [-1,1] (NULL if not in the dense lane); lexical_score (NULL if not in the lexical lane); scores rounded to 12 significant digits; 1-based lane ranks; degraded = no usable query embedding (NULL or the zero vector: lexical only); personal = the hit is in a personal partition (tenant personal:<oid>); exact = the lexical lane''s list is provably the exhaustive BM25 ranking; passage, heading, char_start, char_end = the passage that answers (its ordinal, heading path, span in the parent''s text); highlight = that passage around the query''s lexemes, matches marked «like this» (« and », not Markdown''s ** that documents hold themselves); dense_exact = the dense lane was an exact scan (true) or HNSW (false), NULL when degraded; floor_removed_dense / floor_removed_lexical = candidates the relevance floor (min_similarity / min_lexical_score) removed from that lane, NULL without that floor; explain = with explain => true, the lanes'' ranks, raw scores and fusion terms and the answer''s receipt (see dna.search), else NULL.';
-- The scope's fusion settings (dna.set_search_config(..., fusion, dense_weight); dna.search_config returns them).
ALTER TABLE dna.dna_search_config
    ADD COLUMN fusion text CHECK (fusion IN ('rrf', 'convex')),
    ADD COLUMN dense_weight double precision CHECK (dense_weight >= 0 AND dense_weight <= 1);
COMMENT ON COLUMN dna.dna_search_config.fusion IS 'dna.search''s fusion for this scope: rrf or convex; NULL = the built-in default.';
COMMENT ON COLUMN dna.dna_search_config.dense_weight IS 'The convex fusion''s dense weight in [0, 1] (lexical: 1 - dense_weight); NULL = the built-in default.';
DROP FUNCTION IF EXISTS dna.search_config(text);            -- its result gains fusion, dense_weight
DROP FUNCTION IF EXISTS dna.set_search_config(text, regconfig, double precision, double precision,
                                              double precision[], double precision, integer, integer, boolean);
-- Query vs document embeddings (issue 15 item 4): the role prefixes a model_id's vectors were embedded with.
ALTER TABLE dna.dna_models
    ADD COLUMN query_prefix text NOT NULL DEFAULT '',
    ADD COLUMN document_prefix text NOT NULL DEFAULT '';
COMMENT ON COLUMN dna.dna_models.query_prefix IS 'Put before a query before embedding it (e5: ''query: ''; bge v1.5: its query instruction); '''' = none (MiniLM).';
COMMENT ON COLUMN dna.dna_models.document_prefix IS 'Put before a document (or memory) before embedding it (e5: ''passage: ''); '''' = none.';
DROP FUNCTION IF EXISTS dna.register_model(text, integer, text);   -- gains query_prefix, document_prefix
