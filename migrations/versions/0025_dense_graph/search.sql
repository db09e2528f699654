-- pydna SQL package — search plane: hybrid search (dense KNN + BM25 lexical lane from
-- sql/bm25.sql, fused by the convex combination or dna.rrf, sql/fusion.sql) over passages,
-- answered one hit per document (its best passage) or per passage; validation, width routing,
-- the model registry, a scope's models and the text helpers are sql/search_support.sql; writing
-- documents is sql/documents.sql. Tables come from the alembic revisions; this file only defines functions.

-- ---------------------------------------------------------------------------------------------
-- The dense lane's HNSW search width
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.hnsw_ef_search(k integer, depth integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT least(1000, greatest(40, 4 * depth, 10 * k)) $$;

COMMENT ON FUNCTION dna.hnsw_ef_search(integer, integer) IS
'hnsw.ef_search for dna.search''s dense lane when HNSW answers it: least(1000, greatest(40, 4 x depth, 10 x k)), '
'k the hits asked for and depth the lane''s candidates (default max(4k, 100): 400 for k = 10); 40 is pgvector''s '
'default, 1000 its maximum. The lane sets it for its own transaction (set_config(..., true)) with '
'hnsw.iterative_scan = strict_order, so a lane deeper than ef_search or under a filter keeps scanning. '
'ef_search = depth (100 at k = 10, the rule before) gave recall@10 against an exact scan of 0.77-0.81 on '
'5,000 random 384-dim vectors once ANALYZE let the planner take the graph; 4 x depth gives >= 0.95 on random '
'5k, SciFact and 100k (bench/dense_recall.py, bench/RESULTS.md). NULL k or depth: 40 (greatest ignores NULLs). Pure.';

CREATE OR REPLACE FUNCTION dna.hnsw_ef_search(k integer, depth integer, graph_rows double precision)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT least(1000, ceil(dna.hnsw_ef_search(k, depth)
                            * (1 + 0.5 * greatest(0, log(greatest(graph_rows, 1)) - 5))))::integer
$$;

COMMENT ON FUNCTION dna.hnsw_ef_search(integer, integer, double precision) IS
'hnsw.ef_search for dna.search''s dense lane over a graph of graph_rows rows (the width table''s '
'pg_class.reltuples: the graph holds every scope of the table): dna.hnsw_ef_search(k, depth) x (1 + 0.5 x '
'max(0, log10(graph_rows) - 5)), at most 1000: 400 for k = 10 up to 100,000 rows, 600 at 1,000,000, 800 at '
'10,000,000. An HNSW graph''s recall at a fixed ef_search falls as it grows: at 1M SciFact-derived rows '
'(bench/scale.py''s corpus, graph m 16, ef_construction 128) recall@10 against an exact scan was 0.950 at 400 '
'and 0.966 at 600 (bench/ef_sweep.py, bench/RESULTS.md); the rule was chosen on SciFact''s train queries. '
'NULL, 0 or -1 rows (never analyzed; a Citus coordinator''s shell): the two-argument rule. Pure (revision 0025).';

CREATE OR REPLACE FUNCTION dna.exact_dense_sql(tbl regclass, lane_filter text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT format(
        'WITH r AS MATERIALIZED (
             SELECT x.kind, x.name, x.tenant, x.passage, dna.score_round(x.raw) AS similarity
             FROM (SELECT t.kind, t.name, t.tenant, t.passage, 1 - (t.embedding <=> $3) AS raw
                   FROM %1$s AS t
                   WHERE t.embedding IS NOT NULL AND %2$s
                   ORDER BY 5 DESC FETCH FIRST ($4 + 64) ROWS WITH TIES) AS x),
         cut AS MATERIALIZED (
             SELECT count(*) < $4 + 64
                    OR min(r.similarity) < (SELECT s.similarity FROM r AS s ORDER BY s.similarity DESC
                                            OFFSET greatest($4 - 1, 0) LIMIT 1) AS held
             FROM r)
         SELECT c.* FROM (
         SELECT c.kind, c.name, c.tenant, c.passage, c.similarity,
                row_number() OVER (ORDER BY c.similarity DESC, c.kind, c.name, c.tenant, c.passage)::integer AS rnk
         FROM (SELECT r.kind, r.name, r.tenant, r.passage, r.similarity FROM r WHERE (SELECT h.held FROM cut AS h)
               UNION ALL
               SELECT t.kind, t.name, t.tenant, t.passage, dna.score_round(1 - (t.embedding <=> $3))
               FROM %1$s AS t
               WHERE t.embedding IS NOT NULL AND %2$s AND NOT (SELECT h.held FROM cut AS h)) AS c) AS c
         WHERE c.rnk <= $4', tbl, lane_filter)
$$;

COMMENT ON FUNCTION dna.exact_dense_sql(regclass, text) IS
'Internal (dna.search): the text of the exact dense lane over width table tbl under lane_filter (its $3 the '
'query vector, $4 the depth; rows kind, name, tenant, passage, similarity, rnk): the first depth rows by the '
'cosine rounded to 12 digits (dna.score_round), then key. Only the first depth + 64 rows by the raw cosine '
'(ties included) are rounded; when the last of them rounds as high as the depth-th (more than 64 rows within '
'rounding of the cut) the whole partition is rounded instead. Same rows either way. Pure.';

-- ---------------------------------------------------------------------------------------------
-- Hybrid search
-- ---------------------------------------------------------------------------------------------

DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[], double precision);  -- before the personal parameter (0009_tenancy)
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[], double precision, boolean);  -- before valid_time
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[], double precision, boolean, timestamptz);  -- before passages (0013_passages)
CREATE OR REPLACE FUNCTION dna.search(
    scope text, query text,
    query_embedding vector DEFAULT NULL, model_id text DEFAULT NULL,
    k integer DEFAULT 10, kinds text[] DEFAULT NULL, tenant text DEFAULT '',
    name_prefix text DEFAULT NULL, candidates integer DEFAULT NULL,
    weights double precision[] DEFAULT NULL, rrf_k double precision DEFAULT NULL, personal boolean DEFAULT false,
    valid_time timestamptz DEFAULT now(), passages boolean DEFAULT false, highlight boolean DEFAULT NULL,
    "offset" integer DEFAULT 0, min_similarity double precision DEFAULT NULL,
    min_lexical_score double precision DEFAULT NULL, exact boolean DEFAULT NULL,
    fusion text DEFAULT NULL, dense_weight double precision DEFAULT NULL, explain boolean DEFAULT false,
    past_texts jsonb DEFAULT NULL, past dna.past_text[] DEFAULT NULL, filter jsonb DEFAULT NULL,
    diversity text DEFAULT NULL, duplicate_similarity double precision DEFAULT NULL, mmr_lambda double precision DEFAULT NULL)
RETURNS SETOF dna.search_hit
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    dims integer;
    tbl regclass;
    cfg record;
    dense_depth integer;
    lexical_depth integer;
    dense_order text;
    lane_filter text;
    dense_sql text;
    lexical_sql text;
    terms text[] := '{}';
    missing text[];
    retired integer := 0;
    dense_exact boolean := false;
    returned bigint;
    removed_dense bigint;
    removed_lexical bigint;
    plan text;
    local_execution text;                                -- Citus: citus.enable_local_execution before explain's EXPLAIN
    answer jsonb;
    past_keys text[];                                    -- past_texts' keys: name, kind, tenant joined by chr(31)
    past_hits dna.past_text[];                           -- the past texts to rank (a tsv, of the Kinds and name_prefix asked)
    past_lane jsonb;                                     -- the lexical lane's report
    past_idf float8[];                                   -- the lane's idf per term (terms' order)
    past_avg_len float8;                                 -- the lane's average document length
    lane_cut integer;                                    -- with past texts: the lane's cut before the records leave
    lane_extra integer;                                  -- the rows it fetches beyond that cut
    lane_ids bigint[] := '{}';                          -- with past texts: the lexical lane's rows,
    lane_kinds text[] := '{}';                          -- those kept (in force, not leaving), by key
    lane_names text[] := '{}';
    lane_tenants text[] := '{}';
    lane_passages integer[] := '{}';
    lane_scores float8[] := '{}';
    lane_exact boolean[] := '{}';
    seqscan text;                                        -- enable_seqscan before the HNSW lane's statement
    bitmapscan text;                                     -- enable_bitmapscan before it
    sorting text;                                        -- enable_sort before it
    filter_pred text;                                    -- the filter compiled over t.metadata (dna.filter_sql)
    matching bigint;                                     -- with a filter: rows of the partition it keeps (up to a bound)
    dense_found bigint;                                  -- with a filter: candidates the HNSW lane gave
    dense_route text;                                    -- with a filter: how the dense lane was answered, for explain
    any_match boolean;                                   -- with a filter and no hit: does any row pass it?
    degraded boolean := query_embedding IS NULL OR vector_norm(query_embedding) = 0;   -- the zero vector has no direction
    best_sql text;                                       -- the answer's window of the ranking (diversified: dna.diversify)
    collapse_read text;                                  -- the walk's arrays: the ranking's vectors, texts and scores
    exact_counted boolean := false;                      -- the exact rule's count taken with the out-of-force count
BEGIN
    scope := dna.check_scope(scope);                      -- 22023 outside the name rule (unless rows stand under it)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF k IS NULL OR k < 0 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 0 and 1000, got %', k USING ERRCODE = '22023', HINT = 'k is the number of hits: an integer from 0 to 1000 (0: none); for ranks past 1000 page with "offset".';
    END IF;
    IF "offset" IS NULL OR "offset" < 0 OR "offset" > 9000 THEN
        RAISE EXCEPTION 'offset must be between 0 and 9000, got %', "offset" USING ERRCODE = '22023', HINT = 'offset is the number of ranks skipped: an integer from 0 to 9000; page p of size k is offset (p - 1) * k.';
    END IF;
    IF candidates IS NOT NULL AND (candidates < 1 OR candidates > 10000) THEN
        RAISE EXCEPTION 'candidates must be between 1 and 10000, got %', candidates USING ERRCODE = '22023', HINT = 'candidates is each lane''s depth: an integer from 1 to 10000, or NULL for the scope''s setting, else max(4k, 100).';
    END IF;
    IF length(query) > 10000 THEN
        RAISE EXCEPTION 'query is % characters long; the limit is 10000', length(query) USING ERRCODE = '22001', HINT = 'Ask with a query of at most 10000 characters (the words of a question, not a document).';
    END IF;
    PERFORM dna.check_weights('weights', weights, 2);     -- 2 finite values >= 0 (dense, lexical)
    IF weights[1] = 0 AND weights[2] = 0 THEN
        RAISE EXCEPTION 'weights % turn both lanes off: every hit would score 0', weights
            USING ERRCODE = '22023',
                  HINT = 'Give at least one lane a weight > 0: ''{1,0}'' is the dense lane alone, ''{0,1}'' the lexical lane alone.';
    END IF;
    IF fusion IS NOT NULL AND fusion NOT IN ('rrf', 'convex') THEN
        RAISE EXCEPTION 'fusion must be ''convex'' or ''rrf'', got %', quote_literal(fusion) USING ERRCODE = '22023', HINT = 'fusion must be ''convex'' (dense_weight x normalised cosine + (1 - dense_weight) x normalised BM25) or ''rrf'' (Reciprocal Rank Fusion: weights, rrf_k); NULL: the scope''s setting, else convex.';
    END IF;
    IF dense_weight IS NOT NULL AND NOT (dense_weight >= 0 AND dense_weight <= 1) THEN
        RAISE EXCEPTION 'dense_weight must be between 0 and 1 (the lexical lane weighs 1 - dense_weight), got %',
            dense_weight USING ERRCODE = '22023', HINT = 'dense_weight is the dense lane''s share of the convex fusion: a number from 0 (the lexical lane alone) to 1 (the dense lane alone); NULL: the scope''s setting, else 0.5.';
    END IF;
    -- A fusion's own knobs only: an argument the asked fusion would ignore is a mistake, not a no-op.
    IF fusion = 'rrf' AND dense_weight IS NOT NULL THEN
        RAISE EXCEPTION 'dense_weight is the convex fusion''s, but fusion => ''rrf'' was asked (got dense_weight %)',
            dense_weight USING ERRCODE = '22023',
            HINT = 'RRF is tuned by weights (dense, lexical) and rrf_k; leave dense_weight out, or ask fusion => ''convex''.';
    END IF;
    IF fusion = 'convex' AND (weights IS NOT NULL OR rrf_k IS NOT NULL) THEN
        RAISE EXCEPTION 'weights and rrf_k are RRF''s, but fusion => ''convex'' was asked (got weights %, rrf_k %)',
            coalesce(weights::text, 'NULL'), coalesce(rrf_k::text, 'NULL') USING ERRCODE = '22023',
            HINT = 'The convex fusion is tuned by dense_weight (0..1); leave weights and rrf_k out, or ask fusion => ''rrf''.';
    END IF;
    -- Diversity (sql/fusion.sql, dna.diversify): mmr_lambda is MMR's, and given without a method selects it.
    diversity := coalesce(lower(btrim(diversity)), CASE WHEN mmr_lambda IS NOT NULL THEN 'mmr' END, 'collapse');
    PERFORM dna.check_diversity(diversity, duplicate_similarity, mmr_lambda);
    IF past_texts IS NOT NULL AND jsonb_typeof(past_texts) <> 'array' THEN
        RAISE EXCEPTION 'past_texts must be a JSON array of {kind, name, tenant, tsv}, got a JSON %',
            jsonb_typeof(past_texts) USING ERRCODE = '22023';
    END IF;
    IF past_texts IS NOT NULL AND past IS NOT NULL THEN
        RAISE EXCEPTION 'past_texts and past are one list in two forms: give one of them' USING ERRCODE = '22023',
            HINT = 'past_texts is the JSON form (an array of {kind, name, tenant, tsv}), past the typed one (dna.past_text[]).';
    END IF;
    -- The metadata filter (sql/metadata.sql): 22023 with a hint when malformed; {} is no filter.
    filter := dna.check_filter(filter);
    filter_pred := dna.filter_sql(filter, 't.metadata');
    IF min_similarity IS NOT NULL AND NOT (min_similarity >= -1 AND min_similarity <= 1) THEN
        RAISE EXCEPTION 'min_similarity must be a cosine between -1 and 1, got %', min_similarity
            USING ERRCODE = '22023', HINT = 'min_similarity is the dense lane''s floor: a cosine from -1 to 1 (NULL: no floor).';
    END IF;
    IF min_lexical_score IS NOT NULL AND NOT (min_lexical_score >= 0 AND min_lexical_score < 'Infinity') THEN
        RAISE EXCEPTION 'min_lexical_score must be a finite BM25 score >= 0, got %', min_lexical_score
            USING ERRCODE = '22023', HINT = 'min_lexical_score is the lexical lane''s floor: a BM25 score, a finite number >= 0 (NULL: no floor).';
    END IF;
    -- No model_id: the scope's model with the most documents (of the query vector's width), as
    -- dna.recall picks it, so a caller without an embedder searches the rows the scope was indexed with.
    model_id := coalesce(model_id, dna.scope_model(scope, vector_dims(query_embedding)));
    IF model_id IS NULL THEN
        RAISE NOTICE 'scope % has no documents; nearest scopes: %', quote_literal(scope),
            dna.nearest_scopes_text(scope, 3)            -- sql/catalog.sql
            USING ERRCODE = '02000';
        RETURN;
    END IF;
    dims := dna.model_dims(model_id, scope);              -- model_id is a filter: must be known
    IF query_embedding IS NOT NULL AND vector_dims(query_embedding) <> dims THEN
        RAISE EXCEPTION 'query_embedding has % dimensions but model_id % is registered with %',
            vector_dims(query_embedding), quote_literal(model_id), dims USING ERRCODE = '22023';
    END IF;
    tbl := dna.search_table(dims);
    IF coalesce(btrim(query), '') = '' OR k = 0 THEN
        RETURN;                                          -- a blank query has no hits, and is no error
    END IF;

    -- Defaults: the argument, else the scope's setting (dna.set_search_config), else the built-in
    -- values chosen on the SciFact TRAIN split (bench/tune.py; bench/RESULTS.md): each lane fetches
    -- max(4k, 100) candidates, weights (dense 1, lexical 1.5), rrf_k 10; and the fusion, chosen on
    -- SciFact TRAIN and the LoCoMo dev split (bench/tune.py --steps fusion, bench/locomo_fusion.py) with
    -- the hybrid at 1M not below its better lane (0025): convex, z-score, dense_weight 0.5 (RRF: fusion => 'rrf'). The lane depths do not depend on
    -- offset, so the pages of one size (and candidates) are windows of one ranking: they compose.
    SELECT * INTO cfg FROM dna.search_config(scope);
    dense_depth := coalesce(candidates, cfg.dense_candidates, greatest(4 * k, 100));
    lexical_depth := coalesce(candidates, cfg.lexical_candidates, greatest(4 * k, 100));
    -- weights and rrf_k are RRF's: given (by the call, or the scope) without a fusion, they select it,
    -- so a caller that turns a lane off with weights => '{1,0}' keeps what it asked for.
    fusion := coalesce(fusion, CASE WHEN weights IS NOT NULL OR rrf_k IS NOT NULL THEN 'rrf' END, cfg.fusion,
                       CASE WHEN cfg.weights IS NOT NULL OR cfg.rrf_k IS NOT NULL THEN 'rrf' END, 'convex');
    weights := coalesce(weights, cfg.weights, ARRAY[1.0, 1.5]::float8[]);
    rrf_k := coalesce(rrf_k, cfg.rrf_k, 10);
    dense_weight := coalesce(dense_weight, cfg.dense_weight, 0.5);
    -- diversity => 'collapse' (default) by text alone (cosine 1), mmr_lambda 0.7: bench/diversity.py (docs/hybrid-search.md)
    duplicate_similarity := coalesce(duplicate_similarity, dna.default_duplicate_similarity());
    mmr_lambda := CASE WHEN diversity = 'mmr' THEN coalesce(mmr_lambda, dna.default_mmr_lambda()) END;
    -- BM25 inputs of the lexical lane: the query's lexemes under the scope's regconfig and the
    -- partition's statistics (an empty term list matches nothing).
    terms := dna.bm25_terms(query, cfg.ts_config);
    -- past_texts / past (dna.recall as_of passes past): these records leave both lanes, and the
    -- lexical lane ranks the given tsvector in their place, scored with the lane's own idf and
    -- avg_len (its report). The JSON form is read once, into the typed one.
    IF past_texts IS NOT NULL THEN
        past := ARRAY(SELECT ROW(p.kind, p.name, p.tenant, p.tsv)::dna.past_text
                      FROM jsonb_to_recordset(past_texts) AS p(kind text, name text, tenant text, tsv tsvector));
    END IF;
    IF cardinality(past) > 0 THEN
        -- one pass: the keys, and the past texts the lane can rank (a tsv, of a Kind asked for, under
        -- name_prefix), the only ones scored
        SELECT coalesce(array_agg(p.name || chr(31) || p.kind || chr(31) || p.tenant)
                            FILTER (WHERE p.name IS NOT NULL AND p.kind IS NOT NULL AND p.tenant IS NOT NULL), '{}'),
               coalesce(array_agg(p) FILTER (WHERE p.tsv IS NOT NULL AND (kinds IS NULL OR p.kind = ANY (kinds))
                                                AND (name_prefix IS NULL OR starts_with(p.name, name_prefix))), '{}')
        INTO past_keys, past_hits
        FROM unnest(past) AS p;
        IF cardinality(past_keys) <> cardinality(past) THEN
            RAISE EXCEPTION '%: every element needs kind, name and tenant (strings)',
                CASE WHEN past_texts IS NOT NULL THEN 'past_texts' ELSE 'past' END USING ERRCODE = '22023';
        END IF;
        IF filter IS NOT NULL AND cardinality(past_hits) > 0 THEN
            -- the filter reads a record's metadata as its rows hold it today (a past text has none of its own)
            EXECUTE format('SELECT coalesce(array_agg(p), ''{}'') FROM unnest($1::dna.past_text[]) AS p
                            WHERE EXISTS (SELECT 1 FROM %s AS t WHERE t.scope = $2 AND t.model_id = $3 AND t.kind = p.kind
                                            AND t.name = p.name AND t.tenant = p.tenant AND t.passage = 0 AND %s)',
                           tbl, filter_pred)
                INTO past_hits USING past_hits, scope, model_id;
        END IF;
    END IF;
    -- Any document of this model in the partition (base rows or the caller's tenant)? One index probe;
    -- the lexical lane computes the statistics itself.
    IF NOT EXISTS (SELECT 1 FROM dna.dna_bm25_docs AS x
                   WHERE x.scope = scope AND x.model_id = model_id AND x.tenant IN ('', tenant)) THEN
        -- Nothing indexed with this model here: say so (psql shows the NOTICE, clients surface it)
        -- instead of an empty answer that looks like "no match"; a scope with nothing at all is
        -- most often a typo, so name the nearest scopes that exist.
        IF NOT EXISTS (SELECT 1 FROM dna.dna_bm25_docs AS x WHERE x.scope = scope) THEN
            RAISE NOTICE 'scope % has no documents; nearest scopes: %', quote_literal(scope),
                dna.nearest_scopes_text(scope, 3)        -- sql/catalog.sql
                USING ERRCODE = '02000';
        ELSE
            RAISE NOTICE 'no documents for model_id % in scope %; model_ids with documents there: %',
                quote_literal(model_id), quote_literal(scope),
                dna.scope_models_text(scope)
                USING ERRCODE = '02000';
        END IF;
        RETURN;
    END IF;
    -- Validity at valid_time: documents of memories out of force then (forgotten, or valid from a
    -- later time) are left out of both lanes. The lexical lane cuts its scores before it can look at
    -- documents, so it keeps that many more (two index scans count them; usually few). The later ones
    -- are found by the stored lower bound valid_from (= lower(valid_at)): its comparison is leakproof,
    -- so it stays an index condition beneath a row-level-security policy (lower(valid_at) > $3 is not,
    -- and a role filtered the whole table where the superuser's index scan read nothing).
    -- With the exact rule's count below (exact => NULL, a query vector) in the same statement: one statement
    -- parsed and planned instead of two (0025, topic fused_cost).
    IF valid_time IS NOT NULL AND exact IS NULL AND NOT degraded THEN
        EXECUTE format('SELECT (SELECT count(*) FROM (
                                    SELECT t.doc_id FROM %1$s AS t WHERE t.scope = $1 AND t.model_id = $2
                                      AND t.valid_at IS NOT NULL AND NOT upper_inf(t.valid_at) AND NOT (t.valid_at @> $3)
                                    UNION
                                    SELECT t.doc_id FROM %1$s AS t WHERE t.scope = $1 AND t.model_id = $2
                                      AND t.valid_from > $3) AS r),
                               (SELECT count(*) <= dna.exact_scan_rows() FROM (SELECT 1 FROM %1$s AS t
                                WHERE t.scope = $1 AND t.model_id = $2 LIMIT dna.exact_scan_rows() + 1) AS r)', tbl)
            INTO retired, dense_exact USING scope, model_id, valid_time;
        exact_counted := true;
    ELSIF valid_time IS NOT NULL THEN
        EXECUTE format('SELECT count(*) FROM (
                            SELECT t.doc_id FROM %1$s AS t WHERE t.scope = $1 AND t.model_id = $2
                              AND t.valid_at IS NOT NULL AND NOT upper_inf(t.valid_at) AND NOT (t.valid_at @> $3)
                            UNION
                            SELECT t.doc_id FROM %1$s AS t WHERE t.scope = $1 AND t.model_id = $2
                              AND t.valid_from > $3) AS r', tbl)
            INTO retired USING scope, model_id, valid_time;
    END IF;

    IF past_keys IS NOT NULL AND cardinality(terms) > 0 THEN
        -- The lexical lane, run here, its report (idf, avg_len) scoring the past texts, and its rows
        -- kept for the statement below: those in force at valid_time, under name_prefix, not of a record
        -- that leaves (each finds its document by one probe, a LATERAL the planner keeps: it knows how
        -- many rows the lane gave and would rather hash the whole partition, 15 ms at 10,000 memories
        -- for ~240 rows). The lane cuts its scores at the depth plus the documents out of force
        -- (lane_cut, ties included) and as many more rows as can leave with the records: first as many
        -- more as lane_cut (or as the records, if fewer); only when fewer than the depth are kept and
        -- the lane had more to give, it runs again with as many more as the records. Both give the
        -- statement the same first depth rows (every row above the cut is there, and depth of them are
        -- kept), so the answer is the one a single run with the records' count more gives (measured on
        -- bench/recall_as_of.py: 1,347 rows joined to their documents instead of ~240).
        lane_cut := CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END;
        lane_extra := least(cardinality(past_keys), lane_cut);
        LOOP
            PERFORM set_config('dna.bm25_explain', '{}', true);
            SELECT coalesce(array_agg(c.doc_id), '{}'), coalesce(array_agg(c.score), '{}'), coalesce(array_agg(c.exact), '{}')
            INTO lane_ids, lane_scores, lane_exact
            FROM dna.bm25_lane(scope, model_id, tenant, terms, cfg.bm25_k1, cfg.bm25_b, lane_cut + lane_extra,
                               kinds, NULL, false, true) AS c;
            EXECUTE format('SELECT coalesce(array_agg(d.kind), ''{}''), coalesce(array_agg(d.name), ''{}''),
                                   coalesce(array_agg(d.tenant), ''{}''), coalesce(array_agg(d.passage), ''{}''),
                                   coalesce(array_agg(dna.score_round(c.score)), ''{}''), coalesce(array_agg(c.exact), ''{}'')
                            FROM unnest($1::bigint[], $2::float8[], $3::boolean[]) AS c(doc_id, score, exact)
                            CROSS JOIN LATERAL (SELECT d.kind, d.name, d.tenant, d.passage, d.valid_at, d.metadata FROM %s AS d
                                                WHERE d.scope = $4 AND d.doc_id = c.doc_id LIMIT 1) AS d
                            WHERE ($5::text IS NULL OR starts_with(d.name, $5))
                              AND ($6::timestamptz IS NULL OR d.valid_at IS NULL OR d.valid_at @> $6)
                              AND (d.name || chr(31) || d.kind || chr(31) || d.tenant) NOT IN (SELECT unnest($7::text[]))
                              AND %s', tbl, dna.filter_sql(filter, 'd.metadata'))
                INTO lane_kinds, lane_names, lane_tenants, lane_passages, lane_scores, lane_exact
                USING lane_ids, lane_scores, lane_exact, scope, name_prefix, valid_time, past_keys;
            EXIT WHEN lane_cut IS NULL OR lane_extra >= cardinality(past_keys)
                   OR cardinality(lane_ids) < lane_cut + lane_extra OR cardinality(lane_kinds) >= lexical_depth;
            lane_extra := cardinality(past_keys);
        END LOOP;
        past_lane := coalesce(nullif(current_setting('dna.bm25_explain'), '')::jsonb, '{}');
        IF past_lane ->> 'n_docs' IS NULL THEN              -- no query term in the partition today
            past_lane := (SELECT jsonb_build_object('n_docs', st.n_docs, 'avg_len', st.avg_len)
                          FROM dna.bm25_stats(scope, model_id, tenant) AS st);
        END IF;
        -- idf per query term (in terms' order): the lane's; a term no document of the partition holds
        -- today has df 1 (the past text itself): ln(1 + (N - 0.5) / 1.5)
        past_avg_len := coalesce((past_lane ->> 'avg_len')::float8, 1);
        past_idf := ARRAY(SELECT coalesce(l.w, ln(1 + ((past_lane ->> 'n_docs')::float8 - 0.5) / 1.5))
                          FROM unnest(terms) WITH ORDINALITY AS t(lexeme, i)
                          LEFT JOIN (SELECT x.lexeme, y.w::float8 AS w
                                     FROM jsonb_array_elements_text(coalesce(past_lane -> 'terms', '[]')) WITH ORDINALITY AS x(lexeme, i)
                                     JOIN jsonb_array_elements_text(coalesce(past_lane -> 'idf', '[]')) WITH ORDINALITY AS y(w, i)
                                       ON y.i = x.i) AS l ON l.lexeme = t.lexeme
                          ORDER BY t.i);
    END IF;

    -- Filters, applied inside each lane so that neither starves the fused list.
    -- Tenant overlay: base rows ('') plus the caller's tenant; a tenant row shadows the base row.
    -- (With the base tenant '' the overlay is just t.tenant = '': a simpler plan for the common case.)
    -- The metadata filter is one more condition of the lane (its literals inlined: each filter plans alone).
    lane_filter := format(
        't.scope = $1 AND t.model_id = $2
         AND ($5::text[] IS NULL OR t.kind = ANY ($5))
         AND ($7::text IS NULL OR starts_with(t.name, $7))
         AND ($17::timestamptz IS NULL OR t.valid_at IS NULL OR t.valid_at @> $17)
         AND %s AND %s AND %s',
        filter_pred,
        CASE WHEN past_keys IS NULL THEN 'true'
             ELSE '(t.name || chr(31) || t.kind || chr(31) || t.tenant) NOT IN (SELECT unnest($29::text[]))' END,
        CASE WHEN tenant = '' THEN 't.tenant = '''''
             ELSE format('(t.tenant = $6 OR (t.tenant = '''' AND NOT EXISTS (
                SELECT 1 FROM %s AS s WHERE s.scope = $1 AND s.model_id = t.model_id
                 AND s.kind = t.kind AND s.name = t.name AND s.tenant = $6)))', tbl) END);

    IF NOT degraded THEN
        -- The exact rule: exact => true scans every row of the partition (no HNSW); exact => NULL
        -- (default) does so too when the scope holds at most dna.exact_scan_rows() rows of this
        -- model (an exact scan is then cheaper than the graph, and the answer cannot change with
        -- the planner's statistics); otherwise HNSW answers (approximate).
        IF exact_counted THEN
            NULL;                                        -- counted with the documents out of force above
        ELSIF exact IS NULL THEN
            EXECUTE format('SELECT count(*) <= dna.exact_scan_rows() FROM (SELECT 1 FROM %s AS t
                            WHERE t.scope = $1 AND t.model_id = $2 LIMIT dna.exact_scan_rows() + 1) AS r', tbl)
                INTO dense_exact USING scope, model_id;
        ELSE
            dense_exact := exact;
        END IF;
        -- A metadata filter that keeps few rows (at most max(dna.exact_scan_rows(), depth), counted up to
        -- one more through the GIN index of the filter's containments) is answered by an exact scan of
        -- those rows: cheaper than walking the graph past every row the filter drops, and exact.
        IF filter IS NOT NULL AND NOT dense_exact AND exact IS NULL THEN
            EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %s AS t WHERE t.embedding IS NOT NULL AND %s LIMIT %s) AS r',
                           tbl, lane_filter, greatest(dna.exact_scan_rows(), dense_depth) + 1)
                INTO matching
                USING scope, model_id, query_embedding, dense_depth, kinds, tenant, name_prefix, terms,
                      weights, rrf_k, k, degraded, lexical_depth, cfg.bm25_k1, cfg.bm25_b,
                      CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END, valid_time,
                      NULL::boolean, NULL::tsquery, NULL::boolean, NULL::boolean, NULL::integer, NULL::float8,
                      NULL::float8, NULL::text, NULL::float8, NULL::boolean, NULL::jsonb, past_keys;
            IF matching <= greatest(dna.exact_scan_rows(), dense_depth) THEN
                dense_exact := true;
                dense_route := format('exact scan: %s rows match the filter (at most max(exact_scan_rows, depth) = %s)',
                                      matching, greatest(dna.exact_scan_rows(), dense_depth));
            END IF;
        END IF;
        -- Iterative index scans keep fetching when filters drop rows (pgvector >= 0.8), so a selective
        -- filter still yields the candidates. Planner settings are transaction-local.
        PERFORM set_config('hnsw.iterative_scan', 'strict_order', true);
        PERFORM set_config('hnsw.ef_search', dna.hnsw_ef_search(k, dense_depth,
            (SELECT c.reltuples FROM pg_catalog.pg_class AS c WHERE c.oid = tbl))::text, true);
        IF dense_exact THEN
            -- The exact lane (0024, topic exact_lane): the partition ordered by the raw cosine (1 - distance,
            -- an order no index serves), and only the first depth + 64 of it (ties included) rounded; rounding
            -- every row of the partition (numeric rounding, ~1 us a row) was most of the scan's cost (bench/exact_lane.py).
            -- The same rows as rounding every row, whenever the last of those is rounded below the depth-th
            -- (rounding is monotone: every row left out then ranks below the cut); else (more than 64 rows
            -- within rounding of the cut) the whole partition is rounded, as before.
            dense_sql := dna.exact_dense_sql(tbl, lane_filter);
        ELSE
            IF dims > 2000 THEN                          -- indexed as halfvec; re-scored below in full precision
                dense_order := format('t.embedding::halfvec(%s) <=> $3::halfvec(%s)', dims, dims);
            ELSE
                dense_order := 't.embedding <=> $3';
            END IF;
            -- The lane's candidates, cosine rounded (dna.score_round) so that equal cosines order by key.
            -- The cut keeps its ties (WITH TIES) and the depth is then taken by key: which of several equal
            -- cosines the graph or a bounded sort returned first decided it, differently for each depth
            -- (and so for each k), and pages of different k did not compose (a fuzz of 300 tied documents).
            dense_sql := format(
                'SELECT c.* FROM (
                 SELECT c.kind, c.name, c.tenant, c.passage, c.similarity,
                        row_number() OVER (ORDER BY c.similarity DESC, c.kind, c.name, c.tenant, c.passage)::integer AS rnk
                 FROM (SELECT t.kind, t.name, t.tenant, t.passage, dna.score_round(1 - (t.embedding <=> $3)) AS similarity
                       FROM %s AS t
                       WHERE t.embedding IS NOT NULL AND %s
                       ORDER BY %s FETCH FIRST $4 ROWS WITH TIES) AS c) AS c
                 WHERE c.rnk <= $4', tbl, lane_filter, dense_order);
        END IF;
    ELSE
        dense_sql := 'SELECT NULL::text AS kind, NULL::text AS name, NULL::text AS tenant, NULL::integer AS passage,
                             NULL::float8 AS similarity, NULL::integer AS rnk WHERE false';
    END IF;

    -- Lexical lane: BM25 (dna.bm25_lane, as dna.bm25) over the OR of the query's lexemes; the
    -- overlay is in the partition (shadowed base rows left out) and the Kind filter is in the
    -- postings, so the scores are cut at $16 (ties included) before the join to the documents:
    -- the depth plus the documents out of force at valid_time, so that the validity filter cannot
    -- starve the lane. Only a name_prefix or a metadata filter (document columns) needs every score
    -- ($16 NULL: the lane is then exhaustive, and the join keeps the rows they pass, before the depth).
    -- Scores are rounded to 12 significant digits (dna.score_round): mathematically equal BM25
    -- scores that float arithmetic left 1 ulp apart tie, and order by key.
    -- The lane's certificate (exact) is carried to every hit.
    -- The lane runs by its own statement (below, under the statement's settings) into arrays ($33
    -- doc_ids, $34 scores, $35 certificates) that this joins to the documents: on Citus a function
    -- reading dna_* tables cannot run inside a statement pushed to a shard (sql/tenancy.sql, "Citus
    -- rules"). The same rows as the lane called in the FROM.
    lexical_sql :=
        'SELECT d.kind, d.name, d.tenant, d.passage, c.score AS lexical_score, c.exact,
                row_number() OVER (ORDER BY c.score DESC, d.kind, d.name, d.tenant, d.passage)::integer AS rnk
         FROM (SELECT c.doc_id, dna.score_round(c.score) AS score, c.exact
               FROM unnest($33::bigint[], $34::float8[], $35::boolean[]) AS c(doc_id, score, exact)) AS c
         JOIN ' || tbl::text || ' AS d ON d.scope = $1 AND d.doc_id = c.doc_id
         WHERE ($7::text IS NULL OR starts_with(d.name, $7))
           AND ($17::timestamptz IS NULL OR d.valid_at IS NULL OR d.valid_at @> $17)
           AND ' || dna.filter_sql(filter, 'd.metadata') || '
         ORDER BY c.score DESC, d.kind, d.name, d.tenant, d.passage
         LIMIT $13';
    IF past_keys IS NOT NULL THEN
        -- past texts: the lane's rows (run above, cut later) of those records leave, and their given
        -- tsvectors ($32, the ones the lane can rank) join, BM25 scored as the lane scores (the lane's
        -- idf per term $30 in the order of terms $8, avg_len $36, k1, b; rounded to 1e-9 and 12
        -- significant digits), at passage 0; then one ranking. The lane's rows are those kept above
        -- ($37..$40 their keys, $34 their rounded scores, $35 certificates). A past text's length (as
        -- dna.bm25_doc_length: its positions, a lexeme without counts 1) is summed in the pass that
        -- reads its lexemes (a call of that function per text cost 5 ms at 360 texts).
        lexical_sql :=
            'SELECT u.kind, u.name, u.tenant, u.passage, u.lexical_score, u.exact,
                    row_number() OVER (ORDER BY u.lexical_score DESC, u.kind, u.name, u.tenant, u.passage)::integer AS rnk
             FROM (SELECT d.kind, d.name, d.tenant, d.passage, d.score AS lexical_score, d.exact
                   FROM unnest($37::text[], $38::text[], $39::text[], $40::integer[], $34::float8[], $35::boolean[])
                        AS d(kind, name, tenant, passage, score, exact)
                   UNION ALL
                   SELECT p.kind, p.name, p.tenant, 0, dna.score_round(round(sum(q.w * u.tf * ($14 + 1)
                              / (u.tf + $14 * (1 - $15 + $15 * u.len / $36))) * 1e9) / 1e9), true
                   FROM unnest($32::dna.past_text[]) AS p
                   CROSS JOIN LATERAL (SELECT x.lexeme, coalesce(cardinality(x.positions), 1)::float8 AS tf,
                                              sum(coalesce(cardinality(x.positions), 1)) OVER ()::integer::float8 AS len
                                       FROM unnest(p.tsv) AS x) AS u
                   CROSS JOIN LATERAL (SELECT ($30::float8[])[array_position($8, u.lexeme)] AS w) AS q
                   WHERE q.w IS NOT NULL
                   GROUP BY p.kind, p.name, p.tenant) AS u
             ORDER BY u.lexical_score DESC, u.kind, u.name, u.tenant, u.passage
             LIMIT $13';
    END IF;

    -- The exact rule decides the dense lane's path, not the planner: when HNSW answers (not exact),
    -- the statement runs without sequential scans (restored after it), else a filter the planner
    -- estimates unselective (valid_time NULL, as dna.recall's as_of passes) turned the lane into an
    -- exact scan of the partition (74 ms instead of 8 at 10,000 memories, bench/RESULTS.md). With past
    -- texts the records leaving the lane are one more filter, and the planner read the partition
    -- through a bitmap scan of a btree instead (measured: an exact scan of the 8,000 rows kept, at
    -- 10,000 memories with 2,000 restated): bitmap scans are off too then. So they are for a role under
    -- row-level security (0021, topic policy_inline): the policy's qual lowers the estimate of the
    -- partition's rows (674 of 2,167), the HNSW path's LIMIT then looked dearer than a bitmap scan of the
    -- scope plus a sort, and the role read its partition exactly where the superuser took HNSW
    -- (bench/policy_cost.py); so bitmap scans are off whenever the lane takes HNSW. Sorts are off too
    -- (0021, topic dense_depth): the graph searched at the lane's ef_search (dna.hnsw_ef_search: 400
    -- for k = 10) is priced above a bitmap scan and sort of up to ~20,000 rows, which the planner then
    -- took (225 ms instead of 50 for dna.search at 10,000 memories; the statement's own sorts have no
    -- other plan and still run).
    IF NOT degraded AND NOT dense_exact THEN
        seqscan := current_setting('enable_seqscan');
        PERFORM set_config('enable_seqscan', 'off', true);
        sorting := current_setting('enable_sort');
        PERFORM set_config('enable_sort', 'off', true);
        bitmapscan := current_setting('enable_bitmapscan');
        PERFORM set_config('enable_bitmapscan', 'off', true);
    END IF;
    -- A filtered HNSW lane goes on iterating (hnsw.iterative_scan) until it has its depth or its scan
    -- budget (hnsw.max_scan_tuples) is spent; more rows match the filter than the depth here (else the
    -- scan above was exact), so fewer candidates means the scan ran dry: the lane is then answered by
    -- an exact scan of the rows the filter keeps, and explain says so.
    IF filter IS NOT NULL AND NOT degraded AND NOT dense_exact THEN
        EXECUTE 'SELECT count(*) FROM (' || dense_sql || ') AS d' INTO dense_found
            USING scope, model_id, query_embedding, dense_depth, kinds, tenant, name_prefix, terms,
                      weights, rrf_k, k, degraded, lexical_depth, cfg.bm25_k1, cfg.bm25_b,
                      CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END, valid_time,
                      NULL::boolean, NULL::tsquery, NULL::boolean, NULL::boolean, NULL::integer, NULL::float8,
                      NULL::float8, NULL::text, NULL::float8, NULL::boolean, NULL::jsonb, past_keys;
        IF dense_found < dense_depth THEN
            dense_exact := true;
            dense_route := format('hnsw ran dry (%s of %s candidates under the filter): exact scan', dense_found, dense_depth);
            dense_sql := dna.exact_dense_sql(tbl, lane_filter);
            PERFORM set_config('enable_seqscan', seqscan, true);
            seqscan := NULL;
            PERFORM set_config('enable_sort', sorting, true);
            sorting := NULL;
            IF bitmapscan IS NOT NULL THEN
                PERFORM set_config('enable_bitmapscan', bitmapscan, true);
                bitmapscan := NULL;
            END IF;
        ELSE
            dense_route := format('hnsw, iterative scan: %s candidates under the filter', dense_found);
        END IF;
    END IF;

    -- explain => true: the answer's receipt (the lanes' paths and settings, filters, degradation),
    -- completed in the statement by the candidate counts; the dense lane's path is read from its plan,
    -- under the settings above (those the statement runs with); on Citus, the plan of the scope's shard
    -- on this node (dna.shard_explained), made in this session under those settings.
    IF explain THEN
        IF NOT degraded THEN
            local_execution := current_setting('citus.enable_local_execution', true);
            EXECUTE 'EXPLAIN (FORMAT JSON, COSTS OFF) ' || dna.shard_explained(dense_sql, tbl, scope) INTO plan
                USING scope, model_id, query_embedding, dense_depth, kinds, tenant, name_prefix, terms,
                      weights, rrf_k, k, degraded, lexical_depth, cfg.bm25_k1, cfg.bm25_b,
                      CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END, valid_time,
                      NULL::boolean, NULL::tsquery, NULL::boolean, NULL::boolean, NULL::integer, NULL::float8,
                      NULL::float8, NULL::text, NULL::float8, NULL::boolean, NULL::jsonb, past_keys;
            -- Citus turns local execution off at any EXPLAIN for the rest of the transaction, and the
            -- statements below read the scope's shards locally (XX000 "cannot switch local execution
            -- status" on the node holding them, where the call is delegated): set it back.
            IF local_execution IS NOT NULL THEN
                PERFORM set_config('citus.enable_local_execution', local_execution, true);
            END IF;
            -- Under a filter the candidates were counted above; the planner may still have answered the lane
            -- by an exact scan (a small scope: the graph at the lane's ef_search priced above it): say so.
            IF dense_route LIKE 'hnsw, iterative scan:%' AND plan NOT LIKE '%hnsw%' THEN
                dense_route := format('exact scan, the planner''s choice (the graph at ef_search %s costs more here): '
                                      '%s candidates under the filter', current_setting('hnsw.ef_search'), dense_found);
            END IF;
        END IF;
        answer := jsonb_build_object(
            'k', k, 'offset', "offset", 'model_id', model_id,
            'fusion', CASE WHEN fusion = 'convex' THEN jsonb_build_object('method', 'convex', 'dense_weight', dense_weight,
                                                                          'normalisation', 'z-score over the lane''s candidates, the lowest 0')
                           ELSE jsonb_build_object('method', 'rrf', 'weights', to_jsonb(weights), 'rrf_k', rrf_k) END,
            'degraded', degraded,
            'degradation', CASE WHEN query_embedding IS NULL THEN 'no query embedding: lexical only'
                                WHEN degraded THEN 'the query embedding is the zero vector: lexical only' END,
            'dense', CASE WHEN degraded THEN jsonb_build_object('path', 'none')
                          ELSE jsonb_build_object(
                              'path', CASE WHEN plan LIKE '%hnsw%' THEN 'hnsw' ELSE 'exact scan' END,
                              'exact_rule', CASE WHEN exact IS NULL THEN format('exact when the scope holds <= %s rows of the model', dna.exact_scan_rows())
                                                 WHEN exact THEN 'exact => true' ELSE 'exact => false' END,
                              'ef_search', CASE WHEN plan LIKE '%hnsw%' THEN current_setting('hnsw.ef_search')::integer END,
                              'ef_search_rule', CASE WHEN plan LIKE '%hnsw%' THEN 'least(1000, greatest(40, 4 x depth, 10 x k) x (1 + 0.5 x max(0, log10(graph_rows) - 5)))' END,
                              'graph_rows', CASE WHEN plan LIKE '%hnsw%' THEN (SELECT greatest(c.reltuples, 0)::bigint FROM pg_catalog.pg_class AS c WHERE c.oid = tbl) END,
                              'iterative_scan', CASE WHEN plan LIKE '%hnsw%' THEN 'strict_order' END,
                              'depth', dense_depth, 'min_similarity', min_similarity,
                              'filter', dense_route) END,
            'lexical', jsonb_build_object('scoring', 'BM25', 'k1', cfg.bm25_k1, 'b', cfg.bm25_b, 'ts_config', cfg.ts_config::text,
                                          'terms', to_jsonb(terms), 'depth', lexical_depth,
                                          'cut_at', CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END,
                                          'min_lexical_score', min_lexical_score),
            'filters', jsonb_build_object('kinds', to_jsonb(kinds), 'name_prefix', name_prefix, 'tenant', tenant,
                                          'personal', coalesce(personal, false), 'valid_time', valid_time,
                                          'out_of_force_at_valid_time', retired, 'passages', coalesce(passages, false),
                                          'filter', filter),
            'diversity', jsonb_build_object('method', diversity, 'text_key', 'dna.text_key(passage text)',
                                            'duplicate_similarity', CASE WHEN diversity <> 'off' THEN duplicate_similarity END,
                                            'mmr_lambda', mmr_lambda));
    END IF;

    -- Relevance floors (min_similarity on the dense lane, min_lexical_score on the lexical lane)
    -- remove candidates from their lane after it is ranked (lane ranks keep their meaning); a hit
    -- may still come from the other lane. Every hit carries how many candidates each floor removed.
    -- Both lanes rank passages (a document indexed whole is its passage 0); RRF fuses passages, and
    -- a document's hit is its best fused passage (MaxP) unless passages ($18) asks for every one.
    -- Fusion ($25): RRF of the lane ranks (default), or convex: dense_weight ($26) x the cosine and
    -- (1 - dense_weight) x the BM25 score, each z-score normalised over its lane's candidates of this
    -- query, shifted so its lowest is 0 (dna.z_score; absent from a lane: 0; 0025, min-max before).
    -- Candidates all equal count as sd 0 (max = min): stddev_pop of equal doubles can be a few ulps above 0.
    -- The fused score is rounded as the lane scores are; ties order by (kind, name, tenant, passage).
    -- The answer is the window $22 + 1 .. $22 + k of that one ranking.
    -- The hit's highlight marks the query's lexemes in that passage (dna.identifier_headline: ts_headline,
    -- identifiers marked whole; k rows only; by
    -- default only for passages of split documents: ~0.2-0.4 ms each, and a whole document's or a
    -- memory's snippet already is its text's start).
    -- The lexical lane (without past texts: with them it ran above), by its own statement.
    IF past_keys IS NULL THEN
        SELECT coalesce(array_agg(c.doc_id), '{}'), coalesce(array_agg(c.score), '{}'), coalesce(array_agg(c.exact), '{}')
        INTO lane_ids, lane_scores, lane_exact
        FROM dna.bm25_lane(scope, model_id, tenant, terms, cfg.bm25_k1, cfg.bm25_b,
                           CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END, kinds) AS c;
    END IF;
    -- Diversity ($41, dna.diversify): the ranking's passages (their vectors and dna.text_key; a past text has
    -- neither: today's row holds another text) walked in rank order, near-duplicates of a hit placed before
    -- collapsed into it, until offset + k hits; 'off': the ranking's window as it is.
    -- The statement is parsed and planned at every call (its table and filters are the call's): it holds only
    -- the parts this call uses (0025, topic fused_cost): explain's expressions without explain, the floors'
    -- counts without floors, the collapse's walks for the method asked, a past text's test with past texts.
    -- Each walk's three arrays are one aggregate of one read (three ordered subqueries before).
    collapse_read := format(
        'SELECT coalesce(array_agg(CASE WHEN %2$s THEN doc.embedding END ORDER BY r.pos), ''{}'') AS embeddings,
                coalesce(array_agg(CASE WHEN %3$s THEN doc.body END ORDER BY r.pos), ''{}'') AS texts,
                coalesce(array_agg(r.score ORDER BY r.pos), ''{}'') AS scores
         FROM ranked AS r
         LEFT JOIN LATERAL (SELECT doc.embedding, doc.body FROM %1$s AS doc
                            WHERE doc.scope = $1 AND doc.model_id = $2 AND doc.kind = r.kind AND doc.name = r.name
                              AND doc.tenant = r.tenant AND doc.passage = r.passage LIMIT 1) AS doc ON true', tbl,
        CASE WHEN NOT (diversity = 'mmr' OR duplicate_similarity < 1 OR explain) THEN 'false'
             WHEN past_keys IS NULL THEN 'true'
             ELSE 'NOT ((r.name || chr(31) || r.kind || chr(31) || r.tenant) = ANY ($29))' END,
        CASE WHEN past_keys IS NULL THEN 'dna.collapses_by_text(r.kind)'
             ELSE 'dna.collapses_by_text(r.kind) AND NOT ((r.name || chr(31) || r.kind || chr(31) || r.tenant) = ANY ($29))' END);
    best_sql := CASE WHEN diversity = 'off' THEN
        'picked AS (SELECT NULL::integer AS pos, NULL::integer AS duplicate_of WHERE false),
         best AS (SELECT r.*, r.pos AS place, NULL::jsonb AS diverse FROM ranked AS r
                  WHERE r.pos > $22 ORDER BY r.pos LIMIT $11)'
    -- collapse walks in rank order, so the walk of the first 2 x (offset + k) + 8 candidates keeps the same
    -- hits as the walk of all of them whenever it keeps offset + k: only when it does not (many duplicates)
    -- is the whole ranking read (its vectors and texts: ~200 rows at k = 10). MMR weighs every candidate.
    -- The passage vectors are read only where a cosine is used: MMR, a duplicate_similarity below 1 (the
    -- cosine rule), or explain (a collapsed hit's similarity); collapse by the text rules alone (the
    -- default, duplicate_similarity 1) compares texts only, and the same hits are kept without them.
    WHEN diversity = 'collapse' THEN format(
        'walked AS MATERIALIZED (
             SELECT d.* FROM (%1$s WHERE r.pos <= 2 * ($11 + $22) + 8) AS a
             CROSS JOIN LATERAL dna.diversify(a.embeddings, a.texts, a.scores, $41, $42, $43, $11 + $22) AS d),
         enough AS (SELECT (SELECT count(*) FROM walked AS w WHERE w.place IS NOT NULL) >= $11 + $22
                           OR (SELECT count(*) FROM ranked) <= 2 * ($11 + $22) + 8 AS ok),
         picked AS MATERIALIZED (
             SELECT w.* FROM walked AS w WHERE (SELECT e.ok FROM enough AS e)
             UNION ALL
             SELECT d.* FROM (%1$s) AS a
             CROSS JOIN LATERAL dna.diversify(a.embeddings, a.texts, a.scores, $41, $42, $43, $11 + $22) AS d
             WHERE NOT (SELECT e.ok FROM enough AS e)),', collapse_read)
    ELSE format(
        'picked AS MATERIALIZED (
             SELECT d.* FROM (%1$s) AS a
             CROSS JOIN LATERAL dna.diversify(a.embeddings, a.texts, a.scores, $41, $42, $43, $11 + $22) AS d),', collapse_read) END;
    IF diversity <> 'off' THEN
        best_sql := best_sql || format('
         best AS (
             SELECT r.*, p.place, %s AS diverse
             FROM picked AS p JOIN ranked AS r ON r.pos = p.pos
             WHERE p.place > $22 ORDER BY p.place LIMIT $11)',
            CASE WHEN explain THEN
            'jsonb_build_object(''diversity'', jsonb_strip_nulls(jsonb_build_object(
                        ''fused_rank'', r.pos, ''place'', p.place, ''relevance'', p.relevance, ''redundancy'', p.redundancy,
                        ''collapsed'', (SELECT jsonb_agg(jsonb_build_object(''kind'', c.kind, ''name'', c.name, ''tenant'', c.tenant,
                                                 ''passage'', c.passage, ''fused_rank'', c.pos, ''score'', c.score,
                                                 ''reason'', q.reason, ''similarity'', q.similarity)
                                                 ORDER BY c.pos)
                                      FROM picked AS q JOIN ranked AS c ON c.pos = q.pos WHERE q.duplicate_of = p.pos))))'
            ELSE 'NULL::jsonb' END);
    END IF;
    RETURN QUERY EXECUTE format(
        'WITH dense_all AS MATERIALIZED (%s),
         lexical_all AS MATERIALIZED (%s),
         dense AS (SELECT * FROM dense_all AS d WHERE $23::float8 IS NULL OR d.similarity >= $23),
         lexical AS (SELECT * FROM lexical_all AS l WHERE $24::float8 IS NULL OR l.lexical_score >= $24),
         removed AS (%s),
         fused AS (
             SELECT coalesce(d.kind, l.kind) AS kind, coalesce(d.name, l.name) AS name,
                    coalesce(d.tenant, l.tenant) AS tenant, coalesce(d.passage, l.passage) AS passage,
                    dna.score_round(CASE WHEN $25 = ''convex''
                        THEN dna.convex_fusion(dna.z_score(d.similarity, ds.lo, ds.sd),
                                               dna.z_score(l.lexical_score, ls.lo, ls.sd), $26)
                        ELSE dna.rrf(ARRAY[d.rnk, l.rnk], $9, $10) END) AS score,
                    d.similarity, l.lexical_score, d.rnk AS rank_dense, l.rnk AS rank_lexical,
                    %s AS lanes
             FROM dense AS d FULL JOIN lexical AS l
               ON l.kind = d.kind AND l.name = d.name AND l.tenant = d.tenant AND l.passage = d.passage
             CROSS JOIN (SELECT min(x.similarity) AS lo, CASE WHEN max(x.similarity) > min(x.similarity) THEN stddev_pop(x.similarity) ELSE 0 END AS sd FROM dense AS x) AS ds
             CROSS JOIN (SELECT min(x.lexical_score) AS lo, CASE WHEN max(x.lexical_score) > min(x.lexical_score) THEN stddev_pop(x.lexical_score) ELSE 0 END AS sd FROM lexical AS x) AS ls
         ),
         ranked AS (
             SELECT f.*, row_number() OVER (ORDER BY f.score DESC, f.kind, f.name, f.tenant, f.passage)::integer AS pos FROM (
                 SELECT f.*, row_number() OVER (PARTITION BY f.kind, f.name, f.tenant
                                                ORDER BY f.score DESC, f.passage) AS nth
                 FROM fused AS f) AS f
             WHERE $18 OR f.nth = 1
         ),
         %s
         SELECT $1, f.kind, f.name, f.tenant, f.score, doc.title, doc.snippet,
                f.similarity, f.lexical_score, f.rank_dense, f.rank_lexical, $12,
                starts_with(f.tenant, ''personal:''),
                coalesce((SELECT bool_and(x.exact) FROM lexical_all AS x), true),
                f.passage, doc.heading, doc.char_start, doc.char_end,
                CASE WHEN $19::tsquery IS NOT NULL AND f.lexical_score IS NOT NULL
                      AND coalesce($20, doc.char_start IS NOT NULL)
                     THEN nullif(dna.identifier_headline(doc.ts_config, doc.body, $19::tsquery), '''')
                END,
                CASE WHEN NOT $12 THEN $21 END, r.dense, r.lexical,
                %s,
                doc.metadata
         FROM best AS f
         CROSS JOIN removed AS r
         JOIN %s AS doc ON doc.scope = $1 AND doc.model_id = $2 AND doc.kind = f.kind
                       AND doc.name = f.name AND doc.tenant = f.tenant AND doc.passage = f.passage
         ORDER BY f.place', dense_sql, lexical_sql,
        CASE WHEN min_similarity IS NULL AND min_lexical_score IS NULL THEN 'SELECT NULL::integer AS dense, NULL::integer AS lexical'
             ELSE 'SELECT CASE WHEN $23::float8 IS NOT NULL
                                 THEN (SELECT count(*) FROM dense_all AS d WHERE d.similarity < $23)::integer END AS dense,
                            CASE WHEN $24::float8 IS NOT NULL
                                 THEN (SELECT count(*) FROM lexical_all AS l WHERE l.lexical_score < $24)::integer END AS lexical' END,
        CASE WHEN explain THEN 'CASE WHEN $27 THEN jsonb_build_object(
                        ''dense'', CASE WHEN d.rnk IS NOT NULL THEN jsonb_build_object(
                            ''rank'', d.rnk, ''similarity'', d.similarity,
                            ''normalised'', CASE WHEN $25 = ''convex'' THEN dna.z_score(d.similarity, ds.lo, ds.sd) END,
                            ''term'', CASE WHEN $25 = ''convex'' THEN $26 * dna.z_score(d.similarity, ds.lo, ds.sd)
                                           ELSE $9[1] / ($10 + d.rnk) END) END,
                        ''lexical'', CASE WHEN l.rnk IS NOT NULL THEN jsonb_build_object(
                            ''rank'', l.rnk, ''bm25'', l.lexical_score,
                            ''normalised'', CASE WHEN $25 = ''convex'' THEN dna.z_score(l.lexical_score, ls.lo, ls.sd) END,
                            ''term'', CASE WHEN $25 = ''convex'' THEN (1 - $26) * dna.z_score(l.lexical_score, ls.lo, ls.sd)
                                           ELSE $9[2] / ($10 + l.rnk) END) END) END' ELSE 'NULL::jsonb' END,
        best_sql, CASE WHEN explain THEN 'CASE WHEN $27 THEN f.lanes || jsonb_build_object(''score'', f.score, ''answer'', $28::jsonb
                    || jsonb_build_object(
                        ''dense'', $28::jsonb -> ''dense'' || jsonb_build_object(
                            ''candidates'', (SELECT count(*) FROM dense_all), ''removed_by_floor'', r.dense),
                        ''lexical'', $28::jsonb -> ''lexical'' || jsonb_build_object(
                            ''candidates'', (SELECT count(*) FROM lexical_all), ''removed_by_floor'', r.lexical,
                            ''exact'', coalesce((SELECT bool_and(x.exact) FROM lexical_all AS x), true)),
                        ''fused_candidates'', (SELECT count(*) FROM fused),
                        ''diversity'', $28::jsonb -> ''diversity'' || jsonb_build_object(
                            ''collapsed'', (SELECT count(*) FROM picked AS p WHERE p.duplicate_of IS NOT NULL)))) || coalesce(f.diverse, ''{}'') END' ELSE 'NULL::jsonb' END, tbl)
        USING scope, model_id, query_embedding, dense_depth, kinds, tenant, name_prefix, terms,
              weights, rrf_k, k, degraded, lexical_depth, cfg.bm25_k1, cfg.bm25_b,
              CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END, valid_time,
              coalesce(passages, false), dna.lexical_query(query, cfg.ts_config), highlight,
              dense_exact, "offset", min_similarity, min_lexical_score, fusion, dense_weight,
              coalesce(explain, false), answer, past_keys, past_idf, coalesce(cardinality(past_keys), 0), past_hits,
              lane_ids, lane_scores, lane_exact, past_avg_len, lane_kinds, lane_names, lane_tenants, lane_passages,
              diversity, duplicate_similarity, mmr_lambda;
    GET DIAGNOSTICS returned = ROW_COUNT;
    IF seqscan IS NOT NULL THEN
        PERFORM set_config('enable_seqscan', seqscan, true);
    END IF;
    IF sorting IS NOT NULL THEN
        PERFORM set_config('enable_sort', sorting, true);
    END IF;
    IF bitmapscan IS NOT NULL THEN
        PERFORM set_config('enable_bitmapscan', bitmapscan, true);
    END IF;
    -- A Kind filter naming only Kinds with no documents here is most often a typo: say which, and
    -- which Kinds there are (one index probe per Kind asked; the list only when all are missing).
    -- Checked only when the answer is empty (a Kind with documents here gives an empty answer only
    -- when nothing matches): a recall or search that has hits pays nothing for it.
    -- An empty answer under a metadata filter that no row of the partition passes: say so (checked only
    -- when the answer is empty; usually one GIN probe).
    IF returned = 0 AND filter IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s AS t WHERE t.scope = $1 AND t.model_id = $2
                                       AND t.tenant IN ('''', $3) AND %s)', tbl, filter_pred)
            INTO any_match USING scope, model_id, tenant;
    END IF;
    IF returned = 0 AND filter IS NOT NULL AND NOT any_match THEN
        RAISE NOTICE 'no document of scope % (model_id %) matches the filter %', quote_literal(scope),
            quote_literal(model_id), filter::text USING ERRCODE = '02000';
    END IF;
    IF returned = 0 AND kinds IS NOT NULL THEN
        EXECUTE format('SELECT array_agg(q.k ORDER BY q.k) FROM unnest($2::text[]) AS q(k)
                        WHERE NOT EXISTS (SELECT 1 FROM %s AS t WHERE t.scope = $1 AND t.kind = q.k
                                          AND t.tenant IN ('''', $3) AND t.model_id = $4)', tbl)
            INTO missing USING scope, kinds, tenant, model_id;
        -- Only when no Kind asked for has documents (the answer is then empty): a list of Kinds of
        -- which some are empty here (dna.recall's memory Kinds) is no typo.
        IF cardinality(missing) = cardinality(ARRAY(SELECT DISTINCT q.k FROM unnest(kinds) AS q(k))) THEN
            RAISE NOTICE 'no documents of kind % in scope % (model_id %); kinds there: %',
                array_to_string(missing, ', '), quote_literal(scope), quote_literal(model_id),
                dna.scope_kinds_text(scope, model_id, tbl)
                USING ERRCODE = '02000';
        END IF;
    END IF;

    -- An empty answer under a floor is "nothing known above the floor", not "no documents": say
    -- how many candidates each floor removed (the hits carry the counts when there are hits).
    IF returned = 0 AND (min_similarity IS NOT NULL OR min_lexical_score IS NOT NULL) THEN
        EXECUTE format('WITH dense_all AS (%s), lexical_all AS (%s)
                        SELECT (SELECT count(*) FROM dense_all AS d WHERE d.similarity < $23),
                               (SELECT count(*) FROM lexical_all AS l WHERE l.lexical_score < $24)',
                       dense_sql, lexical_sql)
            INTO removed_dense, removed_lexical
            USING scope, model_id, query_embedding, dense_depth, kinds, tenant, name_prefix, terms,
                  weights, rrf_k, k, degraded, lexical_depth, cfg.bm25_k1, cfg.bm25_b,
                  CASE WHEN name_prefix IS NULL AND filter IS NULL THEN lexical_depth + retired END, valid_time,
                  coalesce(passages, false), dna.lexical_query(query, cfg.ts_config), highlight,
                  dense_exact, "offset", min_similarity, min_lexical_score, fusion, dense_weight,
              coalesce(explain, false), answer, past_keys, past_idf, coalesce(cardinality(past_keys), 0), past_hits,
              lane_ids, lane_scores, lane_exact, past_avg_len, lane_kinds, lane_names, lane_tenants, lane_passages;
        RAISE NOTICE 'no hit above the relevance floors: min_similarity % removed % dense candidates, '
                     'min_lexical_score % removed % lexical candidates',
            coalesce(min_similarity::text, 'NULL'), coalesce(removed_dense, 0),
            coalesce(min_lexical_score::text, 'NULL'), coalesce(removed_lexical, 0)
            USING ERRCODE = '02000';
    END IF;
END
$$;

COMMENT ON FUNCTION dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[], double precision, boolean, timestamptz, boolean, boolean, integer, double precision, double precision, boolean, text, double precision, boolean, jsonb, dna.past_text[], jsonb, text, double precision, double precision) IS
'Hybrid search in one scope: a dense lane (cosine KNN over dna.dna_search_docs_<width of model_id>, HNSW '
'with iterative scans, or an exact scan) and a lexical lane (Okapi BM25 over the OR of the query lexemes, dna.bm25, with the '
'scope''s regconfig and k1/b), each over-fetching candidates with the filters (model_id, kinds, '
'name_prefix, tenant overlay, validity) inside the lane, fused by dna.rrf(ARRAY[rank_dense, rank_lexical], weights, '
'rrf_k) (fusion => ''rrf'') or, fusion => ''convex'' (the default), by dna.convex_fusion: dense_weight (0..1, default 0.5) x the '
'cosine plus (1 - dense_weight) x the BM25 score, each z-score normalised over its lane''s candidates for this query and '
'shifted so the lowest is 0 (dna.z_score: (x - min) / standard deviation; absent from a lane: 0; score then >= 0). weights and rrf_k are RRF''s: given by the call or the '
'scope''s setting without a fusion (call, then scope), they select RRF. model_id NULL: the scope''s model with the most documents (of the query vector''s width; NOTICE '
'and no rows for a scope with none). Defaults when an argument is NULL: the scope''s dna.search_config, else (chosen on the SciFact '
'train split) candidates = max(4k, 100) per lane, weights (dense 1, lexical 1.5), rrf_k 10; '
'(chosen on SciFact train and the LoCoMo dev split with the hybrid at 1M documents not below its better lane, bench/RESULTS.md) fusion convex, z-score, dense_weight 0.5. '
'Returns at most k (0..1000, default 10) dna.search_hit rows: ranks offset+1 .. offset+k (offset 0..9000, default 0) of one ranking ordered '
'by score DESC then (kind, name, tenant, passage); the lane depths do not depend on offset, so pages of one size '
'(and candidates) compose, and pages past the fused candidates are empty. score = RRF in [0, sum(weights)/(rrf_k+1)], similarity = cosine '
'in [-1, 1], lexical_score = BM25 (>= 0), all three rounded to 12 significant digits (dna.score_round) so that '
'mathematically equal scores tie and order by key (each lane''s cut at its depth keeps its ties, then takes the depth by key: '
'over tied documents top k is a prefix of top 2k); ranks 1-based or NULL when absent from a lane; degraded = true '
'when query_embedding is NULL or the zero vector (lexical only). Relevance floors: min_similarity (cosine in [-1, 1]) '
'drops dense candidates below it, min_lexical_score (BM25 >= 0) lexical ones, each from its own lane after ranking; '
'every hit carries floor_removed_dense / floor_removed_lexical (candidates removed; NULL without that floor), and an '
'answer the floors emptied raises a NOTICE (02000) with both counts. exact => true: exact dense scan (no HNSW); '
'exact => NULL (default): exact when the scope holds at most dna.exact_scan_rows() (2000) rows of the model, else '
'HNSW with hnsw.ef_search = dna.hnsw_ef_search(k, depth, the width table''s rows) (400 for k = 10 up to 100,000 rows, 600 at 1M) and iterative scans (the planner may still '
'answer a scope of up to ~10,000 rows by an exact scan, priced below the graph at that width: explain''s path says which); exact => false: HNSW (or whatever the planner picks); dense_exact on every hit says which. A blank query returns no rows. Errors: 22023 (unknown '
'model_id, width mismatch, bad k/offset/candidates/rrf_k/min_similarity/min_lexical_score/fusion/dense_weight, weights not 2 finite values >= 0, '
'dense_weight with fusion rrf, weights or rrf_k with fusion convex), 22001 (query > 10000 chars), 42501 (reserved tenant, not a member, no identity). personal => true searches the '
'caller''s personal partition over the shared base (tenant ''personal:<oid>'' and personal = true in its hits), nothing from any workspace. '
'valid_time (world time, default now()): the documents of memories not in force then (valid_at of the '
'record in dna_instances, copied to the document by trigger: forgotten, or valid from later) are left out '
'of both lanes; documents of other Kinds are always in force; NULL turns the validity filter off. '
'exact (every hit): true when the lexical lane''s list is provably the exhaustive BM25 ranking (always '
'for partitions whose query postings fit dna.bm25_lane''s budget; see dna.bm25). '
'Passages: both lanes rank passage rows (a document indexed whole is its passage 0; see '
'dna.index_documents) and RRF fuses passages; by default each document answers once, by its best fused '
'passage (MaxP), whose passage ordinal, heading, char_start/char_end (span in the parent''s text) and snippet '
'the hit carries; passages => true answers every passage (a document may then appear several times). '
'highlight: that passage''s text around the query''s lexemes, matches marked «like this» (ts_headline through '
'dna.identifier_headline: an identifier marked whole, «transaction.on_commit»; up '
'to 2 fragments joined by " … "; NULL when the hit is not in the lexical lane); highlight => NULL (default) '
'computes it for passages of documents indexed as several (char_start set), true for every hit, false never. '
'explain => true: every hit''s explain (jsonb) holds dense / lexical {rank, similarity | bm25, normalised (convex), term: the '
'lane''s part of the score} (NULL for a lane the hit is absent from), score, and answer: {k, offset, model_id, fusion {method, '
'dense_weight | weights, rrf_k}, degraded, degradation, dense {path: hnsw | exact scan | none (from the lane''s plan), exact_rule, '
'ef_search (the hnsw.ef_search the lane ran with: dna.hnsw_ef_search(k, depth, graph_rows); NULL on an exact scan), ef_search_rule, graph_rows (the width table''s pg_class.reltuples; 0 where it is unknown: never analyzed, or a Citus coordinator''s table, whose rows are its shards''), '
'iterative_scan, depth, candidates, min_similarity, removed_by_floor, filter (how a filtered lane was answered)}, lexical {scoring, k1, b, ts_config, terms, depth, '
'cut_at, candidates, exact, min_lexical_score, removed_by_floor}, filters {kinds, name_prefix, tenant, personal, valid_time, '
'out_of_force_at_valid_time, passages}, fused_candidates}; NULL without explain. NOTICEs (SQLSTATE 02000): a '
'scope with no documents (naming the nearest scopes), a model_id with none there, kinds of which none has documents there '
'(checked only when the answer is empty), an answer the relevance floors emptied. past_texts (jsonb array of {kind, name, '
'tenant, tsv}; default NULL) or past (the same list typed, dna.past_text[]; default NULL; dna.recall as_of passes the '
'texts believed then, dna.as_of_past_texts): the rows of each (kind, name, tenant) leave '
'both lanes, and its tsv (a tsvector, in past_texts its text form; null: nothing to rank) joins the lexical lane at passage 0, scored '
'BM25 with the lane''s idf per term, avg_len, k1 and b (N and df are the partition''s today; a term no document '
'holds today counts df 1, the past text itself), fused like every other '
'candidate; the lexical lane fetches at most its cut plus as many rows more (twice its cut when that is fewer, then '
'again with all of them only if fewer than its depth were left), which gives the answer of one run with all of them '
'more whenever the lane is exact; not a JSON array, an element without kind, name and tenant, or both forms given: 22023. '
'filter (jsonb, default NULL; {} is none): the metadata filter of sql/metadata.sql (equality, eq/ne, in/nin, gt/gte/lt/lte '
'on numbers and ISO-8601 timestamps, exists, contains/contains_any on arrays, and/or/not; dna.filter_sql), a condition '
'of both lanes before their top k, on the row''s metadata (a document''s, dna.set_document_metadata; a memory''s, '
'dna.memory_metadata): the dense lane answers by an exact scan when at most max(dna.exact_scan_rows(), depth) rows '
'pass it (with exact => NULL), else HNSW with iterative scans, and by an exact scan of the rows that pass when that '
'HNSW scan gives fewer than its depth (ran dry); the lexical lane scores every posting of the query terms '
'(as with name_prefix) and keeps the rows that pass, so k hits come whenever k rows match. explain: answer.dense.filter '
'says which, answer.filters.filter echoes it. A past text (past/past_texts) passes by its record''s metadata today. '
'Every hit carries its row''s metadata. An empty answer under a filter no row passes raises a NOTICE (02000). '
'Malformed: 22023 with a hint naming the place (dna.filter_sql), 22001 over 65536 bytes. '
'diversity (text, default NULL = ''collapse''; case and blanks ignored): ''collapse'' walks the ranking (documents by '
'their best passage, or passages) in order and drops every hit whose passage is a near-duplicate of one placed before '
'it: the same dna.text_key (letters and digits, lower-cased; not for a Turn: dna.collapses_by_text) or a cosine between the stored passage vectors >= '
'duplicate_similarity (in (0, 1]; NULL: dna.default_duplicate_similarity(), 1: the cosine rule off, so the text '
'rules alone by default); ''mmr'' collapses the same way and '
'orders the rest by Maximal Marginal Relevance over the fused candidates: mmr_lambda (in [0, 1]; NULL: '
'dna.default_mmr_lambda(), 0.7) x the fused score min-max normalised - (1 - mmr_lambda) x the highest cosine to a hit '
'placed before (mmr_lambda alone selects mmr); ''off'': the fused ranking as it is (the answer before 0022). The window '
'offset+1 .. offset+k is taken from that one diversified ranking, so pages of one size still compose; score is '
'still the fused score (under mmr the hits are in MMR order). dna.diversify does the walk. explain: answer.diversity '
'{method, duplicate_similarity, mmr_lambda, text_key, collapsed: how many candidates were collapsed on the way to '
'offset + k}, and each hit''s explain.diversity {fused_rank, place, collapsed: [{kind, name, tenant, passage, fused_rank, '
'score, similarity}] the candidates collapsed into it (similarity 1: the same text), relevance and redundancy under mmr}. '
'Errors: 22023 for another diversity, duplicate_similarity out of range or with off, mmr_lambda out of range or '
'with collapse/off (dna.check_diversity).';
