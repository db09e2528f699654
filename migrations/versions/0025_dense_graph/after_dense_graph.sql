-- Revision 0025_dense_graph, topic "dense_graph": every width table's HNSW index is rebuilt WITH (m = 16,
-- ef_construction = 128) instead of pgvector's defaults (m 16, ef_construction 64), the definition revision
-- 0001 gave it. On 1M SciFact-derived documents (bench/scale.py's corpus) the default graph's recall@10
-- against an exact scan stops at 0.947 even at hnsw.ef_search 1000, pgvector's maximum; the graph built with
-- ef_construction 128 reaches 0.966 at ef_search 600 (bench/ef_sweep.py, bench/RESULTS.md). Same columns, same
-- operator class, same name: only the graph changes. pydna.maintenance.vector_index_sql (`dna db vector-index
-- build`) builds the same definition.
-- Cost: a full build of each non-empty index (pgvector, ~8 minutes per million 384-dim rows on 2 cores at
-- maintenance_work_mem 1GB). The new graph is built beside the old one under a SHARE lock (reads go on,
-- writes to that width wait), then swapped in; maintenance_work_mem is raised to 1GB for this transaction
-- when it is lower (below the graph's size pgvector builds far slower). An index an operator dropped for a
-- bulk load stays absent (`dna db vector-index build` creates it so); one already built so is left.
DO $$
DECLARE
    w integer;
    idx text;
    target text;
BEGIN
    IF pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB') THEN
        PERFORM set_config('maintenance_work_mem', '1GB', true);
    END IF;
    FOR w IN SELECT dna.search_widths() LOOP
        idx := format('dna_search_docs_%s_embedding_hnsw', w);
        CONTINUE WHEN to_regclass(format('dna.%I', idx)) IS NULL;
        CONTINUE WHEN (SELECT c.reloptions @> ARRAY['m=16', 'ef_construction=128'] AND cardinality(c.reloptions) = 2
                       FROM pg_catalog.pg_class AS c WHERE c.oid = to_regclass(format('dna.%I', idx)));
        target := CASE WHEN w <= 2000 THEN 'embedding vector_cosine_ops'
                       ELSE format('(embedding::halfvec(%s)) halfvec_cosine_ops', w) END;
        EXECUTE format('CREATE INDEX %I ON dna.%I USING hnsw (%s) WITH (m = 16, ef_construction = 128)',
                       idx || '_next', 'dna_search_docs_' || w, target);
        EXECUTE format('DROP INDEX dna.%I', idx);
        EXECUTE format('ALTER INDEX dna.%I RENAME TO %I', idx || '_next', idx);
    END LOOP;
END
$$;
