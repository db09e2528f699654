-- Topic memory_reads: who wrote each version of a memory (dna.versions_append_only sets it to the role
-- the write ran as), read by dna.get_memory and dna.memory_history. NULL for versions written before.
ALTER TABLE dna.dna_versions ADD COLUMN IF NOT EXISTS recorded_by text;

COMMENT ON COLUMN dna.dna_versions.recorded_by IS
'The role that wrote this version (current_user of the write, SET ROLE included), set by dna.versions_append_only; '
'NULL for versions written before revision 0021.';
