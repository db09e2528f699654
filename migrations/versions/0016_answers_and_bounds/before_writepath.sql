-- writepath (0016): dna_instances loses the GiST exclusion constraint dna_instances_no_overlap
-- (scope WITH =, id WITH =, valid_at WITH &&). On a table without statistics the planner used its GiST
-- index for `scope = ...` lookups, and a reconsolidation UPDATE scanning it while its own new row
-- versions split the index's root page left live entries marked dead (PostgreSQL 18.6): memories then
-- went missing from index scans (dna.recall: 55P03 with no other writer; the history trigger: 42501;
-- dna.list_memories: rows left out). A record's id is unique within its scope instead (btree), which
-- the exclusion implied for every record the write path makes (id is immutable, one row per key).
DO $$
DECLARE
    dup record;
BEGIN
    SELECT i.scope, i.id, count(*) AS n, string_agg(i.kind || '/' || i.name, ', ' ORDER BY i.kind, i.name) AS names
    INTO dup FROM dna.dna_instances AS i GROUP BY i.scope, i.id HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'records of scope % share an id (%): %', dup.scope, dup.id, dup.names
            USING ERRCODE = '23505',
                  HINT = 'Give each record its own id (UPDATE dna.dna_instances SET id = gen_random_uuid() WHERE ...), then upgrade.';
    END IF;
END
$$;
ALTER TABLE dna.dna_instances DROP CONSTRAINT IF EXISTS dna_instances_no_overlap;
ALTER TABLE dna.dna_instances ADD CONSTRAINT dna_instances_scope_id_key UNIQUE (scope, id);
COMMENT ON CONSTRAINT dna_instances_scope_id_key ON dna.dna_instances IS
'A record''s id is unique within its scope (btree; 0016 replaced the GiST exclusion dna_instances_no_overlap, '
'whose index lost live entries under a reconsolidation UPDATE). Error: 23505.';
