-- Revision 0022_first_week, topic "identifiers" (issue 27 item 4): dna.text_tsvector now adds the lexemes
-- of a text's identifiers (dna.identifier_tsvector, sql/search_support.sql), and a query is tokenized by
-- it: the rows stored before this revision are tokenized again, so that documents and memories written
-- before and after the upgrade are found alike and BM25's statistics (N, df, avglen) describe one
-- tokenization. Only rows whose tsvector changes are written (a text without identifiers keeps its
-- tsvector and its BM25 postings): each search row by an UPDATE that recomputes its generated tsv (the BM25
-- statement trigger moves its postings, forward row and length, as dna.set_search_config's re-tokenization
-- does); each version's text_tsv (what an as_of recall ranks) with dna_versions' append-only trigger lifted
-- for that one UPDATE of the derived column, as 0016_answers_and_bounds' after_bounds.sql did.
DO $$
DECLARE
    w integer;
BEGIN
    PERFORM dna.mirror_valid_at(true);               -- valid_at is not touched: its row trigger stands aside
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('UPDATE dna.%I AS t SET ts_config = t.ts_config '
                       'WHERE t.tsv IS DISTINCT FROM dna.text_tsvector(t.ts_config, coalesce(t.title, '''') || '' '' || t.body)',
                       'dna_search_docs_' || w);
    END LOOP;
    PERFORM dna.mirror_valid_at(false);
END
$$;
ALTER TABLE dna.dna_versions DISABLE TRIGGER dna_versions_append_only;
UPDATE dna.dna_versions AS v SET text_tsv = dna.text_tsvector(v.ts_config, dna.memory_text(v.kind, v.spec))
WHERE v.ts_config IS NOT NULL
  AND v.text_tsv IS DISTINCT FROM dna.text_tsvector(v.ts_config, dna.memory_text(v.kind, v.spec));
ALTER TABLE dna.dna_versions ENABLE TRIGGER dna_versions_append_only;
