-- Revision 0016_answers_and_bounds, topic "bounds", downgrade on PostgreSQL 15 and 16 (17+ runs
-- ../undo_bounds.sql as released, ALTER COLUMN tsv SET EXPRESSION, which they lack): give the search rows'
-- tsvector its 0001 expression back (before dna.text_tsvector is dropped) by dropping the generated column
-- and adding it again, as below_17/after_bounds.sql did, then drop what before_bounds.sql created. A row
-- whose text needs the bound (its plain tsvector passes 1 MB) cannot be held at 0015: the downgrade stops
-- with 54000; remove or split that document first.
DO $$
DECLARE
    w integer;
BEGIN
    FOREACH w IN ARRAY ARRAY[384, 768, 1024, 1536, 3072] LOOP
        IF to_regclass(format('dna.dna_search_docs_%s', w)) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE dna.dna_search_docs_%s DROP COLUMN tsv, ADD COLUMN tsv tsvector '
                           'GENERATED ALWAYS AS (to_tsvector(ts_config, coalesce(title, '''') || '' '' || body)) STORED',
                           w);
        END IF;
    END LOOP;
END
$$;
DROP INDEX IF EXISTS dna.dna_instances_redacted;
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS ts_config;
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS text_tsv;
ALTER TABLE dna.dna_versions DROP COLUMN IF EXISTS text_digest;
