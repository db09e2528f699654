-- Revision 0022_first_week, topic "passage_headings" (issue 27 item 3): a search row's tsv also holds its
-- passage's heading context (dna.heading_context(title, heading), sql/documents.sql), so a passage is found
-- lexically by the section it sits in. Every width table's generated tsv is dropped and added again with
-- the new expression in one ALTER TABLE (one rewrite, every row's tsv computed anew; rows without a heading
-- — whole documents, memories — get the tsv they had: their text is the same string). ALTER COLUMN … SET
-- EXPRESSION is not used: PostgreSQL 15 and 16 lack it and Citus refuses it on a distributed table; tsv
-- becomes the table's last column, as 0016's below_17 texts already left it on 15 and 16 (every statement
-- names its columns). The rewrite does not fire the BM25 triggers: the rows whose tsv changed (those with a
-- heading) are then derived again by dna.reconcile(scope, 'rebuild_lexical'), scope by scope, which finds
-- exactly them (their forward rows no longer match their tsvector) and re-indexes them into the memtable.
DO $$
DECLARE
    w integer;
    s text;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('ALTER TABLE dna.%I DROP COLUMN tsv, ADD COLUMN tsv tsvector GENERATED ALWAYS AS '
                       '(dna.text_tsvector(ts_config, coalesce(title, '''') || '' '' '
                       '|| coalesce(dna.heading_context(title, heading) || '' '', '''') || body)) STORED',
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
-- The re-tokenizations of this revision (topic identifiers' UPDATEs, the rebuild above) re-index the rows
-- they change into their partitions' memtables, which every query reads whole: a partition where a row left
-- a segment for the memtable (its tombstone is there) has its memtable sealed into a segment again, as the
-- row was before the upgrade (dna.bm25_seal, under the partition's exclusive lock as dna.bm25_compact takes
-- it). Other memtables are left as they were.
DO $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT DISTINCT d.scope, d.model_id, d.tenant FROM dna.dna_bm25_docs AS d
             WHERE d.seg_id IS NULL
               AND EXISTS (SELECT 1 FROM dna.dna_bm25_tombstones AS t
                           WHERE t.scope = d.scope AND t.model_id = d.model_id AND t.tenant = d.tenant
                             AND t.doc_id = d.doc_id)
             ORDER BY 1, 2, 3 LOOP
        PERFORM pg_advisory_xact_lock(dna.bm25_lock_key(p.scope, p.model_id, p.tenant));
        PERFORM dna.bm25_seal(p.scope, p.model_id, p.tenant);
    END LOOP;
END
$$;
