-- Revision 0023_still_open, topic "policy_bound", downgrade: every width table's valid_from column dropped
-- (its index with it) and 0001's expression index dna_search_docs_<w>_valid_from on lower(valid_at) made
-- again, which 0022's dna.search probes.
DO $$
DECLARE
    w integer;
BEGIN
    -- On Citus the DDL goes over one connection per node (as dna.distribute's does), so that the functions
    -- this revision then re-creates (propagated to the workers) may follow it in the same transaction.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('ALTER TABLE dna.%I DROP COLUMN IF EXISTS valid_from', 'dna_search_docs_' || w);
        EXECUTE format('DROP INDEX IF EXISTS dna.%I', 'dna_search_docs_' || w || '_valid_from');
        EXECUTE format('CREATE INDEX %I ON dna.%I (scope, model_id, lower(valid_at)) INCLUDE (doc_id)',
                       'dna_search_docs_' || w || '_valid_from', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
