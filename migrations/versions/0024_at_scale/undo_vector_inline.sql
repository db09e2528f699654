-- Revision 0024_at_scale, topic "vector_inline", downgrade: the width tables' vectors back to pgvector's
-- storage, EXTERNAL (rows written at 0024 keep their layout until rewritten; both layouts read the same); on Citus as after_vector_inline.sql does it.
DO $$
DECLARE
    w integer;
    rel regclass;
    failed text;
    citus boolean := EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus');
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        rel := format('dna.%I', 'dna_search_docs_' || w)::regclass;
        IF citus AND dna.citus_placement(rel) <> 'local' THEN
            PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
            EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding SET STORAGE EXTERNAL', rel);
            PERFORM set_config('citus.enable_ddl_propagation', 'on', true);
            SELECT string_agg(r.shardid || ': ' || r.result, '; ') INTO failed
            FROM run_command_on_shards(rel, 'ALTER TABLE %s ALTER COLUMN embedding SET STORAGE EXTERNAL') AS r
            WHERE NOT r.success;
            IF failed IS NOT NULL THEN
                RAISE EXCEPTION 'SET STORAGE EXTERNAL failed on shards of %: %', rel, failed;
            END IF;
        ELSE
            EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding SET STORAGE EXTERNAL', rel);
        END IF;
    END LOOP;
END
$$;
