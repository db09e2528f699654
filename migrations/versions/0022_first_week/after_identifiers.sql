-- Changed after 0022's release: a 0021 database distributed by dna.distribute() could not pass this
-- fragment (upgrade), because Citus refuses ALTER TABLE … DISABLE/ENABLE TRIGGER on the distributed
-- dna.dna_versions while citus.enable_unsafe_triggers is off ("triggers are not supported on distributed
-- tables when citus.enable_unsafe_triggers is set to false"), and its multi-shard UPDATE of text_tsv
-- (dna.memory_text is STABLE, called with column references: 0A000). What a single node runs is
-- unchanged: the same two ALTER TABLE statements, and the same UPDATE (now inside a DO block that runs
-- it as released when dna.dna_versions is not distributed); the DO blocks before the first ALTER TABLE
-- and after the second do nothing there (no pg_dist_partition, or dna.dna_versions not in it). Where
-- dna.dna_versions is distributed, the first turns citus.enable_unsafe_triggers on for the migration's
-- transaction (is_local, as dna.distribute does), so the shell's ALTER TABLE reaches every shard; the
-- versions are read from the shards, tokenized again on the coordinator and written one by one by primary key with the append-only trigger lifted on the
-- shards, and enabled again on every shard by the second ALTER TABLE; the last DO block puts the setting
-- back to what it was.
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
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN    -- Citus: is dna_versions distributed?
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = $1)'
            INTO distributed USING 'dna.dna_versions'::regclass;
    END IF;
    IF distributed THEN
        PERFORM set_config('dna.enable_unsafe_triggers_before', current_setting('citus.enable_unsafe_triggers'), true);
        PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
END
$$;
ALTER TABLE dna.dna_versions DISABLE TRIGGER dna_versions_append_only;
DO $$
DECLARE
    distributed boolean := false;
    r record;
    tsv tsvector;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN    -- Citus: is dna_versions distributed?
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = $1)'
            INTO distributed USING 'dna.dna_versions'::regclass;
    END IF;
    IF NOT distributed THEN                                            -- one node: the released statement
        UPDATE dna.dna_versions AS v SET text_tsv = dna.text_tsvector(v.ts_config, dna.memory_text(v.kind, v.spec))
        WHERE v.ts_config IS NOT NULL
          AND v.text_tsv IS DISTINCT FROM dna.text_tsvector(v.ts_config, dna.memory_text(v.kind, v.spec));
    ELSE
        -- Citus refuses a STABLE function (dna.memory_text) called with column references in an UPDATE,
        -- and dna.memory_text reads the reference table dna_kinds, which a shard may not query: the
        -- versions' own columns are read from the shards, each tsvector is computed here on the
        -- coordinator, and each changed version is written by its primary key (routed to its shard).
        FOR r IN SELECT v.scope, v.kind, v.api_version, v.name, v.tenant, v.version, v.spec, v.ts_config, v.text_tsv
                 FROM dna.dna_versions AS v WHERE v.ts_config IS NOT NULL LOOP
            tsv := dna.text_tsvector(r.ts_config, dna.memory_text(r.kind, r.spec));
            IF tsv IS DISTINCT FROM r.text_tsv THEN
                UPDATE dna.dna_versions AS v SET text_tsv = tsv
                WHERE v.scope = r.scope AND v.kind = r.kind AND v.api_version = r.api_version AND v.name = r.name
                  AND v.tenant = r.tenant AND v.version = r.version;
            END IF;
        END LOOP;
    END IF;
END
$$;
ALTER TABLE dna.dna_versions ENABLE TRIGGER dna_versions_append_only;
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN    -- Citus: is dna_versions distributed?
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = $1)'
            INTO distributed USING 'dna.dna_versions'::regclass;
    END IF;
    IF distributed THEN
        PERFORM set_config('citus.enable_unsafe_triggers', current_setting('dna.enable_unsafe_triggers_before'), true);
    END IF;
END
$$;
