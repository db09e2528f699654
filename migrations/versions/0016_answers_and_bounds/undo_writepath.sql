-- writepath (0016) undone: back to 0001's GiST exclusion constraint.
ALTER TABLE dna.dna_instances DROP CONSTRAINT IF EXISTS dna_instances_scope_id_key;
ALTER TABLE dna.dna_instances ADD CONSTRAINT dna_instances_no_overlap
    EXCLUDE USING gist (scope WITH =, id WITH =, valid_at WITH &&);
