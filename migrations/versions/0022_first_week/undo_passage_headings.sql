-- Revision 0022_first_week, topic "passage_headings", downgrade: every width table's generated tsv back
-- to 0021's expression (dna.text_tsvector(ts_config, title || ' ' || body)), dropped and added again in one
-- ALTER TABLE, and the BM25 state of the rows whose tsv changed (those with a heading context) derived again
-- (dna.reconcile(scope, 'rebuild_lexical')), before dna.heading_context is dropped.
DO $$
DECLARE
    w integer;
    s text;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('ALTER TABLE dna.%I DROP COLUMN tsv, ADD COLUMN tsv tsvector GENERATED ALWAYS AS '
                       '(dna.text_tsvector(ts_config, coalesce(title, '''') || '' '' || body)) STORED',
                       'dna_search_docs_' || w);
    END LOOP;
    FOR w IN SELECT dna.search_widths() LOOP
        FOR s IN EXECUTE format('SELECT DISTINCT t.scope FROM dna.%I AS t '
                                'WHERE dna.heading_context(t.title, t.heading) IS NOT NULL ORDER BY 1',
                                'dna_search_docs_' || w) LOOP
            PERFORM dna.reconcile(s, 'rebuild_lexical');
        END LOOP;
    END LOOP;
END
$$;
-- The rewrite leaves the tables without statistics, and the dense lane's exact-or-HNSW rule reads the
-- planner's estimate of a scope: analyzed again here, so no plan waits for autovacuum.
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('ANALYZE dna.%I', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
