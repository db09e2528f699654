-- Revision 0025_dense_graph, topic "dense_graph", undone: every width table's HNSW index rebuilt as revision
-- 0001 defined it (pgvector's defaults), the graph built beside the old one and swapped in (as the upgrade
-- does); the size-aware dna.hnsw_ef_search(k, depth, graph_rows) dropped (0024's two-argument rule stays).
DROP FUNCTION IF EXISTS dna.hnsw_ef_search(integer, integer, double precision);

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
        CONTINUE WHEN (SELECT c.reloptions IS NULL FROM pg_catalog.pg_class AS c
                       WHERE c.oid = to_regclass(format('dna.%I', idx)));
        target := CASE WHEN w <= 2000 THEN 'embedding vector_cosine_ops'
                       ELSE format('(embedding::halfvec(%s)) halfvec_cosine_ops', w) END;
        EXECUTE format('CREATE INDEX %I ON dna.%I USING hnsw (%s)', idx || '_next', 'dna_search_docs_' || w, target);
        EXECUTE format('DROP INDEX dna.%I', idx);
        EXECUTE format('ALTER INDEX dna.%I RENAME TO %I', idx || '_next', idx);
    END LOOP;
END
$$;
