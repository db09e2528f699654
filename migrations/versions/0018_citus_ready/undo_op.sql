DROP TRIGGER IF EXISTS dna_instances_before_op ON dna.dna_instances;
ALTER TABLE dna.dna_instances DROP COLUMN IF EXISTS op;
