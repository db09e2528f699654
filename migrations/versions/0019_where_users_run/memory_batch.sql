-- pydna SQL package — memory plane: many memories in one call (dna.remember_many).
--
-- The same write as dna.remember (validation and stamps by dna.prepare_memory_spec, restatement by
-- dna.restated_spec, the history through the dna_instances triggers, the text through the search
-- tables), done set-based: one INSERT … ON CONFLICT for every record and one dna.index_documents for
-- every search row, in the caller's one transaction. Per item it saves the statements a call of
-- dna.remember runs alone (and their statement triggers: the BM25 sync fires once per batch instead
-- of three times per memory). bench/batch.py measures it beside one call per item.

CREATE OR REPLACE FUNCTION dna.remember_many_limit()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 10000
$$;

COMMENT ON FUNCTION dna.remember_many_limit() IS
'10000: the most items one dna.remember_many call takes (54000 above; send batches). Pure.';

CREATE OR REPLACE FUNCTION dna.remember_many(
    scope text, items jsonb, kind text DEFAULT 'Engram', tenant text DEFAULT '', now timestamptz DEFAULT NULL,
    embeddings vector[] DEFAULT NULL, model_id text DEFAULT NULL, personal boolean DEFAULT false,
    atomic boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    n integer;
    it record;
    item_kind text;
    item_at timestamptz;
    item_name text;
    prepared jsonb;
    unknown text;
    ords integer[] := '{}';
    kinds_ text[] := '{}';
    names text[] := '{}';
    givens jsonb[] := '{}';
    preps jsonb[] := '{}';
    embs vector[] := '{}';
    ats timestamptz[] := '{}';
    views jsonb[] := '{}';                               -- per item: its further indexed texts (passages 1..)
    vembs jsonb[] := '{}';                               -- per item: their slots in embeddings ([first, count])
    slot integer := 1;                                   -- the next item's first slot in embeddings
    needed integer := 0;
    failed jsonb := '[]'::jsonb;                         -- {ord, sqlstate, error, hint} of the items refused
    results jsonb;
    dup record;
    err_state text;
    err_text text;
    err_hint text;
    i integer;
BEGIN
    scope := dna.check_scope(scope);                      -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    at := coalesce(dna.check_now(now), now());
    model_id := coalesce(model_id, 'dna-fake-hash-v1');
    atomic := coalesce(atomic, true);
    IF items IS NULL OR jsonb_typeof(items) <> 'array' THEN
        RAISE EXCEPTION 'items must be a JSON array of {spec, name?, kind?, now?}, got %',
            coalesce('a JSON ' || jsonb_typeof(items), 'NULL') USING ERRCODE = '22023',
            HINT = 'For example ''[{"spec": {"summary": "deploys are on thursdays"}}, {"spec": {"summary": "…"}, "name": "m2"}]''.';
    END IF;
    n := jsonb_array_length(items);
    IF n > dna.remember_many_limit() THEN
        RAISE EXCEPTION '% items in one call; the limit is %: send batches', n, dna.remember_many_limit()
            USING ERRCODE = '54000';
    END IF;
    -- One vector per indexed text: for each item its text, then its passages.
    needed := (SELECT coalesce(sum(1 + CASE WHEN jsonb_typeof(x.value -> 'passages') = 'array'
                                            THEN jsonb_array_length(x.value -> 'passages') ELSE 0 END), 0)
               FROM jsonb_array_elements(items) AS x);
    IF embeddings IS NOT NULL AND cardinality(embeddings) <> needed THEN
        RAISE EXCEPTION 'embeddings must have one element per indexed text (each item''s text, then its passages: %), got %',
            needed, cardinality(embeddings) USING ERRCODE = '22023',
            HINT = 'A NULL element indexes that text lexically only; embeddings => NULL indexes every text so.';
    END IF;
    IF n = 0 THEN
        RETURN jsonb_build_object('scope', scope, 'tenant', tenant, 'personal', personal IS TRUE, 'count', 0,
                                  'created', 0, 'updated', 0, 'unchanged', 0, 'failed', 0, 'results', '[]'::jsonb);
    END IF;

    -- 1. Every item is checked and stamped before anything is written (dna.remember's rules); a bad
    -- one is named by its position (1-based): the call fails (atomic) or the item is reported.
    FOR it IN SELECT x.value AS item, x.ord::integer AS ord,
                     CASE WHEN jsonb_typeof(x.value -> 'passages') = 'array' THEN jsonb_array_length(x.value -> 'passages')
                          ELSE 0 END AS extra
              FROM jsonb_array_elements(items) WITH ORDINALITY AS x(value, ord)
              ORDER BY x.ord LOOP
        BEGIN
            IF jsonb_typeof(it.item) <> 'object' THEN
                RAISE EXCEPTION 'an item is a JSON object {spec, name?, kind?, now?}, got a JSON %', jsonb_typeof(it.item)
                    USING ERRCODE = '22023';
            END IF;
            SELECT string_agg(quote_literal(k), ', ' ORDER BY k) INTO unknown
            FROM jsonb_object_keys(it.item) AS k WHERE k NOT IN ('spec', 'name', 'kind', 'now', 'passages');
            IF unknown IS NOT NULL THEN
                RAISE EXCEPTION 'unknown key % (an item is {spec, name?, kind?, now?, passages?})', unknown USING ERRCODE = '22023',
                    HINT = 'The memory''s fields (summary, tags, metadata, …) go inside spec.';
            END IF;
            IF it.item ? 'passages' AND (jsonb_typeof(it.item -> 'passages') <> 'array'
                   OR EXISTS (SELECT 1 FROM jsonb_array_elements(it.item -> 'passages') AS x
                              WHERE jsonb_typeof(x) <> 'string' OR btrim(x #>> '{}') = '' OR octet_length(x #>> '{}') > 1000000)
                   OR jsonb_array_length(it.item -> 'passages') > 99) THEN
                RAISE EXCEPTION 'passages must be a list of at most 99 non-blank texts (each at most 1000000 bytes)'
                    USING ERRCODE = '22023',
                    HINT = 'Further texts the memory is found by, indexed beside its own text (passages 1, 2, …).';
            END IF;
            item_kind := dna.check_memory_kind(coalesce(it.item ->> 'kind', kind, 'Engram'));
            item_at := CASE WHEN jsonb_typeof(it.item -> 'now') = 'string'
                            THEN dna.parse_timestamptz(it.item ->> 'now') END;
            IF it.item ? 'now' AND jsonb_typeof(it.item -> 'now') <> 'null' AND item_at IS NULL THEN
                RAISE EXCEPTION 'now must be an ISO-8601 timestamp string, got %', it.item -> 'now' USING ERRCODE = '22007';
            END IF;
            prepared := dna.prepare_memory_spec(item_kind, it.item -> 'spec', coalesce(item_at, at));
            IF it.item ? 'name' AND jsonb_typeof(it.item -> 'name') NOT IN ('string', 'null') THEN
                RAISE EXCEPTION 'name must be a string, got a JSON %', jsonb_typeof(it.item -> 'name') USING ERRCODE = '22023';
            END IF;
            item_name := dna.check_key('name', coalesce(it.item ->> 'name', dna.memory_name(item_kind, prepared)), 512);
            ords := ords || it.ord;
            kinds_ := kinds_ || item_kind;
            names := names || item_name;
            givens := givens || (it.item -> 'spec');
            preps := preps || prepared;
            embs := embs || embeddings[slot];
            ats := ats || coalesce(item_at, at);
            views := views || coalesce(it.item -> 'passages', '[]'::jsonb);
            vembs := vembs || jsonb_build_array(slot + 1, it.extra);
            slot := slot + 1 + it.extra;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_text = MESSAGE_TEXT, err_hint = PG_EXCEPTION_HINT;
            IF atomic THEN
                RAISE EXCEPTION 'item %: %', it.ord, err_text USING ERRCODE = err_state,
                    HINT = coalesce(nullif(err_hint, '') || ' ', '') || 'Nothing was written (atomic => true); '
                           'atomic => false writes the other items and reports this one.';
            END IF;
            failed := failed || jsonb_strip_nulls(jsonb_build_object('ord', it.ord, 'sqlstate', err_state,
                                                                      'error', err_text, 'hint', nullif(err_hint, '')));
            slot := slot + 1 + it.extra;
        END;
    END LOOP;
    -- One memory once per call: two items of one (kind, name) are refused (the later one, non-atomic).
    SELECT u.kind, u.name, array_agg(u.ord ORDER BY u.ord) AS at_ords INTO dup
    FROM unnest(kinds_, names, ords) AS u(kind, name, ord)
    GROUP BY u.kind, u.name HAVING count(*) > 1 ORDER BY min(u.ord) LIMIT 1;
    IF dup.kind IS NOT NULL THEN
        IF atomic THEN
            RAISE EXCEPTION 'items % name one memory, %/%', array_to_string(dup.at_ords, ' and '), dup.kind, dup.name
                USING ERRCODE = '22023',
                      HINT = 'Send each memory once per call (the same text twice gets the same name); nothing was written.';
        END IF;
        FOR i IN SELECT x.i FROM (SELECT u.i, row_number() OVER (PARTITION BY u.kind, u.name ORDER BY u.ord) AS nth
                                  FROM unnest(kinds_, names, ords) WITH ORDINALITY AS u(kind, name, ord, i)) AS x
                 WHERE x.nth > 1 ORDER BY x.i DESC LOOP
            failed := failed || jsonb_build_object('ord', ords[i], 'sqlstate', '22023',
                                                   'error', format('names one memory with item %s, %s/%s', ords[array_position(names, names[i])],
                                                                   kinds_[i], names[i]));
            ords := ords[:i - 1] || ords[i + 1:];
            kinds_ := kinds_[:i - 1] || kinds_[i + 1:];
            names := names[:i - 1] || names[i + 1:];
            givens := givens[:i - 1] || givens[i + 1:];
            preps := preps[:i - 1] || preps[i + 1:];
            embs := embs[:i - 1] || embs[i + 1:];
            ats := ats[:i - 1] || ats[i + 1:];
            views := views[:i - 1] || views[i + 1:];
            vembs := vembs[:i - 1] || vembs[i + 1:];
        END LOOP;
    END IF;

    -- 2. The write, set-based. A failure here (rare: a history guard, a lock) fails the call when
    -- atomic; otherwise the items are written one by one (the same write for one item), each in its
    -- own subtransaction, and the ones that fail are reported.
    IF cardinality(ords) > 0 THEN
        BEGIN
            results := dna.remember_many_write(scope, tenant, personal IS TRUE, model_id, ords, kinds_, names,
                                               givens, preps, embs, views,
                                               ARRAY(SELECT to_jsonb(embeddings[(v ->> 0)::integer :
                                                                                         (v ->> 0)::integer + (v ->> 1)::integer - 1])
                                                     FROM unnest(vembs) AS v));
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_text = MESSAGE_TEXT, err_hint = PG_EXCEPTION_HINT;
            IF atomic THEN
                RAISE EXCEPTION '%', err_text USING ERRCODE = err_state,
                    HINT = coalesce(nullif(err_hint, '') || ' ', '') || 'Nothing was written (atomic => true).';
            END IF;
            results := '[]'::jsonb;
            FOR i IN 1 .. cardinality(ords) LOOP
                BEGIN
                    results := results || dna.remember_many_write(
                        scope, tenant, personal IS TRUE, model_id, ARRAY[ords[i]], ARRAY[kinds_[i]], ARRAY[names[i]],
                        ARRAY[givens[i]], ARRAY[preps[i]], ARRAY[embs[i]], ARRAY[views[i]],
                        ARRAY[to_jsonb(embeddings[(vembs[i] ->> 0)::integer :
                                                           (vembs[i] ->> 0)::integer + (vembs[i] ->> 1)::integer - 1])]);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_text = MESSAGE_TEXT, err_hint = PG_EXCEPTION_HINT;
                    failed := failed || jsonb_strip_nulls(jsonb_build_object('ord', ords[i], 'sqlstate', err_state,
                                                                              'error', err_text, 'hint', nullif(err_hint, '')));
                END;
            END LOOP;
        END;
    ELSE
        results := '[]'::jsonb;
    END IF;

    results := (SELECT coalesce(jsonb_agg(e.value ORDER BY (e.value ->> 'ord')::integer), '[]'::jsonb)
                FROM jsonb_array_elements(results || failed) AS e);
    RETURN jsonb_build_object(
        'scope', scope, 'tenant', tenant, 'personal', personal IS TRUE, 'count', n,
        'created', (SELECT count(*) FROM jsonb_array_elements(results) AS e WHERE e.value ->> 'action' = 'created'),
        'updated', (SELECT count(*) FROM jsonb_array_elements(results) AS e WHERE e.value ->> 'action' = 'updated'),
        'unchanged', (SELECT count(*) FROM jsonb_array_elements(results) AS e WHERE e.value ->> 'action' = 'unchanged'),
        'failed', jsonb_array_length(failed), 'results', results);
END
$$;

COMMENT ON FUNCTION dna.remember_many(text, jsonb, text, text, timestamptz, vector[], text, boolean, boolean) IS
'Many memories in one call and one transaction: items is a JSON array of {spec, name?, kind? (default the kind '
'argument, Engram), now? (ISO-8601 world time of that item, default now, default now()), passages? (at most 99 further '
'texts the memory is found by, indexed beside its text as passages 1, 2, …: a hit answers by its best one)}, '
'embeddings one vector per indexed text (each item''s text, then its passages; NULL or a NULL element: lexical only) '
'under model_id (default dna-fake-hash-v1); scope, tenant and personal as dna.remember. Each item is what dna.remember(scope, spec, kind, name, tenant, now, embedding, model_id, personal) '
'writes (validated and stamped by dna.prepare_memory_spec, named by dna.memory_name when no name, a stored memory '
'restated by dna.restated_spec, a version appended, its text indexed), written set-based: one INSERT of the records '
'and one dna.index_documents of their texts. Every item is checked before anything is written. atomic => true '
'(default): all or nothing, and a bad item fails the call naming its position (''item 3: …'', its own SQLSTATE and '
'hint), as do two items naming one memory; atomic => false: the bad items are reported and the others written '
'(a write that fails set-based is retried item by item, each in a subtransaction). Returns {scope, tenant, personal, '
'count, created, updated, unchanged, failed, results: one per item in input order: {ord (1-based), kind, name, '
'action: created|updated|unchanged, version, recorded_at, index {action, embedded}} or {ord, sqlstate, error, '
'hint?}}. Errors: 22023 (items not a JSON array, embeddings of another length, a bad item), 22001, 22007, 54000 (more '
'than dna.remember_many_limit() = 10000 items), 42501 (tenant), 42P01 (no table for the embedding width).';

CREATE OR REPLACE FUNCTION dna.remember_many_write(scope text, tenant text, personal boolean, model_id text,
                                                   ords integer[], kinds text[], names text[], givens jsonb[],
                                                   preps jsonb[], embs vector[], views jsonb[] DEFAULT NULL,
                                                   view_embs jsonb[] DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    apis jsonb;
    fields jsonb;
    stored jsonb[];
    merged jsonb[] := '{}';
    actions text[] := '{}';
    texts text[];
    snippets text[];
    idx record;
    out jsonb;
    i integer;
BEGIN
    -- The Kinds' api_version and embed_fields, read first (Citus: no function reading dna_* tables
    -- inside a statement on a shard).
    SELECT jsonb_object_agg(k.kind, k.api_version), jsonb_object_agg(k.kind, to_jsonb(k.embed_fields))
    INTO apis, fields FROM dna.dna_kinds AS k WHERE k.kind = ANY (kinds);
    -- Writers of one key queue on its transaction-level advisory lock (dna.lock_memory's key), taken
    -- in key order so that two batches never wait for each other in a circle; then the rows.
    PERFORM pg_advisory_xact_lock(hashtextextended(
        'dna.memory' || chr(31) || scope || chr(31) || u.kind || chr(31) || u.name || chr(31) || tenant, 0))
    FROM (SELECT DISTINCT u.kind, u.name FROM unnest(kinds, names) AS u(kind, name)) AS u
    ORDER BY u.kind, u.name;
    stored := ARRAY(SELECT i.spec FROM unnest(kinds, names) WITH ORDINALITY AS u(kind, name, o)
                    LEFT JOIN LATERAL (SELECT i.spec FROM dna.dna_instances AS i
                                       WHERE i.scope = scope AND i.kind = u.kind AND i.api_version = apis ->> u.kind
                                         AND i.name = u.name AND i.tenant = tenant
                                       FOR UPDATE) AS i ON true
                    ORDER BY u.o);
    FOR i IN 1 .. cardinality(ords) LOOP
        merged := merged || dna.restated_spec(kinds[i], givens[i], preps[i], stored[i]);
        actions := actions || CASE WHEN stored[i] IS NULL THEN 'created' WHEN merged[i] = stored[i] THEN 'unchanged'
                                   ELSE 'updated' END;
    END LOOP;
    INSERT INTO dna.dna_instances AS i (scope, kind, api_version, name, tenant, spec, op)
    SELECT scope, u.kind, apis ->> u.kind, u.name, tenant, u.spec, 'remember'
    FROM unnest(kinds, names, merged, actions) AS u(kind, name, spec, action)
    WHERE u.action <> 'unchanged'
    ORDER BY u.kind, u.name
    ON CONFLICT ON CONSTRAINT dna_instances_pkey DO UPDATE SET spec = excluded.spec, op = excluded.op;
    -- The specs as stored (the history guard may have kept stored values), and their latest versions.
    merged := ARRAY(SELECT i.spec FROM unnest(kinds, names) WITH ORDINALITY AS u(kind, name, o)
                    JOIN dna.dna_instances AS i ON i.scope = scope AND i.kind = u.kind AND i.api_version = apis ->> u.kind
                                               AND i.name = u.name AND i.tenant = tenant
                    ORDER BY u.o);
    texts := ARRAY(SELECT dna.memory_text_of(CASE WHEN jsonb_typeof(fields -> u.kind) = 'array'
                                                  THEN ARRAY(SELECT jsonb_array_elements_text(fields -> u.kind)) END, u.spec)
                   FROM unnest(kinds, merged) WITH ORDINALITY AS u(kind, spec, o) ORDER BY u.o);
    snippets := ARRAY(SELECT left(coalesce(nullif(u.spec ->> 'summary', ''), u.body), 240)
                      FROM unnest(merged, texts) WITH ORDINALITY AS u(spec, body, o) ORDER BY u.o);
    -- Their texts, in one set-based write of the search rows (one BM25 sync for the batch): each
    -- memory's text is its passage 0, its further texts (views) passages 1, 2, …, all with its snippet.
    IF views IS NULL OR NOT EXISTS (SELECT 1 FROM unnest(views) AS v WHERE jsonb_array_length(v) > 0) THEN
        SELECT coalesce(jsonb_object_agg(r.kind || chr(31) || r.name, jsonb_build_object('action', r.action, 'embedded', r.embedded)),
                        '{}'::jsonb) AS by_key
        INTO idx
        FROM dna.index_documents(scope, kinds, names, texts, embs, model_id, NULL,
                                 CASE WHEN personal THEN '' ELSE tenant END, snippets, personal) AS r
        WHERE r.ord IS NOT NULL;
    ELSE
        WITH rows AS (
            SELECT u.o, 0 AS passage, u.kind, u.name, u.body, u.emb, u.snippet
            FROM unnest(kinds, names, texts, embs, snippets) WITH ORDINALITY AS u(kind, name, body, emb, snippet, o)
            UNION ALL
            SELECT u.o, x.ord::integer, u.kind, u.name, x.body, (view_embs[u.o] ->> (x.ord::integer - 1))::vector, u.snippet
            FROM unnest(kinds, names, views, snippets) WITH ORDINALITY AS u(kind, name, v, snippet, o)
            CROSS JOIN LATERAL jsonb_array_elements_text(u.v) WITH ORDINALITY AS x(body, ord))
        SELECT coalesce(jsonb_object_agg(k.key, jsonb_build_object('action', k.action, 'embedded', k.embedded)), '{}'::jsonb)
               AS by_key
        INTO idx
        FROM (SELECT r.kind || chr(31) || r.name AS key,
                     CASE WHEN bool_and(r.action = 'unchanged') THEN 'unchanged' WHEN bool_and(r.action = 'inserted') THEN 'inserted'
                          WHEN bool_and(r.action IN ('embedded', 'unchanged')) THEN 'embedded' ELSE 'updated' END AS action,
                     bool_and(r.embedded) AS embedded
              FROM dna.index_documents(scope,
                       ARRAY(SELECT x.kind FROM rows AS x ORDER BY x.o, x.passage), ARRAY(SELECT x.name FROM rows AS x ORDER BY x.o, x.passage),
                       ARRAY(SELECT x.body FROM rows AS x ORDER BY x.o, x.passage), ARRAY(SELECT x.emb FROM rows AS x ORDER BY x.o, x.passage),
                       model_id, NULL, CASE WHEN personal THEN '' ELSE tenant END,
                       ARRAY(SELECT x.snippet FROM rows AS x ORDER BY x.o, x.passage), personal,
                       ARRAY(SELECT x.passage FROM rows AS x ORDER BY x.o, x.passage)) AS r
              GROUP BY r.kind, r.name) AS k;
    END IF;
    SELECT jsonb_agg(jsonb_build_object('ord', u.ord, 'kind', u.kind, 'name', u.name, 'action', u.action,
                                        'version', v.version, 'recorded_at', dna.iso8601(v.created_at),
                                        'index', idx.by_key -> (u.kind || chr(31) || u.name)) ORDER BY u.ord)
    INTO out
    FROM unnest(ords, kinds, names, actions) AS u(ord, kind, name, action)
    LEFT JOIN LATERAL (SELECT v.version, v.created_at FROM dna.dna_versions AS v
                       WHERE v.scope = scope AND v.kind = u.kind AND v.api_version = apis ->> u.kind
                         AND v.name = u.name AND v.tenant = tenant
                       ORDER BY v.version DESC LIMIT 1) AS v ON true;
    RETURN out;
END
$$;

COMMENT ON FUNCTION dna.remember_many_write(text, text, boolean, text, integer[], text[], text[], jsonb[], jsonb[], vector[], jsonb[], jsonb[]) IS
'The write of dna.remember_many (arguments already checked and stamped: parallel arrays of the items'' positions, '
'Kinds, names, given and prepared specs, vectors; tenant resolved): the keys locked in key order (dna.lock_memory''s '
'advisory lock, then the rows), each spec restated over the stored one (dna.restated_spec), one INSERT … ON CONFLICT '
'of those that change (their versions appended by the dna_instances triggers), one dna.index_documents of every '
'item''s text (dna.memory_text_of with its Kind''s embed_fields; snippet: the summary, else the text, 240 '
'characters); views (per item, a JSON array of further texts, or NULL) are its passages 1, 2, … (view_embs: per item a '
'JSON array of their vectors, as text). Returns [{ord, kind, name, action, version, recorded_at, index {action, '
'embedded}}] in position order.';
