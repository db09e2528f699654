-- 0019_where_users_run, topic metadata (issue 25 item 1): run before the plane files.
-- Documents and memories carry metadata jsonb (NOT NULL, '{}' by default: a constant, no table read,
-- so Citus shards take it; every existing row gets '{}' without a rewrite). A GIN jsonb_path_ops index
-- serves the containment (@>) that a filter's equality, in and contains compile to (sql/metadata.sql).
ALTER TABLE dna.dna_instances ADD COLUMN IF NOT EXISTS metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
COMMENT ON COLUMN dna.dna_instances.metadata IS 'What filters read of this record (sql/metadata.sql). A memory''s is derived by the write path (dna.memory_metadata: spec.metadata plus its tags, area, created_at, valid window, conversation fields) and copied to its search rows; other records keep ''{}''.';
CREATE INDEX IF NOT EXISTS dna_instances_metadata ON dna.dna_instances USING gin (metadata jsonb_path_ops);
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('ALTER TABLE dna.%I ADD COLUMN IF NOT EXISTS metadata jsonb NOT NULL DEFAULT ''{}''::jsonb',
                       'dna_search_docs_' || w);
        EXECUTE format('COMMENT ON COLUMN dna.%I.metadata IS %L', 'dna_search_docs_' || w,
                       'The document''s metadata, on every passage row (dna.set_document_metadata; a JSONL record''s '
                       'fields beyond the known ones), or a memory''s (dna.memory_metadata, copied by trigger). '
                       'dna.search''s filter reads it inside both lanes.');
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON dna.%I USING gin (metadata jsonb_path_ops)',
                       'dna_search_docs_' || w || '_metadata', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
-- Hits carry the row's metadata.
ALTER TYPE dna.search_hit ADD ATTRIBUTE metadata jsonb;
-- dna.search, dna.recall and dna.list_memories gain filter: their 0018 signatures go (the plane files
-- create the new ones).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                                   double precision, boolean, timestamptz, boolean, boolean, integer, double precision,
                                   double precision, boolean, text, double precision, boolean, jsonb, dna.past_text[]);
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision);
DROP FUNCTION IF EXISTS dna.list_memories(text, text[], text, boolean, timestamptz, integer, boolean);
