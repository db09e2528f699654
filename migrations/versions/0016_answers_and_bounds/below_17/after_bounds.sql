-- Revision 0016_answers_and_bounds, topic "bounds": fill text_digest / text_tsv / ts_config of the
-- versions written before this revision. dna.dna_versions is append-only for every caller (UPDATE is
-- refused by dna_versions_append_only); the migration, as the table's owner, lifts the trigger for this
-- one statement, which sets only the three derived columns from each row's own kind, spec and scope.
ALTER TABLE dna.dna_versions DISABLE TRIGGER dna_versions_append_only;
UPDATE dna.dna_versions AS v
SET text_digest = md5(x.body), ts_config = x.cfg, text_tsv = dna.text_tsvector(x.cfg, x.body)
FROM (SELECT v2.scope, v2.kind, v2.api_version, v2.name, v2.tenant, v2.version,
             dna.memory_text(v2.kind, v2.spec) AS body,
             (SELECT c.ts_config FROM dna.search_config(v2.scope) AS c) AS cfg
      FROM dna.dna_versions AS v2 WHERE v2.text_digest IS NULL) AS x
WHERE v.scope = x.scope AND v.kind = x.kind AND v.api_version = x.api_version AND v.name = x.name
  AND v.tenant = x.tenant AND v.version = x.version;
ALTER TABLE dna.dna_versions ENABLE TRIGGER dna_versions_append_only;

-- The search rows' tsvector is bounded (dna.text_tsvector, sql/catalog.sql): a text within the documented
-- 1,000,000-byte limit whose plain tsvector would pass PostgreSQL's 1 MB tsvector limit (54000) is indexed
-- by a prefix that fits, instead of failing the write. Every row stored so far fits, so its tsvector (and
-- the BM25 state derived from it) is unchanged by the rewrite.
-- This text runs on PostgreSQL 15 and 16, which have no ALTER COLUMN … SET EXPRESSION (17+ runs
-- ../after_bounds.sql as released): the generated column is dropped and added again with the new
-- expression in one ALTER TABLE (one rewrite, every row's tsv computed anew: the same values). Nothing
-- but the column's own generation expression depends on tsv at this revision (0010_scale dropped its GIN
-- index; the BM25 triggers are statement triggers), and every statement that reads or writes these
-- tables names its columns, so the one difference, tsv becoming the table's last column, changes no answer.
DO $$
DECLARE
    w integer;
BEGIN
    FOREACH w IN ARRAY ARRAY[384, 768, 1024, 1536, 3072] LOOP
        IF to_regclass(format('dna.dna_search_docs_%s', w)) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE dna.dna_search_docs_%s DROP COLUMN tsv, ADD COLUMN tsv tsvector '
                           'GENERATED ALWAYS AS (dna.text_tsvector(ts_config, coalesce(title, '''') || '' '' || body)) STORED',
                           w);
        END IF;
    END LOOP;
END
$$;
