-- pydna SQL package — BM25 for the lexical lane.
--
-- score(d, q) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·len(d)/avglen))
-- idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))        (Lucene's non-negative BM25 idf)
--
-- t ranges over the DISTINCT lexemes of to_tsvector(<scope's regconfig>, query) (OR semantics: a
-- document holding any one of them matches). tf(t,d) = number of positions of t in the document's
-- stored tsvector (PostgreSQL keeps at most 256 positions per lexeme); len(d) = Σ tf over the
-- document's lexemes (stop words are not counted, as in a Lucene analyzer with a stop filter).
-- N, avglen and df(t) are taken within the searched partition: one scope, one model_id, the base
-- rows (tenant '') plus the caller's tenant, base rows shadowed by a tenant row left out.
--
-- Storage (tables from revision 0001):
--   dna.dna_bm25_postings (scope, model_id, tenant, lexeme, doc_id) → tf, doc_len
--       one row per (document, lexeme); read per query term by an index-only range scan. Keeping
--       doc_len on the posting makes scoring a single pass over the query terms' postings, with no
--       join to the documents. Unnesting the tsvector of every matching document instead costs
--       ~10× more (DESIGN.md, "Search plane").
--   dna.dna_bm25_stats (scope, model_id, tenant) → n_docs, total_len
--       document count and summed length per partition, for N and avglen.
-- Both are maintained by the row trigger dna.bm25_maintain() on every dna_search_docs_<width>
-- table (insert, delete, and any update that changes the tsvector, tenant, scope or model_id) and
-- cleared by a TRUNCATE trigger. df(t) is not stored: it is counted from the same posting rows the
-- query reads anyway, so it is exact under every write at no extra cost (bench/bm25_stats.py
-- measures this design against computing everything on demand at 100k documents).
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
-- Statistics maintenance
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

CREATE OR REPLACE FUNCTION dna.bm25_maintain()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    len integer;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM dna.dna_bm25_postings AS p
        WHERE p.scope = OLD.scope AND p.model_id = OLD.model_id AND p.tenant = OLD.tenant
          AND p.lexeme = ANY (tsvector_to_array(OLD.tsv)) AND p.doc_id = OLD.doc_id;
        UPDATE dna.dna_bm25_stats AS s
        SET n_docs = s.n_docs - 1, total_len = s.total_len - dna.bm25_doc_length(OLD.tsv)
        WHERE s.scope = OLD.scope AND s.model_id = OLD.model_id AND s.tenant = OLD.tenant;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        len := dna.bm25_doc_length(NEW.tsv);
        INSERT INTO dna.dna_bm25_postings (scope, model_id, tenant, lexeme, doc_id, tf, doc_len, kind)
        SELECT NEW.scope, NEW.model_id, NEW.tenant, u.lexeme, NEW.doc_id,
               coalesce(cardinality(u.positions), 1), len, NEW.kind
        FROM unnest(NEW.tsv) AS u;
        INSERT INTO dna.dna_bm25_stats AS s (scope, model_id, tenant, n_docs, total_len)
        SELECT NEW.scope, NEW.model_id, NEW.tenant, 1, len
        ON CONFLICT (scope, model_id, tenant) DO UPDATE
        SET n_docs = s.n_docs + 1, total_len = s.total_len + excluded.total_len;
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.bm25_maintain() IS
'Row trigger (AFTER INSERT/UPDATE/DELETE) on every dna_search_docs_<width> table: keeps '
'dna.dna_bm25_postings (one row per document and lexeme: tf, doc_len, kind) and dna.dna_bm25_stats '
'(n_docs, total_len per scope, model_id, tenant) equal to the stored tsvectors.';

CREATE OR REPLACE FUNCTION dna.bm25_truncate()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM dna.dna_bm25_postings AS p
    WHERE p.model_id IN (SELECT m.model_id FROM dna.dna_models AS m WHERE m.dims = TG_ARGV[0]::integer);
    DELETE FROM dna.dna_bm25_stats AS s
    WHERE s.model_id IN (SELECT m.model_id FROM dna.dna_models AS m WHERE m.dims = TG_ARGV[0]::integer);
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.bm25_truncate() IS
'Statement trigger (AFTER TRUNCATE) on dna_search_docs_<width>: drops the BM25 postings and statistics '
'of every model of that width (TG_ARGV[0] = width).';

-- ---------------------------------------------------------------------------------------------
-- Scoring
-- ---------------------------------------------------------------------------------------------

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

DROP FUNCTION IF EXISTS dna.bm25_partition_stats(text, text, text);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.bm25_partition_stats(scope text, model_id text, tenant text DEFAULT '',
                                                    personal boolean DEFAULT false)
RETURNS TABLE (n_docs bigint, total_len bigint, avg_len double precision, shadowed bigint[])
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    tbl regclass;
    sh record;
BEGIN
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    SELECT coalesce(sum(s.n_docs), 0)::bigint, coalesce(sum(s.total_len), 0)::bigint
    INTO n_docs, total_len
    FROM dna.dna_bm25_stats AS s
    WHERE s.scope = scope AND s.model_id = model_id AND s.tenant IN ('', tenant);
    shadowed := '{}';
    IF tenant <> '' AND n_docs > 0 THEN
        -- Base rows shadowed by a row of this tenant leave the partition.
        tbl := dna.search_table(dna.model_dims(model_id));
        EXECUTE format(
            'SELECT coalesce(array_agg(b.doc_id ORDER BY b.doc_id), ''{}'') AS ids, count(*) AS n,
                    coalesce(sum(dna.bm25_doc_length(b.tsv)), 0) AS len
             FROM %1$s AS t JOIN %1$s AS b
               ON b.scope = t.scope AND b.kind = t.kind AND b.name = t.name AND b.tenant = ''''
              AND b.model_id = t.model_id
             WHERE t.scope = $1 AND t.model_id = $2 AND t.tenant = $3', tbl)
            INTO sh USING scope, model_id, tenant;
        shadowed := sh.ids;
        n_docs := n_docs - sh.n;
        total_len := total_len - sh.len;
    END IF;
    avg_len := CASE WHEN n_docs > 0 THEN total_len::float8 / n_docs END;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION dna.bm25_partition_stats(text, text, text, boolean) IS
'BM25 statistics of the partition a search reads: scope, model_id, base rows plus tenant''s rows, base '
'rows shadowed by a tenant row removed. Returns n_docs (N), total_len, avg_len (NULL when empty) and '
'the doc_ids of the shadowed base rows. personal => true: the caller''s personal partition.';

DROP FUNCTION IF EXISTS dna.bm25_scores(text, text, text, text[], double precision, double precision, double precision, double precision, bigint[], integer);  -- before kinds
CREATE OR REPLACE FUNCTION dna.bm25_scores(
    scope text, model_id text, tenant text, terms text[],
    n_docs double precision, avg_len double precision, k1 double precision, b double precision,
    shadowed bigint[] DEFAULT '{}', top integer DEFAULT NULL, kinds text[] DEFAULT NULL)
RETURNS TABLE (doc_id bigint, score double precision)
LANGUAGE plpgsql STABLE
ROWS 100                     -- callers join the result to the documents by (scope, doc_id): index lookups
AS $$
#variable_conflict use_column
BEGIN
    -- One pass over the postings of the query terms: df per term from the same rows (exact for the
    -- partition), then the BM25 sum per document. Static SQL, so PL/pgSQL caches its plan.
    -- top: keep the best `top` documents, ties at the cut included (callers order ties by name);
    -- NULL keeps every matching document (callers that filter on document columns). kinds: score
    -- only documents of these Kinds (before the cut); df still counts every document, as N does.
    RETURN QUERY
    WITH p AS MATERIALIZED (
        SELECT p.lexeme, p.doc_id, p.tf, p.doc_len, p.kind
        FROM dna.dna_bm25_postings AS p
        WHERE p.scope = bm25_scores.scope AND p.model_id = bm25_scores.model_id
          AND p.tenant = ANY (ARRAY['', bm25_scores.tenant])
          AND p.lexeme = ANY (bm25_scores.terms)
          AND NOT (p.doc_id = ANY (bm25_scores.shadowed))
    ),
    idf AS (
        SELECT p.lexeme, ln(1 + (bm25_scores.n_docs - count(*) + 0.5) / (count(*) + 0.5)) AS w
        FROM p GROUP BY p.lexeme
    ),
    s AS (
        SELECT p.doc_id,
               sum(idf.w * p.tf * (bm25_scores.k1 + 1)
                   / (p.tf + bm25_scores.k1 * (1 - bm25_scores.b + bm25_scores.b * p.doc_len / bm25_scores.avg_len)))
                   AS score
        FROM p JOIN idf ON idf.lexeme = p.lexeme
        WHERE bm25_scores.kinds IS NULL OR p.kind = ANY (bm25_scores.kinds)
        GROUP BY p.doc_id
    )
    SELECT s.doc_id, s.score FROM s
    ORDER BY s.score DESC
    FETCH FIRST coalesce(bm25_scores.top, 2147483647) ROWS WITH TIES;
END
$$;

COMMENT ON FUNCTION dna.bm25_scores(text, text, text, text[], double precision, double precision, double precision, double precision, bigint[], integer, text[]) IS
'BM25 scores (doc_id, score) of the documents of one partition (scope, model_id, base rows plus tenant, '
'minus the shadowed doc_ids) holding any of terms, given N, avglen, k1 and b (see dna.bm25 and '
'dna.bm25_partition_stats). kinds: only documents of these Kinds are scored (df counts all, like N); '
'NULL = every Kind. top: the best top documents with ties at the cut, NULL = all, in score order. '
'The building block of dna.bm25 and of dna.search''s lexical lane; no validation.';

DROP FUNCTION IF EXISTS dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.bm25(
    scope text, query text, model_id text,
    tenant text DEFAULT '', kinds text[] DEFAULT NULL, name_prefix text DEFAULT NULL,
    k integer DEFAULT 10, k1 double precision DEFAULT NULL, b double precision DEFAULT NULL,
    personal boolean DEFAULT false)
RETURNS SETOF dna.bm25_hit
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    cfg record;
    st record;
    tbl regclass;
    terms text[];
BEGIN
    scope := dna.check_key('scope', scope, 200);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF k IS NULL OR k < 0 OR k > 10000 THEN
        RAISE EXCEPTION 'k must be between 0 and 10000, got %', k USING ERRCODE = '22023';
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
    SELECT * INTO st FROM dna.bm25_partition_stats(scope, model_id, CASE WHEN personal IS TRUE THEN '' ELSE tenant END, personal IS TRUE);
    IF st.n_docs <= 0 THEN
        RETURN;
    END IF;
    -- The top k (ties included, so the final order by name is exact) is cut before the join to
    -- the documents; kinds is applied in the postings, so only a name_prefix needs every score.
    RETURN QUERY EXECUTE format(
        'SELECT d.kind, d.name, d.tenant, c.score, c.doc_id
         FROM dna.bm25_scores($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS c
         JOIN %s AS d ON d.scope = $1 AND d.doc_id = c.doc_id
         WHERE ($12::text IS NULL OR starts_with(d.name, $12))
         ORDER BY c.score DESC, d.kind, d.name, d.tenant
         LIMIT $13', tbl)
        USING scope, model_id, tenant, terms, st.n_docs::float8, st.avg_len, k1, b, st.shadowed,
              CASE WHEN name_prefix IS NULL THEN k END, kinds, name_prefix, k;
END
$$;

COMMENT ON FUNCTION dna.bm25(text, text, text, text, text[], text, integer, double precision, double precision, boolean) IS
'The lexical lane: Okapi BM25 over the distinct lexemes of to_tsvector(<scope regconfig>, query), OR '
'semantics. score = sum over terms of ln(1 + (N - df + 0.5)/(df + 0.5)) * tf*(k1+1)/(tf + k1*(1 - b + '
'b*len/avglen)), with tf and len from the stored tsvector and N, df, avglen taken within the partition '
'(scope, model_id, base rows plus tenant''s rows, shadowed base rows excluded). k1/b: arguments, else '
'the scope''s dna.search_config (default 1.2/0.4). Filters kinds and name_prefix apply before the cut. '
'Returns at most k (0..10000) rows ordered by score DESC, kind, name, tenant. Never raises on query text; '
'a query without lexemes returns no rows. Errors: 22023 (unknown model_id, bad k, k1 or b), 42501 (reserved tenant, not a member, no identity). personal => true: the caller''s '
'personal partition over the shared base.';
