-- pydna SQL package — BM25 for the lexical lane: statistics and scoring.
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
-- Scoring (dna.bm25_lane) is score-at-a-time over impact-ordered chunks with a postings budget
-- (Lin & Trotman, "Anytime Ranking for Impact-Ordered Indexes", ICTIR 2015; measured design B of
-- ../shared/research/bm25-at-scale.md):
--   1. exact path: when the postings of the query terms number at most the budget (every
--      SciFact-size partition), all of them are scored: the exhaustive BM25 ranking, exact = true;
--   2. budgeted path: chunks are read in descending order of their score bound until the budget
--      is spent (the memtable is always read whole); the best C partial sums are rescored exactly
--      from their forward rows (those of them that can still reach the top k: a partial sum plus
--      the bound of every unread posting at least the k-th exact score of the best 2k), and the
--      answer is certified exact when the k-th exact score beats
--      the (C+1)-th partial sum plus the bound of every unread posting (Fagin's threshold
--      argument). Every returned score is exact BM25; `exact` says whether the list is provably
--      the exhaustive one.
-- Scores are rounded to 1e-9: sums of the same terms in another order differ in the last bits, and
-- mathematically equal scores must tie (then order by name) on every path and after every merge.
--
-- Defaults (per scope in dna.dna_search_config, else these): regconfig 'english', k1 = 1.2,
-- b = 0.4, chosen on the SciFact TRAIN split (809 claims; bench/tune.py, figures in
-- bench/RESULTS.md) from the grid k1 ∈ {0.6, 0.9, 1.2, 1.5} × b ∈ {0.3, 0.4, 0.5, 0.75}. The grid is
-- flat near the top (0.9/0.4, Anserini's BEIR setting, and 1.2/0.75, the textbook one, are within
-- 0.003 nDCG@10), so the choice is robust; k1 = 1.2 is also Lucene's default, and b = 0.4 suits
-- short single-topic documents (abstracts, passages, notes) where length says little about
-- verbosity. 'english' beats 'simple' on English text in quality (train nDCG@10 0.697 vs 0.665) and
-- speed (~4×: stop words no longer make an OR query read the postings of nearly every document).
-- Budget 20,000 postings (the research's measured optimum at 1M documents: exact whenever
-- Σdf ≤ budget, which covers every SciFact-size partition), doubled for a query without a rare
-- term; C = max(200, 2·top) rescored candidates. Rule, on the SciFact TRAIN claims at 100k
-- documents (bench/scale.py corpus, first 150 train claims): the smallest C whose mean overlap@10
-- with exhaustive BM25 is within 0.005 of C = 400's (C 200: 0.999 vs 0.999, p50 19.4 vs 24.7 ms;
-- C 100 at budget 10k: 0.982). Figures in bench/RESULTS.md.

-- ---------------------------------------------------------------------------------------------
-- Per-scope configuration
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.search_config(scope text)
RETURNS TABLE (ts_config regconfig, bm25_k1 double precision, bm25_b double precision,
               weights double precision[], rrf_k double precision,
               dense_candidates integer, lexical_candidates integer)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(c.ts_config, 'english'::regconfig), coalesce(c.bm25_k1, 1.2), coalesce(c.bm25_b, 0.4),
           c.weights, c.rrf_k, c.dense_candidates, c.lexical_candidates
    FROM (SELECT 1) AS one
    LEFT JOIN dna.dna_search_config AS c ON c.scope = search_config.scope
$$;

COMMENT ON FUNCTION dna.search_config(text) IS
'The search settings of a scope, defaults filled in: ts_config (regconfig, default english), bm25_k1 '
'(default 1.2), bm25_b (default 0.4); weights, rrf_k, dense_candidates and lexical_candidates are NULL '
'unless set, meaning dna.search''s built-in defaults. Always one row.';

CREATE OR REPLACE FUNCTION dna.set_search_config(
    scope text, ts_config regconfig DEFAULT NULL,
    bm25_k1 double precision DEFAULT NULL, bm25_b double precision DEFAULT NULL,
    weights double precision[] DEFAULT NULL, rrf_k double precision DEFAULT NULL,
    dense_candidates integer DEFAULT NULL, lexical_candidates integer DEFAULT NULL,
    reset boolean DEFAULT false)
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
    IF rrf_k IS NOT NULL AND NOT (rrf_k > 0 AND rrf_k < 'Infinity') THEN
        RAISE EXCEPTION 'rrf_k must be a finite number > 0, got %', rrf_k USING ERRCODE = '22023';
    END IF;
    IF dense_candidates IS NOT NULL AND (dense_candidates < 1 OR dense_candidates > 10000)
       OR lexical_candidates IS NOT NULL AND (lexical_candidates < 1 OR lexical_candidates > 10000) THEN
        RAISE EXCEPTION 'candidates must be between 1 and 10000, got % (dense), % (lexical)',
            dense_candidates, lexical_candidates USING ERRCODE = '22023';
    END IF;

    INSERT INTO dna.dna_search_config AS c (scope) VALUES (scope)
    ON CONFLICT ON CONSTRAINT dna_search_config_pkey DO NOTHING;
    UPDATE dna.dna_search_config AS c SET
        ts_config = CASE WHEN reset THEN coalesce(ts_config, 'english') ELSE coalesce(ts_config, c.ts_config) END,
        bm25_k1 = CASE WHEN reset THEN bm25_k1 ELSE coalesce(bm25_k1, c.bm25_k1) END,
        bm25_b = CASE WHEN reset THEN bm25_b ELSE coalesce(bm25_b, c.bm25_b) END,
        weights = CASE WHEN reset THEN weights ELSE coalesce(weights, c.weights) END,
        rrf_k = CASE WHEN reset THEN rrf_k ELSE coalesce(rrf_k, c.rrf_k) END,
        dense_candidates = CASE WHEN reset THEN dense_candidates ELSE coalesce(dense_candidates, c.dense_candidates) END,
        lexical_candidates = CASE WHEN reset THEN lexical_candidates ELSE coalesce(lexical_candidates, c.lexical_candidates) END,
        updated_at = now()
    WHERE c.scope = scope
    RETURNING * INTO cur;

    -- A new regconfig re-tokenizes the scope's documents (the tsvector is generated from ts_config;
    -- the BM25 trigger rebuilds their postings and statistics).
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('UPDATE dna.%I AS t SET ts_config = $2 WHERE t.scope = $1 AND t.ts_config <> $2',
                       'dna_search_docs_' || w)
            USING scope, cur.ts_config;
        GET DIAGNOSTICS n = ROW_COUNT;
        retokenized := retokenized + n;
    END LOOP;

    RETURN jsonb_build_object('scope', scope, 'ts_config', cur.ts_config::text,
                              'bm25_k1', coalesce(cur.bm25_k1, 1.2), 'bm25_b', coalesce(cur.bm25_b, 0.4),
                              'weights', to_jsonb(cur.weights), 'rrf_k', cur.rrf_k,
                              'dense_candidates', cur.dense_candidates,
                              'lexical_candidates', cur.lexical_candidates,
                              'retokenized', retokenized);
END
$$;

COMMENT ON FUNCTION dna.set_search_config(text, regconfig, double precision, double precision, double precision[], double precision, integer, integer, boolean) IS
'Sets the search settings of a scope; NULL arguments keep the current value (reset => true sets every '
'setting to its argument, NULL meaning the built-in default). ts_config: the text-search configuration '
'(e.g. english, simple) of documents and queries; changing it re-tokenizes the scope''s documents in '
'this transaction. bm25_k1 in [0, 100], bm25_b in [0, 1]; weights (dense, lexical) >= 0, rrf_k > 0 and '
'per-lane candidate depths in [1, 10000] are dna.search''s defaults for this scope. Returns the '
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
    SELECT tsvector_to_array(to_tsvector(config, coalesce(query, '')))
$$;

COMMENT ON FUNCTION dna.bm25_terms(text, regconfig) IS
'The distinct lexemes of a query under a text-search configuration, sorted: the terms BM25 sums over. '
'User text is never parsed as tsquery syntax, so operators, quotes and URLs cannot raise; stop words '
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
-- Scoring
-- ---------------------------------------------------------------------------------------------

DROP FUNCTION IF EXISTS dna.bm25_scores(text, text, text, text[], double precision, double precision, double precision, double precision, bigint[], integer);
DROP FUNCTION IF EXISTS dna.bm25_scores(text, text, text, text[], double precision, double precision, double precision, double precision, bigint[], integer, text[]);
CREATE OR REPLACE FUNCTION dna.bm25_lane(
    scope text, model_id text, tenant text, terms text[],
    k1 double precision, b double precision, top integer DEFAULT NULL, kinds text[] DEFAULT NULL,
    budget integer DEFAULT NULL, exhaustive boolean DEFAULT false, report boolean DEFAULT false,
    candidates integer DEFAULT NULL)
RETURNS TABLE (doc_id bigint, score double precision, exact boolean)
LANGUAGE plpgsql STABLE
ROWS 100                     -- callers join the result to the documents by (scope, doc_id): index lookups
-- The planner sees unnest() of a chunk as 10 rows and would sort ~20,000 postings to group them;
-- hashing them is ~2x faster. (No alternative to a sort exists for ORDER BY … LIMIT: still sorted.)
SET enable_sort = off
AS $$
#variable_conflict use_variable
DECLARE
    parts text[] := CASE WHEN tenant = '' THEN ARRAY[''] ELSE ARRAY['', tenant] END;
    st record;
    n float8;
    avgl float8;
    lex text[];
    w float8[];
    readable bigint;
    cand integer;
    c_tenant text[];
    c_lex text[];
    c_kind text[];
    c_seg integer[];
    c_chunk integer[];
    c_take integer[];
    c_w float8[];
    c_base bigint[];
    rest float8;
    read_postings bigint;
    rarest bigint;
    mem bigint;                  -- memtable postings of the query terms that a Kind filter leaves
    plain boolean;               -- no memtable posting, tombstone or shadowed row to merge or filter
    floor_acc float8;            -- a lower bound of the (C+1)-th partial sum (plain budgeted path)
    spent integer;
    docs bigint[];
    accs float8[];
    r_docs bigint[];
    r_scores float8[];
    cut float8;
    theta float8;
    certified boolean;
    kk float8;                   -- k1·(1 − b): a posting adds w·(k1+1)·tf / (tf + kk + kl·len)
    kl float8;                   -- k1·b / avglen
    t0 timestamptz := clock_timestamp();
    ms jsonb := '{}';
BEGIN
    budget := coalesce(budget, 20000);
    IF budget < 1 THEN
        RAISE EXCEPTION 'budget must be a positive number of postings, got %', budget USING ERRCODE = '22023';
    END IF;
    IF top = 0 OR coalesce(cardinality(terms), 0) = 0 THEN
        RETURN;
    END IF;
    SELECT * INTO st FROM dna.bm25_stats(scope, model_id, tenant);
    IF st.n_docs <= 0 THEN
        RETURN;
    END IF;
    IF report THEN ms := ms || jsonb_build_object('stats', extract(epoch FROM clock_timestamp() - t0) * 1000); END IF;
    n := st.n_docs;
    avgl := CASE WHEN st.avg_len > 0 THEN st.avg_len ELSE 1 END;
    kk := k1 * (1 - b);
    kl := k1 * b / avgl;

    -- df per term over every Kind (as N): sealed chunks + memtable − tombstoned − shadowed.
    -- `readable` counts the postings a Kind filter leaves to score.
    WITH q AS (SELECT DISTINCT u.lexeme FROM unnest(terms) AS u (lexeme)),
    c AS (SELECT h.lexeme, sum(h.n)::bigint AS df,
                 coalesce(sum(h.n) FILTER (WHERE kinds IS NULL OR h.kind = ANY (kinds)), 0)::bigint AS rd
          FROM dna.dna_bm25_chunks AS h
          WHERE h.scope = scope AND h.model_id = model_id AND h.tenant = ANY (parts) AND h.lexeme = ANY (terms)
          GROUP BY h.lexeme),
    m AS (SELECT p.lexeme, count(*) AS df, count(*) FILTER (WHERE kinds IS NULL OR p.kind = ANY (kinds)) AS rd
          FROM dna.dna_bm25_postings AS p
          WHERE p.scope = scope AND p.model_id = model_id AND p.tenant = ANY (parts) AND p.lexeme = ANY (terms)
          GROUP BY p.lexeme),
    t AS (SELECT x.lexeme, count(*) AS df
          FROM dna.dna_bm25_tombstone_terms AS x
          WHERE x.scope = scope AND x.model_id = model_id AND x.tenant = ANY (parts) AND x.lexeme = ANY (terms)
          GROUP BY x.lexeme),
    s AS (SELECT l.lexeme, count(*) AS df
          FROM dna.dna_bm25_forward AS f, unnest(terms) AS l (lexeme)
          WHERE cardinality(st.shadowed) > 0 AND f.scope = scope AND f.doc_id = ANY (st.shadowed)
            AND f.terms ? l.lexeme
          GROUP BY l.lexeme)
    SELECT array_agg(q.lexeme ORDER BY q.lexeme),
           array_agg(ln(1 + (n - d.df + 0.5) / (d.df + 0.5)) ORDER BY q.lexeme),
           sum(coalesce(c.rd, 0) + coalesce(m.rd, 0)), min(d.df), sum(coalesce(m.rd, 0))
    INTO lex, w, readable, rarest, mem
    FROM q LEFT JOIN c ON c.lexeme = q.lexeme LEFT JOIN m ON m.lexeme = q.lexeme
           LEFT JOIN t ON t.lexeme = q.lexeme LEFT JOIN s ON s.lexeme = q.lexeme,
         LATERAL (SELECT coalesce(c.df, 0) + coalesce(m.df, 0) - coalesce(t.df, 0) - coalesce(s.df, 0) AS df) AS d
    WHERE d.df > 0;
    IF lex IS NULL THEN
        RETURN;
    END IF;
    IF report THEN ms := ms || jsonb_build_object('df', extract(epoch FROM clock_timestamp() - t0) * 1000); END IF;
    -- The usual state after a compaction: only sealed chunks to read, nothing to leave out. Each
    -- scoring statement then has a plain form without the memtable branch and the anti-joins,
    -- which cost ~20% per posting even when they find nothing (bench/RESULTS.md, "per posting").
    -- Postings are decoded by unnest() in the select list (ProjectSet: no tuplestore, unlike
    -- unnest in FROM), ~0.05 us per posting cheaper.
    plain := mem = 0 AND st.tombstones = 0 AND cardinality(st.shadowed) = 0;

    IF exhaustive OR top IS NULL OR readable <= budget THEN
        -- Exact path: every posting of the query terms, scored and summed.
        IF report THEN
            PERFORM set_config('dna.bm25_explain', jsonb_build_object(
                'path', 'exact', 'exact', true, 'n_docs', n, 'avg_len', avgl, 'terms', to_jsonb(lex),
                'idf', to_jsonb(w), 'postings', readable, 'budget', budget, 'budget_asked', budget,
                'ms_since_start', ms)::text, true);
        END IF;
        IF plain THEN
            RETURN QUERY
            SELECT x.base + (x.p & 8589934591), round(sum(x.w * ((x.p >> 33) & 511)::float8 * (k1 + 1)
                       / (((x.p >> 33) & 511)::float8 + k1 * (1 - b + b * (x.p >> 42)::float8 / avgl))) * 1e9) / 1e9, true
            FROM (SELECT sg.base_doc_id AS base, q.w, unnest(c.postings) AS p
                  FROM unnest(lex, w) AS q (lexeme, w)
                  JOIN dna.dna_bm25_chunks AS c
                    ON c.scope = scope AND c.model_id = model_id AND c.tenant = ANY (parts) AND c.lexeme = q.lexeme
                  JOIN dna.dna_bm25_segments AS sg
                    ON sg.scope = c.scope AND sg.model_id = c.model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
                  WHERE kinds IS NULL OR c.kind = ANY (kinds)) AS x
            GROUP BY 1
            ORDER BY 2 DESC
            FETCH FIRST coalesce(top, 2147483647) ROWS WITH TIES;
            RETURN;
        END IF;
        RETURN QUERY
        WITH q AS (SELECT * FROM unnest(lex, w) AS q (lexeme, w)),
        tomb AS MATERIALIZED (
            SELECT t.doc_id, t.seg_id FROM dna.dna_bm25_tombstones AS t
            WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = ANY (parts)),
        post AS (
            SELECT x.base + (x.p & 8589934591) AS doc_id, x.seg_id, x.w,
                   ((x.p >> 33) & 511)::float8 AS tf, (x.p >> 42)::float8 AS len
            FROM (SELECT sg.base_doc_id AS base, c.seg_id, q.w, unnest(c.postings) AS p
                  FROM q
                  JOIN dna.dna_bm25_chunks AS c
                    ON c.scope = scope AND c.model_id = model_id AND c.tenant = ANY (parts) AND c.lexeme = q.lexeme
                  JOIN dna.dna_bm25_segments AS sg
                    ON sg.scope = c.scope AND sg.model_id = c.model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
                  WHERE kinds IS NULL OR c.kind = ANY (kinds)) AS x
            UNION ALL
            SELECT p.doc_id, NULL::integer, q.w, p.tf::float8, p.doc_len::float8
            FROM q
            JOIN dna.dna_bm25_postings AS p
              ON p.scope = scope AND p.model_id = model_id AND p.tenant = ANY (parts) AND p.lexeme = q.lexeme
            WHERE kinds IS NULL OR p.kind = ANY (kinds))
        SELECT a.doc_id, round(sum(a.w * a.tf * (k1 + 1) / (a.tf + k1 * (1 - b + b * a.len / avgl))) * 1e9) / 1e9 AS sc, true
        FROM post AS a
        WHERE NOT (a.doc_id = ANY (st.shadowed))
          AND NOT EXISTS (SELECT 1 FROM tomb AS t WHERE t.doc_id = a.doc_id AND t.seg_id = a.seg_id)
        GROUP BY a.doc_id
        ORDER BY 2 DESC
        FETCH FIRST coalesce(top, 2147483647) ROWS WITH TIES;
        RETURN;
    END IF;

    -- Budgeted path. 1. Chunks in descending order of their bound idf · w(tf, len), taken while
    -- the running count of postings stays within the budget (the last one as a prefix). A bound
    -- is the smaller of the chunk's impact at build time scaled by max(1, avglen/avglen_ref) (valid
    -- when k1/b are the build's) and w(max tf, min len) (valid for any k1, b, avglen).
    cand := coalesce(candidates, greatest(200, 2 * top));
    -- No rare term (the rarest one is in more documents than the budget can read): every list is
    -- long and flat, the certificate cannot hold, and the top documents are those matching many
    -- terms. Such queries get twice the budget (measured in bench/scale.py: ~3% of SciFact claims
    -- at 1M documents; see bench/RESULTS.md).
    spent := CASE WHEN rarest > budget THEN 2 * budget ELSE budget END;
    WITH q AS (SELECT * FROM unnest(lex, w) AS q (lexeme, w)),
    h AS (
        SELECT c.tenant, c.lexeme, c.kind, c.seg_id, c.chunk, c.n, q.w, sg.base_doc_id,
               q.w * least(CASE WHEN sg.k1 = k1 AND sg.b = b
                                THEN c.max_imp * greatest(1.0, avgl / sg.avgdl_ref) * 1.000001
                                ELSE 'Infinity'::float8 END,
                           dna.bm25_weight(c.max_tf, c.min_len, k1, b, avgl) * 1.000001) AS bound
        FROM q
        JOIN dna.dna_bm25_chunks AS c
          ON c.scope = scope AND c.model_id = model_id AND c.tenant = ANY (parts) AND c.lexeme = q.lexeme
        JOIN dna.dna_bm25_segments AS sg
          ON sg.scope = c.scope AND sg.model_id = c.model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
        WHERE kinds IS NULL OR c.kind = ANY (kinds)),
    o AS (SELECT h.*, sum(h.n) OVER (ORDER BY h.bound DESC, h.lexeme, h.kind, h.tenant, h.seg_id, h.chunk) AS cum
          FROM h),
    sel AS (SELECT o.*, CASE WHEN o.cum - o.n >= spent THEN 0
                             WHEN o.cum > spent THEN (spent - (o.cum - o.n))::integer
                             ELSE o.n END AS take
            FROM o)
    SELECT array_agg(sel.tenant) FILTER (WHERE sel.take > 0), array_agg(sel.lexeme) FILTER (WHERE sel.take > 0),
           array_agg(sel.kind) FILTER (WHERE sel.take > 0), array_agg(sel.seg_id) FILTER (WHERE sel.take > 0),
           array_agg(sel.chunk) FILTER (WHERE sel.take > 0), array_agg(sel.take) FILTER (WHERE sel.take > 0),
           array_agg(sel.w) FILTER (WHERE sel.take > 0), array_agg(sel.base_doc_id) FILTER (WHERE sel.take > 0),
           coalesce(sum(sel.take), 0),
           coalesce((SELECT sum(r.bound) FROM (SELECT max(x.bound) AS bound FROM sel AS x WHERE x.take < x.n
                                             GROUP BY x.lexeme) AS r), 0)
    INTO c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w, c_base, read_postings, rest
    FROM sel;
    IF report THEN ms := ms || jsonb_build_object('chunks', extract(epoch FROM clock_timestamp() - t0) * 1000); END IF;

    -- 2. Partial sums over the chosen postings and the whole memtable; the best C + 1 kept
    --    (tombstoned and shadowed documents left out). Hash aggregation of the partial sums is
    --    most of the lane's time (~0.5 us per document read): every posting the budget reads is
    --    a competitive one, so none can be skipped before it.
    IF plain THEN
        -- The top C + 1 cut copies every document it sees into a heap; most can be left out first.
        -- The postings of one chunk are distinct documents, each with a partial sum at least its
        -- contribution there, so the (C+1)-th contribution of a first chunk (impact ranks 1..256)
        -- is a lower bound of the (C+1)-th partial sum: documents below it cannot be in the cut
        -- (~5% of them pass at 1M). The cut itself is unchanged.
        SELECT coalesce(max(k.v), '-Infinity'::float8) INTO floor_acc
        FROM unnest(c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w) AS ch (tenant, lexeme, kind, seg_id, chunk, take, w)
        JOIN dna.dna_bm25_chunks AS c
          ON c.scope = scope AND c.model_id = model_id AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
         AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk
        CROSS JOIN LATERAL (
            SELECT y.v FROM (SELECT ch.w * (k1 + 1) * ((x.p >> 33) & 511)::float8
                                    / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8) AS v
                             FROM unnest(c.postings[1:ch.take]) AS x (p)) AS y
            ORDER BY y.v DESC OFFSET cand LIMIT 1) AS k
        WHERE ch.chunk = 0 AND ch.take > cand;
        SELECT array_agg(acc.doc_id ORDER BY acc.acc DESC, acc.doc_id), array_agg(acc.acc ORDER BY acc.acc DESC, acc.doc_id)
        INTO docs, accs
        FROM (SELECT x.base + (x.p & 8589934591) AS doc_id,
                     sum(x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8)) AS acc
              FROM (SELECT ch.base, ch.w * (k1 + 1) AS wk,
                           unnest(CASE WHEN ch.take >= c.n THEN c.postings ELSE c.postings[1:ch.take] END) AS p
                    FROM unnest(c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w, c_base)
                             AS ch (tenant, lexeme, kind, seg_id, chunk, take, w, base)
                    JOIN dna.dna_bm25_chunks AS c
                      ON c.scope = scope AND c.model_id = model_id AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
                     AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk) AS x
              GROUP BY 1
              HAVING sum(x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8)) >= floor_acc
              ORDER BY 2 DESC, 1
              LIMIT cand + 1) AS acc;
    ELSE
        WITH tomb AS MATERIALIZED (
            SELECT t.doc_id, t.seg_id FROM dna.dna_bm25_tombstones AS t
            WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = ANY (parts)),
        post AS (
            SELECT x.base + (x.p & 8589934591) AS doc_id, x.seg_id, x.wk,
                   ((x.p >> 33) & 511)::float8 AS tf, (x.p >> 42)::float8 AS len
            FROM (SELECT ch.base, ch.seg_id, ch.w * (k1 + 1) AS wk,
                         unnest(CASE WHEN ch.take >= c.n THEN c.postings ELSE c.postings[1:ch.take] END) AS p
                  FROM unnest(c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w, c_base)
                           AS ch (tenant, lexeme, kind, seg_id, chunk, take, w, base)
                  JOIN dna.dna_bm25_chunks AS c
                    ON c.scope = scope AND c.model_id = model_id AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
                   AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk) AS x
            UNION ALL
            SELECT p.doc_id, NULL::integer, q.w * (k1 + 1), p.tf::float8, p.doc_len::float8
            FROM unnest(lex, w) AS q (lexeme, w)
            JOIN dna.dna_bm25_postings AS p
              ON p.scope = scope AND p.model_id = model_id AND p.tenant = ANY (parts) AND p.lexeme = q.lexeme
            WHERE kinds IS NULL OR p.kind = ANY (kinds)),
        acc AS (
            SELECT a.doc_id, sum(a.wk * a.tf / (a.tf + kk + kl * a.len)) AS acc
            FROM post AS a
            WHERE NOT (a.doc_id = ANY (st.shadowed))
              AND NOT EXISTS (SELECT 1 FROM tomb AS t WHERE t.doc_id = a.doc_id AND t.seg_id = a.seg_id)
            GROUP BY a.doc_id
            ORDER BY 2 DESC, 1
            LIMIT cand + 1)
        SELECT array_agg(acc.doc_id ORDER BY acc.acc DESC, acc.doc_id), array_agg(acc.acc ORDER BY acc.acc DESC, acc.doc_id)
        INTO docs, accs
        FROM acc;
    END IF;
    docs := coalesce(docs, '{}');
    cut := coalesce(accs[cand + 1], 0);
    IF report THEN ms := ms || jsonb_build_object('accumulate', extract(epoch FROM clock_timestamp() - t0) * 1000); END IF;

    -- 3. Exact BM25 of the best C from their forward rows (jsonb lexeme → tf: a key lookup is a
    --    binary search, ~3x faster than array_position over the lexemes), in two steps: the best
    --    2·top first; then, of the others, only those whose partial sum plus every unread bound
    --    reaches the top-th exact score found so far (a document's exact score is at most its
    --    partial sum + rest, so the others cannot enter the top; ~60% of them at 100k, where the
    --    certificate holds). The answer, theta and the certificate are those of rescoring all C.
    WITH cd AS (SELECT u.doc_id, u.acc, u.i FROM unnest(docs[1:cand], accs[1:cand]) WITH ORDINALITY AS u (doc_id, acc, i)),
    first AS MATERIALIZED (
        SELECT f.doc_id,
               round(sum(q.w * g.tf * (k1 + 1) / (g.tf + k1 * (1 - b + b * f.doc_len / avgl))) * 1e9) / 1e9 AS sc
        FROM dna.dna_bm25_forward AS f
        CROSS JOIN unnest(lex, w) AS q (lexeme, w)
        CROSS JOIN LATERAL (SELECT (f.terms ->> q.lexeme)::float8 AS tf) AS g
        WHERE f.scope = scope AND f.doc_id = ANY (docs[1:least(cand, 2 * top)]) AND g.tf IS NOT NULL
        GROUP BY f.doc_id),
    more AS (
        SELECT f.doc_id,
               round(sum(q.w * g.tf * (k1 + 1) / (g.tf + k1 * (1 - b + b * f.doc_len / avgl))) * 1e9) / 1e9 AS sc
        FROM dna.dna_bm25_forward AS f
        CROSS JOIN unnest(lex, w) AS q (lexeme, w)
        CROSS JOIN LATERAL (SELECT (f.terms ->> q.lexeme)::float8 AS tf) AS g
        WHERE f.scope = scope AND g.tf IS NOT NULL
          AND f.doc_id = ANY (ARRAY(
                SELECT cd.doc_id FROM cd
                WHERE cd.i > least(cand, 2 * top)
                  AND cd.acc + rest + 1e-6 >= coalesce((SELECT x.sc FROM first AS x ORDER BY x.sc DESC OFFSET top - 1 LIMIT 1),
                                                       '-Infinity'::float8)))
        GROUP BY f.doc_id)
    SELECT array_agg(r.doc_id ORDER BY r.sc DESC, r.doc_id), array_agg(r.sc ORDER BY r.sc DESC, r.doc_id)
    INTO r_docs, r_scores
    FROM (SELECT * FROM first UNION ALL SELECT * FROM more) AS r;
    r_docs := coalesce(r_docs, '{}');
    IF report THEN ms := ms || jsonb_build_object('rescore', extract(epoch FROM clock_timestamp() - t0) * 1000); END IF;

    IF cardinality(r_docs) < top AND rest > 0 THEN
        -- The budget read fewer documents than asked for (a tiny budget): answer exhaustively.
        RETURN QUERY SELECT * FROM dna.bm25_lane(scope, model_id, tenant, terms, k1, b, top, kinds, budget,
                                                 true, report, candidates);
        RETURN;
    END IF;

    -- 4. Certificate: no document outside the rescored ones can reach the top-th exact score.
    theta := CASE WHEN cardinality(r_docs) >= top THEN r_scores[top] ELSE 0 END;
    certified := theta > cut + rest OR (rest = 0 AND cardinality(docs) <= cand);
    IF report THEN
        PERFORM set_config('dna.bm25_explain', jsonb_build_object(
            'path', 'budgeted', 'exact', certified, 'n_docs', n, 'avg_len', avgl, 'terms', to_jsonb(lex),
            'idf', to_jsonb(w), 'postings', readable, 'budget', spent, 'budget_asked', budget, 'rarest_df', rarest,
            'postings_read', read_postings,
            'chunks_read', cardinality(c_seg), 'candidates', cand, 'rescored', cardinality(r_docs),
            'theta', theta, 'cut', cut, 'unread_bound', rest, 'ms_since_start', ms)::text, true);
    END IF;
    RETURN QUERY
    SELECT u.d, u.s, certified
    FROM unnest(r_docs, r_scores) AS u (d, s)
    WHERE u.s >= r_scores[least(top, cardinality(r_scores))]
    ORDER BY u.s DESC, u.d;
END
$$;

COMMENT ON FUNCTION dna.bm25_lane(text, text, text, text[], double precision, double precision, integer, text[], integer, boolean, boolean, integer) IS
'BM25 scores (doc_id, score, exact) of the best `top` documents of one partition (scope, model_id, base '
'rows plus tenant — already resolved —, shadowed base rows left out) for the lexemes `terms`, with k1 and '
'b; ties at the cut included; kinds: only documents of these Kinds are scored (df and N count all). '
'Exact path (every posting scored, exact = true) when exhaustive, top is NULL (every matching document), '
'or the postings to score number at most budget (default 20000); else the budgeted path: chunks in bound '
'order up to the budget (doubled when even the rarest term is in more documents than the budget) plus '
'the whole memtable, the best `candidates` (default max(200, 2·top)) partial sums rescored exactly, '
'exact = true only when the certificate proves the list equal to the exhaustive one. Every score is exact '
'BM25. report => true leaves a jsonb summary in the setting dna.bm25_explain. The building block of '
'dna.bm25 and of dna.search''s lexical lane; no validation beyond budget >= 1 (22023).';

DROP FUNCTION IF EXISTS dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision);  -- before the personal parameter (0009_tenancy)
DROP FUNCTION IF EXISTS dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision, boolean);  -- before exact, budget (0010_scale)
CREATE OR REPLACE FUNCTION dna.bm25(
    scope text, query text, model_id text,
    tenant text DEFAULT '', kinds text[] DEFAULT NULL, name_prefix text DEFAULT NULL,
    k integer DEFAULT 10, k1 double precision DEFAULT NULL, b double precision DEFAULT NULL,
    personal boolean DEFAULT false, exact boolean DEFAULT false, budget integer DEFAULT NULL)
RETURNS SETOF dna.bm25_hit
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    cfg record;
    tbl regclass;
    terms text[];
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
    RETURN QUERY EXECUTE format(
        'SELECT d.kind, d.name, d.tenant, c.score, c.doc_id, c.exact
         FROM dna.bm25_lane($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS c
         JOIN %s AS d ON d.scope = $1 AND d.doc_id = c.doc_id
         WHERE ($11::text IS NULL OR starts_with(d.name, $11))
         ORDER BY c.score DESC, d.kind, d.name, d.tenant
         LIMIT $12', tbl)
        USING scope, model_id, tenant, terms, k1, b, CASE WHEN name_prefix IS NULL THEN k END, kinds,
              budget, exact, name_prefix, k;
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
'How the lexical lane answers a query: {path: exact|budgeted, exact, n_docs, avg_len, terms, idf, '
'postings (to score without a budget), budget, and on the budgeted path postings_read, chunks_read, '
'candidates, rescored (the candidates whose exact score was computed: the best 2k, then those that could still reach the top k), theta (k-th exact score), cut ((C+1)-th partial sum), unread_bound, budget_asked and '
'budget (the one spent: doubled for a query without a rare term, rarest_df > budget), ms_since_start '
'(milliseconds from the lane''s start to the end of each phase: stats, df, chunks, accumulate, rescore), hits, k}. '
'An empty object plus hits = 0 when nothing matches. Errors as dna.bm25.';
