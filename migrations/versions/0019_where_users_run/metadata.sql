-- pydna SQL package — metadata: what documents and memories carry beside their text, and the one
-- filter language that narrows search, recall and list_memories by it.
--
-- Every search row (dna_search_docs_<width>) and every record (dna_instances) has a column
-- metadata jsonb (NOT NULL, default '{}'; GIN jsonb_path_ops index, revision 0019_where_users_run,
-- topic metadata). A document's metadata is what it was given (a JSONL record's fields beyond the
-- known ones; dna.set_document_metadata). A memory's is derived from its spec by the write path
-- (dna.memory_metadata): spec.metadata plus the memory's own fields (tags, area, created_at, valid
-- window, conversation, session, speaker...), copied to its search rows by trigger (sql/memory_write.sql).
--
-- The filter language (dna.filter_sql compiles it to a predicate; dna.search puts that predicate
-- inside both lanes, before their top k). A filter is a JSON object:
--   {"field": value}                      equality (value a string, number, boolean or null)
--   {"field": {"op": value, ...}}         operators, several = all of them:
--       eq, ne                            equal / not equal (ne also matches a missing field)
--       in, nin                           one of / none of a list of scalars
--       gt, gte, lt, lte                  a number, or an ISO-8601 timestamp (compared as instants)
--       exists                            true: the field is there (even null); false: it is not
--       contains                          an array field holding every value given (one or a list)
--       contains_any                      an array field holding at least one of a list
--   {"and": [f, ...]}, {"or": [f, ...]}, {"not": f}
-- Several keys in one object are all required (an implicit and). "a.b" is the field b of the object
-- a. Equality and contains are containment (@>), which the GIN index serves; comparisons read the
-- field as a number or timestamp and a field of another type never matches. Errors: 22023 with a
-- hint (not an object, unknown operator, wrong type, empty list, nesting deeper than
-- dna.filter_max_depth() = 8, a list longer than 1000), 22001 (a filter over 65536 bytes).

-- ---------------------------------------------------------------------------------------------
-- Metadata values
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.check_metadata(metadata jsonb, what text DEFAULT 'metadata')
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF metadata IS NULL OR jsonb_typeof(metadata) = 'null' THEN
        RETURN '{}'::jsonb;
    END IF;
    IF jsonb_typeof(metadata) <> 'object' THEN
        RAISE EXCEPTION '% must be a JSON object, got a JSON %', what, jsonb_typeof(metadata)
            USING ERRCODE = '22023', HINT = 'For example {"user": "u1", "project": "kernel", "tags": ["a"]}.';
    END IF;
    IF octet_length(metadata::text) > 65536 THEN
        RAISE EXCEPTION '% is % bytes as JSON; the limit is 65536', what, octet_length(metadata::text)
            USING ERRCODE = '22001', HINT = 'Metadata is for filtering (user, project, source, tags, dates); put long text in the body.';
    END IF;
    RETURN metadata;
END
$$;

COMMENT ON FUNCTION dna.check_metadata(jsonb, text) IS
'Returns metadata when it is a JSON object of at most 65536 bytes (as text); NULL or JSON null: ''{}''. '
'Errors: 22023 (not an object), 22001 (too large); the message names the argument (what). Pure.';

CREATE OR REPLACE FUNCTION dna.memory_field_names()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['tags', 'area', 'affect', 'memory_type', 'created_at', 'valid_from', 'valid_to',
                 'conversation', 'session', 'turn', 'speaker', 'role', 'session_date']
$$;

COMMENT ON FUNCTION dna.memory_field_names() IS
'The keys of a memory''s metadata that come from the memory itself (dna.memory_metadata): tags, area, '
'affect, memory_type, created_at, valid_from, valid_to, and for a conversation''s turn conversation, '
'session, turn, speaker, role, session_date. spec.metadata may not use them (22023). Pure.';

CREATE OR REPLACE FUNCTION dna.memory_metadata(spec jsonb, valid_at tstzrange)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_typeof(spec -> 'metadata') = 'object' THEN spec -> 'metadata' ELSE '{}'::jsonb END
        || jsonb_strip_nulls(jsonb_build_object(
               'tags', CASE WHEN jsonb_typeof(spec -> 'tags') = 'array' THEN spec -> 'tags' END,
               'area', CASE WHEN jsonb_typeof(spec -> 'area') = 'string' AND spec ->> 'area' <> '' THEN spec -> 'area' END,
               'affect', CASE WHEN jsonb_typeof(spec -> 'affect') = 'string' THEN spec -> 'affect' END,
               'memory_type', CASE WHEN jsonb_typeof(spec -> 'memory_type') = 'string' THEN spec -> 'memory_type' END,
               'created_at', dna.iso8601(dna.parse_timestamptz(spec ->> 'created_at')),
               'valid_from', CASE WHEN NOT lower_inf(valid_at) THEN dna.iso8601(lower(valid_at)) END,
               'valid_to', CASE WHEN NOT upper_inf(valid_at) THEN dna.iso8601(upper(valid_at)) END))
        || CASE WHEN jsonb_typeof(spec -> 'conversation') = 'object' THEN jsonb_strip_nulls(jsonb_build_object(
               'conversation', spec #> '{conversation,id}', 'session', spec #> '{conversation,session}',
               'turn', spec #> '{conversation,turn}', 'speaker', spec #> '{conversation,speaker}',
               'role', spec #> '{conversation,role}', 'session_date', spec #> '{conversation,session_date}'))
           ELSE '{}'::jsonb END
$$;

COMMENT ON FUNCTION dna.memory_metadata(jsonb, tstzrange) IS
'A memory''s metadata (dna_instances.metadata, copied to its search rows; what filters read): spec.metadata '
'(an object) with the memory''s own fields over it: tags (array), area, affect, memory_type, created_at '
'(ISO-8601 UTC, dna.iso8601), valid_from / valid_to (the bounds of valid_at; valid_to only once it is '
'closed), and for a conversation''s turn (spec.conversation) conversation, session, turn, speaker, role, '
'session_date. Fields absent from the spec are absent here. Pure.';

-- ---------------------------------------------------------------------------------------------
-- The filter language
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.filter_max_depth()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 8
$$;

COMMENT ON FUNCTION dna.filter_max_depth() IS
'8: how deep a filter may nest (each and, or, not and field condition is one level). Pure.';

CREATE OR REPLACE FUNCTION dna.filter_operators()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte', 'exists', 'contains', 'contains_any']
$$;

COMMENT ON FUNCTION dna.filter_operators() IS
'The operators of a field condition in a filter (dna.filter_sql), in the order the docs list them. Pure.';

CREATE OR REPLACE FUNCTION dna.filter_number(value jsonb)
RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_typeof(value) = 'number' THEN value::numeric END
$$;

COMMENT ON FUNCTION dna.filter_number(jsonb) IS
'A JSON number as numeric; NULL for any other JSON value or NULL (so a comparison on it is not true). Pure.';

CREATE OR REPLACE FUNCTION dna.filter_timestamptz(value jsonb)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_typeof(value) = 'string' THEN dna.parse_timestamptz(value #>> '{}') END
$$;

COMMENT ON FUNCTION dna.filter_timestamptz(jsonb) IS
'A JSON string holding an ISO-8601 timestamp (dna.parse_timestamptz) as timestamptz; NULL for anything '
'else (so a comparison on it is not true). Pure.';

CREATE OR REPLACE FUNCTION dna.filter_refuse(at text, message text, hint text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION '%: %', at, message USING ERRCODE = '22023',
        HINT = hint || ' The filter language: docs/memory.md, "Filters".';
END
$$;

COMMENT ON FUNCTION dna.filter_refuse(text, text, text) IS
'Raises the refusal of a malformed filter: 22023, "<where in the filter>: <message>", the hint followed by '
'where the language is documented.';

CREATE OR REPLACE FUNCTION dna.filter_path_sql(path text[], target text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT format('(%s #> %L::text[])', target, path::text)
$$;

COMMENT ON FUNCTION dna.filter_path_sql(text[], text) IS
'SQL text of the JSON value at path inside the jsonb expression target (#>). Pure.';

CREATE OR REPLACE FUNCTION dna.filter_contains_sql(path text[], value jsonb, target text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    doc jsonb := value;
    i integer;
BEGIN
    -- {"a": {"b": value}} for the path a.b: containment (@>), served by the GIN index
    FOR i IN REVERSE cardinality(path) .. 1 LOOP
        doc := jsonb_build_object(path[i], doc);
    END LOOP;
    RETURN format('(%s @> %L::jsonb)', target, doc::text);
END
$$;

COMMENT ON FUNCTION dna.filter_contains_sql(text[], jsonb, text) IS
'SQL text of "target contains value at path" (target @> {"p1": {"p2": value}}): equality for a scalar value, '
'every element for an array value; what the GIN jsonb_path_ops index serves. Pure.';

CREATE OR REPLACE FUNCTION dna.filter_field_sql(path text[], cond jsonb, target text, at text, depth integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    op text;
    v jsonb;
    parts text[] := '{}';
    e jsonb;
    alts text[];
    cmp text;
    ts timestamptz;
    where_ text;
BEGIN
    IF depth > dna.filter_max_depth() THEN
        PERFORM dna.filter_refuse(at, format('the filter nests deeper than %s levels', dna.filter_max_depth()),
                                  'Flatten it: several keys of one object are already all required.');
    END IF;
    IF jsonb_typeof(cond) IN ('string', 'number', 'boolean', 'null') THEN
        RETURN dna.filter_contains_sql(path, cond, target);         -- {"field": value}: equality
    END IF;
    IF jsonb_typeof(cond) = 'array' THEN
        PERFORM dna.filter_refuse(at, 'a list is not a value to compare with',
                                  'One of several values: {"in": [...]}; an array field holding values: {"contains": [...]} (all) or {"contains_any": [...]}.');
    END IF;
    IF cond = '{}'::jsonb THEN
        PERFORM dna.filter_refuse(at, 'an empty condition', format('Give a value, or operators: %s.',
                                  array_to_string(dna.filter_operators(), ', ')));
    END IF;
    FOR op, v IN SELECT x.key, x.value FROM jsonb_each(cond) AS x ORDER BY x.key LOOP
        where_ := at || '.' || op;
        IF NOT op = ANY (dna.filter_operators()) THEN
            PERFORM dna.filter_refuse(where_, format('unknown operator %s', quote_literal(op)),
                format('Operators: %s (nearest: %s)%s.', array_to_string(dna.filter_operators(), ', '),
                       dna.nearest_names_text(ltrim(op, '$'), dna.filter_operators(), 1),
                       CASE WHEN op IN ('and', 'or', 'not') THEN format('; %s combines whole filters: {"%s": ...} at the top', op, op)
                            WHEN starts_with(op, '$') THEN '; operators are plain words, without $' ELSE '' END));
        END IF;
        IF op IN ('eq', 'ne') THEN
            IF jsonb_typeof(v) NOT IN ('string', 'number', 'boolean', 'null') THEN
                PERFORM dna.filter_refuse(where_, format('%s takes a string, number, boolean or null, got a JSON %s', op, jsonb_typeof(v)),
                                          'A list of values: in / nin; values inside an array field: contains.');
            END IF;
            parts := parts || CASE WHEN op = 'eq' THEN dna.filter_contains_sql(path, v, target)
                                   ELSE 'NOT ' || dna.filter_contains_sql(path, v, target) END;
        ELSIF op IN ('in', 'nin', 'contains_any') OR (op = 'contains' AND jsonb_typeof(v) = 'array') THEN
            IF jsonb_typeof(v) <> 'array' THEN
                PERFORM dna.filter_refuse(where_, format('%s takes a list, got a JSON %s', op, jsonb_typeof(v)),
                                          format('For example {"%s": ["a", "b"]}.', op));
            END IF;
            IF jsonb_array_length(v) > 1000 THEN
                PERFORM dna.filter_refuse(where_, format('%s lists %s values; the limit is 1000', op, jsonb_array_length(v)),
                                          'Narrow by another field, or split the request.');
            END IF;
            IF op IN ('contains', 'contains_any') AND jsonb_array_length(v) = 0 THEN
                PERFORM dna.filter_refuse(where_, format('%s takes a non-empty list', op),
                                          'Leave the condition out to match every row.');
            END IF;
            FOR e IN SELECT x FROM jsonb_array_elements(v) AS x LOOP
                IF jsonb_typeof(e) NOT IN ('string', 'number', 'boolean', 'null') THEN
                    PERFORM dna.filter_refuse(where_, format('%s takes scalars (strings, numbers, booleans, null), found a JSON %s',
                                                             op, jsonb_typeof(e)), 'Compare nested fields by their dotted path: {"a.b": 1}.');
                END IF;
            END LOOP;
            IF op = 'contains' THEN
                parts := parts || dna.filter_contains_sql(path, v, target);
            ELSE
                alts := ARRAY(SELECT dna.filter_contains_sql(path, CASE WHEN op = 'contains_any' THEN jsonb_build_array(x) ELSE x END, target)
                              FROM jsonb_array_elements(v) AS x);
                cmp := CASE WHEN cardinality(alts) = 0 THEN 'false' ELSE '(' || array_to_string(alts, ' OR ') || ')' END;
                parts := parts || CASE WHEN op = 'nin' THEN 'NOT ' || cmp ELSE cmp END;
            END IF;
        ELSIF op = 'contains' THEN
            IF jsonb_typeof(v) NOT IN ('string', 'number', 'boolean', 'null') THEN
                PERFORM dna.filter_refuse(where_, format('contains takes a value or a list of values, got a JSON %s', jsonb_typeof(v)),
                                          'For example {"tags": {"contains": "urgent"}} or {"tags": {"contains": ["a", "b"]}} (both).');
            END IF;
            parts := parts || dna.filter_contains_sql(path, jsonb_build_array(v), target);
        ELSIF op IN ('gt', 'gte', 'lt', 'lte') THEN
            cmp := CASE op WHEN 'gt' THEN '>' WHEN 'gte' THEN '>=' WHEN 'lt' THEN '<' ELSE '<=' END;
            IF jsonb_typeof(v) = 'number' THEN
                parts := parts || format('coalesce(dna.filter_number(%s) %s %s::numeric, false)',
                                         dna.filter_path_sql(path, target), cmp, quote_literal(v::text));
            ELSE
                ts := CASE WHEN jsonb_typeof(v) = 'string' THEN dna.parse_timestamptz(v #>> '{}') END;
                IF ts IS NULL THEN
                    PERFORM dna.filter_refuse(where_, format('%s takes a number or an ISO-8601 timestamp, got %s', op, v::text),
                                              'For example {"turn": {"gte": 3}} or {"created_at": {"gte": "2026-01-01", "lt": "2026-02-01T00:00:00Z"}}.');
                END IF;
                parts := parts || format('coalesce(dna.filter_timestamptz(%s) %s %L::timestamptz, false)',
                                         dna.filter_path_sql(path, target), cmp, dna.iso8601(ts));
            END IF;
        ELSIF op = 'exists' THEN
            IF jsonb_typeof(v) <> 'boolean' THEN
                PERFORM dna.filter_refuse(where_, format('exists takes true or false, got %s', v::text),
                                          'For example {"valid_to": {"exists": false}}.');
            END IF;
            parts := parts || format('%s IS %sNULL', dna.filter_path_sql(path, target), CASE WHEN v = 'true' THEN 'NOT ' ELSE '' END);
        END IF;
    END LOOP;
    RETURN CASE WHEN cardinality(parts) = 1 THEN parts[1] ELSE '(' || array_to_string(parts, ' AND ') || ')' END;
END
$$;

COMMENT ON FUNCTION dna.filter_field_sql(text[], jsonb, text, text, integer) IS
'SQL text of one field condition of a filter (the field at path of target; cond a value or an object of '
'operators, all required); at names the place in the filter for messages, depth its nesting. Errors as '
'dna.filter_sql. Pure.';

CREATE OR REPLACE FUNCTION dna.filter_node_sql(node jsonb, target text, at text, depth integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    key text;
    v jsonb;
    parts text[] := '{}';
    subs text[];
    path text[];
BEGIN
    IF depth > dna.filter_max_depth() THEN
        PERFORM dna.filter_refuse(at, format('the filter nests deeper than %s levels', dna.filter_max_depth()),
                                  'Flatten it: several keys of one object are already all required.');
    END IF;
    IF jsonb_typeof(node) IS DISTINCT FROM 'object' THEN
        PERFORM dna.filter_refuse(at, format('a filter is a JSON object, got a JSON %s', coalesce(jsonb_typeof(node), 'NULL')),
                                  'For example {"user": "u1", "tags": {"contains": "urgent"}}.');
    END IF;
    IF node = '{}'::jsonb THEN
        RETURN 'true';
    END IF;
    FOR key, v IN SELECT x.key, x.value FROM jsonb_each(node) AS x ORDER BY x.key LOOP
        IF key IN ('and', 'or') THEN
            IF jsonb_typeof(v) <> 'array' OR jsonb_array_length(v) = 0 THEN
                PERFORM dna.filter_refuse(at || '.' || key, format('%s takes a non-empty list of filters, got %s', key,
                                          CASE WHEN jsonb_typeof(v) = 'array' THEN 'an empty list' ELSE 'a JSON ' || jsonb_typeof(v) END),
                                          format('For example {"%s": [{"user": "u1"}, {"user": "u2"}]}.', key));
            END IF;
            subs := ARRAY(SELECT dna.filter_node_sql(x.value, target, format('%s.%s[%s]', at, key, x.ord - 1), depth + 1)
                          FROM jsonb_array_elements(v) WITH ORDINALITY AS x(value, ord) ORDER BY x.ord);
            parts := parts || ('(' || array_to_string(subs, CASE WHEN key = 'and' THEN ' AND ' ELSE ' OR ' END) || ')');
        ELSIF key = 'not' THEN
            parts := parts || ('NOT ' || dna.filter_node_sql(v, target, at || '.not', depth + 1));
        ELSE
            IF starts_with(key, '$') THEN
                PERFORM dna.filter_refuse(at || '.' || key, format('%s is not a field name', quote_literal(key)),
                    format('Operators are plain words without $ (%s, and, or, not), and field operators go inside the field: {"field": {"in": [...]}}.',
                           array_to_string(dna.filter_operators(), ', ')));
            END IF;
            path := string_to_array(key, '.');
            IF btrim(key) = '' OR length(key) > 200 OR '' = ANY (path) OR cardinality(path) > dna.filter_max_depth() THEN
                PERFORM dna.filter_refuse(at || '.' || key, format('%s is not a field name', quote_literal(key)),
                                          format('A field is 1-200 characters; a.b is the field b of the object a (at most %s parts, none empty).', dna.filter_max_depth()));
            END IF;
            parts := parts || dna.filter_field_sql(path, v, target, at || '.' || key, depth + 1);
        END IF;
    END LOOP;
    RETURN CASE WHEN cardinality(parts) = 1 THEN parts[1] ELSE '(' || array_to_string(parts, ' AND ') || ')' END;
END
$$;

COMMENT ON FUNCTION dna.filter_node_sql(jsonb, text, text, integer) IS
'SQL text of one filter object (its keys all required: and, or, not, or field conditions) over the jsonb '
'expression target; at names its place in the filter for messages, depth its nesting. Errors as dna.filter_sql. Pure.';

CREATE OR REPLACE FUNCTION dna.filter_sql(filter jsonb, target text DEFAULT 't.metadata')
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF filter IS NULL OR jsonb_typeof(filter) = 'null' THEN
        RETURN 'true';
    END IF;
    IF octet_length(filter::text) > 65536 THEN
        RAISE EXCEPTION 'filter is % bytes as JSON; the limit is 65536', octet_length(filter::text)
            USING ERRCODE = '22001', HINT = 'A long list of values belongs in one in (at most 1000), or in a field of its own.';
    END IF;
    RETURN dna.filter_node_sql(filter, target, 'filter', 1);
END
$$;

COMMENT ON FUNCTION dna.filter_sql(jsonb, text) IS
'Compiles a filter (the language of sql/metadata.sql: equality, eq, ne, in, nin, gt, gte, lt, lte on numbers '
'and ISO-8601 timestamps, exists, contains, contains_any, and/or/not; "a.b" a nested field) to SQL text of a '
'boolean over the jsonb expression target (default t.metadata), every value quoted as a literal. NULL, JSON '
'null or {}: ''true''. Equality, in and contains compile to containment (target @> ...), which a GIN '
'jsonb_path_ops index serves; comparisons read the field as a number or timestamp (a field of another type does '
'not match); ne and nin also match rows without the field; the predicate is never NULL for a non-NULL target. '
'dna.search, dna.recall and dna.list_memories run it inside their scans. Errors: 22023 naming the place '
'(filter.and[0].tags.contain) with a hint: not an object, unknown operator (the nearest named), a value of the '
'wrong type, an empty and/or/contains list, a list over 1000 values, a field name blank, over 200 characters or '
'with an empty part, nesting deeper than dna.filter_max_depth() (8); 22001 over 65536 bytes. Pure.';

CREATE OR REPLACE FUNCTION dna.check_filter(filter jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF filter IS NULL OR jsonb_typeof(filter) = 'null' OR filter = '{}'::jsonb THEN
        RETURN NULL;
    END IF;
    PERFORM dna.filter_sql(filter);                         -- 22023 / 22001 when malformed
    RETURN filter;
END
$$;

COMMENT ON FUNCTION dna.check_filter(jsonb) IS
'The filter a verb applies: NULL when there is none (NULL, JSON null or {}), else the filter itself once '
'dna.filter_sql accepts it (its errors otherwise). Pure.';

CREATE OR REPLACE FUNCTION dna.filter_matches(metadata jsonb, filter jsonb)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    hit boolean;
BEGIN
    EXECUTE 'SELECT ' || dna.filter_sql(filter, '$1') INTO hit USING coalesce(metadata, '{}'::jsonb);
    RETURN hit;
END
$$;

COMMENT ON FUNCTION dna.filter_matches(jsonb, jsonb) IS
'Whether metadata (NULL: {}) matches filter, evaluated by the predicate dna.filter_sql compiles (the one the '
'verbs run). For checking a filter by hand; the verbs never call it per row. Errors as dna.filter_sql. Pure.';

-- ---------------------------------------------------------------------------------------------
-- Writing a document's metadata
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.set_document_metadata(scope text, kinds text[], names text[], metadatas jsonb[],
                                                     tenant text DEFAULT '', personal boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    n integer;
    total integer := 0;
    bad record;
BEGIN
    scope := dna.check_scope(scope);                     -- the name rule (sql/catalog.sql): 22023 / 22001
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF coalesce(cardinality(kinds), 0) <> coalesce(cardinality(names), 0)
       OR coalesce(cardinality(metadatas), 0) <> coalesce(cardinality(names), 0) THEN
        RAISE EXCEPTION 'kinds, names and metadatas must be arrays of one length (got %, %, %)',
            cardinality(kinds), cardinality(names), cardinality(metadatas) USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(names), 0) = 0 THEN
        RETURN 0;
    END IF;
    -- Every element is checked before anything is written: the first bad one is named by position.
    FOR bad IN SELECT u.i, u.kind, u.name, u.m FROM unnest(kinds, names, metadatas) WITH ORDINALITY AS u(kind, name, m, i)
               ORDER BY u.i LOOP
        PERFORM dna.check_metadata(bad.m, format('metadata of document %s (%s/%s)', bad.i, bad.kind, bad.name));
        IF dna.kind_has_trait(bad.kind, 'memory.recallable') THEN
            RAISE EXCEPTION 'document % (%/%): % is a memory Kind, whose metadata comes from the memory', bad.i,
                bad.kind, bad.name, bad.kind USING ERRCODE = '22023',
                HINT = 'Remember it again with spec.metadata (dna.remember).';
        END IF;
    END LOOP;
    SELECT u.kind, u.name, min(u.i) AS first, max(u.i) AS last INTO bad
    FROM unnest(kinds, names) WITH ORDINALITY AS u(kind, name, i)
    GROUP BY u.kind, u.name HAVING count(*) > 1 ORDER BY min(u.i) LIMIT 1;
    IF bad.first IS NOT NULL THEN
        RAISE EXCEPTION 'document %/% appears twice in one call (positions % and %)', bad.kind, bad.name, bad.first, bad.last
            USING ERRCODE = '22023';
    END IF;
    -- Every passage of the document, under every model: metadata is the document's, not a row's.
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('UPDATE dna.%I AS t SET metadata = u.m
                        FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS u(kind, name, m)
                        WHERE t.scope = $1 AND t.kind = u.kind AND t.name = u.name AND t.tenant = $5
                          AND t.metadata IS DISTINCT FROM coalesce(u.m, ''{}''::jsonb)', 'dna_search_docs_' || w)
            USING scope, kinds, names, ARRAY(SELECT coalesce(x, '{}'::jsonb) FROM unnest(metadatas) AS x), tenant;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    RETURN total;
END
$$;

COMMENT ON FUNCTION dna.set_document_metadata(text, text[], text[], jsonb[], text, boolean) IS
'Sets the metadata (a JSON object, NULL = {}) of documents already indexed in scope (parallel arrays kinds, '
'names, metadatas; tenant, or personal => true for the caller''s personal partition): every passage row of '
'each, under every model_id, gets it, replacing what it had; the text, vectors and BM25 index are untouched. '
'Client.index (and `dna index`) call it after each batch with each record''s metadata (a JSONL record''s fields '
'beyond the known ones). Returns the rows changed (0 for a document not indexed). Every element is checked '
'first. Errors: 22023 (arrays of different lengths, metadata not an object, a memory Kind: its metadata comes '
'from dna.remember''s spec.metadata, a document twice), 22001 (metadata over 65536 bytes), 42501 (tenant).';
