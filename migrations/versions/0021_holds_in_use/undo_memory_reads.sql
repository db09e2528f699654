-- Topic memory_reads, undone: 0020's dna_versions (the trigger function that sets the column goes back
-- with memory_write.sql's 0019 text; dna.get_memory and dna.memory_history go with memory_read.sql).
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS recorded_by;
