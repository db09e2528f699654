-- pydna SQL package — BM25 for the lexical lane: configuration, statistics and the entry points.
--
-- score(d, q) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·len(d)/avglen))
-- idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))        (Lucene's non-negative BM25 idf)
--
-- t ranges over the DISTINCT lexemes of to_tsvector(<scope's regconfig>, query) (OR semantics: a
-- document holding any one of them matches). tf(t,d) = number of positions of t in the document's
-- stored tsvector (PostgreSQL keeps at most 256 positions per lexeme); len(d) = Σ tf over the
-- document's lexemes (stop words are not counted, as in a Lucene analyzer with a stop filter).
-- N, avglen and df(t) are taken within the searched partition: one scope, one model_id, the base
-- rows (tenant '') plus the caller's tenant, base rows shadowed by a tenant row left out. They are
-- exact under every insert, update and delete: sums over segments, memtable and tombstones
-- (sql/bm25_write.sql describes the layout; revision 0010_scale created it).
--
-- Scoring: dna.bm25_lane in sql/bm25_lane.sql (score-at-a-time, budget, certificate).
--
-- Defaults (per scope in dna.dna_search_config, else these): regconfig 'english', k1 = 1.2,
-- b = 0.4, chosen on the SciFact TRAIN split (809 claims; bench/tune.py, figures in
-- bench/RESULTS.md) from the grid k1 ∈ {0.6, 0.9, 1.2, 1.5} × b ∈ {0.3, 0.4, 0.5, 0.75}. The grid is
-- flat near the top (0.9/0.4, Anserini's BEIR setting, and 1.2/0.75, the textbook one, are within
-- 0.003 nDCG@10), so the choice is robust; k1 = 1.2 is also Lucene's default, and b = 0.4 suits
-- short single-topic documents (abstracts, passages, notes) where length says little about
-- verbosity. 'english' beats 'simple' on English text in quality (train nDCG@10 0.697 vs 0.665) and
-- speed (~4×: stop words no longer make an OR query read the postings of nearly every document).

-- ---------------------------------------------------------------------------------------------
-- Per-scope configuration
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.search_config(scope text)
RETURNS TABLE (ts_config regconfig, bm25_k1 double precision, bm25_b double precision,
               weights double precision[], rrf_k double precision,
               dense_candidates integer, lexical_candidates integer,
               fusion text, dense_weight double precision)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- PL/pgSQL, not SQL: Citus cannot plan a parameterized query over an inlined SQL function that
    -- reads a Citus table (sql/tenancy.sql, "Citus rules"). The same row.
    RETURN QUERY
    SELECT coalesce(c.ts_config, 'english'::regconfig), coalesce(c.bm25_k1, 1.2::float8), coalesce(c.bm25_b, 0.4::float8),
           c.weights, c.rrf_k, c.dense_candidates, c.lexical_candidates, c.fusion, c.dense_weight
    FROM (SELECT 1) AS one
    LEFT JOIN dna.dna_search_config AS c ON c.scope = search_config.scope;
END
$$;

COMMENT ON FUNCTION dna.search_config(text) IS
'The search settings of a scope, defaults filled in: ts_config (regconfig, default english), bm25_k1 '
'(default 1.2), bm25_b (default 0.4); weights, rrf_k, dense_candidates, lexical_candidates, fusion and dense_weight are NULL '
'unless set, meaning dna.search''s built-in defaults. Always one row.';

CREATE OR REPLACE FUNCTION dna.set_search_config(
    scope text, ts_config regconfig DEFAULT NULL,
    bm25_k1 double precision DEFAULT NULL, bm25_b double precision DEFAULT NULL,
    weights double precision[] DEFAULT NULL, rrf_k double precision DEFAULT NULL,
    dense_candidates integer DEFAULT NULL, lexical_candidates integer DEFAULT NULL,
    reset boolean DEFAULT false, fusion text DEFAULT NULL, dense_weight double precision DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    cur record;
    w integer;
    n integer;
    retokenized integer := 0;
BEGIN
    -- An operator function (application roles read the settings, they do not change them): say so
    -- instead of PostgreSQL's bare "permission denied for table".
    IF NOT (has_table_privilege('dna.dna_search_config', 'INSERT')
            AND has_table_privilege('dna.dna_search_config', 'UPDATE')) THEN
        RAISE EXCEPTION 'dna.set_search_config is an operator function: role % may not change search settings', current_user
            USING ERRCODE = '42501',
                  HINT = 'Run it as the role that runs the migrations (postgres on the embedded server), or GRANT INSERT, UPDATE ON dna.dna_search_config TO the role.';
    END IF;
    scope := dna.check_key('scope', scope, 200);
    IF bm25_k1 IS NOT NULL AND NOT (bm25_k1 >= 0 AND bm25_k1 <= 100) THEN
        RAISE EXCEPTION 'bm25_k1 must be between 0 and 100, got %', bm25_k1 USING ERRCODE = '22023';
    END IF;
    IF bm25_b IS NOT NULL AND NOT (bm25_b >= 0 AND bm25_b <= 1) THEN
        RAISE EXCEPTION 'bm25_b must be between 0 and 1, got %', bm25_b USING ERRCODE = '22023';
    END IF;
    IF weights IS NOT NULL AND (cardinality(weights) <> 2 OR EXISTS (
            SELECT 1 FROM unnest(weights) AS x WHERE x IS NULL OR NOT (x >= 0 AND x < 'Infinity'))) THEN
        RAISE EXCEPTION 'weights must hold 2 finite values >= 0 (dense, lexical), got %', weights
            USING ERRCODE = '22023';
    END IF;
    IF fusion IS NOT NULL AND fusion NOT IN ('rrf', 'convex') THEN      -- dna.search's fusion (sql/search.sql)
        RAISE EXCEPTION 'fusion must be ''rrf'' or ''convex'', got %', quote_literal(fusion) USING ERRCODE = '22023';
    END IF;
    IF dense_weight IS NOT NULL AND NOT (dense_weight >= 0 AND dense_weight <= 1) THEN
        RAISE EXCEPTION 'dense_weight must be between 0 and 1, got %', dense_weight USING ERRCODE = '22023';
    END IF;
    IF rrf_k IS NOT NULL AND NOT (rrf_k > 0 AND rrf_k < 'Infinity') THEN
        RAISE EXCEPTION 'rrf_k must be a finite number > 0, got %', rrf_k USING ERRCODE = '22023';
    END IF;
    IF dense_candidates IS NOT NULL AND (dense_candidates < 1 OR dense_candidates > 10000)
       OR lexical_candidates IS NOT NULL AND (lexical_candidates < 1 OR lexical_candidates > 10000) THEN
        RAISE EXCEPTION 'candidates must be between 1 and 10000, got % (dense), % (lexical)',
            dense_candidates, lexical_candidates USING ERRCODE = '22023';
    END IF;

    -- SELECT first, then a plain INSERT (never INSERT … ON CONFLICT: dna_search_config is a
    -- reference table on Citus, see dna.register_model).
    IF NOT EXISTS (SELECT 1 FROM dna.dna_search_config AS c WHERE c.scope = scope) THEN
        BEGIN
            INSERT INTO dna.dna_search_config AS c (scope) VALUES (scope);
        EXCEPTION WHEN unique_violation THEN
            NULL;                                        -- a concurrent call created it: updated below
        END;
    END IF;
    UPDATE dna.dna_search_config AS c SET
        ts_config = CASE WHEN reset THEN coalesce(ts_config, 'english') ELSE coalesce(ts_config, c.ts_config) END,
        bm25_k1 = CASE WHEN reset THEN bm25_k1 ELSE coalesce(bm25_k1, c.bm25_k1) END,
        bm25_b = CASE WHEN reset THEN bm25_b ELSE coalesce(bm25_b, c.bm25_b) END,
        weights = CASE WHEN reset THEN weights ELSE coalesce(weights, c.weights) END,
        rrf_k = CASE WHEN reset THEN rrf_k ELSE coalesce(rrf_k, c.rrf_k) END,
        dense_candidates = CASE WHEN reset THEN dense_candidates ELSE coalesce(dense_candidates, c.dense_candidates) END,
        lexical_candidates = CASE WHEN reset THEN lexical_candidates ELSE coalesce(lexical_candidates, c.lexical_candidates) END,
        fusion = CASE WHEN reset THEN fusion ELSE coalesce(fusion, c.fusion) END,
        dense_weight = CASE WHEN reset THEN dense_weight ELSE coalesce(dense_weight, c.dense_weight) END,
        updated_at = now()
    WHERE c.scope = scope
    RETURNING * INTO cur;

    -- A new regconfig re-tokenizes the scope's documents (the tsvector is generated from ts_config;
    -- the BM25 trigger rebuilds their postings and statistics). valid_at is not touched, so the
    -- valid_at row trigger stands aside (dna.mirror_valid_at).
    PERFORM dna.mirror_valid_at(true);
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('UPDATE dna.%I AS t SET ts_config = $2 WHERE t.scope = $1 AND t.ts_config <> $2',
                       'dna_search_docs_' || w)
            USING scope, cur.ts_config;
        GET DIAGNOSTICS n = ROW_COUNT;
        retokenized := retokenized + n;
    END LOOP;
    PERFORM dna.mirror_valid_at(false);

    RETURN jsonb_build_object('scope', scope, 'ts_config', cur.ts_config::text,
                              'bm25_k1', coalesce(cur.bm25_k1, 1.2), 'bm25_b', coalesce(cur.bm25_b, 0.4),
                              'weights', to_jsonb(cur.weights), 'rrf_k', cur.rrf_k,
                              'dense_candidates', cur.dense_candidates,
                              'lexical_candidates', cur.lexical_candidates,
                              'fusion', cur.fusion, 'dense_weight', cur.dense_weight,
                              'retokenized', retokenized);
END
$$;

COMMENT ON FUNCTION dna.set_search_config(text, regconfig, double precision, double precision, double precision[], double precision, integer, integer, boolean, text, double precision) IS
'Operator function (42501 for a role without INSERT and UPDATE on dna.dna_search_config, e.g. an application role). '
'Sets the search settings of a scope; NULL arguments keep the current value (reset => true sets every '
'setting to its argument, NULL meaning the built-in default). ts_config: the text-search configuration '
'(e.g. english, simple) of documents and queries; changing it re-tokenizes the scope''s documents in '
'this transaction. bm25_k1 in [0, 100], bm25_b in [0, 1]; weights (dense, lexical) >= 0, rrf_k > 0 and '
'per-lane candidate depths in [1, 10000], fusion (''rrf'' or ''convex'') and dense_weight in [0, 1] (the convex '
'fusion''s) are dna.search''s defaults for this scope. Returns the '
'effective settings and the number of re-tokenized documents. Errors: 22023 (out-of-range values, '
'blank scope), 42704 (unknown regconfig, from the cast).';


-- ---------------------------------------------------------------------------------------------
-- Statistics
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.bm25_doc_length(tsv tsvector)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer FROM unnest(tsv) AS u
$$;

COMMENT ON FUNCTION dna.bm25_doc_length(tsvector) IS
'BM25 document length: the number of token positions in the tsvector (a lexeme without positions '
'counts 1). Stop words are not in the tsvector and do not count.';

CREATE OR REPLACE FUNCTION dna.bm25_terms(query text, config regconfig DEFAULT 'english')
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- The whole lexeme of each identifier of the query is listed dna.identifier_weight() times in all:
    -- the lane weighs a term by how often it is listed (its idf times that count).
    SELECT ARRAY(SELECT x.l FROM (
        SELECT u.l FROM unnest(tsvector_to_array(dna.text_tsvector(config, coalesce(query, '')))) AS u (l)  -- bounded: never 54000
        UNION ALL
        SELECT lower(t.token) FROM dna.identifier_tokens(left(coalesce(query, ''), 100000)) AS t,
                                   generate_series(2, dna.identifier_weight())
        ) AS x ORDER BY x.l)
$$;

COMMENT ON FUNCTION dna.bm25_terms(text, regconfig) IS
'The lexemes of a query under a text-search configuration (dna.text_tsvector: words and identifiers), sorted: '
'the terms BM25 sums over, each once but the whole lexeme of an identifier of the query (on_commit, '
'django.db.transaction, queryset), listed dna.identifier_weight() = 2 times: the lane weighs a term by its '
'count (revision 0022_first_week). '
'User text is never parsed as tsquery syntax, so operators, quotes and URLs cannot raise, nor can a long text '
'(dna.text_tsvector: read up to its longest prefix whose tsvector fits PostgreSQL''s 1 MB limit); stop words '
'only → empty array.';

CREATE OR REPLACE FUNCTION dna.bm25_stats(scope text, model_id text, tenant text)
RETURNS TABLE (n_docs bigint, total_len bigint, avg_len double precision, shadowed bigint[], tombstones bigint)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    parts text[] := CASE WHEN tenant = '' THEN ARRAY[''] ELSE ARRAY['', tenant] END;
    sh record;
    tbl regclass;
BEGIN
    -- N = sealed + memtable − tombstoned documents: rows no writer updates in place (one statement).
    SELECT g.n + m.n - t.n, g.len + m.len - t.len, t.n INTO n_docs, total_len, tombstones
    FROM (SELECT coalesce(sum(s.n_docs), 0)::bigint AS n, coalesce(sum(s.total_len), 0)::bigint AS len
          FROM dna.dna_bm25_segments AS s
          WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = ANY (parts)) AS g,
         (SELECT count(*)::bigint AS n, coalesce(sum(d.doc_len), 0)::bigint AS len
          FROM dna.dna_bm25_docs AS d
          WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = ANY (parts) AND d.seg_id IS NULL) AS m,
         (SELECT count(*)::bigint AS n, coalesce(sum(x.doc_len), 0)::bigint AS len
          FROM dna.dna_bm25_tombstones AS x
          WHERE x.scope = scope AND x.model_id = model_id AND x.tenant = ANY (parts)) AS t;
    shadowed := '{}';
    IF tenant <> '' AND n_docs > 0 THEN
        -- Base rows shadowed by a row of this tenant leave the partition.
        tbl := dna.search_table(dna.model_dims(model_id));
        EXECUTE format(
            -- LATERAL … OFFSET 0 (not pulled up into a join): one unique-key lookup per tenant row,
            -- whatever the statistics say (a join planned without them compared every tenant row
            -- with every base row: seconds for a few hundred documents).
            'SELECT coalesce(array_agg(b.doc_id ORDER BY b.doc_id), ''{}'') AS ids, count(*) AS n,
                    coalesce(sum(d.doc_len), 0) AS len
             FROM (SELECT DISTINCT t.scope, t.kind, t.name, t.model_id FROM %1$s AS t   -- a document, not each passage
                   WHERE t.scope = $1 AND t.model_id = $2 AND t.tenant = $3) AS t
             CROSS JOIN LATERAL (SELECT b.doc_id FROM %1$s AS b
                                 WHERE b.scope = t.scope AND b.kind = t.kind AND b.name = t.name
                                   AND b.tenant = '''' AND b.model_id = t.model_id OFFSET 0) AS b
             CROSS JOIN LATERAL (SELECT d.doc_len FROM dna.dna_bm25_docs AS d
                                 WHERE d.scope = t.scope AND d.model_id = t.model_id AND d.tenant = ''''
                                   AND d.doc_id = b.doc_id OFFSET 0) AS d', tbl)
            INTO sh USING scope, model_id, tenant;
        shadowed := sh.ids;
        n_docs := n_docs - sh.n;
        total_len := total_len - sh.len;
    END IF;
    avg_len := CASE WHEN n_docs > 0 THEN total_len::float8 / n_docs END;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION dna.bm25_stats(text, text, text) IS
'BM25 statistics of the partition a search reads (scope, model_id, base rows plus tenant''s rows, base '
'rows shadowed by a tenant row removed; tenant already resolved): n_docs (N), total_len, avg_len (NULL '
'when empty), the doc_ids of the shadowed base rows and the number of tombstones (removed sealed '
'documents not yet merged away). Sums over segments, memtable and tombstones.';

DROP FUNCTION IF EXISTS dna.bm25_partition_stats(text, text, text);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.bm25_partition_stats(scope text, model_id text, tenant text DEFAULT '',
                                                    personal boolean DEFAULT false)
RETURNS TABLE (n_docs bigint, total_len bigint, avg_len double precision, shadowed bigint[])
LANGUAGE sql STABLE
AS $$
    SELECT s.n_docs, s.total_len, s.avg_len, s.shadowed FROM dna.bm25_stats(scope, model_id, dna.resolve_tenant(tenant, personal)) AS s
$$;

COMMENT ON FUNCTION dna.bm25_partition_stats(text, text, text, boolean) IS
'BM25 statistics of the partition a search reads: scope, model_id, base rows plus tenant''s rows, base '
'rows shadowed by a tenant row removed. Returns n_docs (N), total_len, avg_len (NULL when empty) and '
'the doc_ids of the shadowed base rows. personal => true: the caller''s personal partition. Errors: '
'42501 (reserved tenant, not a member, no identity), 22023 (bad tenant).';

-- ---------------------------------------------------------------------------------------------
-- Entry points (the lane itself: sql/bm25_lane.sql)
-- ---------------------------------------------------------------------------------------------

DROP FUNCTION IF EXISTS dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision);  -- before the personal parameter (0009_tenancy)
DROP FUNCTION IF EXISTS dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision, boolean);  -- before exact, budget (0010_scale)
CREATE OR REPLACE FUNCTION dna.bm25(
    scope text, query text, model_id text,
    tenant text DEFAULT '', kinds text[] DEFAULT NULL, name_prefix text DEFAULT NULL,
    k integer DEFAULT 10, k1 double precision DEFAULT NULL, b double precision DEFAULT NULL,
    personal boolean DEFAULT false, exact boolean DEFAULT false, budget integer DEFAULT NULL)
RETURNS SETOF dna.bm25_hit
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    cfg record;
    tbl regclass;
    terms text[];
    ids bigint[];
    scores float8[];
    certs boolean[];
BEGIN
    scope := dna.check_key('scope', scope, 200);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF k IS NULL OR k < 0 OR k > 10000 THEN
        RAISE EXCEPTION 'k must be between 0 and 10000, got %', k USING ERRCODE = '22023';
    END IF;
    IF budget IS NOT NULL AND (budget < 1 OR budget > 100000000) THEN
        RAISE EXCEPTION 'budget must be between 1 and 100000000 postings, got %', budget USING ERRCODE = '22023';
    END IF;
    tbl := dna.search_table(dna.model_dims(model_id, scope));
    SELECT * INTO cfg FROM dna.search_config(scope);
    k1 := coalesce(k1, cfg.bm25_k1);
    b := coalesce(b, cfg.bm25_b);
    IF NOT (k1 >= 0 AND k1 <= 100) OR NOT (b >= 0 AND b <= 1) THEN
        RAISE EXCEPTION 'BM25 needs k1 in [0, 100] and b in [0, 1], got k1 = %, b = %', k1, b
            USING ERRCODE = '22023';
    END IF;
    terms := dna.bm25_terms(query, cfg.ts_config);
    IF k = 0 OR cardinality(terms) = 0 THEN
        RETURN;
    END IF;
    -- The top k (ties included, so the final order by name is exact) is cut before the join to
    -- the documents; kinds is applied in the postings, so only a name_prefix needs every score.
    -- The lane runs by its own statement, its rows joined to the documents by the next (on Citus a
    -- function reading dna_* tables cannot run inside a statement pushed to a shard: sql/tenancy.sql,
    -- "Citus rules").
    SELECT coalesce(array_agg(c.doc_id), '{}'), coalesce(array_agg(c.score), '{}'), coalesce(array_agg(c.exact), '{}')
    INTO ids, scores, certs
    FROM dna.bm25_lane(scope, model_id, tenant, terms, k1, b, CASE WHEN name_prefix IS NULL THEN k END, kinds,
                       budget, exact) AS c;
    RETURN QUERY EXECUTE format(
        'SELECT d.kind, d.name, d.tenant, c.score, c.doc_id, c.exact
         FROM unnest($1::bigint[], $2::float8[], $3::boolean[]) AS c(doc_id, score, exact)
         JOIN %s AS d ON d.scope = $4 AND d.doc_id = c.doc_id
         WHERE ($5::text IS NULL OR starts_with(d.name, $5))
         ORDER BY c.score DESC, d.kind, d.name, d.tenant
         LIMIT $6', tbl)
        USING ids, scores, certs, scope, name_prefix, k;
END
$$;

COMMENT ON FUNCTION dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision, boolean, boolean, integer) IS
'The lexical lane: Okapi BM25 over the distinct lexemes of to_tsvector(<scope regconfig>, query), OR '
'semantics. score = sum over terms of ln(1 + (N - df + 0.5)/(df + 0.5)) * tf*(k1+1)/(tf + k1*(1 - b + '
'b*len/avglen)), with tf and len from the stored tsvector and N, df, avglen taken within the partition '
'(scope, model_id, base rows plus tenant''s rows, shadowed base rows excluded). k1/b: arguments, else '
'the scope''s dna.search_config (default 1.2/0.4). Filters kinds and name_prefix apply before the cut. '
'Returns at most k (0..10000) dna.bm25_hit rows ordered by score DESC, kind, name, tenant; each says '
'exact: true when the list is the exhaustive BM25 ranking (always for partitions whose query postings '
'fit the budget, default 20000 postings; else when a certificate proves it, see dna.bm25_lane); every '
'score is exact BM25. exact => true forces exhaustive scoring (cost grows with the corpus); a '
'name_prefix scores exhaustively too. Never raises on query text; a query without lexemes returns no '
'rows. Errors: 22023 (unknown model_id, bad k, k1, b or budget), 42501 (reserved tenant, not a member, '
'no identity). personal => true: the caller''s personal partition over the shared base.';

CREATE OR REPLACE FUNCTION dna.bm25_explain(scope text, query text, model_id text, tenant text DEFAULT '',
                                            kinds text[] DEFAULT NULL, k integer DEFAULT 10,
                                            budget integer DEFAULT NULL, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    cfg record;
    hits integer;
BEGIN
    scope := dna.check_key('scope', scope, 200);
    tenant := dna.resolve_tenant(tenant, personal);
    PERFORM dna.model_dims(model_id, scope);
    SELECT * INTO cfg FROM dna.search_config(scope);
    PERFORM set_config('dna.bm25_explain', '{}', true);
    SELECT count(*) INTO hits
    FROM dna.bm25_lane(scope, model_id, tenant, dna.bm25_terms(query, cfg.ts_config), cfg.bm25_k1, cfg.bm25_b,
                       k, kinds, budget, false, true);
    RETURN current_setting('dna.bm25_explain')::jsonb || jsonb_build_object('hits', hits, 'k', k);
END
$$;

COMMENT ON FUNCTION dna.bm25_explain(text, text, text, text, text[], integer, integer, boolean) IS
'How the lexical lane answers a query: {path: exact|budgeted, exact, n_docs, avg_len, terms (distinct), idf '
'(per term: its idf times how often dna.bm25_terms lists it, 2 for an identifier''s whole lexeme), '
'postings (to score without a budget), budget, and on the budgeted path postings_read, chunks_read, '
'candidates, rescored (the candidates whose exact score was computed: the best 2k, then those that could still reach the top k), theta (k-th exact score), cut ((C+1)-th partial sum), unread_bound, budget_asked and '
'budget (the one spent: doubled for a query without a rare term, rarest_df > budget), ms_since_start '
'(milliseconds from the lane''s start to the end of each phase: stats, df, chunks, accumulate, rescore), hits, k}. '
'An empty object plus hits = 0 when nothing matches. Errors as dna.bm25.';
