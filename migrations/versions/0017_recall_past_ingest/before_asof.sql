-- Revision 0017_recall_past_ingest, topic "asof" (issue 13 item 4): the typed list of past texts
-- dna.recall(as_of) hands to dna.search, and dna.search's signature with it.

CREATE TYPE dna.past_text AS (kind text, name text, tenant text, tsv tsvector);
COMMENT ON TYPE dna.past_text IS
'A record ranked by another text than its search rows hold (dna.search(past => ...)): its key (kind, name, '
'tenant) and that text as a tsvector (NULL: nothing to rank, its rows only leave the lanes). '
'dna.as_of_past_texts gives the memories restated since an instant, with their text then.';

-- The version of a record believed at an instant, found by the record's id and the version's number
-- (dna.as_of_past_texts: one probe per memory restated after as_of; dna_versions.id is the record's
-- dna_instances.id, the write path files every version under it).
CREATE INDEX IF NOT EXISTS dna_versions_scope_id_version ON dna.dna_versions (scope, id, version);
COMMENT ON INDEX dna.dna_versions_scope_id_version IS
'A record''s versions by its id and their number: dna.as_of_past_texts finds the version believed at as_of (the one '
'before the first recorded after it) with one probe per memory restated since.';

-- dna.search gains past dna.past_text[] (sql/search.sql): the 23-argument form goes first.
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                                   double precision, boolean, timestamptz, boolean, boolean, integer, double precision,
                                   double precision, boolean, text, double precision, boolean, jsonb);
