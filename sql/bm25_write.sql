-- pydna SQL package — the write side of the BM25 lexical index: an LSM of impact-ordered postings.
--
-- A partition is (scope, model_id, tenant). Every document of a partition is in exactly one place:
--   the memtable   dna.dna_bm25_postings: one row per (lexeme, document), unsealed documents only;
--                  read exhaustively by every query, so it is kept small by dna.bm25_compact;
--   a segment      dna.dna_bm25_segments (one row: n_docs, total_len, avgdl_ref, k1, b, base_doc_id)
--                  + dna.dna_bm25_chunks: per (lexeme, kind) the segment's postings sorted by BM25
--                  impact (descending) and cut into geometric chunks of 256, 512, … 8192 postings,
--                  each an int8[] of packed postings (doc_id − base_doc_id) | tf << 33 | len << 42.
-- dna.dna_bm25_docs says where each live document is (seg_id, NULL = memtable; kind; doc_len), and
-- dna.dna_bm25_forward holds its term vector (jsonb lexeme → tf as text: jsonb_object() builds it
-- ~2x faster than jsonb_object_agg) for the exact rerank.
-- Deleting or changing a sealed document leaves a tombstone (dna.dna_bm25_tombstones, and one
-- dna.dna_bm25_tombstone_terms row per lexeme, so df stays exact) until a merge drops its postings.
--
-- N, total length and df are never stored as counters a writer updates: they are sums over
-- segments, memtable and tombstones read at query time (sql/bm25.sql), so writers share no row
-- (no hot statistics row, no 40P01 between writers of one partition).
--
-- Locks: a statement that removes or changes documents takes the partition's advisory lock in
-- SHARED mode (to commit). dna.bm25_compact takes it EXCLUSIVE with pg_try_advisory_xact_lock and
-- never waits for a row lock (memtable documents are claimed FOR UPDATE SKIP LOCKED), so
-- compaction never joins a deadlock cycle; if writers hold the lock it retries, then reports busy.
--
-- Research and figures: ../shared/research/bm25-at-scale.md (design B); bench/scale.py.

-- ---------------------------------------------------------------------------------------------
-- Constants and packing
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.bm25_bulk_threshold()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 1000 $$;

COMMENT ON FUNCTION dna.bm25_bulk_threshold() IS
'Documents of one partition written by one statement from which they go straight into a new '
'segment instead of the memtable (1000; pg_textsearch''s bulk_load_threshold plays the same role).';

CREATE OR REPLACE FUNCTION dna.bm25_chunk_of(rank bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- Geometric chunks of 256 · 2^c postings up to 8192, then 8192 each: the best postings of a
    -- list sit in small chunks, so a budget can stop at a fine grain where impacts are high.
    SELECT CASE WHEN rank <= 256 THEN 0 WHEN rank <= 768 THEN 1 WHEN rank <= 1792 THEN 2
                WHEN rank <= 3840 THEN 3 WHEN rank <= 7936 THEN 4 WHEN rank <= 16128 THEN 5
                ELSE 6 + ((rank - 16129) / 8192)::integer END
$$;

COMMENT ON FUNCTION dna.bm25_chunk_of(bigint) IS
'The chunk of the posting at 1-based impact rank `rank` in its list: 0 for ranks 1-256, 1 for 257-768, '
'… 5 for 7937-16128 (sizes 256 · 2^c), then one chunk per 8192 postings.';

CREATE OR REPLACE FUNCTION dna.bm25_weight(tf double precision, len double precision,
                                           k1 double precision, b double precision, avg_len double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len)) $$;

COMMENT ON FUNCTION dna.bm25_weight(double precision, double precision, double precision, double precision, double precision) IS
'BM25 term-frequency weight tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len)) (the impact of one posting, '
'before idf). Increases with tf and decreases with len, so (max tf, min len) bounds a chunk for any k1, b.';

CREATE OR REPLACE FUNCTION dna.bm25_lock_key(scope text, model_id text, tenant text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT hashtextextended('dna.bm25:' || scope || chr(31) || model_id || chr(31) || tenant, 0) $$;

COMMENT ON FUNCTION dna.bm25_lock_key(text, text, text) IS
'The advisory-lock key of a BM25 partition: shared by statements that remove documents, exclusive for '
'dna.bm25_compact. (A hash collision only serialises two partitions; it never changes an answer.)';

-- ---------------------------------------------------------------------------------------------
-- Segments
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.bm25_build_segment(scope text, model_id text, tenant text, seg_id integer,
                                                  level integer, source text, doc_ids bigint[],
                                                  k1 double precision, b double precision,
                                                  source_segs integer[] DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    st record;
    n bigint;
    wm text := current_setting('work_mem');
    pa text := current_setting('enable_presorted_aggregate', true);  -- NULL before PostgreSQL 16
BEGIN
    -- source: a query with columns (kind, lexeme, doc_id, tf, len) over the documents of the new
    -- segment, parameterised by $1 scope, $2 model_id, $3 tenant, $4 doc_ids (the live documents
    -- of the segment, also the ones whose dna_bm25_docs rows give n_docs and total_len) and
    -- $10 source_segs (the segments a merge reads).
    SELECT count(*) AS n_docs, coalesce(sum(d.doc_len), 0) AS total_len,
           min(d.doc_id) AS lo, max(d.doc_id) AS hi
    INTO st
    FROM dna.dna_bm25_docs AS d
    WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.doc_id = ANY (doc_ids);
    IF st.n_docs = 0 THEN
        RETURN 0;
    END IF;
    IF st.hi - st.lo >= 8589934592 THEN                  -- 33 bits of doc_id offset in a packed posting
        RAISE EXCEPTION 'BM25 segment of % documents spans doc_ids % to %, more than 2^33 apart', st.n_docs, st.lo, st.hi
            USING ERRCODE = '54000', HINT = 'Compact more often (dna.bm25_compact) so segments stay close in doc_id.';
    END IF;
    -- A segment is built like an index: its one sort gets maintenance_work_mem when that is larger
    -- (a 10,000-document segment sorts ~90 MB of postings; spilling to disk costs ~1.8x).
    IF pg_size_bytes(current_setting('maintenance_work_mem')) > pg_size_bytes(wm) THEN
        PERFORM set_config('work_mem', current_setting('maintenance_work_mem'), true);
    END IF;
    IF pa IS NOT NULL THEN             -- PostgreSQL 15 has no presorted aggregates: each list sorts alone
        PERFORM set_config('enable_presorted_aggregate', 'off', true);
    END IF;
    -- The postings sorted by (lexeme, kind), each list then sorted by (impact DESC, doc_id) into
    -- one packed array (per-list sorts: enable_presorted_aggregate off for the statement, as one
    -- sort on all four keys costs ~4x more), then cut into its chunks by rank (array slices: the
    -- chunk of rank r is dna.bm25_chunk_of(r), chunk c starts at rank 256 * (2^c - 1) + 1 for
    -- c <= 5, then every 8192). A chunk's max_imp is the impact of its first posting (computed
    -- again from the packed tf and len: the same expression on the same integers); a list of one
    -- chunk takes max_tf and min_len from the aggregate, a longer one from its slices.
    EXECUTE format(
        'INSERT INTO dna.dna_bm25_chunks AS c (scope, model_id, tenant, lexeme, kind, seg_id, chunk,
                                              n, max_imp, max_tf, min_len, postings)
         SELECT $1, $2, $3, l.lexeme, l.kind, $5, g.chunk, least(l.n, g.hi) - g.lo + 1,
                (((l.ps[g.lo] >> 33) & 511)::integer * ($7 + 1)
                 / (((l.ps[g.lo] >> 33) & 511)::integer + $7 * (1 - $8 + $8 * (l.ps[g.lo] >> 42)::integer / $9)))::real,
                CASE WHEN l.n <= 256 THEN l.max_tf
                     ELSE (SELECT max(((x.p >> 33) & 511)::integer) FROM unnest(l.ps[g.lo:least(l.n, g.hi)]) AS x (p)) END,
                CASE WHEN l.n <= 256 THEN l.min_len
                     ELSE (SELECT min((x.p >> 42)::integer) FROM unnest(l.ps[g.lo:least(l.n, g.hi)]) AS x (p)) END,
                CASE WHEN l.n <= 256 THEN l.ps ELSE l.ps[g.lo:least(l.n, g.hi)] END
         FROM (SELECT s.lexeme, s.kind, count(*)::integer AS n, max(s.tf) AS max_tf, min(s.len) AS min_len,
                      array_agg((s.doc_id - $6) | (s.tf::int8 << 33) | (least(s.len, 2097151)::int8 << 42)
                                ORDER BY s.imp DESC, s.doc_id) AS ps
               FROM (SELECT src.kind COLLATE "C" AS kind, src.lexeme COLLATE "C" AS lexeme, src.doc_id, src.tf, src.len,
                            (src.tf * ($7 + 1) / (src.tf + $7 * (1 - $8 + $8 * src.len / $9)))::real AS imp
                     FROM (%s) AS src) AS s
               GROUP BY s.lexeme, s.kind) AS l,
              LATERAL (SELECT x.c AS chunk,
                              CASE WHEN x.c <= 5 THEN 256 * ((1 << x.c) - 1) + 1 ELSE 16129 + (x.c - 6) * 8192 END AS lo,
                              CASE WHEN x.c <= 5 THEN 256 * ((1 << (x.c + 1)) - 1) ELSE 16128 + (x.c - 5) * 8192 END AS hi
                       FROM generate_series(0, dna.bm25_chunk_of(l.n)) AS x (c)) AS g', source)
        USING scope, model_id, tenant, doc_ids, seg_id, st.lo, k1, b,
              greatest(st.total_len::float8 / st.n_docs, 1), source_segs;
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('work_mem', wm, true);
    IF pa IS NOT NULL THEN
        PERFORM set_config('enable_presorted_aggregate', pa, true);
    END IF;
    INSERT INTO dna.dna_bm25_segments (scope, model_id, tenant, seg_id, level, n_docs, total_len,
                                       avgdl_ref, k1, b, base_doc_id)
    VALUES (scope, model_id, tenant, seg_id, level, st.n_docs, st.total_len,
            greatest(st.total_len::float8 / st.n_docs, 1), k1, b, st.lo);
    RETURN n;
END
$$;

COMMENT ON FUNCTION dna.bm25_build_segment(text, text, text, integer, integer, text, bigint[], double precision, double precision, integer[]) IS
'Internal: writes segment seg_id of a partition from `source` (SQL yielding kind, lexeme, doc_id, tf, len '
'over $1 scope, $2 model_id, $3 tenant, $4 doc_ids, $10 source_segs): chunk rows in impact order (impact = BM25 weight at '
'the segment''s own average length, k1, b) and the segment row, from one sort of the postings (run with '
'work_mem raised to maintenance_work_mem for the statement when that is larger, as an index build is). '
'Returns the number of chunk rows.';

CREATE OR REPLACE FUNCTION dna.bm25_segment_level(n_docs bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN n_docs < 8000 THEN 0 ELSE floor(ln(n_docs / 1000.0) / ln(8.0))::integer END $$;

COMMENT ON FUNCTION dna.bm25_segment_level(bigint) IS
'Merge level of a segment of n_docs documents: 0 below 8,000, then one level per factor 8 '
'(8k-64k: 1, 64k-512k: 2, …). dna.bm25_compact merges a level once it holds 8 segments.';

-- ---------------------------------------------------------------------------------------------
-- Write path (statement-level triggers with transition tables)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.bm25_add_docs(scope text, model_id text, tenant text, doc_ids bigint[],
                                             seg_id integer)
RETURNS void
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    cfg record;
BEGIN
    -- The documents' dna_bm25_docs and dna_bm25_forward rows exist (written by dna.bm25_sync).
    IF seg_id IS NULL THEN                               -- into the memtable
        INSERT INTO dna.dna_bm25_postings (scope, model_id, tenant, lexeme, doc_id, tf, doc_len, kind)
        SELECT f.scope, f.model_id, f.tenant, e.lexeme, f.doc_id, u.tf, f.doc_len, f.kind
        FROM dna.dna_bm25_forward AS f, jsonb_each_text(f.terms) AS e (lexeme, v), LATERAL (SELECT e.v::integer AS tf) AS u
        WHERE f.scope = scope AND f.doc_id = ANY (doc_ids);
        RETURN;
    END IF;
    SELECT * INTO cfg FROM dna.search_config(scope);   -- a bulk statement: its own level-0 segment
    -- Postings straight from the stored tsvectors (the forward rows hold the same terms as jsonb,
    -- ~2x dearer to explode); doc_len from the forward row (its primary key is its only index: a
    -- probe of dna_bm25_docs could be planned on its seg_id index, a scan of the whole partition
    -- per document). One key probe per document of each table (LATERAL … OFFSET 0): never a scan
    -- of the whole table, which would grow with every batch.
    PERFORM dna.bm25_build_segment(scope, model_id, tenant, seg_id, 0, format(
        'SELECT t.kind, u.lexeme, i.doc_id, coalesce(cardinality(u.positions), 1) AS tf, d.doc_len AS len
         FROM unnest($4) AS i (doc_id)
         CROSS JOIN LATERAL (SELECT t.kind, t.tsv FROM %s AS t WHERE t.scope = $1 AND t.doc_id = i.doc_id OFFSET 0) AS t
         CROSS JOIN LATERAL (SELECT f.doc_len FROM dna.dna_bm25_forward AS f
                             WHERE f.scope = $1 AND f.doc_id = i.doc_id OFFSET 0) AS d
         CROSS JOIN LATERAL unnest(t.tsv) AS u', dna.search_table(dna.model_dims(model_id))),
        doc_ids, cfg.bm25_k1, cfg.bm25_b);
END
$$;

COMMENT ON FUNCTION dna.bm25_add_docs(text, text, text, bigint[], integer) IS
'Internal (dna.bm25_sync): indexes documents whose dna_bm25_docs/forward rows are written: into the '
'memtable (seg_id NULL) or as the new level-0 segment seg_id (a bulk statement).';

CREATE OR REPLACE FUNCTION dna.bm25_remove_docs(scope text, model_id text, tenant text, doc_ids bigint[])
RETURNS void
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
BEGIN
    -- Shared with other writers, exclusive for compaction (which never waits for it).
    PERFORM pg_advisory_xact_lock_shared(dna.bm25_lock_key(scope, model_id, tenant));
    WITH gone AS (
        DELETE FROM dna.dna_bm25_docs AS d
        WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.doc_id = ANY (doc_ids)
        RETURNING d.doc_id, d.seg_id, d.kind, d.doc_len
    ),
    fwd AS (
        DELETE FROM dna.dna_bm25_forward AS f
        USING gone AS g
        WHERE f.scope = scope AND f.doc_id = g.doc_id
        RETURNING f.doc_id, f.terms
    ),
    mem AS (
        DELETE FROM dna.dna_bm25_postings AS p
        USING gone AS g, fwd, jsonb_object_keys(fwd.terms) AS l (lexeme)
        WHERE g.seg_id IS NULL AND fwd.doc_id = g.doc_id
          AND p.scope = scope AND p.model_id = model_id AND p.tenant = tenant
          AND p.lexeme = l.lexeme AND p.doc_id = g.doc_id
    ),
    tomb AS (
        INSERT INTO dna.dna_bm25_tombstones (scope, model_id, tenant, doc_id, seg_id, kind, doc_len)
        SELECT scope, model_id, tenant, g.doc_id, g.seg_id, g.kind, g.doc_len
        FROM gone AS g WHERE g.seg_id IS NOT NULL
    )
    INSERT INTO dna.dna_bm25_tombstone_terms (scope, model_id, tenant, lexeme, doc_id, seg_id)
    SELECT scope, model_id, tenant, l.lexeme, g.doc_id, g.seg_id
    FROM gone AS g JOIN fwd ON fwd.doc_id = g.doc_id, jsonb_object_keys(fwd.terms) AS l (lexeme)
    WHERE g.seg_id IS NOT NULL;
END
$$;

COMMENT ON FUNCTION dna.bm25_remove_docs(text, text, text, bigint[]) IS
'Internal (dna.bm25_sync): removes documents from the lexical index: memtable postings are deleted, '
'sealed documents get a tombstone (and tombstone terms, so df stays exact) until a merge. Takes the '
'partition''s advisory lock in shared mode until commit.';

CREATE OR REPLACE FUNCTION dna.bm25_sync()
RETURNS trigger
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
DECLARE
    r record;
    changed text := '';
BEGIN
    -- Statement trigger with transition tables (new_rows / old_rows) on every dna_search_docs_<N>:
    -- one pass per statement however many rows it wrote. An UPDATE that leaves a document's
    -- lexical identity (doc_id, scope, model_id, tenant, kind, tsv) as it was changes nothing here.
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        IF TG_OP = 'UPDATE' THEN
            changed := ' WHERE NOT EXISTS (SELECT 1 FROM new_rows AS n WHERE n.doc_id = o.doc_id AND n.scope = o.scope
                           AND n.model_id = o.model_id AND n.tenant = o.tenant AND n.kind = o.kind AND n.tsv = o.tsv)';
        END IF;
        FOR r IN EXECUTE 'SELECT o.scope, o.model_id, o.tenant, array_agg(o.doc_id ORDER BY o.doc_id) AS ids
                          FROM old_rows AS o' || changed || '
                          GROUP BY o.scope, o.model_id, o.tenant ORDER BY 1, 2, 3' LOOP
            PERFORM dna.bm25_remove_docs(r.scope, r.model_id, r.tenant, r.ids);
        END LOOP;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        IF TG_OP = 'UPDATE' THEN
            changed := ' WHERE NOT EXISTS (SELECT 1 FROM old_rows AS o WHERE o.doc_id = n.doc_id AND o.scope = n.scope
                           AND o.model_id = n.model_id AND o.tenant = n.tenant AND o.kind = n.kind AND o.tsv = n.tsv)';
        END IF;
        -- Tokenized once: the stored tsvector becomes the forward row; postings come from it.
        FOR r IN EXECUTE 'WITH added AS MATERIALIZED (
                              SELECT n.scope, n.model_id, n.tenant, n.doc_id, n.kind, n.tsv FROM new_rows AS n' || changed || '),
                          parts AS (
                              SELECT a.scope, a.model_id, a.tenant, array_agg(a.doc_id ORDER BY a.doc_id) AS ids,
                                     CASE WHEN count(*) >= dna.bm25_bulk_threshold()
                                          THEN nextval(''dna.dna_bm25_seg_id_seq'')::integer END AS seg_id
                              FROM added AS a GROUP BY a.scope, a.model_id, a.tenant),
                          fwd AS (
                              INSERT INTO dna.dna_bm25_forward (scope, model_id, tenant, doc_id, kind, doc_len, terms)
                              SELECT a.scope, a.model_id, a.tenant, a.doc_id, a.kind, v.len, v.terms
                              FROM added AS a,
                                   LATERAL (SELECT coalesce(jsonb_object(array_agg(u.lexeme),
                                                                         array_agg(coalesce(cardinality(u.positions), 1)::text)), ''{}'') AS terms,
                                                   coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
                                            FROM unnest(a.tsv) AS u) AS v
                              RETURNING doc_id, doc_len),
                          docs AS (
                              INSERT INTO dna.dna_bm25_docs (scope, model_id, tenant, doc_id, seg_id, kind, doc_len)
                              SELECT a.scope, a.model_id, a.tenant, a.doc_id, p.seg_id, a.kind, f.doc_len
                              FROM added AS a JOIN fwd AS f ON f.doc_id = a.doc_id
                              JOIN parts AS p ON p.scope = a.scope AND p.model_id = a.model_id AND p.tenant = a.tenant)
                          SELECT p.scope, p.model_id, p.tenant, p.ids, p.seg_id FROM parts AS p ORDER BY 1, 2, 3' LOOP
            PERFORM dna.bm25_add_docs(r.scope, r.model_id, r.tenant, r.ids, r.seg_id);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.bm25_sync() IS
'Statement trigger (AFTER INSERT / UPDATE / DELETE, transition tables new_rows / old_rows) on every '
'dna_search_docs_<width> table: keeps the BM25 index equal to the stored tsvectors. Added documents get '
'their forward row and memtable postings, or, when one statement adds dna.bm25_bulk_threshold() or more '
'to a partition, a level-0 segment of their own; removed ones are deleted from the memtable or '
'tombstoned. Writers never update a shared row.';

CREATE OR REPLACE FUNCTION dna.bm25_truncate()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['dna_bm25_postings', 'dna_bm25_chunks', 'dna_bm25_segments', 'dna_bm25_docs',
                             'dna_bm25_forward', 'dna_bm25_tombstones', 'dna_bm25_tombstone_terms'] LOOP
        EXECUTE format('DELETE FROM dna.%I AS x WHERE x.model_id IN
                            (SELECT m.model_id FROM dna.dna_models AS m WHERE m.dims = $1)', t)
            USING TG_ARGV[0]::integer;
    END LOOP;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.bm25_truncate() IS
'Statement trigger (AFTER TRUNCATE) on dna_search_docs_<width>: drops the BM25 index (memtable, '
'segments, forward rows, tombstones) of every model of that width (TG_ARGV[0] = width).';

-- ---------------------------------------------------------------------------------------------
-- Compaction: seal the memtable, merge segments
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.bm25_seal(scope text, model_id text, tenant text)
RETURNS integer
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    ids bigint[];
    seg integer;
    cfg record;
BEGIN
    -- Caller holds the partition's exclusive advisory lock. Documents a writer is changing right
    -- now are skipped (SKIP LOCKED): compaction never waits for a writer.
    SELECT array_agg(x.doc_id ORDER BY x.doc_id) INTO ids
    FROM (SELECT d.doc_id FROM dna.dna_bm25_docs AS d
          WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.seg_id IS NULL
          FOR UPDATE SKIP LOCKED) AS x;
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    seg := nextval('dna.dna_bm25_seg_id_seq');
    SELECT * INTO cfg FROM dna.search_config(scope);
    PERFORM dna.bm25_build_segment(scope, model_id, tenant, seg, dna.bm25_segment_level(cardinality(ids)),
        'SELECT p.kind, p.lexeme, p.doc_id, p.tf, p.doc_len AS len FROM dna.dna_bm25_postings AS p
         WHERE p.scope = $1 AND p.model_id = $2 AND p.tenant = $3 AND p.doc_id = ANY ($4)', ids,
        cfg.bm25_k1, cfg.bm25_b);
    UPDATE dna.dna_bm25_docs AS d SET seg_id = seg
    WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.doc_id = ANY (ids);
    DELETE FROM dna.dna_bm25_postings AS p
    WHERE p.scope = scope AND p.model_id = model_id AND p.tenant = tenant AND p.doc_id = ANY (ids);
    RETURN cardinality(ids);
END
$$;

COMMENT ON FUNCTION dna.bm25_seal(text, text, text) IS
'Internal (dna.bm25_compact): moves the memtable documents of a partition into one new segment; '
'returns how many.';

CREATE OR REPLACE FUNCTION dna.bm25_merge(scope text, model_id text, tenant text, segs integer[])
RETURNS bigint
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    ids bigint[];
    seg integer;
    cfg record;
BEGIN
    -- Caller holds the partition's exclusive advisory lock, so no writer is tombstoning documents
    -- of these segments. Tombstoned postings are dropped; impacts are recomputed at the merged
    -- segment's average length.
    SELECT coalesce(array_agg(d.doc_id ORDER BY d.doc_id), '{}') INTO ids FROM dna.dna_bm25_docs AS d
    WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.seg_id = ANY (segs);
    SELECT * INTO cfg FROM dna.search_config(scope);
    seg := nextval('dna.dna_bm25_seg_id_seq');
    -- Postings decoded in the select list; the tombstone anti-join only when one of the segments
    -- has tombstones (a merge after a bulk load has none).
    PERFORM dna.bm25_build_segment(scope, model_id, tenant, seg, dna.bm25_segment_level(cardinality(ids)),
        'SELECT q.kind, q.lexeme, q.base + (q.p & 8589934591) AS doc_id, ((q.p >> 33) & 511)::integer AS tf,
                (q.p >> 42)::integer AS len
         FROM (SELECT c.kind, c.lexeme, c.seg_id, s.base_doc_id AS base, unnest(c.postings) AS p
               FROM dna.dna_bm25_chunks AS c
               JOIN dna.dna_bm25_segments AS s ON s.scope = c.scope AND s.model_id = c.model_id
                                              AND s.tenant = c.tenant AND s.seg_id = c.seg_id
               WHERE c.scope = $1 AND c.model_id = $2 AND c.tenant = $3 AND c.seg_id = ANY ($10)) AS q'
        || CASE WHEN EXISTS (SELECT 1 FROM dna.dna_bm25_tombstones AS t
                             WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = tenant
                               AND t.seg_id = ANY (segs)) THEN '
         WHERE NOT EXISTS (SELECT 1 FROM dna.dna_bm25_tombstones AS t
                           WHERE t.scope = $1 AND t.model_id = $2 AND t.tenant = $3
                             AND t.seg_id = q.seg_id AND t.doc_id = q.base + (q.p & 8589934591))' ELSE '' END,
        ids, cfg.bm25_k1, cfg.bm25_b, segs);
    UPDATE dna.dna_bm25_docs AS d SET seg_id = seg
    WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.seg_id = ANY (segs);
    DELETE FROM dna.dna_bm25_chunks AS c
    WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = tenant AND c.seg_id = ANY (segs);
    DELETE FROM dna.dna_bm25_tombstone_terms AS t
    WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = tenant AND t.seg_id = ANY (segs);
    DELETE FROM dna.dna_bm25_tombstones AS t
    WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = tenant AND t.seg_id = ANY (segs);
    DELETE FROM dna.dna_bm25_segments AS s
    WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant AND s.seg_id = ANY (segs);
    IF cardinality(ids) = 0 THEN                         -- every document was deleted: no segment left
        DELETE FROM dna.dna_bm25_segments AS s
        WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant AND s.seg_id = seg;
    END IF;
    RETURN cardinality(ids);
END
$$;

COMMENT ON FUNCTION dna.bm25_merge(text, text, text, integer[]) IS
'Internal (dna.bm25_compact): rewrites the given segments of a partition as one, without the postings of '
'tombstoned documents (their tombstones go); returns the live documents it holds.';

CREATE OR REPLACE FUNCTION dna.bm25_compact(scope text DEFAULT NULL, model_id text DEFAULT NULL,
                                            tenant text DEFAULT NULL, full_merge boolean DEFAULT false,
                                            wait_ms integer DEFAULT 2000)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    p record;
    lvl record;
    got boolean;
    waited integer;
    sealed integer;
    segs integer[];
    merged integer;
    dead bigint;
    parts jsonb := '[]';
BEGIN
    IF wait_ms IS NULL OR wait_ms < 0 OR wait_ms > 600000 THEN
        RAISE EXCEPTION 'wait_ms must be between 0 and 600000, got %', wait_ms USING ERRCODE = '22023';
    END IF;
    FOR p IN
        SELECT x.scope, x.model_id, x.tenant FROM (
            SELECT d.scope, d.model_id, d.tenant FROM dna.dna_bm25_docs AS d WHERE d.seg_id IS NULL
            GROUP BY 1, 2, 3
            UNION SELECT s.scope, s.model_id, s.tenant FROM dna.dna_bm25_segments AS s GROUP BY 1, 2, 3) AS x
        WHERE (bm25_compact.scope IS NULL OR x.scope = bm25_compact.scope)
          AND (bm25_compact.model_id IS NULL OR x.model_id = bm25_compact.model_id)
          AND (bm25_compact.tenant IS NULL OR x.tenant = bm25_compact.tenant)
        ORDER BY 1, 2, 3
    LOOP
        -- Try, never queue: a queued exclusive request would make later shared requests wait
        -- behind it, and a writer holding the shared lock could then be waiting on one of them.
        waited := 0;
        LOOP
            got := pg_try_advisory_xact_lock(dna.bm25_lock_key(p.scope, p.model_id, p.tenant));
            EXIT WHEN got OR waited >= wait_ms;
            PERFORM pg_sleep(0.02);
            waited := waited + 20;
        END LOOP;
        IF NOT got THEN
            parts := parts || jsonb_build_object('scope', p.scope, 'model_id', p.model_id, 'tenant', p.tenant,
                                                 'status', 'busy');
            CONTINUE;
        END IF;
        sealed := dna.bm25_seal(p.scope, p.model_id, p.tenant);
        merged := 0;
        LOOP
            -- A level that holds 8 segments is merged into one (level 0, segments under 8,000
            -- documents, as soon as it holds 4: each one costs every query a round of chunk headers
            -- and small merges are cheap); segments with >= 10% tombstoned documents are rewritten
            -- with it. full_merge: everything into one segment.
            SELECT array_agg(s.seg_id ORDER BY s.seg_id) INTO segs
            FROM dna.dna_bm25_segments AS s
            LEFT JOIN LATERAL (SELECT count(*) AS n FROM dna.dna_bm25_tombstones AS t
                               WHERE t.scope = s.scope AND t.model_id = s.model_id AND t.tenant = s.tenant
                                 AND t.seg_id = s.seg_id) AS t ON true
            WHERE s.scope = p.scope AND s.model_id = p.model_id AND s.tenant = p.tenant
              AND (full_merge
                   OR t.n * 10 >= s.n_docs
                   OR s.level = (SELECT s2.level FROM dna.dna_bm25_segments AS s2
                                 WHERE s2.scope = p.scope AND s2.model_id = p.model_id AND s2.tenant = p.tenant
                                 GROUP BY s2.level HAVING count(*) >= CASE WHEN s2.level = 0 THEN 4 ELSE 8 END
                                 ORDER BY s2.level LIMIT 1));
            EXIT WHEN segs IS NULL OR (cardinality(segs) = 1 AND NOT EXISTS (
                SELECT 1 FROM dna.dna_bm25_tombstones AS t
                WHERE t.scope = p.scope AND t.model_id = p.model_id AND t.tenant = p.tenant AND t.seg_id = segs[1]));
            PERFORM dna.bm25_merge(p.scope, p.model_id, p.tenant, segs);
            merged := merged + cardinality(segs);
            EXIT WHEN full_merge;
        END LOOP;
        SELECT count(*) INTO dead FROM dna.dna_bm25_tombstones AS t
        WHERE t.scope = p.scope AND t.model_id = p.model_id AND t.tenant = p.tenant;
        parts := parts || jsonb_build_object(
            'scope', p.scope, 'model_id', p.model_id, 'tenant', p.tenant, 'status', 'ok',
            'sealed_documents', sealed, 'merged_segments', merged,
            'segments', (SELECT count(*) FROM dna.dna_bm25_segments AS s
                         WHERE s.scope = p.scope AND s.model_id = p.model_id AND s.tenant = p.tenant),
            'tombstones', dead);
    END LOOP;
    RETURN jsonb_build_object('partitions', parts);
END
$$;

COMMENT ON FUNCTION dna.bm25_compact(text, text, text, boolean, integer) IS
'Maintenance (an operator or a scheduled job runs it; no verb does): per BM25 partition (scope, model_id, '
'tenant; NULL = all) seals the memtable into a segment, merges every level holding 8 segments (level 0, '
'segments under 8,000 documents: 4) (and '
'segments with >= 10% tombstoned documents), dropping tombstoned postings; full_merge => true merges '
'each partition into one segment (fastest queries, after a bulk load). Idempotent; answers are the same '
'before and after (exact BM25 statistics either way). Safe beside reads and writes: it takes the '
'partition''s advisory lock only if free (waiting up to wait_ms, default 2000), never waits for a row '
'lock, and reports status busy for a partition it could not lock. Run it in its own transaction. '
'Returns {partitions: [{scope, model_id, tenant, status, sealed_documents, merged_segments, segments, '
'tombstones}]}. Errors: 22023 (wait_ms outside 0..600000).';

CREATE OR REPLACE FUNCTION dna.bm25_storage(scope text DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    WITH c AS (SELECT count(*) AS chunks, coalesce(sum(x.n), 0) AS postings,
                      coalesce(sum(pg_column_size(x.postings)), 0) AS posting_bytes
               FROM dna.dna_bm25_chunks AS x WHERE bm25_storage.scope IS NULL OR x.scope = bm25_storage.scope),
         m AS (SELECT count(*) AS postings FROM dna.dna_bm25_postings AS x
               WHERE bm25_storage.scope IS NULL OR x.scope = bm25_storage.scope),
         d AS (SELECT count(*) AS documents, count(*) FILTER (WHERE x.seg_id IS NULL) AS memtable_documents
               FROM dna.dna_bm25_docs AS x WHERE bm25_storage.scope IS NULL OR x.scope = bm25_storage.scope),
         s AS (SELECT count(*) AS segments FROM dna.dna_bm25_segments AS x
               WHERE bm25_storage.scope IS NULL OR x.scope = bm25_storage.scope),
         t AS (SELECT count(*) AS tombstones FROM dna.dna_bm25_tombstones AS x
               WHERE bm25_storage.scope IS NULL OR x.scope = bm25_storage.scope)
    SELECT jsonb_build_object(
        'scope', bm25_storage.scope, 'documents', d.documents, 'memtable_documents', d.memtable_documents,
        'segments', s.segments, 'chunks', c.chunks, 'postings', c.postings, 'memtable_postings', m.postings,
        'tombstones', t.tombstones, 'posting_bytes', c.posting_bytes,
        'bytes_per_posting', round(c.posting_bytes::numeric / nullif(c.postings, 0), 2),
        'chunk_table_bytes', pg_total_relation_size('dna.dna_bm25_chunks'),
        'forward_table_bytes', pg_total_relation_size('dna.dna_bm25_forward'),
        'docs_table_bytes', pg_total_relation_size('dna.dna_bm25_docs'),
        'memtable_table_bytes', pg_total_relation_size('dna.dna_bm25_postings'))
    FROM c, m, d, s, t
$$;

COMMENT ON FUNCTION dna.bm25_storage(text) IS
'Size of the BM25 index of a scope (NULL = all): documents (memtable ones), segments, chunk rows, sealed '
'postings and their bytes (pg_column_size of the packed arrays, so bytes_per_posting = B per sealed '
'posting), memtable postings, tombstones, and the on-disk size of each table (whole tables, every scope).';
