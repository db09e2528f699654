-- Revision 0024_at_scale, topic "vector_inline": every width table keeps its vectors in the row (STORAGE MAIN)
-- instead of pgvector's EXTERNAL, under which a row of text, tsvector and a 384-dim vector (1,540 bytes)
-- passed the 2 kB TOAST threshold and its vector was moved out of line: an exact scan of the dense lane
-- (scopes of at most dna.exact_scan_rows() rows, dna.recall's small memory scopes) then fetched every
-- vector from the TOAST table. MAIN lets the text and the tsvector leave the row first; a vector too large
-- for a page (1536 and 3072 dims beside long text) still moves out. Catalog only: rows written from now
-- on are stored so; rows already stored keep their layout until rewritten (VACUUM FULL of the table, a
-- re-index of the document; docs/operations.md).
-- On Citus, which refuses ALTER COLUMN ... SET STORAGE on a distributed table ("alter table command is
-- currently unsupported"), the coordinator's table is altered without DDL propagation and each shard by
-- run_command_on_shards (an error on any shard fails the upgrade).
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
            EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding SET STORAGE MAIN', rel);
            PERFORM set_config('citus.enable_ddl_propagation', 'on', true);
            SELECT string_agg(r.shardid || ': ' || r.result, '; ') INTO failed
            FROM run_command_on_shards(rel, 'ALTER TABLE %s ALTER COLUMN embedding SET STORAGE MAIN') AS r
            WHERE NOT r.success;
            IF failed IS NOT NULL THEN
                RAISE EXCEPTION 'SET STORAGE MAIN failed on shards of %: %', rel, failed;
            END IF;
        ELSE
            EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding SET STORAGE MAIN', rel);
        END IF;
    END LOOP;
END
$$;
