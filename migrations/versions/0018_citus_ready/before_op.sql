-- S2 (issue 16): the verb label of a write rides in the row it writes, not in a session setting.
ALTER TABLE dna.dna_instances ADD COLUMN op text;
COMMENT ON COLUMN dna.dna_instances.op IS 'The verb that wrote this row version (remember, reconsolidate, forget, revive, redact; NULL for a plain INSERT/UPDATE), recorded as dna_versions.op by dna.instances_after_write. Written by the verbs with the row; an UPDATE that does not name op clears it (dna.instances_op_named, dna.instances_before_write).';
DROP FUNCTION IF EXISTS dna.set_op(text);
