-- Revision 0016_answers_and_bounds, topic "bounds": what the history keeps of each version's text, so
-- that an as_of recall reads it instead of recomputing it (dna.recall, sql/memory_verbs.sql).
--
-- dna.dna_versions.text_digest: md5 of dna.memory_text(kind, spec) (whether two versions hold the same
-- text); .text_tsv: dna.text_tsvector(ts_config, that text); .ts_config: the scope's text search
-- configuration when the version was written (a read under another configuration recomputes the
-- tsvector). Filled by the append-only trigger (dna.versions_append_only) from the row itself, so no
-- writer can set them; versions written before this revision are filled by after_bounds.sql.
ALTER TABLE dna.dna_versions ADD COLUMN IF NOT EXISTS text_digest text;
ALTER TABLE dna.dna_versions ADD COLUMN IF NOT EXISTS text_tsv tsvector;
ALTER TABLE dna.dna_versions ADD COLUMN IF NOT EXISTS ts_config regconfig;
COMMENT ON COLUMN dna.dna_versions.text_digest IS
'md5 of dna.memory_text(kind, spec): equal digests, same text. Set by dna.versions_append_only.';
COMMENT ON COLUMN dna.dna_versions.text_tsv IS
'dna.text_tsvector(ts_config, dna.memory_text(kind, spec)): the version''s text as an as_of recall ranks it. '
'Set by dna.versions_append_only.';
COMMENT ON COLUMN dna.dna_versions.ts_config IS
'The scope''s text search configuration (dna.search_config) text_tsv was computed with.';

-- as_of_redacted: the tombstones of a scope, without reading every record.
CREATE INDEX IF NOT EXISTS dna_instances_redacted ON dna.dna_instances (scope, created_at)
    WHERE dna.is_redacted(spec);
