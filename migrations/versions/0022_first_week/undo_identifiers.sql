-- Revision 0022_first_week, topic "identifiers", downgrade: 0021's dna.text_tsvector (to_tsvector alone,
-- the text released in versions/0021_holds_in_use/catalog.sql, which the downgrade runs again after this
-- fragment) first, then every row whose tsvector holds identifier lexemes is tokenized again by it, so that
-- 0021's queries meet 0021's tokenization and BM25's statistics match it.
CREATE OR REPLACE FUNCTION dna.text_tsvector(cfg regconfig, body text)
RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    need bigint;
    room bigint;
    n integer;
    cut text;
BEGIN
    IF body IS NULL OR octet_length(body) <= dna.text_tsvector_direct_bytes() THEN
        RETURN to_tsvector(cfg, body);
    END IF;
    BEGIN
        RETURN to_tsvector(cfg, body);
    EXCEPTION WHEN program_limit_exceeded THEN             -- 54000 string is too long for tsvector (N bytes, max M bytes)
        need := (regexp_match(SQLERRM, '\((\d+) bytes, max (\d+) bytes\)'))[1]::bigint;
        room := (regexp_match(SQLERRM, '\((\d+) bytes, max (\d+) bytes\)'))[2]::bigint;
    END;
    -- A prefix in proportion to what fits (95% of it), cut before a partial word; 10% shorter until
    -- its tsvector fits (a prefix's tsvector is never larger than a longer prefix's).
    n := floor(length(body) * 0.95 * coalesce(room::float8 / nullif(need, 0), 0.5))::integer;
    LOOP
        cut := left(body, n);
        IF substr(body, n + 1, 1) !~ '\s' THEN
            cut := regexp_replace(cut, '\S+$', '');
        END IF;
        BEGIN
            RETURN to_tsvector(cfg, cut);
        EXCEPTION WHEN program_limit_exceeded THEN
            n := floor(n * 0.9)::integer;
        END;
    END LOOP;
END
$$;
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
