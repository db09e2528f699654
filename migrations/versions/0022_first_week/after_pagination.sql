-- 0022_first_week, topic pagination (issue 27 item 6): run after the plane files. On a database Citus
-- already distributes (dna.distribute ran), the new signatures of dna.recall and dna.list_memories (topic
-- pagination) and of dna.search (topic diversity) are delegated by scope as dna.distribute delegates them
-- (dna.delegated_verbs(): search forced, the others not), so that the upgrade keeps them on the scope's
-- node without a second dna.distribute(). Elsewhere: nothing.
DO $$
DECLARE
    r record;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p
                   WHERE p.logicalrelid = 'dna.dna_instances'::regclass) THEN
        RETURN;                                          -- Citus installed, pydna not distributed yet
    END IF;
    FOR r IN SELECT v.fn, v.force_delegation FROM dna.delegated_verbs() AS v
             JOIN pg_catalog.pg_proc AS p ON p.oid = v.fn::oid
             WHERE p.proname IN ('recall', 'list_memories', 'search') LOOP
        EXECUTE 'SELECT create_distributed_function($1, ''scope'', colocate_with := ''dna.dna_instances'', '
                'force_delegation := $2)' USING r.fn, r.force_delegation;
    END LOOP;
END
$$;
