-- Topic index_digests, undone: 0020's dna_document_sources (the functions that read the column go with
-- catalog.sql's 0019 text).
ALTER TABLE dna.dna_document_sources DROP COLUMN IF EXISTS digests;
