-- pydna SQL package — the BM25 lexical lane: one partition's best documents for a query's lexemes.
--
-- The scores are those defined in sql/bm25.sql (Lucene's BM25 over the stored tsvectors; N, avglen
-- and df exact under every write); this file is the algorithm that finds the best of them.
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
-- Budget 20,000 postings (the research's measured optimum at 1M documents: exact whenever
-- Σdf ≤ budget, which covers every SciFact-size partition), doubled for a query without a rare
-- term; C = max(200, 2·top) rescored candidates. Rule, on the SciFact TRAIN claims at 100k
-- documents (bench/scale.py corpus, first 150 train claims): the smallest C whose mean overlap@10
-- with exhaustive BM25 is within 0.005 of C = 400's (C 200: 0.999 vs 0.999, p50 19.4 vs 24.7 ms;
-- C 100 at budget 10k: 0.982). Figures in bench/RESULTS.md.

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
SET jit = off                -- many short statements: compiling them would cost more than running them
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
    floor_acc float8;            -- a lower bound of the lim-th partial sum
    lim integer;                 -- partial sums kept: C + 1, and room for the suspects
    full_heap boolean;           -- the heap held lim documents (others may lie below)
    others boolean;              -- a document outside the candidates has a partial sum
    sus boolean[];               -- which of the kept partial sums belong to a document with a tombstone
    n_plain bigint;              -- candidates without a tombstone
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
    -- A term listed twice weighs twice (dna.bm25_terms lists an identifier of the query twice).
    WITH q AS (SELECT u.lexeme, count(*) AS qn FROM unnest(terms) AS u (lexeme) GROUP BY u.lexeme),
    c AS (SELECT q.lexeme, sum(h.n)::bigint AS df,
                 coalesce(sum(h.n) FILTER (WHERE kinds IS NULL OR h.kind = ANY (kinds)), 0)::bigint AS rd
          FROM q CROSS JOIN LATERAL (
              SELECT h.n, h.kind FROM dna.dna_bm25_chunks AS h
              WHERE h.scope = scope AND h.model_id = model_id AND h.tenant = ANY (parts) AND h.lexeme = q.lexeme
              OFFSET 0) AS h
          GROUP BY q.lexeme),
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
           array_agg(q.qn * ln(1 + (n - d.df + 0.5) / (d.df + 0.5)) ORDER BY q.lexeme),
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
    -- Every read of the memtable names its lexemes twice: joined to the query's terms and as
    -- `lexeme = ANY (lex)`, so its index is searched by lexeme whichever side of the join the planner
    -- puts the table on. Planned on statistics that say the memtable is empty (an ANALYZE after a seal or a
    -- compaction) it went outer and its index was read by (scope, model_id, tenant) alone: every entry of
    -- the partition, dead ones included until VACUUM (27 ms for 89,000 after a full compaction of 30,000
    -- documents; 0025, topic lane_lexemes).
    -- Every read of the chunks is a probe per query term (LATERAL … OFFSET 0, lexeme = q.lexeme) or per
    -- chosen chunk (its whole key), never a join the planner may turn around: planned without statistics
    -- (a restore, a table never analyzed: one row estimated per partition) the chunks went outer and
    -- were read by partition, every chunk filtered by lexeme, or through their merge index (dna.bm25 ×3.6
    -- / ×24 p50 / p95 on a 30,000-document scope; 0026, topic any_statistics). That index is partial
    -- (WHERE n > 0, every chunk) so that no statement of this lane, which never names n, can use it.
    -- The usual states (after a compaction; a live scope between seals): nothing to leave out. The
    -- exact statement then has a plain form without the anti-joins, which cost ~20% per posting even
    -- when they find nothing (bench/RESULTS.md, "per posting"). Postings are decoded by unnest() in
    -- the select list (ProjectSet: no tuplestore, unlike unnest in FROM), ~0.05 us per posting cheaper.

    IF exhaustive OR top IS NULL OR readable <= budget THEN
        -- Exact path: every posting of the query terms, scored and summed.
        IF report THEN
            PERFORM set_config('dna.bm25_explain', jsonb_build_object(
                'path', 'exact', 'exact', true, 'n_docs', n, 'avg_len', avgl, 'terms', to_jsonb(lex),
                'idf', to_jsonb(w), 'postings', readable, 'budget', budget, 'budget_asked', budget,
                'ms_since_start', ms)::text, true);
        END IF;
        IF st.tombstones = 0 AND cardinality(st.shadowed) = 0 THEN
            -- Nothing to leave out (no tombstone or shadowed row): the plain form. A live scope's
            -- memtable postings are packed as the chunks' (tf << 33 | len << 42, their doc_id as the
            -- base), so one decode serves both and no anti-join or shadowed test runs per posting (the
            -- state of a scope written through SQL between two seals; with no memtable posting the
            -- second arm reads nothing).
            RETURN QUERY
            SELECT x.base + (x.p & 8589934591), round(sum(x.w * ((x.p >> 33) & 511)::float8 * (k1 + 1)
                       / (((x.p >> 33) & 511)::float8 + k1 * (1 - b + b * (x.p >> 42)::float8 / avgl))) * 1e9) / 1e9, true
            FROM (SELECT sg.base_doc_id AS base, q.w, unnest(c.postings) AS p
                  FROM unnest(lex, w) AS q (lexeme, w)
                  CROSS JOIN LATERAL (
                      SELECT c.tenant, c.kind, c.seg_id, c.postings FROM dna.dna_bm25_chunks AS c
                      WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = ANY (parts) AND c.lexeme = q.lexeme
                      OFFSET 0) AS c
                  JOIN dna.dna_bm25_segments AS sg
                    ON sg.scope = scope AND sg.model_id = model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
                  WHERE kinds IS NULL OR c.kind = ANY (kinds)
                  UNION ALL
                  SELECT p.doc_id, q.w, (p.tf::bigint << 33) | (p.doc_len::bigint << 42)
                  FROM unnest(lex, w) AS q (lexeme, w)
                  JOIN dna.dna_bm25_postings AS p
                    ON p.scope = scope AND p.model_id = model_id AND p.tenant = ANY (parts) AND p.lexeme = q.lexeme AND p.lexeme = ANY (lex)
                  WHERE kinds IS NULL OR p.kind = ANY (kinds)) AS x
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
                  CROSS JOIN LATERAL (
                      SELECT c.tenant, c.kind, c.seg_id, c.postings FROM dna.dna_bm25_chunks AS c
                      WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = ANY (parts) AND c.lexeme = q.lexeme
                      OFFSET 0) AS c
                  JOIN dna.dna_bm25_segments AS sg
                    ON sg.scope = scope AND sg.model_id = model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
                  WHERE kinds IS NULL OR c.kind = ANY (kinds)) AS x
            UNION ALL
            SELECT p.doc_id, NULL::integer, q.w, p.tf::float8, p.doc_len::float8
            FROM q
            JOIN dna.dna_bm25_postings AS p
              ON p.scope = scope AND p.model_id = model_id AND p.tenant = ANY (parts) AND p.lexeme = q.lexeme AND p.lexeme = ANY (lex)
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
        SELECT c.tenant, q.lexeme, c.kind, c.seg_id, c.chunk, c.n, q.w, sg.base_doc_id,
               q.w * least(CASE WHEN sg.k1 = k1 AND sg.b = b
                                THEN c.max_imp * greatest(1.0, avgl / sg.avgdl_ref) * 1.000001
                                ELSE 'Infinity'::float8 END,
                           dna.bm25_weight(c.max_tf, c.min_len, k1, b, avgl) * 1.000001) AS bound
        FROM q
        CROSS JOIN LATERAL (
            SELECT c.tenant, c.kind, c.seg_id, c.chunk, c.n, c.max_imp, c.max_tf, c.min_len FROM dna.dna_bm25_chunks AS c
            WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = ANY (parts) AND c.lexeme = q.lexeme
            OFFSET 0) AS c
        JOIN dna.dna_bm25_segments AS sg
          ON sg.scope = scope AND sg.model_id = model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
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
    -- Tombstoned postings are not left out per posting (a hashed probe of every posting cost as
    -- much as the rest of the step, bench/RESULTS.md "after live writes"): the partial sum of a
    -- document with a tombstone may count its removed postings, so it is only an upper bound.
    -- Such documents ("suspects") among the best are all rescored from their forward rows (a
    -- removed document has none, a changed one has its new terms), and the cut is taken over the
    -- others: `lim` leaves room for up to min(tombstones, C) suspects beside the best C (more
    -- when they fill it).
    lim := cand + 1 + CASE WHEN st.tombstones > 0 THEN least(st.tombstones, cand)::integer ELSE 0 END;
    -- The top `lim` cut copies every document it sees into a heap; most can be left out first.
    -- The postings of one chunk are distinct documents, each with a partial sum at least its
    -- contribution there (memtable postings only add to it), so the lim-th contribution of a
    -- first chunk (impact ranks 1..256) among documents not shadowed is a lower bound of the
    -- lim-th partial sum: documents below it cannot be in the cut (~5% of them pass at 1M).
    LOOP
        SELECT coalesce(max(k.v), '-Infinity'::float8) INTO floor_acc
        FROM unnest(c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w, c_base)
                 AS ch (tenant, lexeme, kind, seg_id, chunk, take, w, base)
        CROSS JOIN LATERAL (
            SELECT c.n, c.postings FROM dna.dna_bm25_chunks AS c
            WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
              AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk
            OFFSET 0) AS c
        CROSS JOIN LATERAL (
            SELECT y.v FROM (SELECT ch.w * (k1 + 1) * ((x.p >> 33) & 511)::float8
                                    / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8) AS v
                             FROM unnest(c.postings[1:ch.take]) AS x (p)
                             WHERE cardinality(st.shadowed) = 0 OR NOT (ch.base + (x.p & 8589934591) = ANY (st.shadowed))) AS y
            ORDER BY y.v DESC OFFSET lim - 1 LIMIT 1) AS k
        WHERE ch.chunk = 0 AND ch.take >= lim;
        IF mem = 0 AND cardinality(st.shadowed) = 0 THEN
            SELECT array_agg(acc.doc_id ORDER BY acc.acc DESC, acc.doc_id), array_agg(acc.acc ORDER BY acc.acc DESC, acc.doc_id)
            INTO docs, accs
            FROM (SELECT x.base + (x.p & 8589934591) AS doc_id,
                         sum(x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8)) AS acc
                  FROM (SELECT ch.base, ch.w * (k1 + 1) AS wk,
                               unnest(CASE WHEN ch.take >= c.n THEN c.postings ELSE c.postings[1:ch.take] END) AS p
                        FROM unnest(c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w, c_base)
                                 AS ch (tenant, lexeme, kind, seg_id, chunk, take, w, base)
                        CROSS JOIN LATERAL (
                            SELECT c.n, c.postings FROM dna.dna_bm25_chunks AS c
                            WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
                              AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk
                            OFFSET 0) AS c) AS x
                  GROUP BY 1
                  HAVING sum(x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8)) >= floor_acc
                  ORDER BY 2 DESC, 1
                  LIMIT lim) AS acc;
        ELSE
            -- Memtable postings join the chunks' in the same packed form (tf << 33 | len << 42, their
            -- doc_id as the base), so one decode serves both; shadowed base rows are left out.
            SELECT array_agg(acc.doc_id ORDER BY acc.acc DESC, acc.doc_id), array_agg(acc.acc ORDER BY acc.acc DESC, acc.doc_id)
            INTO docs, accs
            FROM (SELECT x.base + (x.p & 8589934591) AS doc_id,
                         sum(x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8)) AS acc
                  FROM (SELECT ch.base, ch.w * (k1 + 1) AS wk,
                               unnest(CASE WHEN ch.take >= c.n THEN c.postings ELSE c.postings[1:ch.take] END) AS p
                        FROM unnest(c_tenant, c_lex, c_kind, c_seg, c_chunk, c_take, c_w, c_base)
                                 AS ch (tenant, lexeme, kind, seg_id, chunk, take, w, base)
                        CROSS JOIN LATERAL (
                            SELECT c.n, c.postings FROM dna.dna_bm25_chunks AS c
                            WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
                              AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk
                            OFFSET 0) AS c
                        UNION ALL
                        SELECT p.doc_id, q.w * (k1 + 1), (p.tf::bigint << 33) | (p.doc_len::bigint << 42)
                        FROM unnest(lex, w) AS q (lexeme, w)
                        JOIN dna.dna_bm25_postings AS p
                          ON p.scope = scope AND p.model_id = model_id AND p.tenant = ANY (parts) AND p.lexeme = q.lexeme AND p.lexeme = ANY (lex)
                        WHERE kinds IS NULL OR p.kind = ANY (kinds)) AS x
                  WHERE cardinality(st.shadowed) = 0 OR NOT (x.base + (x.p & 8589934591) = ANY (st.shadowed))
                  GROUP BY 1
                  HAVING sum(x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + kk + kl * (x.p >> 42)::float8)) >= floor_acc
                  ORDER BY 2 DESC, 1
                  LIMIT lim) AS acc;
        END IF;
        docs := coalesce(docs, '{}');
        accs := coalesce(accs, '{}');
        full_heap := cardinality(docs) >= lim;   -- documents beyond the heap may exist (below its last)
        -- Every released candidate is kept when the heap is not full or holds more than C others
        -- (a document above them all would have more than C partial sums above its own); else the
        -- suspects crowded the heap: keep more.
        EXIT WHEN st.tombstones = 0;
        -- sus[i]: docs[i] has a tombstone (one hashed probe of the partition's tombstones)
        SELECT coalesce(array_agg(v.d IN (SELECT t.doc_id FROM dna.dna_bm25_tombstones AS t
                                          WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = ANY (parts))
                                  ORDER BY v.i), '{}')
        INTO sus FROM unnest(docs) WITH ORDINALITY AS v (d, i);
        EXIT WHEN NOT full_heap OR cardinality(docs) - cardinality(array_positions(sus, true)) > cand;
        lim := 2 * lim;
    END LOOP;
    -- The candidates: every suspect, and the best C others; the cut bounds every other document's
    -- partial sum: the best other left out, else (when the heap was full) the smallest kept.
    IF st.tombstones > 0 AND cardinality(docs) > 0 THEN
        SELECT coalesce(array_agg(u.d ORDER BY u.i) FILTER (WHERE u.sus OR u.r <= cand), '{}'),
               coalesce(array_agg(u.a ORDER BY u.i) FILTER (WHERE u.sus OR u.r <= cand), '{}'),
               max(u.a) FILTER (WHERE NOT u.sus AND u.r > cand),
               count(*) FILTER (WHERE NOT u.sus AND u.r <= cand)
        INTO docs, accs, cut, n_plain
        FROM (SELECT x.*, count(*) FILTER (WHERE NOT x.sus) OVER (ORDER BY x.i) AS r
              FROM unnest(docs, accs, sus) WITH ORDINALITY AS x (d, a, sus, i)) AS u;
        IF cut IS NULL AND full_heap THEN
            cut := (SELECT min(a) FROM unnest(accs) AS a);   -- no other kept: the smallest kept bounds the rest
        END IF;
        others := cut IS NOT NULL;
    ELSE
        cut := accs[cand + 1];
        others := cardinality(docs) > cand;
        docs := docs[1:cand];
        accs := accs[1:cand];
        n_plain := cardinality(docs);
    END IF;
    cut := coalesce(cut, 0);
    IF report THEN ms := ms || jsonb_build_object('accumulate', extract(epoch FROM clock_timestamp() - t0) * 1000); END IF;

    -- 3. Exact BM25 of the best C from their forward rows (jsonb lexeme → tf: a key lookup is a
    --    binary search, ~3x faster than array_position over the lexemes), in two steps: the best
    --    2·top first; then, of the others, only those whose partial sum plus every unread bound
    --    reaches the top-th exact score found so far (a document's exact score is at most its
    --    partial sum + rest, so the others cannot enter the top; ~60% of them at 100k, where the
    --    certificate holds). The answer, theta and the certificate are those of rescoring all C.
    WITH cd AS (SELECT u.doc_id, u.acc, u.i FROM unnest(docs, accs) WITH ORDINALITY AS u (doc_id, acc, i)),
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

    IF (cardinality(r_docs) < top OR n_plain < top) AND rest > 0 THEN
        -- The budget read fewer documents than asked for (a tiny budget), or fewer without a
        -- tombstone (their partial sums are the only exact ones): answer exhaustively.
        RETURN QUERY SELECT * FROM dna.bm25_lane(scope, model_id, tenant, terms, k1, b, top, kinds, budget,
                                                 true, report, candidates);
        RETURN;
    END IF;

    -- 4. Certificate: no document outside the rescored ones can reach the top-th exact score.
    theta := CASE WHEN cardinality(r_docs) >= top THEN r_scores[top] ELSE 0 END;
    certified := theta > cut + rest OR (rest = 0 AND NOT others);
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
