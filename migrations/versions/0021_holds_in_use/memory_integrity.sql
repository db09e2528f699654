-- pydna SQL package — integrity: what the derived state should be, checked and repaired.
--
-- dna.verify_integrity(scope, mode) reports drift between a scope's records and what is derived from
-- them (after a restore, a TRUNCATE, a disabled trigger, or a switch of embedder); dna.reconcile(scope,
-- action) repairs what can be derived again and lists what needs a client (vectors: dna reindex).
-- The checks, each a list of {kind, name, tenant, model_id?, ...} (at most 1000 per check, with counts):
--   lexical          search rows whose BM25 state is missing or differs from their stored tsvector
--                    (dna_bm25_docs / dna_bm25_forward), and BM25 documents without a search row;
--   validity         memory search rows whose valid_at is not their record's (dna.search filters on it);
--   rows             memory records without a search row under a model_id the scope's memories use,
--                    and memory search rows without a record;
--   vectors          search rows without an embedding where other rows of their Kind and model_id have
--                    one (a document indexed lexical-only on purpose, alone of its Kind, is not flagged);
--   history          memory records whose latest version in dna_versions is not the record as it is.
-- Everything runs with the caller's rights: row-level security decides what is checked.
-- Runs after memory_erasure.sql (migration 0015_governed_history). SQLSTATE 22023 bad argument.

CREATE OR REPLACE FUNCTION dna.integrity_findings(scope text, full_check boolean)
RETURNS TABLE (check_name text, finding jsonb)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    t text;
    memory_kinds text[] := dna.recallable_kinds();       -- by their own statements (sql/tenancy.sql, "Citus rules")
    no_search_row text := '';
    rows_kinds text[];
    rows_names text[];
    rows_tenants text[];
    rows_models text[];
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        t := 'dna.dna_search_docs_' || w;
        RETURN QUERY EXECUTE format($q$
            SELECT 'lexical', jsonb_build_object('kind', s.kind, 'name', s.name, 'tenant', s.tenant, 'model_id', s.model_id,
                                                 'passage', s.passage, 'doc_id', s.doc_id,
                                                 'problem', CASE WHEN d.doc_id IS NULL THEN 'not in the BM25 index'
                                                                 ELSE 'BM25 terms differ from the tsvector' END)
            FROM %s AS s
            LEFT JOIN dna.dna_bm25_docs AS d ON d.scope = s.scope AND d.model_id = s.model_id AND d.tenant = s.tenant
                                            AND d.doc_id = s.doc_id
            LEFT JOIN dna.dna_bm25_forward AS f ON f.scope = s.scope AND f.doc_id = s.doc_id
            WHERE s.scope = $1
              AND (d.doc_id IS NULL
                   OR ($2 AND (f.doc_id IS NULL OR f.kind <> s.kind OR f.terms <> (
                        SELECT coalesce(jsonb_object(array_agg(u.lexeme), array_agg(coalesce(cardinality(u.positions), 1)::text)), '{}')
                        FROM unnest(s.tsv) AS u))))
            $q$, t) USING scope, full_check;
        RETURN QUERY EXECUTE format($q$
            SELECT 'validity', jsonb_build_object('kind', s.kind, 'name', s.name, 'tenant', s.tenant, 'model_id', s.model_id,
                                                  'search_valid_at', s.valid_at::text, 'record_valid_at', i.valid_at::text)
            FROM %s AS s
            JOIN dna.dna_instances AS i ON i.scope = s.scope AND i.kind = s.kind AND i.name = s.name AND i.tenant = s.tenant
            WHERE s.scope = $1 AND i.kind = ANY ($2) AND s.valid_at IS DISTINCT FROM i.valid_at
            $q$, t) USING scope, memory_kinds;
        RETURN QUERY EXECUTE format($q$
            SELECT 'rows', jsonb_build_object('kind', s.kind, 'name', s.name, 'tenant', s.tenant, 'model_id', s.model_id,
                                              'problem', 'search row without a record')
            FROM %s AS s
            WHERE s.scope = $1 AND s.kind = ANY ($2)
              AND NOT EXISTS (SELECT 1 FROM dna.dna_instances AS i
                              WHERE i.scope = $1 AND i.kind = s.kind AND i.name = s.name AND i.tenant = s.tenant)
            $q$, t) USING scope, memory_kinds;
        RETURN QUERY EXECUTE format($q$
            SELECT 'vectors', jsonb_build_object('kind', s.kind, 'name', s.name, 'tenant', s.tenant, 'model_id', s.model_id,
                                                 'passage', s.passage)
            FROM %s AS s WHERE s.scope = $1 AND s.embedding IS NULL
              AND EXISTS (SELECT 1 FROM %s AS o WHERE o.scope = $1 AND o.model_id = s.model_id AND o.kind = s.kind
                                                  AND o.embedding IS NOT NULL)
            $q$, t, t) USING scope;
        -- a BM25 document is orphaned when no width table holds its doc_id (one NOT EXISTS per width)
        no_search_row := no_search_row || format(' AND NOT EXISTS (SELECT 1 FROM %s AS s WHERE s.scope = $1 '
                                                 'AND s.model_id = d.model_id AND s.doc_id = d.doc_id)', t);
    END LOOP;
    RETURN QUERY EXECUTE
        'SELECT ''lexical''::text, jsonb_build_object(''kind'', d.kind, ''tenant'', d.tenant, ''model_id'', d.model_id,
                                                    ''doc_id'', d.doc_id, ''problem'', ''BM25 document without a search row'')
         FROM dna.dna_bm25_docs AS d WHERE d.scope = $1' || no_search_row USING scope;
    -- Every memory record has a search row under each model_id the scope's memories use (those rows
    -- read first, by their own statement).
    SELECT coalesce(array_agg(x.kind), '{}'), coalesce(array_agg(x.name), '{}'), coalesce(array_agg(x.tenant), '{}'),
           coalesce(array_agg(x.model_id), '{}')
    INTO rows_kinds, rows_names, rows_tenants, rows_models
    FROM dna.memory_search_rows(scope) AS x;
    RETURN QUERY
        SELECT 'rows', jsonb_build_object('kind', i.kind, 'name', i.name, 'tenant', i.tenant, 'model_id', m.model_id,
                                          'problem', 'record without a search row')
        FROM dna.dna_instances AS i
        CROSS JOIN (SELECT DISTINCT x.model_id FROM unnest(rows_models) AS x(model_id)) AS m
        WHERE i.scope = scope AND i.kind = ANY (memory_kinds) AND NOT dna.is_redacted(i.spec)
          AND NOT EXISTS (SELECT 1 FROM unnest(rows_kinds, rows_names, rows_tenants, rows_models) AS x(kind, name, tenant, model_id)
                          WHERE x.model_id = m.model_id AND x.kind = i.kind AND x.name = i.name AND x.tenant = i.tenant);
    RETURN QUERY
        SELECT 'history', jsonb_build_object('kind', i.kind, 'name', i.name, 'tenant', i.tenant,
                                             'latest_version', v.version,
                                             'problem', CASE WHEN v.version IS NULL THEN 'no version'
                                                             ELSE 'the latest version is not the record' END)
        FROM dna.dna_instances AS i
        LEFT JOIN LATERAL (SELECT x.version, x.spec, x.valid_at FROM dna.dna_versions AS x
                           WHERE x.scope = scope AND x.kind = i.kind AND x.api_version = i.api_version
                             AND x.name = i.name AND x.tenant = i.tenant ORDER BY x.version DESC LIMIT 1) AS v ON true
        WHERE i.scope = scope AND i.kind = ANY (memory_kinds)
          AND (v.version IS NULL OR v.spec IS DISTINCT FROM i.spec OR v.valid_at IS DISTINCT FROM i.valid_at);
END
$$;

COMMENT ON FUNCTION dna.integrity_findings(text, boolean) IS
'Internal (dna.verify_integrity): one row per drift found in scope, (check_name, finding). full_check also '
'compares every BM25 forward row with its search row''s tsvector (quick: presence only).';

CREATE OR REPLACE FUNCTION dna.search_row_exists(scope text, model_id text, doc_id bigint)
RETURNS SETOF boolean
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    found boolean;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM dna.%I AS s WHERE s.scope = $1 AND s.model_id = $2 AND s.doc_id = $3)',
                       'dna_search_docs_' || w) INTO found USING scope, model_id, doc_id;
        IF found THEN
            RETURN NEXT true;
            RETURN;
        END IF;
    END LOOP;
    RETURN NEXT false;
END
$$;

COMMENT ON FUNCTION dna.search_row_exists(text, text, bigint) IS
'Internal: whether a search row of any width holds doc_id under (scope, model_id). One row: true or false.';

CREATE OR REPLACE FUNCTION dna.memory_search_rows(scope text)
RETURNS TABLE (kind text, name text, tenant text, model_id text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    memory_kinds text[] := dna.recallable_kinds();       -- by its own statement (sql/tenancy.sql, "Citus rules")
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        RETURN QUERY EXECUTE format('SELECT s.kind, s.name, s.tenant, s.model_id FROM dna.%I AS s
                                     WHERE s.scope = $1 AND s.kind = ANY ($2)', 'dna_search_docs_' || w)
            USING scope, memory_kinds;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.memory_search_rows(text) IS
'Internal: the (kind, name, tenant, model_id) of every search row of a memory Kind in scope, every width.';

CREATE OR REPLACE FUNCTION dna.verify_integrity(scope text, mode text DEFAULT 'quick')
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    report jsonb;
BEGIN
    scope := dna.check_scope(scope);
    IF mode IS NULL OR mode NOT IN ('quick', 'full') THEN
        RAISE EXCEPTION 'mode must be quick or full, got %', coalesce(quote_literal(mode), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'quick checks presence and counts; full also compares every search row''s BM25 terms with its tsvector.';
    END IF;
    -- A scope with no rows is consistent, and most often a typo: say so (as dna.search does).
    IF NOT dna.scope_exists(scope) THEN
        RAISE NOTICE 'scope % has no rows; nearest scopes: %', quote_literal(scope), dna.nearest_scopes_text(scope, 3);
    END IF;
    SELECT jsonb_object_agg(c.name, jsonb_build_object('count', coalesce(f.n, 0), 'findings', coalesce(f.items, '[]'::jsonb)))
    INTO report
    FROM unnest(ARRAY['lexical', 'validity', 'rows', 'vectors', 'history']) AS c(name)
    LEFT JOIN (SELECT x.check_name, count(*) AS n,
                      (jsonb_agg(x.finding ORDER BY x.finding::text) FILTER (WHERE true)) AS items
               FROM dna.integrity_findings(scope, mode = 'full') AS x GROUP BY x.check_name) AS f ON f.check_name = c.name;
    RETURN jsonb_build_object('scope', scope, 'mode', mode, 'scope_exists', dna.scope_exists(scope),
                              'ok', NOT EXISTS (SELECT 1 FROM jsonb_each(report) AS e WHERE (e.value ->> 'count')::bigint > 0),
                              'checks', report);
END
$$;

COMMENT ON FUNCTION dna.verify_integrity(text, text) IS
'Integrity report of a scope (read-only; what the caller''s row-level security shows): {scope, mode, '
'scope_exists (false, with a NOTICE naming the nearest scopes, when no row stands under it: nothing to check), ok, '
'checks: {lexical, validity, rows, vectors, history: {count, findings[{kind, name, tenant, model_id?, '
'problem?, ...}]}}}. lexical: search rows missing from the BM25 index (full: or whose BM25 terms differ '
'from the tsvector) and BM25 documents without a search row; validity: memory search rows whose valid_at '
'is not their record''s; rows: memory records without a search row under a model_id the scope''s memories '
'use, and memory search rows without a record; vectors: search rows without an embedding where other rows of '
'their Kind and model_id have one; history: '
'memory records whose latest version is not the record (or that have none). mode: quick (default) or '
'full. Repair: dna.reconcile. Errors: 22023.';

CREATE OR REPLACE FUNCTION dna.reconcile(scope text, action text DEFAULT 'report', model_id text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    r record;
    n bigint;
    fixed jsonb := '{}'::jsonb;
    todo jsonb;
    memory_kinds text[] := dna.recallable_kinds();       -- by their own statements (sql/tenancy.sql, "Citus rules")
    vec_kinds text[];
    vec_names text[];
    vec_tenants text[];
BEGIN
    scope := dna.check_scope(scope);
    IF action IS NULL OR action NOT IN ('report', 'rebuild_lexical', 'reembed') THEN
        RAISE EXCEPTION 'action must be report, rebuild_lexical or reembed, got %', coalesce(quote_literal(action), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'report: dna.verify_integrity(scope, ''full''); rebuild_lexical: the BM25 index and validity mirrors from the rows; reembed: what a model_id lacks.';
    END IF;
    IF action = 'report' THEN
        RETURN dna.verify_integrity(scope, 'full');
    END IF;
    IF action = 'reembed' THEN
        -- What model_id lacks: memory records without a row or a vector under it (the text to embed);
        -- the client embeds exactly that and writes it with dna.index_document (dna reindex --model).
        IF model_id IS NULL OR NOT EXISTS (SELECT 1 FROM dna.dna_models AS m WHERE m.model_id = model_id) THEN
            RAISE EXCEPTION 'reembed needs a registered model_id, got %', coalesce(quote_literal(model_id), 'NULL')
                USING ERRCODE = '22023',
                      HINT = format('Registered model_ids: %s.', coalesce((SELECT string_agg(quote_literal(m.model_id), ', ' ORDER BY m.model_id)
                                                                            FROM dna.dna_models AS m), 'none'));
        END IF;
        SELECT coalesce(array_agg(v.kind), '{}'), coalesce(array_agg(v.name), '{}'), coalesce(array_agg(v.tenant), '{}')
        INTO vec_kinds, vec_names, vec_tenants
        FROM dna.integrity_vectors(scope, model_id) AS v;
        SELECT coalesce(jsonb_agg(jsonb_build_object('kind', i.kind, 'name', i.name, 'tenant', i.tenant,
                                                     'text', dna.memory_text_of(dk.embed_fields, i.spec),
                                                     'title', left(coalesce(nullif(i.spec ->> 'summary', ''),
                                                                            dna.memory_text_of(dk.embed_fields, i.spec)), 240))
                                  ORDER BY i.kind, i.name, i.tenant), '[]'::jsonb)
        INTO todo
        FROM dna.dna_instances AS i
        LEFT JOIN dna.dna_kinds AS dk ON dk.kind = i.kind
        WHERE i.scope = scope AND i.kind = ANY (memory_kinds) AND NOT dna.is_redacted(i.spec)
          AND NOT EXISTS (SELECT 1 FROM unnest(vec_kinds, vec_names, vec_tenants) AS v(kind, name, tenant)
                          WHERE v.kind = i.kind AND v.name = i.name AND v.tenant = i.tenant);
        RETURN jsonb_build_object('scope', scope, 'action', action, 'model_id', model_id,
                                  'count', jsonb_array_length(todo), 'to_embed', todo,
                                  'documents_to_embed', dna.reembed_documents(scope, model_id, memory_kinds,
                                                                              vec_kinds, vec_names, vec_tenants));
    END IF;
    -- rebuild_lexical: the BM25 state of drifted rows derived again from their tsvectors, orphans
    -- removed, validity mirrors copied from the records.
    FOR r IN SELECT (x.finding ->> 'model_id') AS model_id, (x.finding ->> 'tenant') AS tenant,
                    array_agg((x.finding ->> 'doc_id')::bigint) AS ids,
                    bool_or(x.finding ->> 'problem' = 'BM25 document without a search row') AS orphan
             FROM dna.integrity_findings(scope, true) AS x WHERE x.check_name = 'lexical'
             GROUP BY 1, 2, x.finding ->> 'problem' = 'BM25 document without a search row' LOOP
        PERFORM dna.bm25_remove_docs(scope, r.model_id, r.tenant, r.ids);
        -- A forward row that drifted names the wrong lexemes: the memtable postings go by doc_id.
        DELETE FROM dna.dna_bm25_postings AS x
        WHERE x.scope = scope AND x.model_id = r.model_id AND x.tenant = r.tenant AND x.doc_id = ANY (r.ids);
        IF NOT r.orphan THEN
            FOR w IN SELECT dna.search_widths() LOOP
                EXECUTE format($q$
                    WITH fwd AS (
                        INSERT INTO dna.dna_bm25_forward (scope, model_id, tenant, doc_id, kind, doc_len, terms)
                        SELECT s.scope, s.model_id, s.tenant, s.doc_id, s.kind, v.len, v.terms
                        FROM dna.%I AS s,
                             LATERAL (SELECT coalesce(jsonb_object(array_agg(u.lexeme),
                                                                   array_agg(coalesce(cardinality(u.positions), 1)::text)), '{}') AS terms,
                                             coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer AS len
                                      FROM unnest(s.tsv) AS u) AS v
                        WHERE s.scope = $1 AND s.model_id = $2 AND s.tenant = $3 AND s.doc_id = ANY ($4)
                        RETURNING doc_id, kind, doc_len)
                    INSERT INTO dna.dna_bm25_docs (scope, model_id, tenant, doc_id, seg_id, kind, doc_len)
                    SELECT $1, $2, $3, f.doc_id, NULL, f.kind, f.doc_len FROM fwd AS f
                    $q$, 'dna_search_docs_' || w) USING scope, r.model_id, r.tenant, r.ids;
            END LOOP;
            PERFORM dna.bm25_add_docs(scope, r.model_id, r.tenant, r.ids, NULL);
        END IF;
        fixed := jsonb_set(fixed, '{lexical}', to_jsonb(coalesce((fixed ->> 'lexical')::bigint, 0) + cardinality(r.ids)));
    END LOOP;
    n := 0;
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('WITH u AS (UPDATE dna.%I AS s SET valid_at = i.valid_at FROM dna.dna_instances AS i
                                   WHERE s.scope = $1 AND i.scope = $1 AND i.kind = s.kind AND i.name = s.name
                                     AND i.tenant = s.tenant AND i.kind = ANY ($2)
                                     AND s.valid_at IS DISTINCT FROM i.valid_at RETURNING 1)
                        SELECT count(*) FROM u', 'dna_search_docs_' || w) INTO r USING scope, memory_kinds;
        n := n + r.count;
    END LOOP;
    fixed := fixed || jsonb_build_object('validity', n);
    RETURN jsonb_build_object('scope', scope, 'action', action, 'repaired', fixed,
                              'after', dna.verify_integrity(scope, 'full'));
END
$$;

COMMENT ON FUNCTION dna.reconcile(text, text, text) IS
'Repairs what dna.verify_integrity finds, with the caller''s rights. action: report (the full check, '
'nothing written); rebuild_lexical (the BM25 state of every drifted search row derived again from its '
'tsvector — removed, then forward row, document and memtable postings added — BM25 documents without a '
'search row removed, and memory search rows given their record''s valid_at; returns {repaired: {lexical, '
'validity}, after: the full check}); reembed (model_id required: to_embed, the memory records lacking a '
'row or a vector under model_id, [{kind, name, tenant, text, title}], for the client to embed and write with '
'dna.index_document; documents_to_embed, the documents with no vector under model_id as another model_id '
'holds them, passages and metadata (dna.reembed_documents), for the client to embed title + body per passage '
'and write as Client.index does: dna reindex --model). History is reported, never rewritten. Errors: 22023.';

CREATE OR REPLACE FUNCTION dna.reembed_documents(scope text, model_id text, memory_kinds text[],
                                                 vec_kinds text[], vec_names text[], vec_tenants text[])
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    found jsonb := '[]'::jsonb;
    part jsonb;
BEGIN
    -- Each document (a search row of a Kind that is not a memory Kind) with no vector under model_id,
    -- as another model_id holds it: every passage with its text and span, and the document's metadata.
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format($q$
            SELECT coalesce(jsonb_agg(d.doc), '[]'::jsonb) FROM (
                SELECT jsonb_build_object(
                           'kind', s.kind, 'name', s.name, 'tenant', s.tenant, 'source_model_id', s.model_id,
                           'metadata', (array_agg(s.metadata ORDER BY s.passage))[1],
                           'passages', jsonb_agg(jsonb_build_object(
                               'passage', s.passage, 'title', s.title, 'body', s.body, 'snippet', s.snippet,
                               'heading', s.heading, 'char_start', s.char_start, 'char_end', s.char_end)
                               ORDER BY s.passage)) AS doc
                FROM dna.%I AS s
                WHERE s.scope = $1 AND s.model_id <> $2 AND NOT (s.kind = ANY ($3))
                  AND NOT EXISTS (SELECT 1 FROM unnest($4::text[], $5::text[], $6::text[]) AS v(kind, name, tenant)
                                  WHERE v.kind = s.kind AND v.name = s.name AND v.tenant = s.tenant)
                GROUP BY s.kind, s.name, s.tenant, s.model_id) AS d
            $q$, 'dna_search_docs_' || w)
            INTO part USING scope, model_id, memory_kinds, vec_kinds, vec_names, vec_tenants;
        found := found || part;
    END LOOP;
    -- A document held under several other model_ids is listed once: from the first of them by name.
    RETURN (SELECT coalesce(jsonb_agg(x.d ORDER BY x.d ->> 'kind', x.d ->> 'name', x.d ->> 'tenant'), '[]'::jsonb)
            FROM (SELECT DISTINCT ON (e ->> 'kind', e ->> 'name', e ->> 'tenant') e AS d
                  FROM jsonb_array_elements(found) AS e
                  ORDER BY e ->> 'kind', e ->> 'name', e ->> 'tenant', e ->> 'source_model_id') AS x);
END
$$;

COMMENT ON FUNCTION dna.reembed_documents(text, text, text[], text[], text[], text[]) IS
'Internal (dna.reconcile reembed): the documents of scope (Kinds not in memory_kinds) with no vector under '
'model_id (vec_kinds/names/tenants: what has one), each as another model_id holds it: [{kind, name, tenant, '
'source_model_id, metadata, passages: [{passage, title, body, snippet, heading, char_start, char_end}]}], '
'ordered by kind, name, tenant; a document under several model_ids comes from the first by name.';

CREATE OR REPLACE FUNCTION dna.integrity_vectors(scope text, model_id text)
RETURNS TABLE (kind text, name text, tenant text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        RETURN QUERY EXECUTE format('SELECT s.kind, s.name, s.tenant FROM dna.%I AS s
                                     WHERE s.scope = $1 AND s.model_id = $2 AND s.embedding IS NOT NULL',
                                    'dna_search_docs_' || w) USING scope, model_id;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.integrity_vectors(text, text) IS
'Internal (dna.reconcile reembed): the (kind, name, tenant) of every search row of scope that has a vector under model_id.';
