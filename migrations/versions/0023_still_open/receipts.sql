-- pydna SQL package — receipts: a stored record of one answer, and its replay (issue 15 item 2).
--
-- dna.take_receipt(verb, args, keep_query) runs dna.search or a read-only dna.recall with the named
-- arguments in args and stores, in dna.dna_search_receipts, what is needed to ask the same question
-- again and to tell whether the answer is the same: the arguments as run (with the moment and model
-- the answer depended on pinned), salted SHA-256 digests of the query text, of the query embedding
-- and of all inputs together, the settings that shaped the answer (the scope's search configuration,
-- the fusion and its parameters, the dense lane's path, ef_search and iterative scan, the BM25
-- parameters, the schema revision, pgvector's version) and the ordered result ids with their scores.
-- The query text and embedding are stored only with keep_query => true.
-- dna.replay(receipt_id) re-runs the stored question and answers {match, ids_then, ids_now,
-- first_difference, settings_changed, ...}.
--
-- The table comes from revision 0016_answers_and_bounds (before_receipts.sql); it carries the tenant
-- policy of every dna_* data table (dna.protected_tables), so a receipt is visible to exactly the
-- roles that can see the tenant it was taken in. Receipts are never rewritten (UPDATE raises 55000);
-- DELETE removes them (retention is the operator's: DELETE ... WHERE taken_at < ...).
-- SQLSTATEs: 22023 invalid argument (unknown verb or argument, a query or embedding whose digest is
-- not the receipt's, a query the receipt did not keep and the caller did not pass), P0002 no receipt
-- visible under that id, 55000 UPDATE of a receipt; the verb's own errors pass through unchanged.

CREATE OR REPLACE FUNCTION dna.receipt_verb(verb text)
RETURNS regprocedure
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    fn regprocedure;
BEGIN
    IF verb IS NULL OR verb NOT IN ('search', 'recall') THEN
        RAISE EXCEPTION 'verb must be search or recall, got %', coalesce(quote_literal(verb), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'verb is ''search'' (dna.search) or ''recall'' (a read-only dna.recall).';
    END IF;
    SELECT p.oid::regprocedure INTO fn FROM pg_catalog.pg_proc AS p
    WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = verb
    ORDER BY p.pronargs DESC LIMIT 1;
    RETURN fn;
END
$$;

COMMENT ON FUNCTION dna.receipt_verb(text) IS
'The function a receipt''s verb runs: ''search'' => dna.search, ''recall'' => dna.recall (the installed '
'signature, read from the catalog, so receipts follow the verbs'' arguments as they are). 22023 otherwise.';

CREATE OR REPLACE FUNCTION dna.receipt_arg(fn text, name text, type text, value jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    state text;
    reason text;
    how text;
    typ regtype;
BEGIN
    -- The type is a type name, read by PostgreSQL's own parser (to_regtype): never text spliced into SQL.
    BEGIN
        typ := to_regtype(type);
    EXCEPTION WHEN syntax_error THEN                     -- 'text, (SELECT 1/0)': no type name at all
        typ := NULL;
    END;
    IF typ IS NULL THEN
        RAISE EXCEPTION 'dna.receipt_arg: % is not a type name', coalesce(quote_literal(type), 'NULL')
            USING ERRCODE = '22023', HINT = 'Give a type as format_type prints it, e.g. integer, text[], vector.';
    END IF;
    type := format_type(typ, NULL);
    IF value IS NULL OR jsonb_typeof(value) = 'null' THEN
        RETURN;                                          -- NULL: the argument's NULL
    END IF;
    BEGIN
        -- The cast dna.receipt_call makes: a JSON array to an SQL array, anything else through its text.
        IF type LIKE '%[]' AND jsonb_typeof(value) = 'array' THEN
            EXECUTE format('SELECT ARRAY(SELECT jsonb_array_elements_text($1))::%s', typ) USING value;
        ELSE
            EXECUTE format('SELECT ($1 #>> ''{}'')::%s', typ) USING value;
        END IF;
    EXCEPTION WHEN data_exception THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, reason = MESSAGE_TEXT;
        how := CASE
            WHEN type LIKE '%[]' THEN format('a JSON array of %s values', left(type, -2))
            WHEN type IN ('integer', 'bigint', 'smallint') THEN format('a JSON number (an integer within the range of %s)', type)
            WHEN type IN ('double precision', 'real', 'numeric') THEN 'a JSON number'
            WHEN type = 'boolean' THEN 'true or false'
            WHEN type LIKE 'timestamp%' THEN 'an ISO 8601 string, e.g. "2026-12-01T17:00:00Z"'
            WHEN type IN ('vector', 'halfvec') THEN 'a JSON array of numbers ([0.12, -0.03, ...]) or pgvector''s text "[0.12,-0.03,...]"'
            ELSE format('a JSON value that PostgreSQL reads as %s', type) END;
        RAISE EXCEPTION 'args.% of dna.% must be %, got %: %', name, fn, type, value::text, reason
            USING ERRCODE = state, HINT = format('Give args.%s as %s, or null for the argument''s NULL.', name, how);
    END;
END
$$;

COMMENT ON FUNCTION dna.receipt_arg(text, text, text, jsonb) IS
'Checks that the JSON value of argument name (of function fn, for messages) casts to its declared type '
'as dna.receipt_call casts it (a JSON array to an SQL array, anything else through its text; JSON null '
'is NULL). Raises the cast''s own SQLSTATE (22P02 invalid text, 22003 out of range, 22007 bad timestamp, '
'...) with a message naming args.<name>, the function, the type and the value, and a hint of the JSON to '
'give. Used by dna.take_receipt and dna.receipt_call, so a malformed argument is refused by name before '
'anything runs. type is read as a type name (to_regtype; 22023 when it is none), never spliced into SQL.';

CREATE OR REPLACE FUNCTION dna.receipt_required_args(verb text, args jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    fn regprocedure := dna.receipt_verb(verb);
    missing text;
BEGIN
    -- The arguments without a default (the first pronargs - pronargdefaults), query and query_embedding
    -- apart (a receipt may keep neither: an empty query is the verb's to judge).
    SELECT string_agg(format('args.%s', n.name), ', ' ORDER BY n.ord) INTO missing
    FROM pg_catalog.pg_proc AS p
    CROSS JOIN LATERAL unnest(p.proargnames) WITH ORDINALITY AS n(name, ord)
    WHERE p.oid = fn AND n.ord <= p.pronargs - p.pronargdefaults
      AND n.name NOT IN ('query', 'query_embedding', 'explain')
      AND NOT (args ? n.name AND jsonb_typeof(args -> n.name) <> 'null');
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'dna.% needs %: a receipt gives every argument without a default', verb, missing
            USING ERRCODE = '22023',
                  HINT = 'For example {"scope": "docs", "query": "rank fusion", "k": 10}; dna.scopes() lists the scopes.';
    END IF;
END
$$;

COMMENT ON FUNCTION dna.receipt_required_args(text, jsonb) IS
'Refuses (22023, naming each args.<name>) a receipt''s args that lack an argument of dna.search / '
'dna.recall (verb) without a default (scope), so dna.take_receipt never reaches the verb with a call that '
'does not resolve (42883). Query and query_embedding are given apart and never required here.';

CREATE OR REPLACE FUNCTION dna.receipt_call(verb text, args jsonb)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    fn regprocedure := dna.receipt_verb(verb);
    call text;
    a record;
    unknown text;
BEGIN
    IF args IS NULL OR jsonb_typeof(args) <> 'object' THEN
        RAISE EXCEPTION 'args must be a JSON object of dna.%''s named arguments, got %', verb,
            coalesce(jsonb_typeof(args), 'NULL') USING ERRCODE = '22023',
            HINT = 'For example {"scope": "docs", "query": "rank fusion", "k": 10}.';
    END IF;
    SELECT string_agg(quote_literal(x.key), ', ' ORDER BY x.key) INTO unknown
    FROM jsonb_object_keys(args) AS x(key)
    WHERE x.key IN ('query', 'query_embedding', 'explain')
       OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc AS p, unnest(p.proargnames) AS n(name)
                      WHERE p.oid = fn AND n.name = x.key);
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'dna.% has no argument % a receipt can set', verb, unknown USING ERRCODE = '22023',
            HINT = 'query and query_embedding are given beside the other arguments; explain is the receipt''s.';
    END IF;
    PERFORM dna.receipt_required_args(verb, args);
    -- query ($1) and query_embedding ($2) apart; every other argument of args as a literal of its
    -- declared type: a JSON array as an SQL array, anything else through its text. Literals, not
    -- expressions over a parameter: Citus, delegating the call to the scope's node, sent
    -- ($3 ->> 'valid_time')::timestamptz as a cast from cstring, which the worker refused.
    call := format('dna.%I(query => $1, query_embedding => $2, explain => true', verb);
    FOR a IN SELECT n.name, format_type(t.oid, NULL) AS type, t.typcategory = 'A' AS is_array
             FROM pg_catalog.pg_proc AS p
             CROSS JOIN LATERAL unnest(p.proargnames, p.proargtypes::oid[]) AS n(name, type)
             JOIN pg_catalog.pg_type AS t ON t.oid = n.type
             WHERE p.oid = fn AND args ? n.name
             ORDER BY n.name LOOP
        PERFORM dna.receipt_arg(verb, a.name, a.type, args -> a.name);   -- a malformed value: refused by name
        call := call || format(', %I => %L::%s', a.name,
            CASE WHEN a.is_array AND jsonb_typeof(args -> a.name) = 'array'
                 THEN ARRAY(SELECT jsonb_array_elements_text(args -> a.name))::text
                 ELSE args ->> a.name END, a.type);
    END LOOP;
    RETURN call || ')';
END
$$;

COMMENT ON FUNCTION dna.receipt_call(text, jsonb) IS
'The SQL call of dna.search / dna.recall (verb) with the named arguments of args (a JSON object: '
'each key an argument of the installed function, each value a literal of its declared type; a JSON array '
'becomes an SQL array), query => $1, query_embedding => $2 and explain => true ($3 stays args). '
'22023 when args is not an object, or names an argument the function lacks, or names query, '
'query_embedding or explain (given apart); a value that does not cast to its argument''s type raises '
'the cast''s SQLSTATE naming the argument (dna.receipt_arg).';

CREATE OR REPLACE FUNCTION dna.receipt_digest(salt uuid, payload text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT encode(sha256(convert_to(salt::text || ':' || payload, 'UTF8')), 'hex')
$$;

COMMENT ON FUNCTION dna.receipt_digest(uuid, text) IS
'Hex SHA-256 (64 characters) of salt || '':'' || payload in UTF-8; salt is the receipt id, so equal '
'queries in two receipts have different digests and no precomputed table matches one. A digest proves '
'that a given text is the receipt''s; it does not hide a guessable query from a role that can read the '
'receipt (row-level security decides who can). Pure.';

CREATE OR REPLACE FUNCTION dna.receipt_inputs_digest(receipt_id uuid, verb text, scope text, tenant text, args jsonb,
                                                     query_digest text, embedding_digest text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- jsonb's text is canonical: keys sorted, no duplicates, numbers normalised.
    SELECT dna.receipt_digest(receipt_id, jsonb_build_object(
        'verb', verb, 'scope', scope, 'tenant', tenant, 'args', args,
        'query_sha256', query_digest, 'query_embedding_sha256', embedding_digest)::text)
$$;

COMMENT ON FUNCTION dna.receipt_inputs_digest(uuid, text, text, text, jsonb, text, text) IS
'The digest of a receipt''s canonical inputs: dna.receipt_digest of the jsonb text (canonical: sorted '
'keys) of {verb, scope, tenant, args, query_sha256, query_embedding_sha256}. Pure.';

CREATE OR REPLACE FUNCTION dna.receipt_query_digests(receipt_id uuid, query text, query_embedding vector)
RETURNS TABLE (query_digest text, embedding_digest text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- The embedding's text is pgvector's shortest round-trip form of its float4 components: exact.
    SELECT dna.receipt_digest(receipt_id, CASE WHEN query IS NULL THEN 'query null' ELSE 'query ' || query END),
           CASE WHEN query_embedding IS NOT NULL
                THEN dna.receipt_digest(receipt_id, 'query_embedding ' || query_embedding::text) END
$$;

COMMENT ON FUNCTION dna.receipt_query_digests(uuid, text, vector) IS
'(query_digest, embedding_digest) of a receipt: dna.receipt_digest of the query text (a NULL query '
'has its own digest) and of the query embedding''s text (pgvector''s exact float4 form); '
'embedding_digest NULL without an embedding. Pure.';

CREATE OR REPLACE FUNCTION dna.receipt_leaves(doc jsonb)
RETURNS TABLE (path text, value jsonb)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH RECURSIVE walk(path, value) AS (
        SELECT e.key, e.value FROM jsonb_each(CASE WHEN jsonb_typeof(doc) = 'object' THEN doc ELSE '{}' END) AS e
        UNION ALL
        SELECT w.path || '.' || e.key, e.value FROM walk AS w, jsonb_each(w.value) AS e
        WHERE jsonb_typeof(w.value) = 'object'
    )
    SELECT w.path, w.value FROM walk AS w WHERE jsonb_typeof(w.value) <> 'object' OR w.value = '{}'
$$;

COMMENT ON FUNCTION dna.receipt_leaves(jsonb) IS
'The leaves of a JSON object as (dotted path, value): nested objects are walked, arrays and scalars '
'(and empty objects) are leaves. Used to name the settings that changed between a receipt and its replay. Pure.';

CREATE OR REPLACE FUNCTION dna.receipt_revision()
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v text;
BEGIN
    IF to_regclass('public.dna_alembic_version') IS NOT NULL THEN   -- absent when installed from printed SQL
        EXECUTE 'SELECT min(version_num) FROM public.dna_alembic_version' INTO v;
    END IF;
    RETURN v;
END
$$;

COMMENT ON FUNCTION dna.receipt_revision() IS
'The schema''s alembic revision (public.dna_alembic_version), NULL when that table is absent: a receipt '
'records which release of the SQL package answered.';

CREATE OR REPLACE FUNCTION dna.receipt_settings(verb text, scope text, model_id text, answer jsonb, keep_query boolean)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    cfg jsonb;
BEGIN
    -- The scope's settings by their own statement (sql/tenancy.sql, "Citus rules"); the same object.
    cfg := (SELECT to_jsonb(c) || jsonb_build_object('ts_config', c.ts_config::text) FROM dna.search_config(scope) AS c);
    RETURN jsonb_build_object(
        'search_config', cfg,
        'model', (SELECT jsonb_build_object('model_id', m.model_id, 'dims', m.dims, 'query_prefix', m.query_prefix,
                                            'document_prefix', m.document_prefix)
                  FROM dna.dna_models AS m WHERE m.model_id = receipt_settings.model_id),
        'exact_scan_rows', dna.exact_scan_rows(),
        'revision', dna.receipt_revision(),
        'pgvector', (SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'vector'),
        -- The answer's own account (dna.search's / dna.recall's explain), without what the data
        -- decided (candidate counts, the lexical certificate) and without the inputs (filters: in args);
        -- the query's lexemes only when the query is kept.
        'answer', CASE WHEN answer IS NULL OR jsonb_typeof(answer) <> 'object' THEN NULL   -- no hit: no account
                       WHEN verb = 'search'
                       THEN answer #- '{dense,candidates}' #- '{dense,removed_by_floor}' #- '{lexical,candidates}'
                                   #- '{lexical,removed_by_floor}' #- '{lexical,exact}' #- '{lexical,cut_at}'
                                   #- '{fused_candidates}' #- '{filters}'
                                   #- CASE WHEN keep_query THEN '{}' ELSE '{lexical,terms}' END::text[]
                       ELSE answer #- '{pool,returned}' #- '{pool,in_force}' #- '{pool,dropped}' #- '{filters}' END);
END
$$;

COMMENT ON FUNCTION dna.receipt_settings(text, text, text, jsonb, boolean) IS
'The settings that shape an answer, as a receipt keeps them: search_config (dna.search_config(scope)), '
'model (dna_models: dims, role prefixes), exact_scan_rows (dna.exact_scan_rows()), revision (the schema''s '
'alembic revision), pgvector (extension version), answer (the verb''s explain without candidate counts, '
'certificate and filters: for search the fusion and its parameters, degradation, the dense lane''s path, '
'exact rule, ef_search, iterative scan and depth, BM25 k1/b/ts_config/depth, and the query''s lexemes only '
'with keep_query; for recall its ranking, decay, pool depth and degradations). STABLE.';

CREATE OR REPLACE FUNCTION dna.receipt_run(verb text, args jsonb, query text, query_embedding vector)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    call text := dna.receipt_call(verb, args);
    out jsonb;
BEGIN
    IF verb = 'search' THEN
        EXECUTE format('SELECT coalesce(jsonb_agg(to_jsonb(h) - ''ordinality'' ORDER BY h.ordinality), ''[]'')
                        FROM %s WITH ORDINALITY AS h', call)
            INTO out USING query, query_embedding, args;
        RETURN jsonb_build_object(
            'hits', out,
            'results', (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', h ->> 'kind', 'name', h ->> 'name',
                                                                     'tenant', h ->> 'tenant', 'passage', (h ->> 'passage')::integer,
                                                                     'score', h -> 'score') ORDER BY o), '[]')
                        FROM jsonb_array_elements(out) WITH ORDINALITY AS e(h, o)),
            'answer', out -> 0 -> 'explain' -> 'answer');
    END IF;
    EXECUTE format('SELECT %s', call) INTO out USING query, query_embedding, args;
    RETURN jsonb_build_object(
        'answer_full', out,
        'results', (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', h ->> 'kind', 'name', h ->> 'name',
                                                                 'tenant', h ->> 'tenant', 'score', h -> 'score') ORDER BY o), '[]')
                    FROM jsonb_array_elements(out -> 'hits') WITH ORDINALITY AS e(h, o)),
        'answer', out -> 'explain');
END
$$;

COMMENT ON FUNCTION dna.receipt_run(text, jsonb, text, vector) IS
'Runs dna.search / dna.recall (verb) with args (dna.receipt_call) and explain => true; returns '
'{results: the ordered [{kind, name, tenant, passage (search), score}], answer: the verb''s explain of '
'the whole answer, hits (search: every hit row as JSON) or answer_full (recall: its answer)}.';

CREATE OR REPLACE FUNCTION dna.receipt_diversity(args jsonb, answer jsonb, fallback text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- The answer's own account first (its explain.diversity: the method and the values it ran with),
    -- then the arguments as given, then fallback: the default of the release that answered.
    SELECT CASE
        WHEN jsonb_typeof(answer -> 'diversity') = 'object' AND answer -> 'diversity' ? 'method'
        THEN args || jsonb_build_object('diversity', answer -> 'diversity' ->> 'method')
                  || jsonb_strip_nulls(jsonb_build_object('duplicate_similarity', answer -> 'diversity' -> 'duplicate_similarity',
                                                          'mmr_lambda', answer -> 'diversity' -> 'mmr_lambda'))
        WHEN jsonb_typeof(args -> 'diversity') = 'string' THEN args
        ELSE args || jsonb_build_object('diversity', CASE WHEN fallback = 'collapse' AND jsonb_typeof(args -> 'mmr_lambda') = 'number'
                                                          THEN 'mmr' ELSE fallback END)
    END
$$;

COMMENT ON FUNCTION dna.receipt_diversity(jsonb, jsonb, text) IS
'A receipt''s args (jsonb object) with the diversity its answer ran with pinned (revision 0023, topic '
'receipt_diversity): from answer (the verb''s explain of the answer, or a receipt''s settings.answer) when it '
'has a diversity account: diversity => its method, duplicate_similarity and mmr_lambda => its values where '
'not null; else args as they are when they name a diversity; else diversity => fallback (''collapse'': '
'''mmr'' when args give mmr_lambda). dna.take_receipt passes ''collapse'' (the verbs'' default since '
'0022_first_week); dna.replay passes, for a receipt that recorded none, the default of the revision that took '
'it: ''off'' before 0022_first_week (no diversity then), ''collapse'' from it. Pure.';

CREATE OR REPLACE FUNCTION dna.take_receipt(verb text, args jsonb, keep_query boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    rid uuid := gen_random_uuid();
    query text;
    emb vector;
    explain boolean;
    run jsonb;
    tenant text;
    scope text;
    model_id text;
    digests record;
    settings jsonb;
    out jsonb;
BEGIN
    PERFORM dna.receipt_verb(verb);
    IF args IS NULL OR jsonb_typeof(args) <> 'object' THEN
        RAISE EXCEPTION 'args must be a JSON object of dna.%''s named arguments, got %', verb,
            coalesce(jsonb_typeof(args), 'NULL') USING ERRCODE = '22023',
            HINT = 'For example {"scope": "docs", "query": "rank fusion", "k": 10}.';
    END IF;
    PERFORM dna.receipt_required_args(verb, args);
    PERFORM dna.receipt_arg(verb, 'query_embedding', 'vector', args -> 'query_embedding');
    PERFORM dna.receipt_arg('take_receipt', 'explain', 'boolean', args -> 'explain');
    PERFORM dna.receipt_arg(verb, 'reconsolidate', 'boolean', args -> 'reconsolidate');
    query := args ->> 'query';
    emb := (args ->> 'query_embedding')::vector;       -- a JSON array of numbers or pgvector's text
    explain := coalesce((args ->> 'explain')::boolean, false);
    args := args - 'query' - 'query_embedding' - 'explain';
    IF verb = 'recall' THEN
        -- A receipt's recall is read-only: a reconsolidating recall changes the memories it ranks,
        -- so its replay could not compare.
        IF coalesce((args ->> 'reconsolidate')::boolean, false) THEN
            RAISE EXCEPTION 'reconsolidate must be false in a receipt: a receipt''s recall is read-only'
                USING ERRCODE = '22023',
                      HINT = 'Pass reconsolidate false or leave it out (a receipt sets it false); dna.recall itself '
                             'reinforces what it surfaces.';
        END IF;
        args := args || '{"reconsolidate": false}';
    ELSE
        -- Pinned so that a replay asks the same question: the validity moment (valid_time; JSON null
        -- = no validity filter, kept) and the model (model_id NULL = the scope's, as dna.search picks it).
        IF NOT args ? 'valid_time' THEN
            args := args || jsonb_build_object('valid_time', dna.iso8601(now()));
        END IF;
        model_id := coalesce(args ->> 'model_id', dna.scope_model(args ->> 'scope', vector_dims(emb)));
        args := args || jsonb_build_object('model_id', model_id);
    END IF;
    run := dna.receipt_run(verb, args, query, emb);
    -- Pinned from the answer: the diversity it ran with (a later default cannot change the replay).
    args := dna.receipt_diversity(args, run -> 'answer', 'collapse');
    IF verb = 'recall' THEN
        -- Pinned from the answer: the world time the memory factors were computed at, the model, the decay.
        args := args || jsonb_build_object('now', run -> 'answer_full' ->> 'now', 'model_id', run -> 'answer_full' ->> 'model_id',
                                           'decay', run -> 'answer_full' ->> 'decay');
        tenant := run -> 'answer_full' ->> 'tenant';
        model_id := run -> 'answer_full' ->> 'model_id';
    ELSE
        tenant := dna.resolve_tenant(coalesce(args ->> 'tenant', ''), coalesce((args ->> 'personal')::boolean, false));
    END IF;
    scope := args ->> 'scope';
    SELECT * INTO digests FROM dna.receipt_query_digests(rid, query, emb);
    -- read by its own statement, not inside the INSERT (sql/tenancy.sql, "Citus rules")
    settings := dna.receipt_settings(verb, scope, model_id, run -> 'answer', keep_query);
    INSERT INTO dna.dna_search_receipts (receipt_id, verb, scope, tenant, args, settings, results,
                                         inputs_digest, query_digest, embedding_digest, query, query_embedding)
    VALUES (rid, verb, scope, tenant, args, settings,
            run -> 'results',
            dna.receipt_inputs_digest(rid, verb, scope, tenant, args, digests.query_digest, digests.embedding_digest),
            digests.query_digest, digests.embedding_digest,
            CASE WHEN keep_query THEN query END, CASE WHEN keep_query THEN emb END);
    IF verb = 'search' THEN
        out := jsonb_build_object('hits', CASE WHEN explain THEN run -> 'hits'
                                               ELSE (SELECT coalesce(jsonb_agg(h || '{"explain": null}' ORDER BY o), '[]')
                                                     FROM jsonb_array_elements(run -> 'hits') WITH ORDINALITY AS e(h, o)) END);
    ELSE
        out := run -> 'answer_full';
        IF NOT explain THEN
            out := (out - 'explain') || jsonb_build_object('hits',
                (SELECT coalesce(jsonb_agg(h - 'explain' ORDER BY o), '[]')
                 FROM jsonb_array_elements(out -> 'hits') WITH ORDINALITY AS e(h, o)));
        END IF;
    END IF;
    RETURN out || jsonb_build_object('receipt_id', rid, 'verb', verb, 'taken_at', dna.iso8601(now()),
                                     'kept_query', coalesce(keep_query, false));
END
$$;

COMMENT ON FUNCTION dna.take_receipt(text, jsonb, boolean) IS
'Answers a question and keeps a receipt of it. verb: ''search'' (dna.search) or ''recall'' (dna.recall, '
'read-only: reconsolidate is false, true is refused). args: a JSON object of the verb''s named arguments '
'(scope, query, query_embedding as a JSON array or pgvector text, model_id, k, tenant, personal, weights '
'as a JSON array, ...; explain => true keeps each hit''s explain in the answer). Pinned in the stored '
'args so that a replay asks the same question: search''s valid_time (absent: now()) and model_id (NULL: '
'dna.scope_model, as dna.search picks it); recall''s now (its world time), model_id and decay; for both the '
'diversity the answer ran with (diversity, duplicate_similarity, mmr_lambda: dna.receipt_diversity). Stores in '
'dna.dna_search_receipts: the args as run (without query and query_embedding), the salted SHA-256 digests '
'of the query, the embedding and all inputs (dna.receipt_digest), the settings (dna.receipt_settings), '
'the ordered results [{kind, name, tenant, passage, score}], taken_at, taken_by (current_user), the '
'tenant the answer was read in (personal => ''personal:<oid>''); the query text and embedding only with '
'keep_query => true (default false: no column holds the query''s text or lexemes). Returns search: '
'{hits: [dna.search_hit as JSON], receipt_id, verb, taken_at, kept_query}; recall: its answer plus the '
'same keys. Errors: 22023 (verb, args not an object, an unknown argument, reconsolidate true); a value '
'that does not cast to its argument''s type: the cast''s SQLSTATE (22P02, 22003, 22007, ...) naming '
'args.<name>, its type and value (dna.receipt_arg); the verb''s own (e.g. 22023 k out of range, 42501 not '
'a member of the tenant); each with a hint, and nothing is stored.';

CREATE OR REPLACE FUNCTION dna.replay(receipt_id uuid, query text DEFAULT NULL, query_embedding vector DEFAULT NULL,
                                      now timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    given record;
    run jsonb;
    settings_now jsonb;
    first integer;
BEGIN
    SELECT * INTO r FROM dna.dna_search_receipts AS x WHERE x.receipt_id = replay.receipt_id;
    IF NOT FOUND THEN
        -- Unknown, deleted, or in a tenant the caller cannot see: the same answer, nothing told.
        RAISE EXCEPTION 'no receipt % visible to role %', coalesce(receipt_id::text, 'NULL'),
            quote_ident(current_user::text) USING ERRCODE = 'P0002',
            HINT = 'A receipt is a row of dna.dna_search_receipts visible to the roles that can see its tenant; '
                   'dna.take_receipt returns the id (a deleted receipt is gone).';
    END IF;
    SELECT * INTO given FROM dna.receipt_query_digests(r.receipt_id, query, query_embedding);
    IF query IS NOT NULL AND given.query_digest <> r.query_digest THEN
        RAISE EXCEPTION 'query does not match receipt %: its digest differs from the receipt''s query_digest', r.receipt_id
            USING ERRCODE = '22023', HINT = 'Pass the query exactly as it was asked (the same text, character for character).';
    END IF;
    IF query_embedding IS NOT NULL AND r.embedding_digest IS NULL THEN
        RAISE EXCEPTION 'receipt % was taken without a query_embedding; replay it without one', r.receipt_id
            USING ERRCODE = '22023', HINT = 'Its answer was lexical only: pass query_embedding => NULL.';
    END IF;
    IF query_embedding IS NOT NULL AND given.embedding_digest <> r.embedding_digest THEN
        RAISE EXCEPTION 'query_embedding does not match receipt %: its digest differs from the receipt''s embedding_digest',
            r.receipt_id USING ERRCODE = '22023',
            HINT = 'Embed the query with the receipt''s model (args ->> ''model_id'') and role prefix, as when it was taken.';
    END IF;
    query := coalesce(query, r.query);
    query_embedding := coalesce(query_embedding, r.query_embedding);
    IF query IS NULL AND r.query_digest <> (SELECT d.query_digest FROM dna.receipt_query_digests(r.receipt_id, NULL, NULL) AS d) THEN
        RAISE EXCEPTION 'receipt % was taken without keep_query: pass its query', r.receipt_id
            USING ERRCODE = '22023', HINT = 'Pass the query it answered: dna.replay(receipt_id, query => ...) '
                                            '(from the command line: dna replay RECEIPT_ID --query TEXT).';
    END IF;
    IF query_embedding IS NULL AND r.embedding_digest IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % was taken with a query embedding it did not keep (keep_query false): pass its query_embedding',
            r.receipt_id USING ERRCODE = '22023',
            HINT = 'dna.replay(receipt_id, query => ..., query_embedding => ...): the embedding of the query by the receipt''s model.';
    END IF;

    -- now: the world time to replay at instead of the receipt's (search: valid_time, unless the receipt
    -- asked for no validity filter; recall: now).
    IF now IS NOT NULL THEN
        PERFORM dna.check_now(now);
        IF r.verb = 'recall' THEN
            r.args := r.args || jsonb_build_object('now', dna.iso8601(now));
        ELSIF r.args -> 'valid_time' <> 'null' THEN
            r.args := r.args || jsonb_build_object('valid_time', dna.iso8601(now));
        END IF;
    END IF;
    -- A receipt that recorded no diversity (taken before 0023): the one it ran with, from its answer's
    -- account (0022) or the default of its revision ('off' before 0022_first_week).
    IF NOT r.args ? 'diversity' THEN
        r.args := dna.receipt_diversity(r.args, r.settings -> 'answer',
                                        CASE WHEN left(r.settings ->> 'revision', 4) >= '0022' THEN 'collapse' ELSE 'off' END);
    END IF;
    run := dna.receipt_run(r.verb, r.args, query, query_embedding);
    settings_now := dna.receipt_settings(r.verb, r.scope, r.args ->> 'model_id', run -> 'answer', r.query IS NOT NULL);
    SELECT min(i) INTO first
    FROM generate_series(1, greatest(jsonb_array_length(r.results), jsonb_array_length(run -> 'results'))) AS i
    WHERE (r.results -> (i - 1)) - 'score' IS DISTINCT FROM (run -> 'results' -> (i - 1)) - 'score';
    RETURN jsonb_build_object(
        'receipt_id', r.receipt_id, 'verb', r.verb, 'scope', r.scope, 'tenant', r.tenant,
        'taken_at', dna.iso8601(r.taken_at), 'replayed_at', dna.iso8601(now()), 'inputs_digest', r.inputs_digest,
        'world_time', coalesce(r.args ->> 'now', r.args ->> 'valid_time'),
        'match', first IS NULL,
        'scores_match', r.results = run -> 'results',
        'ids_then', r.results, 'ids_now', run -> 'results',
        'first_difference', CASE WHEN first IS NOT NULL THEN jsonb_build_object(
            'rank', first, 'then', r.results -> (first - 1), 'now', run -> 'results' -> (first - 1)) END,
        'settings_changed', (SELECT coalesce(jsonb_agg(jsonb_build_object('setting', coalesce(t.path, n.path),
                                                                          'then', coalesce(t.value, 'null'),
                                                                          'now', coalesce(n.value, 'null'))
                                                       ORDER BY coalesce(t.path, n.path)), '[]')
                             FROM dna.receipt_leaves(r.settings) AS t
                             FULL JOIN dna.receipt_leaves(settings_now) AS n ON n.path = t.path
                             WHERE coalesce(t.value, 'null') <> coalesce(n.value, 'null')));
END
$$;

COMMENT ON FUNCTION dna.replay(uuid, text, vector, timestamptz) IS
'Re-runs the question of a receipt (dna.take_receipt) with its stored args (valid_time / now, model_id and '
'diversity as pinned then; a receipt that recorded no diversity replays with the one it ran with: its '
'answer''s account, else ''off'' when taken before 0022_first_week; a recall read-only) against the data and settings of now, and says whether the answer '
'is the same. now: NULL (default) replays at the receipt''s world time (a memory written since is not yet '
'in force then); a timestamp replays at that world time instead (search: valid_time, unless the receipt '
'had no validity filter; recall: now; 22007 when ±infinity). query / query_embedding: the receipt''s when it kept them, else they must be passed; a '
'given one must have the receipt''s digest. Returns {receipt_id, verb, scope, tenant, taken_at, '
'replayed_at, inputs_digest, world_time (the valid_time / now replayed at), match (the ordered ids (kind, name, tenant, passage) are equal), '
'scores_match (ids and scores equal), ids_then, ids_now ([{kind, name, tenant, passage, score}] in rank '
'order), first_difference ({rank (1-based), then, now: the ids at that rank, null past a list''s end}, '
'null on a match), settings_changed ([{setting: dotted path in dna.receipt_settings, then, now}])}. '
'Stores nothing. Errors: P0002 no receipt with that id visible to the caller (unknown, deleted, or in '
'a tenant the caller cannot see); 22023 a query or query_embedding whose digest differs from the '
'receipt''s, a query_embedding for a receipt taken without one, or a query / query_embedding the '
'receipt did not keep and the call did not pass (the message names the argument).';

CREATE OR REPLACE FUNCTION dna.receipts_immutable()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'UPDATE of receipt % refused: a receipt is never rewritten', OLD.receipt_id
        USING ERRCODE = '55000', HINT = 'Take a new receipt (dna.take_receipt); DELETE removes one.';
END
$$;

COMMENT ON FUNCTION dna.receipts_immutable() IS
'Trigger of dna.dna_search_receipts (BEFORE UPDATE): raises 55000, so a stored receipt is never '
'rewritten by any role (DELETE, under row-level security, removes one).';
