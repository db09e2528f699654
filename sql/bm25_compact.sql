-- pydna SQL package — compaction of the BM25 lexical index (sql/bm25_write.sql holds its layout and
-- write path): seal a partition's memtable into a segment, merge segments, report the index's size.
--
-- Compaction runs per scope (dna.bm25_compact_scope): every statement filters that one scope, so on
-- Citus the call is delegated (forced) to the node that holds the scope's shards, where the writers
-- of the partition take their advisory locks and segment ids too (sql/distribute.sql).
-- Split out of sql/bm25_write.sql in revision 0019_where_users_run.

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
    part bigint[];
    r record;
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
    SELECT * INTO cfg FROM dna.search_config(scope);
    -- One segment per run of doc_ids a packed posting can hold (dna.bm25_doc_ranges: one, but for
    -- doc_ids drawn on several Citus nodes).
    FOR r IN SELECT x.lo, x.hi FROM dna.bm25_doc_ranges(ids) AS x LOOP
        part := CASE WHEN r.lo = ids[1] AND r.hi = ids[cardinality(ids)] THEN ids
                     ELSE ARRAY(SELECT i FROM unnest(ids) AS i WHERE i BETWEEN r.lo AND r.hi ORDER BY i) END;
        seg := dna.bm25_next_seg(scope, model_id, tenant);
        PERFORM dna.bm25_build_segment(scope, model_id, tenant, seg, dna.bm25_segment_level(cardinality(part)),
            'SELECT p.kind, p.lexeme, p.doc_id, p.tf, p.doc_len AS len FROM dna.dna_bm25_postings AS p
             WHERE p.scope = $1 AND p.model_id = $2 AND p.tenant = $3 AND p.doc_id = ANY ($4)', part,
            cfg.bm25_k1, cfg.bm25_b);
        UPDATE dna.dna_bm25_docs AS d SET seg_id = seg
        WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.doc_id = ANY (part);
    END LOOP;
    DELETE FROM dna.dna_bm25_postings AS p
    WHERE p.scope = scope AND p.model_id = model_id AND p.tenant = tenant AND p.doc_id = ANY (ids);
    RETURN cardinality(ids);
END
$$;

COMMENT ON FUNCTION dna.bm25_seal(text, text, text) IS
'Internal (dna.bm25_compact, dna.bm25_bound_memtable): moves the memtable documents of a partition into one new segment (one per '
'range of dna.bm25_doc_ranges); returns how many.';

CREATE OR REPLACE FUNCTION dna.bm25_bound_memtable(scope text, model_id text, tenant text)
RETURNS integer
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    lim integer := dna.bm25_memtable_limit();
    key bigint := dna.bm25_lock_key(scope, model_id, tenant);
    n integer;
    segs integer[];
BEGIN
    -- Called by the write path after memtable postings were added (dna.bm25_index_docs). Counts at
    -- most lim + 1 memtable documents (an index-only range of dna_bm25_docs_memtable), so the check
    -- costs the same however large the partition.
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM dna.dna_bm25_docs AS d
        WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.seg_id IS NULL
        LIMIT lim::bigint + 1) AS x;
    IF n <= lim THEN
        RETURN 0;
    END IF;
    -- Sealing needs the partition's exclusive lock, as dna.bm25_compact does; a writer never waits
    -- for it (a remover or a compaction holds it: the next statement seals). Held for the seal
    -- only (session level, released at once, also on error), not to commit: a writer's later
    -- statements never hold it while they wait for a row lock, so no deadlock cycle can go through
    -- it. A remover that comes after the release waits for the sealed rows' locks like any writer.
    IF NOT pg_try_advisory_lock(key) THEN
        RETURN 0;
    END IF;
    BEGIN
        n := dna.bm25_seal(scope, model_id, tenant);
        -- Then the small segments merged in pairs, as a binary counter: segments below
        -- dna.bm25_write_merge_cap() documents fall in size classes floor(log2(n_docs / lim)), and
        -- the smallest class holding two (or more) is merged into one, until no class holds two.
        -- Every segment costs every query a round of chunk headers and spreads the lane's budget
        -- (more chunks left unread, so more candidates rescored): a scope written through SQL
        -- alone then holds at most one segment per class (≤ 4 below the cap) beside the ones
        -- dna.bm25_compact merges. Each document is rewritten once per class (~0.15 ms of CPU
        -- each, bench/RESULTS.md); a statement rewrites at most ~2x the cap.
        FOR i IN 1..32 LOOP
            SELECT c.segs INTO segs FROM (
                SELECT array_agg(s.seg_id ORDER BY s.seg_id) AS segs
                FROM dna.dna_bm25_segments AS s
                WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant
                  AND s.n_docs < dna.bm25_write_merge_cap()
                GROUP BY floor(ln(greatest(s.n_docs, 1)::float8 / lim) / ln(2.0))
                HAVING count(*) >= 2
                ORDER BY floor(ln(greatest(s.n_docs, 1)::float8 / lim) / ln(2.0))
                LIMIT 1) AS c;
            EXIT WHEN segs IS NULL;
            EXIT WHEN dna.bm25_merge(scope, model_id, tenant, segs) < 0;   -- being merged by another writer
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        PERFORM pg_advisory_unlock(key);
        RAISE;
    END;
    PERFORM pg_advisory_unlock(key);
    RETURN n;
END
$$;

COMMENT ON FUNCTION dna.bm25_bound_memtable(text, text, text) IS
'Internal (the write path, dna.bm25_index_docs): when the memtable of the partition (scope, model_id, tenant) '
'holds more than dna.bm25_memtable_limit() documents, seals them into a segment (dna.bm25_seal, as '
'dna.bm25_compact does), then merges the segments below dna.bm25_write_merge_cap() documents in pairs of one '
'size class (floor(log2(n_docs / limit))) until no class holds two (dna.bm25_merge), under the partition''s '
'exclusive advisory lock, tried and never waited for (busy: left to the next statement) and released after. '
'Returns the documents sealed (0: under the limit, or busy). Merging larger segments stays dna.bm25_compact''s.';

CREATE OR REPLACE FUNCTION dna.bm25_merge(scope text, model_id text, tenant text, segs integer[])
RETURNS bigint
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    ids bigint[];
    r record;
    n bigint;
    seg integer;
    cfg record;
    source text;
    several boolean;
BEGIN
    -- Caller holds the partition's exclusive advisory lock, so no writer is tombstoning documents
    -- of these segments. Tombstoned postings are dropped; impacts are recomputed at the merged
    -- segment's average length.
    -- The segments another transaction is merging (a write path's merge, its lock released but
    -- not yet committed) are left out: their rows are locked (SKIP LOCKED, never waited for).
    segs := ARRAY(SELECT s.seg_id FROM dna.dna_bm25_segments AS s
                  WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant AND s.seg_id = ANY (segs)
                  ORDER BY s.seg_id FOR UPDATE SKIP LOCKED);
    IF cardinality(segs) = 0 THEN
        RETURN -1;                                       -- every one is being merged elsewhere
    END IF;
    SELECT coalesce(array_agg(d.doc_id ORDER BY d.doc_id), '{}') INTO ids FROM dna.dna_bm25_docs AS d
    WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.seg_id = ANY (segs);
    SELECT * INTO cfg FROM dna.search_config(scope);
    -- Postings decoded in the select list; the tombstone anti-join only when one of the segments
    -- has tombstones (a merge after a bulk load has none). The chunks of the segments are read and
    -- deleted through dna_bm25_chunks_merge, which only a statement naming n > 0 (true of every chunk)
    -- may use (0026, topic any_statistics).
    source := 'SELECT q.kind, q.lexeme, q.base + (q.p & 8589934591) AS doc_id, ((q.p >> 33) & 511)::integer AS tf,
                (q.p >> 42)::integer AS len
         FROM (SELECT c.kind, c.lexeme, c.seg_id, s.base_doc_id AS base, unnest(c.postings) AS p
               FROM dna.dna_bm25_chunks AS c
               JOIN dna.dna_bm25_segments AS s ON s.scope = $1 AND s.model_id = c.model_id
                                              AND s.tenant = c.tenant AND s.seg_id = c.seg_id
               WHERE c.scope = $1 AND c.model_id = $2 AND c.tenant = $3 AND c.seg_id = ANY ($10) AND c.n > 0) AS q'
        || CASE WHEN EXISTS (SELECT 1 FROM dna.dna_bm25_tombstones AS t
                             WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = tenant
                               AND t.seg_id = ANY (segs)) THEN '
         WHERE NOT EXISTS (SELECT 1 FROM dna.dna_bm25_tombstones AS t
                           WHERE t.scope = $1 AND t.model_id = $2 AND t.tenant = $3
                             AND t.seg_id = q.seg_id AND t.doc_id = q.base + (q.p & 8589934591))' ELSE '' END;
    -- One merged segment per run of doc_ids a packed posting can hold (dna.bm25_doc_ranges: one,
    -- but for doc_ids drawn on several Citus nodes); each then reads the postings of its run only.
    several := (SELECT count(*) > 1 FROM dna.bm25_doc_ranges(ids));
    FOR r IN SELECT x.lo, x.hi FROM dna.bm25_doc_ranges(ids) AS x LOOP
        seg := dna.bm25_next_seg(scope, model_id, tenant);
        SELECT count(*) INTO n FROM unnest(ids) AS i WHERE i BETWEEN r.lo AND r.hi;
        PERFORM dna.bm25_build_segment(scope, model_id, tenant, seg, dna.bm25_segment_level(n),
            CASE WHEN several THEN format('SELECT m.* FROM (%s) AS m WHERE m.doc_id BETWEEN %s AND %s', source, r.lo, r.hi)
                 ELSE source END,
            CASE WHEN several THEN ARRAY(SELECT i FROM unnest(ids) AS i WHERE i BETWEEN r.lo AND r.hi ORDER BY i)
                 ELSE ids END,
            cfg.bm25_k1, cfg.bm25_b, segs);
        UPDATE dna.dna_bm25_docs AS d SET seg_id = seg
        WHERE d.scope = scope AND d.model_id = model_id AND d.tenant = tenant AND d.seg_id = ANY (segs)
          AND d.doc_id BETWEEN r.lo AND r.hi;
    END LOOP;
    DELETE FROM dna.dna_bm25_chunks AS c
    WHERE c.scope = scope AND c.model_id = model_id AND c.tenant = tenant AND c.seg_id = ANY (segs) AND c.n > 0;
    DELETE FROM dna.dna_bm25_tombstone_terms AS t
    WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = tenant AND t.seg_id = ANY (segs);
    DELETE FROM dna.dna_bm25_tombstones AS t
    WHERE t.scope = scope AND t.model_id = model_id AND t.tenant = tenant AND t.seg_id = ANY (segs);
    DELETE FROM dna.dna_bm25_segments AS s
    WHERE s.scope = scope AND s.model_id = model_id AND s.tenant = tenant AND s.seg_id = ANY (segs);
    RETURN cardinality(ids);                             -- 0: every document was deleted, no segment left
END
$$;

COMMENT ON FUNCTION dna.bm25_merge(text, text, text, integer[]) IS
'Internal (dna.bm25_compact): rewrites the given segments of a partition as one (one per range of '
'dna.bm25_doc_ranges), without the postings of tombstoned documents (their tombstones go); returns the '
'live documents it holds, or -1 when another transaction is merging every one of them (their rows locked: skipped).';

CREATE OR REPLACE FUNCTION dna.bm25_compact_scope(scope text, model_id text DEFAULT NULL,
                                                  tenant text DEFAULT NULL, full_merge boolean DEFAULT false,
                                                  wait_ms integer DEFAULT 2000)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    p record;
    full_level integer;
    n_segs bigint;
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
    IF scope IS NULL THEN
        RAISE EXCEPTION 'dna.bm25_compact_scope needs a scope (dna.bm25_compact compacts every scope)'
            USING ERRCODE = '22004';
    END IF;
    IF dna.citus_version() IS NOT NULL AND NOT dna.holds_scope(scope) THEN
        -- The partition's writers take its advisory locks and segment ids on the shard's node (the
        -- BM25 triggers fire there); a compaction elsewhere would not exclude them.
        RAISE EXCEPTION 'dna.bm25_compact_scope(%): this node does not hold the scope''s shards', quote_literal(scope)
            USING ERRCODE = '0A000',
                  HINT = 'Call dna.bm25_compact(scope) on the coordinator after dna.distribute(): it delegates each scope to its node.';
    END IF;
    -- Every statement filters this one scope: on Citus the call is delegated to the node that holds
    -- it (forced: also inside a transaction), where its writers take the advisory locks too.
    FOR p IN
        SELECT x.scope, x.model_id, x.tenant FROM (
            SELECT d.scope, d.model_id, d.tenant FROM dna.dna_bm25_docs AS d WHERE d.scope = scope AND d.seg_id IS NULL
            GROUP BY 1, 2, 3
            UNION SELECT s.scope, s.model_id, s.tenant FROM dna.dna_bm25_segments AS s WHERE s.scope = scope
            GROUP BY 1, 2, 3) AS x
        WHERE (bm25_compact_scope.model_id IS NULL OR x.model_id = bm25_compact_scope.model_id)
          AND (bm25_compact_scope.tenant IS NULL OR x.tenant = bm25_compact_scope.tenant)
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
            -- (Each table filtered by the scope argument itself, no correlation: on Citus every
            -- statement of a forced delegation must route to the scope's shard.)
            SELECT s2.level INTO full_level FROM dna.dna_bm25_segments AS s2
            WHERE s2.scope = scope AND s2.model_id = p.model_id AND s2.tenant = p.tenant
            GROUP BY s2.level HAVING count(*) >= CASE WHEN s2.level = 0 THEN 4 ELSE 8 END
            ORDER BY s2.level LIMIT 1;
            SELECT array_agg(s.seg_id ORDER BY s.seg_id) INTO segs
            FROM dna.dna_bm25_segments AS s
            LEFT JOIN (SELECT t.seg_id, count(*) AS n FROM dna.dna_bm25_tombstones AS t
                       WHERE t.scope = scope AND t.model_id = p.model_id AND t.tenant = p.tenant
                       GROUP BY t.seg_id) AS t ON t.seg_id = s.seg_id
            WHERE s.scope = scope AND s.model_id = p.model_id AND s.tenant = p.tenant
              AND (full_merge OR t.n * 10 >= s.n_docs OR s.level = full_level);
            EXIT WHEN segs IS NULL OR (cardinality(segs) = 1 AND NOT EXISTS (
                SELECT 1 FROM dna.dna_bm25_tombstones AS t
                WHERE t.scope = scope AND t.model_id = p.model_id AND t.tenant = p.tenant AND t.seg_id = segs[1]));
            EXIT WHEN dna.bm25_merge(p.scope, p.model_id, p.tenant, segs) < 0;   -- merged by a writer now
            merged := merged + cardinality(segs);
            EXIT WHEN full_merge;
        END LOOP;
        -- What the seal and the merges changed is analyzed now, not when autovacuum comes by.
        PERFORM dna.bm25_keep_statistics(scope, ARRAY['dna_bm25_postings', 'dna_bm25_chunks', 'dna_bm25_segments',
                                                      'dna_bm25_docs', 'dna_bm25_tombstones', 'dna_bm25_tombstone_terms']);
        SELECT count(*) INTO dead FROM dna.dna_bm25_tombstones AS t
        WHERE t.scope = scope AND t.model_id = p.model_id AND t.tenant = p.tenant;
        SELECT count(*) INTO n_segs FROM dna.dna_bm25_segments AS s
        WHERE s.scope = scope AND s.model_id = p.model_id AND s.tenant = p.tenant;
        parts := parts || jsonb_build_object(
            'scope', p.scope, 'model_id', p.model_id, 'tenant', p.tenant, 'status', 'ok',
            'sealed_documents', sealed, 'merged_segments', merged, 'segments', n_segs, 'tombstones', dead);
    END LOOP;
    RETURN jsonb_build_object('partitions', parts);
END
$$;

COMMENT ON FUNCTION dna.bm25_compact_scope(text, text, text, boolean, integer) IS
'Internal (dna.bm25_compact, one scope): compacts the BM25 partitions of scope (model_id, tenant: NULL = '
'all). Delegated by scope on Citus (forced), so it runs where the scope''s shards and writers are. '
'Returns {partitions: [...]} as dna.bm25_compact. Errors: 22023 (wait_ms), 22004 (scope NULL).';

CREATE OR REPLACE FUNCTION dna.bm25_compact(scope text DEFAULT NULL, model_id text DEFAULT NULL,
                                            tenant text DEFAULT NULL, full_merge boolean DEFAULT false,
                                            wait_ms integer DEFAULT 2000)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    scopes text[];
    s text;
    parts jsonb := '[]';
BEGIN
    IF wait_ms IS NULL OR wait_ms < 0 OR wait_ms > 600000 THEN
        RAISE EXCEPTION 'wait_ms must be between 0 and 600000, got %', wait_ms USING ERRCODE = '22023';
    END IF;
    -- Each scope by a call in a FROM clause: on Citus that form is delegated from inside a function
    -- (an expression such as RETURN f(...) is evaluated where it stands, on the coordinator).
    IF scope IS NOT NULL THEN
        SELECT r INTO parts FROM dna.bm25_compact_scope(scope, model_id, tenant, full_merge, wait_ms) AS r;
        RETURN parts;
    END IF;
    -- Every scope with a memtable or segments, one call each (by scope name, as the partitions were).
    scopes := ARRAY(SELECT x.scope FROM (
                        SELECT d.scope FROM dna.dna_bm25_docs AS d WHERE d.seg_id IS NULL
                          AND (model_id IS NULL OR d.model_id = model_id) AND (tenant IS NULL OR d.tenant = tenant)
                        GROUP BY 1
                        UNION SELECT g.scope FROM dna.dna_bm25_segments AS g
                        WHERE (model_id IS NULL OR g.model_id = model_id) AND (tenant IS NULL OR g.tenant = tenant)
                        GROUP BY 1) AS x
                    ORDER BY 1);
    FOREACH s IN ARRAY scopes LOOP
        SELECT parts || (r -> 'partitions') INTO parts FROM dna.bm25_compact_scope(s, model_id, tenant, full_merge, wait_ms) AS r;
    END LOOP;
    RETURN jsonb_build_object('partitions', parts);
END
$$;

COMMENT ON FUNCTION dna.bm25_compact(text, text, text, boolean, integer) IS
'Maintenance (an operator or a scheduled job runs it; no verb does; writes seal a memtable past '
'dna.bm25_memtable_limit() themselves): per BM25 partition (scope, model_id, '
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
