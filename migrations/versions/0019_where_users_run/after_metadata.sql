-- 0019_where_users_run, topic metadata: run after the plane files. The memories stored before this
-- revision get their metadata (dna.memory_metadata of their spec and valid_at: tags, area, created_at,
-- valid window...), and their search rows a copy of it, by the write path's own triggers (the
-- spec and valid_at do not change, so no version is appended). Row-level security is lifted for the
-- owner running the upgrade (NO FORCE) during the one UPDATE, so that personal memories are reached
-- by a non-superuser owner too, and forced again after it.
ALTER TABLE dna.dna_instances NO FORCE ROW LEVEL SECURITY;
UPDATE dna.dna_instances AS i SET metadata = dna.memory_metadata(i.spec, i.valid_at)
WHERE i.kind = ANY (dna.recallable_kinds()) AND i.metadata IS DISTINCT FROM dna.memory_metadata(i.spec, i.valid_at);
ALTER TABLE dna.dna_instances FORCE ROW LEVEL SECURITY;
