-- pydna SQL package — the catalog: which scopes exist, which is nearest to a name, and the rule
-- that scope and Kind names follow.
--
-- Every function here runs with the caller's rights (no SECURITY DEFINER): what it counts and
-- lists is what the caller's own SELECT sees under row-level security (sql/tenancy.sql).
-- Tables come from the alembic revisions; this file only defines functions (revision 0012_first_day).
--
-- The name rule (dna.check_scope, dna.check_kind): a scope or a Kind is 1 to 200 characters; the
-- first is a letter, a digit or "_"; the others are letters, digits or one of . _ - : / @ +.
-- Letters are A-Z and a-z, and every character above U+00A0 except the Unicode spaces (so
-- "café" and "日本語" are names, "My Scope!" and "bad kind!" are not). Names already stored
-- before the rule existed stay usable: a scope that has rows, or a Kind that dna.dna_kinds
-- registers, is accepted whatever its characters.
-- SQLSTATEs: 22023 (blank or outside the rule), 22001 (longer than 200 characters).

-- ---------------------------------------------------------------------------------------------
-- The name rule
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.name_follows_rule(value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- [^\x01-\xa0...] : every character above U+00A0 except the Unicode spaces and the BOM.
    SELECT value ~ ('^[A-Za-z0-9_' || chr(161) || '-' || chr(1114111) || ']'
                    || '[A-Za-z0-9._:/@+' || chr(161) || '-' || chr(1114111) || '-]*$')
       AND value !~ ('[' || chr(5760) || chr(8192) || '-' || chr(8202) || chr(8232) || chr(8233)
                     || chr(8239) || chr(8287) || chr(12288) || chr(65279) || ']')
$$;

COMMENT ON FUNCTION dna.name_follows_rule(text) IS
'True when value follows the name rule of scopes and Kinds (see sql/catalog.sql): first a letter, '
'digit or _, then letters, digits or . _ - : / @ +; letters are A-Z, a-z and every character above '
'U+00A0 except the Unicode spaces (U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) '
'and U+FEFF. No length check (dna.check_scope and dna.check_kind add it). NULL for NULL. Pure.';

CREATE OR REPLACE FUNCTION dna.check_scope(scope text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM dna.check_key('scope', scope, 200);           -- 22023 blank, 22001 longer than 200
    IF NOT dna.name_follows_rule(scope) AND NOT dna.scope_exists(scope) THEN
        RAISE EXCEPTION 'invalid scope %: a scope is 1-200 letters, digits and . _ - : / @ +, starting with a '
                        'letter, digit or _', quote_literal(scope)
            USING ERRCODE = '22023',
                  HINT = format('For example %L.', coalesce(nullif(trim(BOTH '-' FROM
                      regexp_replace(lower(scope), '[^a-z0-9._:/@+-]+', '-', 'g')), ''), 'my-scope'));
    END IF;
    RETURN scope;
END
$$;

COMMENT ON FUNCTION dna.check_scope(text) IS
'Returns scope when it follows the name rule (dna.name_follows_rule: 1-200 letters, digits and '
'. _ - : / @ +, first a letter, digit or _), or when rows already stand under it (a scope stored before '
'the rule stays usable). Errors: 22023 when NULL, blank or outside the rule (the hint suggests a name '
'that follows it), 22001 when longer than 200 characters. Called by the memory verbs (sql/memory.sql) '
'and the document verbs.';

CREATE OR REPLACE FUNCTION dna.check_kind(kind text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM dna.check_key('kind', kind, 200);             -- 22023 blank, 22001 longer than 200
    IF NOT dna.name_follows_rule(kind)
       AND NOT EXISTS (SELECT 1 FROM dna.dna_kinds AS k WHERE k.kind = check_kind.kind) THEN
        RAISE EXCEPTION 'invalid kind %: a Kind is 1-200 letters, digits and . _ - : / @ +, starting with a '
                        'letter, digit or _', quote_literal(kind)
            USING ERRCODE = '22023',
                  HINT = 'For example Doc, Note or Engram; the memory Kinds are listed by dna.recallable_kinds().';
    END IF;
    RETURN kind;
END
$$;

COMMENT ON FUNCTION dna.check_kind(text) IS
'Returns kind when it follows the name rule (dna.name_follows_rule: 1-200 letters, digits and '
'. _ - : / @ +, first a letter, digit or _) or is registered in dna.dna_kinds. Says nothing about '
'whether documents of that Kind exist. Errors: 22023 when NULL, blank or outside the rule, 22001 '
'when longer than 200 characters. Called by dna.check_memory_kind (the memory verbs) and the document verbs.';

-- ---------------------------------------------------------------------------------------------
-- Which scopes exist
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.scope_exists(scope text)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    w integer;
    found boolean;
BEGIN
    IF EXISTS (SELECT 1 FROM dna.dna_instances AS i WHERE i.scope = scope_exists.scope) THEN
        RETURN true;
    END IF;
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM dna.%I AS t WHERE t.scope = $1)', 'dna_search_docs_' || w)
            INTO found USING scope;
        IF found THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

COMMENT ON FUNCTION dna.scope_exists(text) IS
'True when a row the caller can see (row-level security) stands under scope: a record of '
'dna.dna_instances or a document of any dna_search_docs_<N>. One index probe per table.';

CREATE OR REPLACE FUNCTION dna.scope_names()
RETURNS SETOF text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    w integer;
    tables text[] := ARRAY['dna_instances'];
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        tables := tables || ('dna_search_docs_' || w);
    END LOOP;
    -- Each table's scopes by a loose index scan (one probe of its scope-leading key per scope),
    -- so the cost follows the number of scopes, not of rows. Citus refuses a recursive CTE without
    -- a filter on the distribution column (D9 of ../shared/research/citus-probe-3.md), so a table
    -- it distributes is read with DISTINCT, which every shard answers for its own scopes.
    -- Citus plans some call shapes of a delegated verb (inside BEGIN, EXPLAIN ANALYZE, a join) as a
    -- shard's task, which may not read the other shards: then 55000, which the hint catches.
    BEGIN
        RETURN QUERY EXECUTE (
            SELECT string_agg(CASE WHEN dna.citus_placement(format('dna.%I', tab)::regclass) = 'distributed'
                THEN format('(SELECT DISTINCT t.scope FROM dna.%I AS t)', tab)
                ELSE format(
                '(WITH RECURSIVE s(scope) AS (SELECT min(t.scope) FROM dna.%1$I AS t '
                'UNION ALL SELECT (SELECT min(t.scope) FROM dna.%1$I AS t WHERE t.scope > s.scope) '
                'FROM s WHERE s.scope IS NOT NULL) SELECT s.scope FROM s WHERE s.scope IS NOT NULL)', tab) END,
                ' UNION ') || ' ORDER BY 1'
            FROM unnest(tables) AS tab);
    EXCEPTION WHEN internal_error THEN
        IF SQLERRM NOT LIKE 'cannot execute a distributed query from a query on a shard%' THEN
            RAISE;
        END IF;
        RAISE EXCEPTION 'dna.scope_names: Citus runs this call as a shard''s task, which cannot read the other shards'
            USING ERRCODE = '55000',
                  HINT = 'Run SELECT * FROM dna.scope_names() (or dna.scopes()) on its own, outside a transaction block.';
    END;
END
$$;

COMMENT ON FUNCTION dna.scope_names()
IS 'Every scope under which the caller can see a row (dna.dna_instances or any dna_search_docs_<N>), '
'once each, sorted. Read-only; on one server the cost grows with the number of scopes (a loose index '
'scan per table); a table Citus distributes is read with SELECT DISTINCT scope (every shard, all its '
'rows), since Citus refuses the recursive CTE of the loose scan. Errors: 55000 on Citus inside a call '
'Citus runs as a shard''s task (inside a transaction block, EXPLAIN ANALYZE), where the other shards '
'cannot be read.';

CREATE OR REPLACE FUNCTION dna.scopes()
RETURNS TABLE (scope text, documents bigint, memories bigint, model_ids text[])
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_column
DECLARE
    w integer;
    docs text := '';
    memory_kinds text[] := dna.recallable_kinds();
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        docs := docs || CASE WHEN docs = '' THEN '' ELSE ' UNION ALL ' END
             || format('SELECT t.scope, t.kind, t.name, t.tenant, t.model_id FROM dna.%I AS t', 'dna_search_docs_' || w);
    END LOOP;
    IF docs = '' THEN
        docs := 'SELECT NULL::text, NULL::text, NULL::text, NULL::text, NULL::text WHERE false';
    END IF;
    RETURN QUERY EXECUTE format($q$
        WITH d(scope, kind, name, tenant, model_id) AS (%s),
        doc AS (
            SELECT d.scope,
                   count(DISTINCT (d.kind, d.name, d.tenant)) FILTER (WHERE NOT d.kind = ANY ($1)) AS documents,
                   array_agg(DISTINCT d.model_id ORDER BY d.model_id) AS model_ids
            FROM d GROUP BY d.scope
        ),
        mem AS (
            SELECT i.scope, count(*) AS memories FROM dna.dna_instances AS i
            WHERE i.kind = ANY ($1) GROUP BY i.scope
        ),
        names AS (
            SELECT doc.scope FROM doc UNION SELECT mem.scope FROM mem
            UNION SELECT i.scope FROM dna.dna_instances AS i
        )
        SELECT n.scope, coalesce(doc.documents, 0), coalesce(mem.memories, 0), coalesce(doc.model_ids, '{}')
        FROM names AS n LEFT JOIN doc ON doc.scope = n.scope LEFT JOIN mem ON mem.scope = n.scope
        ORDER BY n.scope COLLATE "C"
    $q$, docs) USING memory_kinds;
END
$$;

COMMENT ON FUNCTION dna.scopes() IS
'The scopes the caller can see rows in (row-level security decides), sorted (COLLATE "C"): documents = '
'distinct (kind, name, tenant) of search documents that are not of a memory Kind, counted once '
'whatever the number of models that index them; memories = records of a memory Kind '
'(dna.recallable_kinds()) in dna.dna_instances, forgotten ones included; model_ids = the models with '
'search documents there (memories included), sorted. Read-only; reads every search row (seconds at '
'millions of documents). `dna scopes` prints it.';

CREATE OR REPLACE FUNCTION dna.edit_distance(a text, b text)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    x text[] := regexp_split_to_array(a, '');
    y text[] := regexp_split_to_array(b, '');
    m integer := coalesce(array_length(x, 1), 0);
    n integer := coalesce(array_length(y, 1), 0);
    prev2 integer[];
    prev integer[];
    cur integer[];
    i integer;
    j integer;
    cost integer;
BEGIN
    IF m = 0 THEN RETURN n; END IF;
    IF n = 0 THEN RETURN m; END IF;
    prev := array_fill(0, ARRAY[n + 1], ARRAY[0]);        -- rows are 0-based: prev[j] = distance to y[1..j]
    FOR j IN 0 .. n LOOP
        prev[j] := j;
    END LOOP;
    FOR i IN 1 .. m LOOP
        cur := array_fill(0, ARRAY[n + 1], ARRAY[0]);
        cur[0] := i;
        FOR j IN 1 .. n LOOP
            cost := CASE WHEN x[i] = y[j] THEN 0 ELSE 1 END;
            cur[j] := least(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            IF i > 1 AND j > 1 AND x[i] = y[j - 1] AND x[i - 1] = y[j] THEN   -- a transposition
                cur[j] := least(cur[j], prev2[j - 2] + 1);
            END IF;
        END LOOP;
        prev2 := prev;
        prev := cur;
    END LOOP;
    RETURN prev[n];
END
$$;

COMMENT ON FUNCTION dna.edit_distance(text, text) IS
'The optimal-string-alignment distance between a and b: the fewest insertions, deletions, '
'substitutions and transpositions of two adjacent characters (Damerau-Levenshtein restricted; '
'''my-ap'' → ''my-app'' is 1, ''tema'' → ''team'' is 1). Characters compare exactly (case counts). '
'O(length(a) x length(b)). NULL for NULL. Pure.';

CREATE OR REPLACE FUNCTION dna.nearest_names(name text, candidates text[], n integer DEFAULT 3)
RETURNS TABLE (name text, distance integer)
LANGUAGE sql IMMUTABLE
AS $$
    -- The distance of the first 64 characters of each (a hint's work stays bounded whatever the text:
    -- an 80,000-character name cost seconds per candidate, and no name of a scope passes 200).
    SELECT c.name, dna.edit_distance(lower(left(nearest_names.name, 64)), lower(left(c.name, 64)))
    FROM unnest(candidates) AS c(name)
    WHERE nearest_names.name IS NOT NULL AND c.name <> nearest_names.name
    ORDER BY 2, (c.name NOT LIKE left(nearest_names.name, 1) || '%'), c.name COLLATE "C"
    LIMIT greatest(coalesce(n, 3), 0)
$$;

COMMENT ON FUNCTION dna.nearest_names(text, text[], integer) IS
'The n (default 3) of candidates nearest to name, name itself left out: by dna.edit_distance of the '
'lower-cased names, then those sharing its first character, then name. Every candidate is one however '
'far (distance says how far). Names are compared on their first 64 characters (bounded work for a long '
'text). Empty when name is NULL or no other candidate exists. The "did you mean" '
'of messages (dna.nearest_scopes, dna.lock_memory''s hint); as one line: dna.nearest_names_text. Pure.';

CREATE OR REPLACE FUNCTION dna.nearest_names_text(name text, candidates text[], n integer DEFAULT 3)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(string_agg(quote_literal(x.name), ', ' ORDER BY x.ord), 'none')
    FROM dna.nearest_names(name, candidates, n) WITH ORDINALITY AS x(name, distance, ord)
$$;

COMMENT ON FUNCTION dna.nearest_names_text(text, text[], integer) IS
'dna.nearest_names(name, candidates, n) as one line for messages: a, b, c nearest first, '
'or ''none'' when no other candidate exists. Pure.';

CREATE OR REPLACE FUNCTION dna.nearest_scopes(scope text, n integer DEFAULT 3)
RETURNS TABLE (scope text, distance integer)
LANGUAGE sql STABLE
AS $$
    SELECT x.name, x.distance FROM dna.nearest_names(scope, ARRAY(SELECT s.name FROM dna.scope_names() AS s(name)), n) AS x
$$;

COMMENT ON FUNCTION dna.nearest_scopes(text, integer) IS
'The n (default 3) existing scopes (dna.scope_names(): rows the caller can see) nearest to scope, '
'scope itself left out: dna.nearest_names over them (by dna.edit_distance of the lower-cased names, '
'then those sharing its first character, then name). Every scope is a candidate however far (distance '
'says how far), so a scope with no neighbour still gets the names that exist. Empty when no other '
'scope exists. For the "did you mean" of messages: dna.nearest_scopes_text.';

CREATE OR REPLACE FUNCTION dna.nearest_scopes_text(scope text, n integer DEFAULT 3)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN dna.nearest_names_text(scope, ARRAY(SELECT s.name FROM dna.scope_names() AS s(name)), n);
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    -- Citus ran the verb as a shard's task, where the other shards' scopes cannot be read: the
    -- message the hint belongs to must still be raised (D9).
    RETURN 'not listed from here (SELECT scope FROM dna.scopes() lists them)';
END
$$;

COMMENT ON FUNCTION dna.nearest_scopes_text(text, integer) IS
'dna.nearest_scopes(scope, n) as one line for messages: a, b, c nearest first, or ''none'' '
'when no other scope exists (dna.nearest_names_text over dna.scope_names()); on Citus, inside a call '
'run as a shard''s task (where dna.scope_names refuses, 55000), ''not listed from here (SELECT scope '
'FROM dna.scopes() lists them)''.';

-- ---------------------------------------------------------------------------------------------
-- Where a document was indexed from (dna.dna_document_sources, revision 0012_first_day)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.document_exists(scope text, kind text, name text, tenant text DEFAULT '')
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    w integer;
    found boolean;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM dna.%I AS t WHERE t.scope = $1 AND t.kind = $2 '
                       'AND t.name = $3 AND t.tenant = $4)', 'dna_search_docs_' || w)
            INTO found USING scope, kind, name, coalesce(tenant, '');
        IF found THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

COMMENT ON FUNCTION dna.document_exists(text, text, text, text) IS
'True when the caller can see a search document (kind, name, tenant) in scope, under any model_id. '
'One index probe per width table.';

CREATE OR REPLACE FUNCTION dna.record_document_sources(scope text, kinds text[], names text[], tenants text[],
                                                       sources text[])
RETURNS integer
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    scope := dna.check_scope(scope);
    IF cardinality(kinds) IS DISTINCT FROM cardinality(names) OR cardinality(kinds) IS DISTINCT FROM cardinality(tenants)
       OR cardinality(kinds) IS DISTINCT FROM cardinality(sources) THEN
        RAISE EXCEPTION 'kinds, names, tenants and sources must be arrays of one length (got %, %, %, %)',
            cardinality(kinds), cardinality(names), cardinality(tenants), cardinality(sources) USING ERRCODE = '22023';
    END IF;
    INSERT INTO dna.dna_document_sources AS s (scope, kind, name, tenant, source)
    SELECT DISTINCT ON (x.kind, x.name, coalesce(x.tenant, ''))
           scope, x.kind, x.name, coalesce(x.tenant, ''), x.source
    FROM unnest(kinds, names, tenants, sources) AS x(kind, name, tenant, source)
    WHERE x.source IS NOT NULL
    ORDER BY x.kind, x.name, coalesce(x.tenant, '')
    ON CONFLICT ON CONSTRAINT dna_document_sources_pkey DO UPDATE SET source = excluded.source, recorded_at = excluded.recorded_at
    WHERE s.source IS DISTINCT FROM excluded.source;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

COMMENT ON FUNCTION dna.record_document_sources(text, text[], text[], text[], text[]) IS
'Records where documents were indexed from (one source per (kind, name, tenant): e.g. the absolute path '
'of the file; `dna index` records it after writing), replacing an older source. NULL sources are '
'skipped. Returns the rows written. Advisory: no answer depends on it; dna.source_conflicts reads it. '
'Errors: 22023 (arrays of different lengths, bad scope).';

CREATE OR REPLACE FUNCTION dna.source_conflicts(scope text, kinds text[], names text[], tenants text[],
                                                sources text[])
RETURNS TABLE (kind text, name text, tenant text, source text, new_source text)
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_column
DECLARE
    r record;
BEGIN
    -- PL/pgSQL, and dna.document_exists called by its own statement per row: Citus plans no SQL
    -- set-returning function over dna_* tables in a parameterized query, nor a function reading
    -- dna_* tables inside a statement it pushes to a shard (sql/tenancy.sql, "Citus rules").
    FOR r IN SELECT s.kind, s.name, s.tenant, s.source, x.source AS new_source
             FROM unnest(kinds, names, tenants, sources) AS x(kind, name, tenant, source)
             JOIN dna.dna_document_sources AS s
               ON s.scope = source_conflicts.scope AND s.kind = x.kind AND s.name = x.name
              AND s.tenant = coalesce(x.tenant, '')
             WHERE x.source IS NOT NULL AND s.source <> x.source
             ORDER BY s.kind COLLATE "C", s.name COLLATE "C", s.tenant COLLATE "C" LOOP
        IF dna.document_exists(source_conflicts.scope, r.kind, r.name, r.tenant) THEN
            kind := r.kind; name := r.name; tenant := r.tenant; source := r.source; new_source := r.new_source;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.source_conflicts(text, text[], text[], text[], text[]) IS
'The documents about to be written (parallel arrays) that already stand in scope indexed from another '
'source (dna.dna_document_sources): kind, name, tenant, the recorded source and the new one. Writing '
'them replaces the documents of the other source: `dna index` warns before it does (and --name-prefix '
'keeps both). Read-only.';

-- What a document's source held when it was last written (dna_document_sources.digests, revision
-- 0021_holds_in_use): `dna index` asks which inputs are unchanged before it splits them into passages.

CREATE OR REPLACE FUNCTION dna.unchanged_sources(scope text, model_id text, kinds text[], names text[],
                                                 tenants text[], digests text[])
RETURNS TABLE (ord integer, passages integer)
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    tbl regclass;
    n integer;
BEGIN
    scope := dna.check_scope(scope);
    IF cardinality(kinds) IS DISTINCT FROM cardinality(names) OR cardinality(kinds) IS DISTINCT FROM cardinality(tenants)
       OR cardinality(kinds) IS DISTINCT FROM cardinality(digests) THEN
        RAISE EXCEPTION 'kinds, names, tenants and digests must be arrays of one length (got %, %, %, %)',
            cardinality(kinds), cardinality(names), cardinality(tenants), cardinality(digests) USING ERRCODE = '22023';
    END IF;
    IF model_id IS NULL OR NOT EXISTS (SELECT 1 FROM dna.dna_models AS m WHERE m.model_id = model_id) THEN
        RETURN;                                          -- a model never written here: nothing is unchanged
    END IF;
    tbl := dna.search_table(dna.model_dims(model_id));
    -- PL/pgSQL, one statement per candidate for the existence check: Citus plans no SQL set-returning
    -- function over dna_* tables in a parameterized query (sql/tenancy.sql, "Citus rules").
    FOR r IN SELECT x.ord::integer AS i, x.kind, x.name, coalesce(x.tenant, '') AS tenant
             FROM unnest(kinds, names, tenants, digests) WITH ORDINALITY AS x(kind, name, tenant, digest, ord)
             JOIN dna.dna_document_sources AS s
               ON s.scope = unchanged_sources.scope AND s.kind = x.kind AND s.name = x.name
              AND s.tenant = coalesce(x.tenant, '')
             WHERE x.digest IS NOT NULL AND s.digests ->> model_id = x.digest
             ORDER BY x.ord LOOP
        EXECUTE format('SELECT count(*) FROM %s AS t WHERE t.scope = $1 AND t.kind = $2 AND t.name = $3 '
                       'AND t.tenant = $4 AND t.model_id = $5', tbl)
            INTO n USING scope, r.kind, r.name, r.tenant, model_id;
        IF n > 0 THEN
            ord := r.i; passages := n;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.unchanged_sources(text, text, text[], text[], text[], text[]) IS
'(ord, passages): the 1-based positions of the inputs (parallel arrays kinds, names, tenants, digests), with '
'the rows their document has, whose digest is the '
'one recorded for model_id when the document was last written from its source (dna_document_sources.digests, '
'dna.record_source_digests) and whose document still stands under model_id: `dna index` skips them before '
'splitting them into passages (a digest is the client''s sha256 of everything that decides the rows: text, '
'title, format, metadata, passages on/off, the splitter''s version). Read-only; rows the caller cannot see '
'are never unchanged. Errors: 22023 (arrays of different lengths, bad scope).';

CREATE OR REPLACE FUNCTION dna.record_source_digests(scope text, model_id text, kinds text[], names text[],
                                                     tenants text[], sources text[], digests text[])
RETURNS integer
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
BEGIN
    scope := dna.check_scope(scope);
    PERFORM dna.check_key('model_id', model_id, 200);
    IF cardinality(kinds) IS DISTINCT FROM cardinality(names) OR cardinality(kinds) IS DISTINCT FROM cardinality(tenants)
       OR cardinality(kinds) IS DISTINCT FROM cardinality(sources) OR cardinality(kinds) IS DISTINCT FROM cardinality(digests) THEN
        RAISE EXCEPTION 'kinds, names, tenants, sources and digests must be arrays of one length (got %, %, %, %, %)',
            cardinality(kinds), cardinality(names), cardinality(tenants), cardinality(sources), cardinality(digests)
            USING ERRCODE = '22023';
    END IF;
    -- Another source, or another digest under this model: the digests of the other models are kept
    -- only while the source is the same.
    -- The proposed digests are {model_id: digest} (a digest is never NULL here), so "another digest
    -- under this model" is "the row's digests do not contain them": no variable in ON CONFLICT, which
    -- Citus sends to the scope's node as a parameter of no type (s.digests -> $1 failed there: 42P18
    -- "could not determine data type of parameter $1"; a cast to text is no node to deparse).
    INSERT INTO dna.dna_document_sources AS s (scope, kind, name, tenant, source, digests)
    SELECT DISTINCT ON (x.kind, x.name, coalesce(x.tenant, ''))
           scope, x.kind, x.name, coalesce(x.tenant, ''), x.source, jsonb_build_object(model_id, x.digest)
    FROM unnest(kinds, names, tenants, sources, digests) AS x(kind, name, tenant, source, digest)
    WHERE x.source IS NOT NULL AND x.digest IS NOT NULL
    ORDER BY x.kind, x.name, coalesce(x.tenant, '')
    ON CONFLICT ON CONSTRAINT dna_document_sources_pkey DO UPDATE
        SET source = excluded.source, recorded_at = excluded.recorded_at,
            digests = CASE WHEN s.source = excluded.source THEN s.digests || excluded.digests ELSE excluded.digests END
    WHERE s.source IS DISTINCT FROM excluded.source OR NOT coalesce(s.digests @> excluded.digests, false);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

COMMENT ON FUNCTION dna.record_source_digests(text, text, text[], text[], text[], text[], text[]) IS
'Records where documents were written from and their digest under model_id (parallel arrays; one row per '
'(kind, name, tenant) in dna_document_sources: source, digests = {model_id: digest, ...}); `dna index` '
'calls it after writing. Another source replaces the row and its digests; the same source keeps the digests '
'of the other model_ids. NULL sources or digests are skipped. Returns the rows written. Read by '
'dna.unchanged_sources and dna.source_conflicts. Errors: 22023 (arrays of different lengths, bad scope or '
'model_id).';

-- ---------------------------------------------------------------------------------------------
-- Text bounds (revision 0016_answers_and_bounds)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.text_tsvector_direct_bytes()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 100000
$$;

COMMENT ON FUNCTION dna.text_tsvector_direct_bytes() IS
'100000: texts of at most this many bytes are made a tsvector directly by dna.text_tsvector (their tsvector '
'is always far below PostgreSQL''s 1 MB (1048575-byte) tsvector limit); longer ones through its bounded path.';

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
        RETURN to_tsvector(cfg, body) || dna.identifier_tsvector(cfg, body);
    END IF;
    BEGIN
        RETURN to_tsvector(cfg, body) || dna.identifier_tsvector(cfg, body);
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
            RETURN to_tsvector(cfg, cut) || dna.identifier_tsvector(cfg, cut);
        EXCEPTION WHEN program_limit_exceeded THEN
            n := floor(n * 0.9)::integer;
        END;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.text_tsvector(regconfig, text) IS
'The tsvector of a text under a text search configuration, bounded: to_tsvector(cfg, body) and the lexemes '
'of its identifiers (dna.identifier_tsvector: on_commit, django.db.transaction, QuerySet whole and by their '
'parts; revision 0022_first_week) when it fits '
'PostgreSQL''s tsvector limit (1048575 bytes of lexemes and positions; always for a text of at most '
'dna.text_tsvector_direct_bytes() = 100000 bytes), else the tsvector of a prefix of the text that fits: 95% '
'of the share of the text the limit holds (from the size PostgreSQL reports), cut before a partial word, 10% '
'shorter until it fits; words past it are not found lexically '
'(index a long document as passages: `dna index --passages`, docs/passages.md). Never raises 54000. '
'What the search rows (column tsv of dna_search_docs_<width>), the history (dna.dna_versions.text_tsv), '
'dna.lexical_query and dna.bm25''s query lexemes are made of. NULL body: NULL. Pure.';

-- ---------------------------------------------------------------------------------------------
-- Vector bounds (revision 0016_answers_and_bounds)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.halfvec_max()
RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 65504::real
$$;

COMMENT ON FUNCTION dna.halfvec_max() IS
'65504: the largest finite half-precision value, the range of a halfvec component (the 3072-d HNSW index '
'is built on embedding::halfvec(3072)).';

CREATE OR REPLACE FUNCTION dna.storable_vector(v vector)
RETURNS vector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN v IS NULL OR vector_norm(v) <= dna.halfvec_max() THEN v   -- no component can pass the range
                WHEN (SELECT max(abs(x)) FROM unnest(v::real[]) AS x) > dna.halfvec_max() THEN l2_normalize(v)
                ELSE v END
$$;

COMMENT ON FUNCTION dna.storable_vector(vector) IS
'The vector the document door stores (dna.index_document, dna.index_documents, so dna.index_staged and '
'dna.remember): v itself, or, when a component lies beyond the halfvec range (|x| > dna.halfvec_max() = '
'65504), v scaled to unit length (l2_normalize). Normalised rather than refused because the dense lane is '
'cosine: scaling by a positive constant changes no similarity and no ranking, and it makes every width '
'behave alike (a 3072-d vector is indexed as halfvec, whose cast raised 22003 for such a component, while '
'384-d took it). NaN and infinite components never reach it: pgvector refuses them when the value is read '
'as a vector (22000 "NaN not allowed in vector" / "infinite value not allowed in vector"), before any '
'function runs. NULL: NULL. Pure.';
