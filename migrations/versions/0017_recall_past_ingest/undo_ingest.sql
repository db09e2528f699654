-- ingest (revision 0017) undone: the valid_at trigger as 0002_memory created it (no WHEN clause).
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS dna_search_docs_valid_at ON dna.%I', 'dna_search_docs_' || w);
        EXECUTE format('CREATE TRIGGER dna_search_docs_valid_at BEFORE INSERT OR UPDATE ON dna.%I FOR EACH ROW '
                       'EXECUTE FUNCTION dna.search_docs_valid_at()', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
