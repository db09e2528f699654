-- pydna SQL package — the write side of the BM25 lexical index: an LSM of impact-ordered postings.
--
-- A partition is (scope, model_id, tenant). Every document of a partition is in exactly one place:
--   the memtable   dna.dna_bm25_postings: one row per (lexeme, document), unsealed documents only;
--                  read exhaustively by every query, so the write path keeps it small: a statement
--                  that leaves more than dna.bm25_memtable_limit() documents there seals them into
--                  a segment and merges small segments in pairs of one size class
--                  (dna.bm25_bound_memtable); dna.bm25_compact seals and merges;
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
-- A segment's seg_id is unique within its partition (dna.bm25_next_seg), from no sequence.
--
-- Who writes it: the statement triggers of every dna_search_docs_<N> (dna.bm25_sync), whoever writes
-- the rows — a verb or a plain INSERT / UPDATE / DELETE — so the index cannot drift from the rows. On
-- Citus they fire on the shard and write the co-located index tables there: everything a partition's
-- writers and its compaction (sql/bm25_compact.sql) do happens on the node that holds it.
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

CREATE OR REPLACE FUNCTION dna.bm25_memtable_limit()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 1000 $$;

COMMENT ON FUNCTION dna.bm25_memtable_limit() IS
'Documents a partition''s memtable holds at most after a write statement (1000; 2000 before revision '
'0023): a statement that leaves more there seals them into a segment and merges the small segments in '
'pairs (dna.bm25_bound_memtable), as Lucene refreshes and RocksDB flushes, so a scope written only '
'through the SQL verbs stays near its compacted speed with no operator action.';

CREATE OR REPLACE FUNCTION dna.bm25_write_merge_cap()
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 16::bigint * dna.bm25_memtable_limit() $$;

COMMENT ON FUNCTION dna.bm25_write_merge_cap() IS
'Documents from which a segment is left to dna.bm25_compact by the write path (16 x dna.bm25_memtable_limit() '
'= 16000): dna.bm25_bound_memtable merges only segments below it, so one write statement rewrites at most '
'~2 x this many documents (a cascade 1k+1k, 2k+2k, … 8k+8k).';

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

CREATE OR REPLACE FUNCTION dna.bm25_keep_statistics(scope text, tables text[])
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
#variable_conflict use_variable
DECLARE
    t text;
    rel regclass;
    tup real;
    mods bigint;
    may boolean;
    done integer := 0;
    citus boolean := dna.citus_version() IS NOT NULL;
    v17 boolean := current_setting('server_version_num')::integer >= 170000;
    target text;
BEGIN
    -- The write paths keep the planner's statistics of the BM25 tables they change true, so the
    -- lanes' plans never depend on when autovacuum last looked (a memtable analyzed empty right
    -- after a bulk load then filled live: 5x slower plans). A table is analyzed when the rows
    -- changed since its last ANALYZE (committed, pg_stat_get_mod_since_analyze, plus this
    -- transaction's) reach 200 + a quarter of the rows it was analyzed with, or it was never
    -- analyzed: the estimates stay within ~1.25x of the truth, at a cost that is a fraction of the
    -- writes' (geometric: a table growing from empty to n rows is analyzed ~log1.25(n / 200) times;
    -- a plan made with no statistics at all runs the lane ~20x slower, bench/RESULTS.md). At most once per table and transaction;
    -- never waiting (a table another session analyzes or vacuums now is left to it: its
    -- SHARE UPDATE EXCLUSIVE lock is tried with NOWAIT); only by a role that may ANALYZE it (its
    -- owner; from PostgreSQL 17 a role with MAINTAIN, e.g. pg_maintain) — for others autovacuum
    -- does it. On Citus the shard of the scope on this node is analyzed (the plans run there).
    -- Counters as they are now, not as this transaction first read them (stats_fetch_consistency
    -- caches an entry for the transaction from its first read).
    PERFORM pg_stat_clear_snapshot();
    FOREACH t IN ARRAY tables LOOP
        rel := to_regclass('dna.' || t);
        CONTINUE WHEN rel IS NULL;
        IF citus AND dna.citus_placement(rel) = 'distributed' THEN
            rel := to_regclass(shard_name(rel, get_shard_id_for_distribution_column(rel, scope)));
            CONTINUE WHEN rel IS NULL;                   -- the scope's shard is on another node
        END IF;
        SELECT c.reltuples INTO tup FROM pg_class AS c WHERE c.oid = rel;
        mods := pg_stat_get_mod_since_analyze(rel) + pg_stat_get_xact_tuples_inserted(rel)
                + pg_stat_get_xact_tuples_updated(rel) + pg_stat_get_xact_tuples_deleted(rel);
        CONTINUE WHEN tup >= 0 AND mods < 200 + 0.25 * tup;     -- (reltuples -1: never analyzed)
        CONTINUE WHEN greatest(pg_stat_get_last_analyze_time(rel), pg_stat_get_last_autoanalyze_time(rel)) >= now();
        may := CASE WHEN v17 THEN has_table_privilege(rel, 'MAINTAIN')
                    ELSE pg_has_role((SELECT c.relowner FROM pg_class AS c WHERE c.oid = rel), 'USAGE') END;
        CONTINUE WHEN NOT may;
        BEGIN
            EXECUTE format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE NOWAIT', rel);
        EXCEPTION WHEN lock_not_available THEN
            CONTINUE;
        END;
        -- The BM25 tables from a sample of 3,000 rows (statistics target 10), the search tables from the
        -- server's. The lanes read the BM25 tables by key whatever their statistics (0026, topic
        -- any_statistics); what they need of them is the row counts, which a small sample gives as well. The
        -- memtable and the chunks turn over at every seal and merge, so the write path analyzes them about
        -- every hundred documents: ~105 ms for 72,000 memtable postings at the default target of 100, 15 ms
        -- at 10 (0026, topic analyze_cost).
        IF t LIKE 'dna\_bm25\_%' AND current_setting('default_statistics_target')::integer > 10 THEN
            target := current_setting('default_statistics_target');
            PERFORM set_config('default_statistics_target', '10', true);
            EXECUTE format('ANALYZE %s', rel);
            PERFORM set_config('default_statistics_target', target, true);
        ELSE
            EXECUTE format('ANALYZE %s', rel);
        END IF;
        done := done + 1;
    END LOOP;
    RETURN done;
END
$$;

COMMENT ON FUNCTION dna.bm25_keep_statistics(text, text[]) IS
'Internal (the BM25 write paths, dna.bm25_sync for the search table it fires on, and dna.bm25_compact_scope): ANALYZEs each of the given dna.dna_bm25_* or dna_search_docs_<width> tables '
'(names without schema; on Citus the shard of scope on this node) whose rows changed since its last ANALYZE '
'(committed and this transaction''s) reach 200 + a quarter of its analyzed rows, or that was never analyzed, at most once per transaction, '
'never waiting for a lock, when the caller may analyze it (owner; PostgreSQL 17+: MAINTAIN); the BM25 tables with a '
'statistics target of at most 10 (a 3,000-row sample), the search tables with the server''s. Returns how '
'many it analyzed.';

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

CREATE OR REPLACE FUNCTION dna.bm25_doc_ranges(doc_ids bigint[])
RETURNS TABLE (lo bigint, hi bigint)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    d bigint;
BEGIN
    -- A packed posting holds doc_id - base_doc_id in 33 bits, so a segment's documents span less
    -- than 2^33 doc_ids. One server's doc_ids come from one sequence, so that is one range unless
    -- billions of ids lie between a partition's documents; on Citus each node draws doc_ids from
    -- its own range of the sequence (2^48 apart: the coordinator for a verb run there, the worker
    -- for a delegated one), so one scope's documents can need a segment per node.
    SELECT min(x), max(x) INTO lo, hi FROM unnest(doc_ids) AS x;
    IF lo IS NULL THEN
        RETURN;
    END IF;
    IF hi - lo < 8589934592 THEN
        RETURN NEXT;
        RETURN;
    END IF;
    lo := NULL;
    FOR d IN SELECT x FROM unnest(doc_ids) AS x ORDER BY x LOOP
        IF lo IS NULL THEN
            lo := d;
        ELSIF d - lo >= 8589934592 THEN
            RETURN NEXT;                                 -- (lo, hi): the run so far
            lo := d;
        END IF;
        hi := d;
    END LOOP;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION dna.bm25_doc_ranges(bigint[]) IS
'Internal (segment builds): doc_ids cut into runs (lo, hi), ascending, each spanning less than 2^33 (the '
'doc_id offset of a packed posting), greedily from the smallest: one row when they fit one segment, no row '
'for an empty array.';

CREATE OR REPLACE FUNCTION dna.bm25_segment_level(n_docs bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN n_docs < 8000 THEN 0 ELSE floor(ln(n_docs / 1000.0) / ln(8.0))::integer END $$;

COMMENT ON FUNCTION dna.bm25_segment_level(bigint) IS
'Merge level of a segment of n_docs documents: 0 below 8,000, then one level per factor 8 '
'(8k-64k: 1, 64k-512k: 2, …). dna.bm25_compact merges a level once it holds 8 segments.';

-- ---------------------------------------------------------------------------------------------
-- Write path (statement-level triggers; on Citus they fire on the shard, next to the index)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.bm25_next_seg(scope text, model_id text, tenant text)
RETURNS integer
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    part integer := hashtext('dna.bm25.seg:' || scope || chr(31) || model_id || chr(31) || tenant);
    seg integer;
BEGIN
    -- A seg_id is unique within its partition, which lives on one node (Citus: one shard), so it
    -- needs no sequence (a coordinator-only object on Citus, D7). The next one after the
    -- partition's last, claimed by a transaction-level advisory lock (pg_try_…: never waits), so
    -- two writers building segments of one partition at once take different ids; the existence
    -- check, a statement of its own, sees a segment committed since the max() was read.
    SELECT coalesce(max(s.seg_id), 0) + 1 INTO seg FROM dna.dna_bm25_segments AS s
    WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant;
    LOOP
        IF pg_try_advisory_xact_lock(part, seg) AND NOT EXISTS (
               SELECT 1 FROM dna.dna_bm25_segments AS s
               WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant AND s.seg_id = seg) THEN
            RETURN seg;
        END IF;
        seg := seg + 1;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.bm25_next_seg(text, text, text) IS
'Internal (bulk statements, dna.bm25_seal, dna.bm25_merge): the seg_id of a new segment of the partition '
'(scope, model_id, tenant): the partition''s highest + 1, or the next one not claimed by a transaction in '
'progress (pg_try_advisory_xact_lock(hashtext(partition), seg_id), held to commit). Increasing within a '
'partition, as the sequence it replaces (0019) was; no sequence, so it runs on the node that holds the '
'partition (Citus).';

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
    -- The documents' dna_bm25_docs and dna_bm25_forward rows exist (written by dna.bm25_index_docs).
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
'Internal (dna.bm25_index_docs, dna.reconcile): indexes documents whose dna_bm25_docs/forward rows are written: into the '
'memtable (seg_id NULL) or as the new level-0 segment seg_id (a bulk statement).';

CREATE OR REPLACE FUNCTION dna.bm25_index_docs(scope text, model_id text, tenant text, doc_ids bigint[],
                                               kinds text[], lens integer[], terms jsonb[])
RETURNS void
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    seg integer;
    r record;
BEGIN
    -- One partition's added documents (parallel arrays: doc_id, Kind, length, terms from the
    -- stored tsvector), one statement per table: forward rows, document rows, then the postings
    -- (memtable) or, from dna.bm25_bulk_threshold() documents on, a level-0 segment of their own
    -- (one per range of dna.bm25_doc_ranges).
    INSERT INTO dna.dna_bm25_forward (scope, model_id, tenant, doc_id, kind, doc_len, terms)
    SELECT scope, model_id, tenant, u.doc_id, u.kind, u.len, u.terms
    FROM unnest(doc_ids, kinds, lens, terms) AS u (doc_id, kind, len, terms);
    IF cardinality(doc_ids) < dna.bm25_bulk_threshold() THEN
        INSERT INTO dna.dna_bm25_docs (scope, model_id, tenant, doc_id, seg_id, kind, doc_len)
        SELECT scope, model_id, tenant, u.doc_id, NULL, u.kind, u.len
        FROM unnest(doc_ids, kinds, lens) AS u (doc_id, kind, len);
        PERFORM dna.bm25_add_docs(scope, model_id, tenant, doc_ids, NULL);
        -- Writing bounds its own cost: past dna.bm25_memtable_limit() documents the memtable,
        -- which every query reads whole, is sealed into a segment (sql/bm25_compact.sql).
        PERFORM dna.bm25_bound_memtable(scope, model_id, tenant);
        PERFORM dna.bm25_keep_statistics(scope, ARRAY['dna_bm25_postings', 'dna_bm25_docs', 'dna_bm25_forward',
                                                      'dna_bm25_chunks', 'dna_bm25_segments']);
        RETURN;
    END IF;
    FOR r IN SELECT x.lo, x.hi FROM dna.bm25_doc_ranges(doc_ids) AS x LOOP
        seg := dna.bm25_next_seg(scope, model_id, tenant);
        INSERT INTO dna.dna_bm25_docs (scope, model_id, tenant, doc_id, seg_id, kind, doc_len)
        SELECT scope, model_id, tenant, u.doc_id, seg, u.kind, u.len
        FROM unnest(doc_ids, kinds, lens) AS u (doc_id, kind, len) WHERE u.doc_id BETWEEN r.lo AND r.hi;
        PERFORM dna.bm25_add_docs(scope, model_id, tenant,
                                  ARRAY(SELECT i FROM unnest(doc_ids) AS i WHERE i BETWEEN r.lo AND r.hi), seg);
    END LOOP;
    PERFORM dna.bm25_keep_statistics(scope, ARRAY['dna_bm25_docs', 'dna_bm25_forward', 'dna_bm25_chunks',
                                                  'dna_bm25_segments']);
END
$$;

COMMENT ON FUNCTION dna.bm25_index_docs(text, text, text, bigint[], text[], integer[], jsonb[]) IS
'Internal (dna.bm25_sync): adds documents of one partition to the lexical index from parallel arrays '
'(doc_ids, kinds, lens = token positions, terms = jsonb lexeme → tf as text): their forward and document '
'rows, then memtable postings (sealed into a segment when the memtable passes dna.bm25_memtable_limit(): '
'dna.bm25_bound_memtable), or a level-0 segment of their own (dna.bm25_next_seg; one per range of '
'dna.bm25_doc_ranges) when there are dna.bm25_bulk_threshold() or more.';

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
    PERFORM dna.bm25_keep_statistics(scope, ARRAY['dna_bm25_docs', 'dna_bm25_forward', 'dna_bm25_postings',
                                                  'dna_bm25_tombstones', 'dna_bm25_tombstone_terms']);
END
$$;

COMMENT ON FUNCTION dna.bm25_remove_docs(text, text, text, bigint[]) IS
'Internal (dna.bm25_sync, dna.reconcile): removes documents from the lexical index: memtable postings are deleted, '
'sealed documents get a tombstone (and tombstone terms, so df stays exact) until a merge. Takes the '
'partition''s advisory lock in shared mode until commit.';

CREATE OR REPLACE FUNCTION dna.bm25_sync()
RETURNS trigger
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
DECLARE
    p record;
    written text;                -- a scope this statement wrote (its shard, on Citus)
BEGIN
    -- Statement trigger with transition tables (new_rows / old_rows) on every dna_search_docs_<N>:
    -- one pass per statement however many rows it wrote, nothing when it wrote none (the other
    -- event of an INSERT … ON CONFLICT DO UPDATE). An UPDATE that leaves a document's lexical
    -- identity (doc_id, scope, model_id, tenant, kind, tsv) as it was changes nothing here.
    -- The transition tables are read only by statements that read no other table, into arrays per
    -- partition; the index is written from those by statements that each filter one scope. On
    -- Citus this trigger fires on the shard, whose co-located index tables it writes locally, and a
    -- statement naming a Citus table is planned by Citus, which does not pass a transition table
    -- on to its plan (citus-probe-3 D8).
    IF TG_OP = 'DELETE' THEN
        FOR p IN SELECT o.scope, o.model_id, o.tenant, array_agg(o.doc_id ORDER BY o.doc_id) AS ids
                 FROM old_rows AS o GROUP BY o.scope, o.model_id, o.tenant ORDER BY 1, 2, 3 LOOP
            PERFORM dna.bm25_remove_docs(p.scope, p.model_id, p.tenant, p.ids);
            written := p.scope;
        END LOOP;
    ELSIF TG_OP = 'UPDATE' THEN
        FOR p IN SELECT o.scope, o.model_id, o.tenant, array_agg(o.doc_id ORDER BY o.doc_id) AS ids
                 FROM old_rows AS o
                 WHERE NOT EXISTS (SELECT 1 FROM new_rows AS n WHERE n.doc_id = o.doc_id AND n.scope = o.scope
                                     AND n.model_id = o.model_id AND n.tenant = o.tenant AND n.kind = o.kind AND n.tsv = o.tsv)
                 GROUP BY o.scope, o.model_id, o.tenant ORDER BY 1, 2, 3 LOOP
            PERFORM dna.bm25_remove_docs(p.scope, p.model_id, p.tenant, p.ids);
            written := p.scope;
        END LOOP;
        -- Tokenized once: the stored tsvector becomes the forward row; postings come from it.
        FOR p IN SELECT n.scope, n.model_id, n.tenant, array_agg(n.doc_id ORDER BY n.doc_id) AS ids,
                        array_agg(n.kind ORDER BY n.doc_id) AS kinds, array_agg(v.len ORDER BY n.doc_id) AS lens,
                        array_agg(v.terms ORDER BY n.doc_id) AS terms
                 FROM new_rows AS n,
                      LATERAL (SELECT coalesce(jsonb_object(array_agg(u.lexeme), array_agg(coalesce(cardinality(u.positions), 1)::text)),
                                               '{}') AS terms,
                                      coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
                               FROM unnest(n.tsv) AS u) AS v
                 WHERE NOT EXISTS (SELECT 1 FROM old_rows AS o WHERE o.doc_id = n.doc_id AND o.scope = n.scope
                                     AND o.model_id = n.model_id AND o.tenant = n.tenant AND o.kind = n.kind AND o.tsv = n.tsv)
                 GROUP BY n.scope, n.model_id, n.tenant ORDER BY 1, 2, 3 LOOP
            PERFORM dna.bm25_index_docs(p.scope, p.model_id, p.tenant, p.ids, p.kinds, p.lens, p.terms);
            written := p.scope;
        END LOOP;
    ELSE
        FOR p IN SELECT n.scope, n.model_id, n.tenant, array_agg(n.doc_id ORDER BY n.doc_id) AS ids,
                        array_agg(n.kind ORDER BY n.doc_id) AS kinds, array_agg(v.len ORDER BY n.doc_id) AS lens,
                        array_agg(v.terms ORDER BY n.doc_id) AS terms
                 FROM new_rows AS n,
                      LATERAL (SELECT coalesce(jsonb_object(array_agg(u.lexeme), array_agg(coalesce(cardinality(u.positions), 1)::text)),
                                               '{}') AS terms,
                                      coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
                               FROM unnest(n.tsv) AS u) AS v
                 GROUP BY n.scope, n.model_id, n.tenant ORDER BY 1, 2, 3 LOOP
            PERFORM dna.bm25_index_docs(p.scope, p.model_id, p.tenant, p.ids, p.kinds, p.lens, p.terms);
            written := p.scope;
        END LOOP;
    END IF;
    -- The search table's own statistics are kept true as the BM25 tables' are (0024, topic
    -- write_statistics): its key probes (dna.index_documents' one probe per element) were planned on
    -- the (scope, model_id, valid_from) index when the table had been analyzed empty, a scan of the
    -- scope per element (a bulk load of 10,000-document batches: 11 s for the first two, minutes each after).
    IF written IS NOT NULL THEN
        PERFORM dna.bm25_keep_statistics(written, ARRAY[TG_TABLE_NAME::text]);
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.bm25_sync() IS
'Statement trigger (AFTER INSERT / UPDATE / DELETE, transition tables new_rows / old_rows) on every '
'dna_search_docs_<width> table: keeps the BM25 index equal to the stored tsvectors, whoever writes the rows '
'(the verbs, or plain INSERT / UPDATE / DELETE). Per partition (scope, model_id, tenant): added documents '
'get their forward row and memtable postings, or, when one statement adds dna.bm25_bulk_threshold() or more '
'to a partition, a level-0 segment of their own (dna.bm25_index_docs); removed ones are deleted from the '
'memtable or tombstoned (dna.bm25_remove_docs). Writers never update a shared row. On Citus it fires on '
'the shard and writes the co-located index there; it reads the transition tables only in statements that '
'read no Citus table.';

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
