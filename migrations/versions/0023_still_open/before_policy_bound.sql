-- Revision 0023_still_open, topic "policy_bound" (issue 26 item 4): every width table keeps the lower bound
-- of a row's validity as a column, valid_from = lower(valid_at) (generated, stored: every INSERT and UPDATE
-- keeps it, NULL where valid_at is NULL or unbounded below), and the index dna_search_docs_<w>_valid_from
-- reads that column instead of the expression lower(valid_at). dna.search's validity probe ("valid from a
-- later time") compares valid_from > valid_time: timestamptz's comparison is leakproof, so beneath the
-- row-level-security policy it stays an index condition (lower(valid_at) > valid_time is not leakproof:
-- the application role's probe filtered every row of the table where the superuser's index scan read
-- none). One ALTER TABLE per width (one rewrite); the column is the table's last (every statement names
-- its columns).
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
        EXECUTE format('ALTER TABLE dna.%I ADD COLUMN valid_from timestamptz GENERATED ALWAYS AS (lower(valid_at)) STORED',
                       'dna_search_docs_' || w);
        EXECUTE format('DROP INDEX IF EXISTS dna.%I', 'dna_search_docs_' || w || '_valid_from');
        EXECUTE format('CREATE INDEX %I ON dna.%I (scope, model_id, valid_from) INCLUDE (doc_id)',
                       'dna_search_docs_' || w || '_valid_from', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
