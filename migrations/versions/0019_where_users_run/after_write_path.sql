-- Topic write_path (issue 24, D5 and D7 of ../shared/research/citus-probe-3.md). D5: the valid_at row
-- trigger of every width search table fires unless the writing statement gave memory rows their
-- record's valid_at itself (dna.valid_at_mirrored, set by the verbs through dna.mirror_valid_at): its WHEN
-- clause reads a setting, no table (on Citus the clause runs inside the shard's INSERT, where reading
-- dna_kinds, a reference table, is refused); the Kind test moved into dna.search_docs_valid_at's body.
-- D7: segment ids come from dna.bm25_next_seg (per partition), so the sequence goes (on Citus it
-- existed on the coordinator only, while segments are built on the workers).
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS dna_search_docs_valid_at ON dna.%I', 'dna_search_docs_' || w);
        EXECUTE format('CREATE TRIGGER dna_search_docs_valid_at BEFORE INSERT OR UPDATE ON dna.%I FOR EACH ROW '
                       'WHEN (current_setting(''dna.valid_at_mirrored'', true) IS DISTINCT FROM ''on'') '
                       'EXECUTE FUNCTION dna.search_docs_valid_at()', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
DROP SEQUENCE dna.dna_bm25_seg_id_seq;
