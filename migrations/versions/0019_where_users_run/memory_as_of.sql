-- pydna SQL package — memory plane: reading the past (as_of).
--
-- dna.recall(..., as_of => T) ranks each memory as it was believed at T (transaction time,
-- dna.dna_versions.created_at). A memory whose text at T is not today's (a version with another text
-- was recorded after T) cannot be ranked by its search rows, which hold today's text: its text then
-- is ranked in their place. This file finds those memories and their past texts
-- (dna.as_of_past_texts, handed to dna.search(past => ...)) and writes the as_of part of the
-- answer (dna.as_of_report). dna.recall itself (sql/memory_verbs.sql) calls both.
--
-- The history keeps what this needs of each version (revision 0016): text_digest (md5 of
-- dna.memory_text), text_tsv (its tsvector) and ts_config (the scope's configuration then), set by
-- dna.versions_append_only from the row itself. A record's versions are numbered without gaps and
-- stamped in the order they were written (only the oldest are ever removed), so the version believed
-- at T is the one just before its first version recorded after T.
--
-- SQLSTATEs: 22023 bad argument, 22007 infinite as_of. Runs after memory_write.sql, before
-- memory_verbs.sql (migration 0017_recall_past_ingest).

CREATE OR REPLACE FUNCTION dna.as_of_past_texts(scope text, as_of timestamptz, query text DEFAULT NULL,
                                                kinds text[] DEFAULT NULL, tenant text DEFAULT '')
RETURNS SETOF dna.past_text
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    cfg regconfig;
    lq tsquery;
    kind_fields jsonb;                                   -- Kind -> embed_fields, read by its own statement (Citus)
BEGIN
    scope := dna.check_scope(scope);                     -- 22023 outside the name rule (sql/catalog.sql)
    IF as_of IS NULL THEN
        RAISE EXCEPTION 'as_of must be given: the instant whose beliefs are read' USING ERRCODE = '22023';
    END IF;
    PERFORM dna.check_now(as_of, 'as_of');               -- 22007 for ±infinity
    kinds := dna.check_memory_kinds(kinds);              -- NULL: every memory Kind; 22023 for another Kind
    tenant := coalesce(tenant, '');
    cfg := (SELECT c.ts_config FROM dna.search_config(scope) AS c);
    lq := CASE WHEN coalesce(btrim(query), '') <> '' THEN dna.lexical_query(query, cfg) END;
    kind_fields := (SELECT jsonb_object_agg(k.kind, k.embed_fields) FROM dna.dna_kinds AS k);
    -- One statement: the versions recorded after as_of (index dna_versions_scope_created), grouped
    -- per record into its first version after as_of and its latest version's digest (the latest is a
    -- copy of the record as it is now); then the version just before that first one, by the record's
    -- id and its number: one probe of index dna_versions_scope_id_version per record (a uuid compares
    -- bytewise; by the primary key's text columns, compared under the collation: 1.7x the time). Kept when
    -- its digest is not the latest's and the record exists: a record of the scope with that id
    -- (dna_instances_scope_id_key; the write path files every version under its record's id, which
    -- never changes, nor does a memory's key; by key, the test hashed every record of the scope, ~9 ms
    -- of ~27 at 10,000 memories with 2,000 restated). Its tsvector is the stored one (recomputed only
    -- under another ts_config than the scope's), handed on only when it matches the query's lexemes:
    -- the lexical lane can rank nothing else, and every other one only leaves the lanes.
    RETURN QUERY
    WITH moved AS (
        SELECT v.id, v.kind, v.api_version, v.name, v.tenant, min(v.version) AS first_after,
               -- the latest version's digest, in one hashed pass: max of (version, digest) as text
               substr(max(lpad(v.version::text, 10, '0') || coalesce(v.text_digest, '') COLLATE "C"), 11) AS cur_digest
        FROM dna.dna_versions AS v
        WHERE v.scope = scope AND v.created_at > as_of AND v.kind = ANY (kinds) AND v.tenant IN (tenant, '')
        GROUP BY v.id, v.kind, v.api_version, v.name, v.tenant
    )
    SELECT m.kind, m.name, m.tenant, CASE WHEN lq IS NOT NULL AND b.tsv @@ lq THEN b.tsv END
    FROM moved AS m
    JOIN LATERAL (SELECT v.text_digest,
                         CASE WHEN v.ts_config = cfg THEN v.text_tsv
                              ELSE dna.text_tsvector(cfg, dna.memory_text_of(
                                       CASE WHEN jsonb_typeof(kind_fields -> v.kind) = 'array'
                                            THEN ARRAY(SELECT jsonb_array_elements_text(kind_fields -> v.kind)) END,
                                       v.spec)) END AS tsv
                  FROM dna.dna_versions AS v
                  WHERE v.scope = scope AND v.id = m.id AND v.version = m.first_after - 1
                    AND v.kind = m.kind AND v.api_version = m.api_version AND v.name = m.name
                    AND v.tenant = m.tenant AND v.created_at <= as_of
                  LIMIT 1) AS b ON true                  -- one probe each, version included
    WHERE b.text_digest IS DISTINCT FROM m.cur_digest
      AND EXISTS (SELECT 1 FROM dna.dna_instances AS i WHERE i.scope = scope AND i.id = m.id);
END
$$;

COMMENT ON FUNCTION dna.as_of_past_texts(text, timestamptz, text, text[], text) IS
'The memories of scope whose text believed at as_of (transaction time) is not today''s, one '
'dna.past_text (kind, name, tenant, tsv) each: a version with another text (dna_versions.text_digest) '
'was recorded after as_of, and the record exists. tsv is the text believed then as a tsvector '
'(dna_versions.text_tsv; recomputed when its ts_config is not the scope''s), given only when it matches '
'one of query''s lexemes under the scope''s regconfig (dna.lexical_query), else NULL (nothing to rank; '
'a NULL or blank query: NULL for all). kinds: memory Kinds (default every one, dna.check_memory_kinds); '
'tenant: the partition read ('''' the shared base, a tenant or personal:<oid>, as dna.resolve_tenant '
'gives it; the base rows are read too); row-level security decides what is visible. A memory '
'recorded first after as_of, or whose history was pruned past as_of, has no version then and is not '
'listed (dna.recall names the latter in as_of_truncated). What dna.recall(as_of => ...) passes to '
'dna.search(past => ...). Cost: one probe per memory restated after as_of. Errors: 22023 (scope, kinds, '
'as_of NULL), 22007 (infinite as_of).';

CREATE OR REPLACE FUNCTION dna.as_of_report(scope text, as_of timestamptz, kinds text[], tenant text,
                                            truncated jsonb, past dna.past_text[])
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'as_of', dna.iso8601(as_of),
        'as_of_truncated', coalesce(truncated, '[]'::jsonb),
        -- one array made JSON at once (a JSON element per name cost ~2 ms more at 2,000 names)
        'as_of_past_text', to_jsonb(ARRAY(SELECT DISTINCT p.name COLLATE "C" AS n FROM unnest(past) AS p ORDER BY n)),
        -- Erased memories (dna.redact) that existed at as_of cannot be ranked: their text is gone.
        'as_of_redacted', (SELECT coalesce(jsonb_agg(to_jsonb(i.name) ORDER BY i.name COLLATE "C"), '[]'::jsonb)
                           FROM dna.dna_instances AS i
                           WHERE i.scope = as_of_report.scope AND i.kind = ANY (as_of_report.kinds)
                             AND dna.is_redacted(i.spec)
                             AND i.tenant IN (as_of_report.tenant, '') AND i.created_at <= as_of_report.as_of))
$$;

COMMENT ON FUNCTION dna.as_of_report(text, timestamptz, text[], text, jsonb, dna.past_text[]) IS
'The as_of part of a dna.recall answer: {as_of (ISO 8601), as_of_truncated (truncated as given: the '
'candidates whose history was pruned past as_of), as_of_past_text (the distinct names of past, the '
'memories ranked by their text then, dna.as_of_past_texts; sorted bytewise), as_of_redacted (the names '
'of the memories of kinds in the partition tenant or the base erased by dna.redact that existed at '
'as_of; sorted bytewise)}. Reads dna_instances for the redacted ones; row-level security applies.';
