-- Topic write_path, undone: 0017's valid_at trigger (WHEN dna.kind_has_trait(NEW.kind,
-- 'memory.recallable')), and the segment-id sequence, set past every seg_id there is (the old
-- functions number segments from it across partitions), with USAGE for every role
-- dna.grant_app_role had granted (those with INSERT on a width table).
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS dna_search_docs_valid_at ON dna.%I', 'dna_search_docs_' || w);
        EXECUTE format('CREATE TRIGGER dna_search_docs_valid_at BEFORE INSERT OR UPDATE ON dna.%I FOR EACH ROW '
                       'WHEN (dna.kind_has_trait(NEW.kind, ''memory.recallable'')) '
                       'EXECUTE FUNCTION dna.search_docs_valid_at()', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
CREATE SEQUENCE IF NOT EXISTS dna.dna_bm25_seg_id_seq AS integer;
COMMENT ON SEQUENCE dna.dna_bm25_seg_id_seq IS 'seg_id of BM25 segments (one sequence for every partition).';
SELECT setval('dna.dna_bm25_seg_id_seq', coalesce((SELECT max(s.seg_id) FROM dna.dna_bm25_segments AS s), 0) + 1, false);
DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::regrole::text
             FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS a
             WHERE c.oid = 'dna.dna_search_docs_384'::regclass AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner AND a.grantee <> 0
             ORDER BY 1 LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE dna.dna_bm25_seg_id_seq TO %s', r);
    END LOOP;
END
$$;
