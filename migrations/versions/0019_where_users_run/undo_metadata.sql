-- Undo of topic metadata (revision 0019_where_users_run): the signatures with filter, the columns and
-- their indexes, the hit's attribute; the revision then re-runs 0018's texts of the plane files it
-- changed (the 0018 signatures of dna.search, dna.recall and dna.list_memories).
DROP FUNCTION IF EXISTS dna.search(text, text, vector, text, integer, text[], text, text, integer, double precision[],
                                   double precision, boolean, timestamptz, boolean, boolean, integer, double precision,
                                   double precision, boolean, text, double precision, boolean, jsonb, dna.past_text[], jsonb);
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb);
DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz,
                                   timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer);
DROP FUNCTION IF EXISTS dna.list_memories(text, text[], text, boolean, timestamptz, integer, boolean, jsonb);
ALTER TYPE dna.search_hit DROP ATTRIBUTE IF EXISTS metadata;
DROP INDEX IF EXISTS dna.dna_instances_metadata;
ALTER TABLE dna.dna_instances DROP COLUMN IF EXISTS metadata;
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('DROP INDEX IF EXISTS dna.%I', 'dna_search_docs_' || w || '_metadata');
        EXECUTE format('ALTER TABLE dna.%I DROP COLUMN IF EXISTS metadata', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
