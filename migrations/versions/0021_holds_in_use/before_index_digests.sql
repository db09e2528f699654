-- Topic index_digests: what each document's source held when it was last written, per model_id, so that
-- `dna index` skips an unchanged input before splitting it (dna.unchanged_sources, dna.record_source_digests).
ALTER TABLE dna.dna_document_sources ADD COLUMN IF NOT EXISTS digests jsonb NOT NULL DEFAULT '{}'::jsonb;

COMMENT ON COLUMN dna.dna_document_sources.digests IS
'{model_id: digest} of the input the document was last written from under each model_id (the client''s '
'sha256 of its text, title, format, metadata, passages on/off and splitter version); {} before revision 0021.';
