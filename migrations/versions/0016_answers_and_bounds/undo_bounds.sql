-- Revision 0016_answers_and_bounds, topic "bounds", downgrade: drop what before_bounds.sql created.
DROP INDEX IF EXISTS dna.dna_instances_redacted;
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS ts_config;
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS text_tsv;
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS text_digest;
