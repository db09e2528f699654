-- ingest (revision 0017): the valid_at trigger of every width search table fires only for the
-- rows it changes. dna.search_docs_valid_at (sql/memory_write.sql) sets NEW.valid_at for a memory
-- Kind (trait memory.recallable) and returns NEW untouched otherwise; the same test as the
-- trigger's WHEN clause spares every other row the PL/pgSQL trigger call (its NEW record: ~100 µs
-- per row of a bulk load, measured by bench/bulk_profile.py).
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
