-- pydna SQL package — what the search plane stands on: validation of keys and tenants, width
-- routing and the model registry (model_id → dims → dna_search_docs_<dims>, role prefixes), a
-- scope's models (dna.scope_models, dna.scope_model), and the text helpers (text hash, the lexical query, the Kinds of a scope for messages). Used by
-- dna.search (sql/search.sql), the document door (sql/documents.sql) and the memory verbs.
-- Tables come from the alembic revisions; this file only defines functions.

-- ---------------------------------------------------------------------------------------------
-- Validation helpers
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.check_tenant(tenant text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF tenant IS NULL OR tenant = '' THEN
        RETURN '';
    END IF;
    IF lower(tenant) LIKE 'personal:%' THEN
        RAISE EXCEPTION 'tenant %: the prefix ''personal:'' is reserved; personal memory is resolved '
                        'from the connected identity, never passed as a tenant', quote_literal(tenant)
            USING ERRCODE = '42501';
    END IF;
    IF tenant !~ '^[a-z0-9][a-z0-9._-]{0,62}$' THEN
        RAISE EXCEPTION 'invalid tenant %: use 1-63 characters of a-z, 0-9, ".", "_", "-", starting '
                        'with a letter or digit', quote_literal(tenant)
            USING ERRCODE = '22023';
    END IF;
    RETURN tenant;
END
$$;

COMMENT ON FUNCTION dna.check_tenant(text) IS
'Validates a tenant slug and returns it ('''' for NULL/empty = the shared base). Slugs: 1-63 chars '
'[a-z0-9._-], first a letter or digit. Errors: 42501 for the reserved prefix personal:, 22023 otherwise.';

CREATE OR REPLACE FUNCTION dna.resolve_tenant(tenant text, personal boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    tenant := dna.check_tenant(tenant);                  -- an explicit personal:* tenant is refused (42501)
    IF to_regprocedure('dna.tenancy_resolve(text,boolean)') IS NULL THEN
        IF personal THEN                                 -- fail closed before the tenancy revision
            RAISE EXCEPTION 'personal memory needs an identity, and the identity map is not installed'
                USING ERRCODE = '42501', HINT = 'Run `dna db upgrade` (revision 0009_tenancy).';
        END IF;
        RETURN tenant;
    END IF;
    RETURN dna.tenancy_resolve(tenant, coalesce(personal, false));
END
$$;

COMMENT ON FUNCTION dna.resolve_tenant(text, boolean) IS
'The partition a call works in: the validated tenant (dna.check_tenant: personal:* refused with 42501, '
'bad slugs 22023) when personal is false, after checking workspace membership (dna.tenancy_resolve, '
'sql/tenancy.sql: 42501 for a non-member); ''personal:<oid>'' of the connected identity when personal '
'is true (42501 when the role has no identity). The oid is never an argument.';

CREATE OR REPLACE FUNCTION dna.check_key(what text, value text, max_length integer DEFAULT 256)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF value IS NULL OR btrim(value) = '' THEN
        RAISE EXCEPTION '% is required (got %)', what, coalesce(quote_literal(value), 'NULL')
            USING ERRCODE = '22023',
                  HINT = format('Give %s as a non-blank text of at most %s characters.', what, max_length);
    END IF;
    IF length(value) > max_length THEN
        RAISE EXCEPTION '% is % characters long; the limit is %', what, length(value), max_length
            USING ERRCODE = '22001',
                  HINT = format('Give %s as a text of at most %s characters.', what, max_length);
    END IF;
    RETURN value;
END
$$;

COMMENT ON FUNCTION dna.check_key(text, text, integer) IS
'Returns value when it is a non-blank key of at most max_length characters (default 256). '
'Errors: 22023 when NULL or blank, 22001 when too long; the message names the argument (what) and its '
'value or length, the hint the limit.';

-- ---------------------------------------------------------------------------------------------
-- Width routing and the model registry
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.search_table(dims integer)
RETURNS regclass
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    t regclass := to_regclass(format('dna.dna_search_docs_%s', dims));
BEGIN
    IF t IS NULL THEN
        RAISE EXCEPTION 'no search table for embedding width % (widths with a table: %)', dims,
            (SELECT coalesce(string_agg(w::text, ', ' ORDER BY w), 'none') FROM dna.search_widths() AS w)
            USING ERRCODE = '42P01',
                  HINT = format('Write an alembic revision that creates dna.dna_search_docs_%s like the '
                                'other width tables (see migrations/README.md), then run `dna db upgrade`.',
                                dims);
    END IF;
    RETURN t;
END
$$;

COMMENT ON FUNCTION dna.search_table(integer) IS
'Routes an embedding width to its search table dna.dna_search_docs_<dims>. Errors: 42P01 when no '
'table exists for that width; the hint names the migration to write. Creates nothing.';

CREATE OR REPLACE FUNCTION dna.search_widths()
RETURNS SETOF integer
LANGUAGE sql STABLE
AS $$
    SELECT substring(c.relname FROM '^dna_search_docs_(\d+)$')::integer AS w
    FROM pg_class AS c
    WHERE c.relnamespace = 'dna'::regnamespace
      AND c.relkind IN ('r', 'p')
      AND c.relname ~ '^dna_search_docs_\d+$'
    ORDER BY 1
$$;

COMMENT ON FUNCTION dna.search_widths() IS
'The embedding widths that have a search table, ascending (from the catalog).';

CREATE OR REPLACE FUNCTION dna.register_model(model_id text, dims integer, description text DEFAULT NULL,
                                              query_prefix text DEFAULT NULL, document_prefix text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    known record;
BEGIN
    PERFORM dna.check_key('model_id', model_id, 200);
    IF dims IS NULL OR dims < 1 THEN
        RAISE EXCEPTION 'dims must be a positive integer, got %', dims USING ERRCODE = '22023';
    END IF;
    IF length(query_prefix) > 500 OR length(document_prefix) > 500 THEN
        RAISE EXCEPTION 'role prefixes are at most 500 characters long' USING ERRCODE = '22001';
    END IF;
    FOR i IN 1 .. 2 LOOP                                 -- before the insert (a wrong-width vector: 22023 before any 42P01), and after it
        SELECT m.dims, m.query_prefix, m.document_prefix INTO known FROM dna.dna_models AS m WHERE m.model_id = model_id;
        IF known.dims <> dims THEN
            RAISE EXCEPTION 'model_id % is registered with % dimensions, not %', quote_literal(model_id), known.dims, dims
                USING ERRCODE = '22023',
                      HINT = 'A model_id names one embedding space: give another artifact another model_id.';
        END IF;
        IF known.dims IS NOT NULL AND (query_prefix IS DISTINCT FROM known.query_prefix AND query_prefix IS NOT NULL
                                       OR document_prefix IS DISTINCT FROM known.document_prefix AND document_prefix IS NOT NULL) THEN
            RAISE EXCEPTION 'model_id % is registered with role prefixes (query %, document %), not (query %, document %)',
                quote_literal(model_id), quote_literal(known.query_prefix), quote_literal(known.document_prefix),
                quote_literal(coalesce(query_prefix, known.query_prefix)),
                quote_literal(coalesce(document_prefix, known.document_prefix))
                USING ERRCODE = '22023',
                      HINT = 'Vectors embedded with other role prefixes are another embedding space: give them another model_id.';
        END IF;
        EXIT WHEN i = 2;
        PERFORM dna.search_table(dims);                   -- unknown width: fail before writing
        IF known.dims IS NULL THEN
            -- Absent: a plain INSERT, never INSERT … ON CONFLICT. On Citus dna_models is a reference
            -- table, whose upsert locks it in a mode only UPDATE/DELETE/TRUNCATE rights allow (an
            -- app role has SELECT and INSERT). A concurrent registration of the same model_id wins
            -- the race harmlessly: its row is read and checked on the second pass.
            BEGIN
                INSERT INTO dna.dna_models AS m (model_id, dims, description, query_prefix, document_prefix)
                VALUES (model_id, dims, description, coalesce(query_prefix, ''), coalesce(document_prefix, ''));
            EXCEPTION WHEN unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
    RETURN jsonb_build_object('model_id', model_id, 'dims', known.dims, 'table', dna.search_table(known.dims)::text,
                              'query_prefix', known.query_prefix, 'document_prefix', known.document_prefix);
END
$$;

COMMENT ON FUNCTION dna.register_model(text, integer, text, text, text) IS
'Registers model_id with its embedding width and its role prefixes (idempotent): query_prefix is put before '
'a query and document_prefix before a document before embedding (e5: ''query: '' / ''passage: ''; bge v1.5: '
'its query instruction / ; MiniLM: none). NULL prefixes:  for a new model_id, unchecked for a known '
'one. A model_id names one embedding space with its prefixes, so a scope never holds vectors of two '
'purposes under one model_id. Returns {model_id, dims, table, query_prefix, document_prefix}. '
'Errors: 22023 for a blank model_id, dims < 1, or a model_id already registered with another width or '
'other prefixes; 22001 for a prefix over 500 characters; 42P01 when no search table exists for that width '
'(nothing is written).';

CREATE OR REPLACE FUNCTION dna.model_prefixes(model_id text)
RETURNS TABLE (query_prefix text, document_prefix text)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- PL/pgSQL, not SQL (Citus: see dna.search_config).
    RETURN QUERY
    SELECT m.query_prefix, m.document_prefix FROM dna.dna_models AS m WHERE m.model_id = model_prefixes.model_id;
END
$$;

COMMENT ON FUNCTION dna.model_prefixes(text) IS
'The role prefixes model_id is registered with (dna.register_model): query_prefix before a query, '
'document_prefix before a document, '''' for none; no row for an unknown model_id. The client embeds with them.';

DROP FUNCTION IF EXISTS dna.model_dims(text);  -- before the scope parameter
CREATE OR REPLACE FUNCTION dna.model_dims(model_id text, scope text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    d integer;
BEGIN
    PERFORM dna.check_key('model_id', model_id, 200);
    SELECT m.dims INTO d FROM dna.dna_models AS m WHERE m.model_id = model_id;
    IF d IS NULL AND scope IS NOT NULL THEN
        -- A search: most often the caller's embedder is not the one that indexed this scope.
        RAISE EXCEPTION 'unknown model_id %: nothing was ever indexed with it; model_ids with documents in scope %: %',
            quote_literal(model_id), quote_literal(scope), dna.scope_models_text(scope)
            USING ERRCODE = '22023',
                  HINT = 'Search with the model_id that indexed this scope (dna.scope_models(scope) lists them), '
                         'or index documents with this model first.';
    ELSIF d IS NULL THEN
        RAISE EXCEPTION 'unknown model_id % (registered: %)', quote_literal(model_id),
            (SELECT coalesce(string_agg(m.model_id || ' (' || m.dims || ')', ', ' ORDER BY m.model_id), 'none')
             FROM dna.dna_models AS m)
            USING ERRCODE = '22023',
                  HINT = 'Index documents with an embedding from that model, or call dna.register_model(model_id, dims).';
    END IF;
    RETURN d;
END
$$;

COMMENT ON FUNCTION dna.model_dims(text, text) IS
'The registered embedding width of model_id. Errors: 22023 for an unknown model_id: the message lists the '
'registered ones, or, given the scope being read, the model_ids with documents in that scope (dna.scope_models).';

-- ---------------------------------------------------------------------------------------------
-- Text helpers
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.text_hash(title text, body text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT encode(sha256(convert_to(coalesce(title, '') || E'\n' || coalesce(body, ''), 'UTF8')), 'hex')
$$;

COMMENT ON FUNCTION dna.text_hash(text, text) IS
'SHA-256 (hex) of title || newline || body: the key that makes indexing idempotent (unchanged text is never re-embedded).';

-- ---------------------------------------------------------------------------------------------
-- Identifiers (revision 0022_first_week, issue 27 item 4)
-- ---------------------------------------------------------------------------------------------
-- PostgreSQL's parser splits snake_case at the underscore (on_commit → on, a stop word, and commit),
-- keeps a dotted name as one host lexeme (django.db.transaction) and a CamelCase word as one
-- (QuerySet → queryset). dna.text_tsvector adds what it leaves out, so that an identifier is found as
-- written and by its parts: the whole identifier (lower case, unstemmed), for a dotted name every run
-- of two or more of its segments and every segment that is an identifier itself, and its words
-- (split at _ . and case changes, through the configuration: stemmed, stop words dropped), less the
-- lexemes the parser already gave for it.

CREATE OR REPLACE FUNCTION dna.identifier_tokens(body text)
RETURNS TABLE (token text, n integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT m.t, count(*)::integer
    FROM (SELECT x[1] AS t
          -- a dot that opens a name (Sphinx's :meth:`.QuerySet.select_for_update`) is not part of it.
          -- Only a text that holds an underscore, a dot between name characters or a CamelCase run can
          -- hold an identifier (each kind below needs one): one scan decides, and a text without any
          -- (9 SciFact abstracts in 10) is not split into tokens at all (0024, topic ingest_cost).
          FROM regexp_matches(CASE WHEN strpos(body, '_') > 0 OR body ~ '[A-Za-z0-9_]\.[A-Za-z_]|[a-z][A-Z][a-z]{2}'
                                   THEN regexp_replace(body, '(^|[^A-Za-z0-9_.])\.(?=[A-Za-z_])', '\1 ', 'g')
                                   ELSE '' END,
                              '(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)', 'g') AS x) AS m
    WHERE (strpos(m.t, '_') > 0 AND m.t ~ '[A-Za-z0-9]')                  -- snake_case, _private, __init__
       OR (strpos(m.t, '.') > 0 AND m.t !~ '(^|\.)[A-Za-z0-9_](\.|$)')   -- dotted.names (not e.g, x.y, H2A.Z)
       OR m.t ~ '[a-z][A-Z][a-z]{2}'                                      -- CamelCase, getElementById (not HeLa, TatAd)
    GROUP BY m.t
$$;

COMMENT ON FUNCTION dna.identifier_tokens(text) IS
'The identifiers of a text and how often each occurs: ASCII tokens [A-Za-z_][A-Za-z0-9_]* joined by '
'dots, not preceded by a letter, digit, _ or . (a dot that opens a name, as in Sphinx''s .QuerySet.select_for_update, '
'is not part of it), that hold an underscore (snake_case, _private), dots '
'between segments of 2+ characters each (dotted.names; not e.g., x.y or H2A.Z), or a lower-case letter, a '
'capital and 2+ lower-case letters (CamelCase, getElementById; not mRNA, HeLa, TatAd, IFNgamma or ATPase, '
'whose parts would be guesses). NULL: no rows. Pure.';

CREATE OR REPLACE FUNCTION dna.identifier_lexemes(cfg regconfig, token text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH seg AS (SELECT s.s, s.i FROM unnest(string_to_array(token, '.')) WITH ORDINALITY AS s (s, i)),
    want AS (
        SELECT lower(token) AS l
        UNION                                                         -- runs of 2+ segments (up to 8 segments)
        SELECT lower(string_agg(b.s, '.' ORDER BY b.i))
        FROM seg AS a JOIN seg AS b ON b.i >= a.i, seg AS e
        WHERE e.i > a.i AND b.i <= e.i AND (SELECT count(*) FROM seg) <= 8
        GROUP BY a.i, e.i
        UNION                                                         -- segments that are identifiers themselves
        SELECT lower(g.s) FROM seg AS g
        WHERE strpos(token, '.') > 0 AND (SELECT count(*) FROM dna.identifier_tokens(g.s)) > 0
        UNION                                                         -- the words, as the configuration makes them
        SELECT w.l FROM unnest(tsvector_to_array(to_tsvector(cfg,
            translate(regexp_replace(regexp_replace(token, '([a-z0-9])([A-Z])', '\1 \2', 'g'),
                                     '([A-Z])([A-Z][a-z])', '\1 \2', 'g'), '_.', '  ')))) AS w (l))
    SELECT coalesce(array_agg(x.l ORDER BY x.l), '{}')
    FROM want AS x
    WHERE x.l <> '' AND NOT x.l = ANY (tsvector_to_array(to_tsvector(cfg, token)))
$$;

COMMENT ON FUNCTION dna.identifier_lexemes(regconfig, text) IS
'The lexemes dna.text_tsvector adds for one identifier (dna.identifier_tokens) under a configuration: '
'the identifier in lower case, unstemmed (on_commit, django.db.transaction, getelementbyid); for a dotted '
'name every run of 2+ segments (db.transaction) and each segment that is an identifier (on_commit); its '
'words split at _ . and case changes, stemmed and without stop words as the configuration makes them '
'(commit, transact, queri, set); less the lexemes to_tsvector(cfg, identifier) already holds. Sorted. Pure.';

CREATE OR REPLACE FUNCTION dna.identifier_tsvector(cfg regconfig, body text)
RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- One position per occurrence (at most 256, PostgreSQL's limit per lexeme), so that tf counts them
    -- and dna.bm25_doc_length counts each added lexeme.
    SELECT coalesce(string_agg('''' || replace(replace(a.l, '\', '\\'), '''', '''''') || ''':'
                               || array_to_string(ARRAY(SELECT generate_series(1, least(a.n, 256))), ','), ' '),
                    '')::tsvector
    FROM (SELECT l.l, sum(t.n)::integer AS n
          FROM dna.identifier_tokens(body) AS t, unnest(dna.identifier_lexemes(cfg, t.token)) AS l (l)
          GROUP BY l.l) AS a
$$;

COMMENT ON FUNCTION dna.identifier_tsvector(regconfig, text) IS
'What dna.text_tsvector adds to to_tsvector(cfg, body) for the identifiers of body: each lexeme of '
'dna.identifier_lexemes, with one position per occurrence of its identifiers (positions 1..n, at most '
'256; dna.text_tsvector''s concatenation moves them past the text''s own). Empty when body holds no '
'identifier. Pure.';

CREATE OR REPLACE FUNCTION dna.identifier_weight()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 2
$$;

COMMENT ON FUNCTION dna.identifier_weight() IS
'2: how many times dna.bm25_terms lists the whole lexeme of an identifier of the query (on_commit, '
'django.db.transaction, queryset), so that the lexical lane weighs it twice its idf: a document that '
'holds the identifier as written ranks above ones that only repeat its words.';

CREATE OR REPLACE FUNCTION dna.identifier_headline(cfg regconfig, body text, query tsquery)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    lexemes text[];
    extra text;
    out text := '';
    core text;
    mid text;
    r record;
    -- ts_headline's fragments are joined by a character body does not hold, then rejoined below.
    cut text := CASE WHEN strpos(body, chr(57344)) = 0 THEN chr(57344) ELSE ' … ' END;
    headline text;
    parts text[];
    plain text;
    apart text;
    tail integer;  -- where the fragment before ends in body
    hit integer;
BEGIN
    IF query IS NULL OR body IS NULL THEN
        RETURN NULL;
    END IF;
    -- The query's lexemes (a tsquery's text quotes each one).
    lexemes := ARRAY(SELECT replace(replace(m[1], '''''', ''''), '\\', '\')
                     FROM regexp_matches(query::text, '''((?:[^'']|'''')*)''', 'g') AS m);
    -- An identifier of body that a query lexeme names (whole, a run of its segments or a word):
    -- its own lexemes join the query, so that ts_headline marks it where the parser keeps it whole.
    SELECT string_agg(DISTINCT '''' || replace(replace(p.l, '\', '\\'), '''', '''''') || '''', ' | ')
    INTO extra
    FROM dna.identifier_tokens(body) AS t,
         unnest(tsvector_to_array(to_tsvector(cfg, t.token))) AS p (l)
    WHERE (strpos(p.l, '.') > 0 OR strpos(t.token, '_') = 0 AND strpos(t.token, '.') = 0)  -- a lexeme the parser kept whole
      AND (dna.identifier_lexemes(cfg, t.token) && lexemes OR lower(t.token) = ANY (lexemes));
    IF extra IS NOT NULL THEN
        query := query || extra::tsquery;
    END IF;
    headline := ts_headline(cfg, body, query,
                            'StartSel=«, StopSel=», MaxWords=40, MinWords=15, MaxFragments=2, FragmentDelimiter="'
                            || cut || '"');
    -- Two fragments that the words between them do not part are one: ts_headline starts a fragment
    -- that grew back to the one before it past short words (3 characters or fewer) and punctuation,
    -- and would show "a couple … options" for "a couple of options". The text between them in body
    -- comes back when it holds nothing but such words, stop words and punctuation (at most 120
    -- characters); any other gap stays " … ".
    IF cut <> ' … ' AND strpos(headline, cut) > 0 THEN
        parts := string_to_array(headline, cut);
        headline := parts[1];
        plain := replace(replace(parts[1], '«', ''), '»', '');
        hit := strpos(body, plain);
        tail := CASE WHEN hit > 0 THEN hit + length(plain) END;
        FOR i IN 2 .. cardinality(parts) LOOP
            plain := replace(replace(parts[i], '«', ''), '»', '');
            hit := CASE WHEN tail IS NULL THEN 0 ELSE strpos(substr(body, tail), plain) END;
            apart := CASE WHEN hit > 0 THEN substr(body, tail, hit - 1) END;
            IF apart IS NOT NULL AND length(apart) <= 120
               AND NOT EXISTS (SELECT 1 FROM regexp_split_to_table(apart, '[^[:alnum:]_]+') AS w (w)
                               WHERE length(w.w) > 3 AND to_tsvector(cfg, w.w) <> ''::tsvector) THEN
                headline := headline || apart || parts[i];
            ELSE
                headline := headline || ' … ' || parts[i];
            END IF;
            tail := CASE WHEN hit > 0 THEN tail + hit - 1 + length(plain) END;
        END LOOP;
    END IF;
    -- Marks that fall inside an identifier (on_«commit», «transaction.on»_«commit») widen to all of it;
    -- dots before or after it stay outside the marks.
    FOR r IN SELECT m[1] AS gap, m[2] AS run
             FROM regexp_matches(headline, '([^A-Za-z0-9_.«»]*)([A-Za-z0-9_.«»]*)', 'g') AS m LOOP
        IF strpos(r.run, '«') = 0 THEN
            out := out || r.gap || r.run;
        ELSE
            core := replace(replace(r.run, '«', ''), '»', '');
            mid := btrim(core, '.');
            out := out || r.gap || CASE WHEN mid = '' THEN core
                ELSE substr(core, 1, strpos(core, mid) - 1) || '«' || mid || '»'
                     || substr(core, strpos(core, mid) + length(mid)) END;
        END IF;
    END LOOP;
    RETURN out;
END
$$;

COMMENT ON FUNCTION dna.identifier_headline(regconfig, text, tsquery) IS
'The highlight of body for a query: ts_headline(cfg, body, query) with matches marked «like this» (MaxWords=40, '
'MinWords=15, up to 2 fragments joined by " … "), an identifier of body that the query names marked whole '
'(«transaction.on_commit»). Two fragments parted only by punctuation, stop words and words of 3 characters '
'or fewer (at most 120 characters) are shown as one, with the text between them: no word is dropped '
'between fragments that touch. NULL when body or query is NULL. Pure.';

CREATE OR REPLACE FUNCTION dna.lexical_query(query text, config regconfig DEFAULT 'english')
RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- OR of the query's lexemes. Lexemes come from to_tsvector, so user text is never parsed as
    -- tsquery syntax: operators, quotes, URLs and e-mail addresses cannot raise. Each lexeme is
    -- quoted for the tsquery input syntax (quotes and backslashes escaped). Only stop words → NULL.
    SELECT string_agg('''' || replace(replace(x.l, '\', '\\'), '''', '''''') || '''', ' | ' ORDER BY x.l)::tsquery
    FROM (SELECT u.lexeme AS l FROM unnest(dna.text_tsvector(config, coalesce(query, ''))) AS u  -- bounded: never 54000
          ORDER BY u.positions[1], u.lexeme LIMIT 10000) AS x  -- the first 10000 lexemes: a parse that fits the stack
$$;

COMMENT ON FUNCTION dna.lexical_query(text, regconfig) IS
'An OR tsquery of the lexemes of to_tsvector(config, query), so a natural-language question matches '
'documents holding only some of its words (for tsv @@ matching; dna.search''s lexical lane scores the '
'same lexemes with BM25, dna.bm25). Never raises on user text (tsquery operators, quotes, URLs, e-mail '
'addresses) nor on a long one (dna.text_tsvector: a query whose tsvector would pass PostgreSQL''s 1 MB limit '
'is read up to a prefix that fits; its first 10000 distinct lexemes, by position, so that the tsquery parses within '
'the stack); returns NULL when the text has no lexemes (blank or stop words only).';

CREATE OR REPLACE FUNCTION dna.scope_kinds_text(scope text, model_id text, tbl regclass)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    listed text;
    rel text;
BEGIN
    -- Only a width table of schema dna is read (the name comes from the catalog, quoted by %I).
    SELECT format('%I.%I', n.nspname, c.relname) INTO rel
    FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.oid = tbl AND n.nspname = 'dna' AND c.relname ~ '^dna_search_docs_[0-9]+$';
    IF rel IS NULL THEN
        RAISE EXCEPTION 'dna.scope_kinds_text: % is not a search table of schema dna', tbl
            USING ERRCODE = '22023', HINT = 'dna.search_table(dims) names the search table of a width.';
    END IF;
    -- The distinct Kinds of a scope by a loose index scan (one probe per Kind), at most 20.
    EXECUTE format('WITH RECURSIVE k AS (
                        (SELECT t.kind FROM %1$s AS t WHERE t.scope = $1 ORDER BY t.kind LIMIT 1)
                        UNION ALL
                        SELECT (SELECT t.kind FROM %1$s AS t WHERE t.scope = $1 AND t.kind > k.kind
                                ORDER BY t.kind LIMIT 1)
                        FROM k WHERE k.kind IS NOT NULL)
                    SELECT string_agg(k.kind, '', '' ORDER BY k.kind)
                    FROM (SELECT k.kind FROM k WHERE k.kind IS NOT NULL LIMIT 20) AS k', rel)
        INTO listed USING scope;
    RETURN coalesce(listed, 'none');
END
$$;

COMMENT ON FUNCTION dna.scope_kinds_text(text, text, regclass) IS
'The Kinds with documents in scope in the search table tbl, as one line for messages (''Doc, Engram'', at '
'most 20, or ''none''): dna.search names them in its NOTICE when a kinds entry has no documents. 22023 when '
'tbl is not a dna.dna_search_docs_<N> table.';

-- ---------------------------------------------------------------------------------------------
-- A scope's models (moved from sql/search.sql, 0017)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.scope_models(scope text)
RETURNS TABLE (model_id text, dims integer, documents bigint)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        RETURN QUERY EXECUTE format('SELECT t.model_id, %s, count(*) FILTER (WHERE t.passage = 0)
                                     FROM dna.%I AS t WHERE t.scope = $1
                                     GROUP BY t.model_id ORDER BY t.model_id', w, 'dna_search_docs_' || w)
            USING scope;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.scope_models(text) IS
'The model_ids that have documents in scope, with their width and document count (documents, not '
'passages: rows at passage 0 the caller can see under row-level security), by width then model_id. dna.search names them in its NOTICE '
'(SQLSTATE 02000) when the requested model_id has no documents in the scope.';

CREATE OR REPLACE FUNCTION dna.scope_models_text(scope text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(string_agg(format('%s (%s document%s)', m.model_id, m.documents,
                                      CASE WHEN m.documents = 1 THEN '' ELSE 's' END), ', ' ORDER BY m.model_id),
                    'none')
    FROM dna.scope_models(scope) AS m
$$;

COMMENT ON FUNCTION dna.scope_models_text(text) IS
'dna.scope_models(scope) as one line for messages: ''model_id (N documents), …'' by model_id, or ''none''.';

CREATE OR REPLACE FUNCTION dna.scope_model(scope text, dims integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    first_id text;
    next_id text;
    seen text[] := '{}';
BEGIN
    -- The model_ids of the scope's rows by two probes of each width table's (scope, model_id, valid_from)
    -- index: its smallest model_id, then the next one above it. A scope indexed by one model (the common
    -- case) is answered without counting its rows (a count read every row the caller can see: at 1M
    -- documents, every search that names no model_id); two or more are counted, as dna.scope_models does.
    FOR w IN SELECT dna.search_widths() LOOP
        CONTINUE WHEN dims IS NOT NULL AND w <> dims;
        EXECUTE format('SELECT min(t.model_id) FROM dna.%I AS t WHERE t.scope = $1', 'dna_search_docs_' || w)
            INTO first_id USING scope;
        CONTINUE WHEN first_id IS NULL;
        EXECUTE format('SELECT min(t.model_id) FROM dna.%I AS t WHERE t.scope = $1 AND t.model_id > $2',
                       'dna_search_docs_' || w)
            INTO next_id USING scope, first_id;
        seen := seen || first_id || CASE WHEN next_id IS NULL THEN '{}'::text[] ELSE ARRAY[next_id] END;
        EXIT WHEN cardinality(seen) > 1;
    END LOOP;
    IF cardinality(seen) <= 1 THEN
        RETURN seen[1];                                   -- NULL: the scope has no rows the caller can see
    END IF;
    RETURN (SELECT m.model_id FROM dna.scope_models(scope) AS m
            WHERE dims IS NULL OR m.dims = dims
            ORDER BY m.documents DESC, m.model_id LIMIT 1);
END
$$;

COMMENT ON FUNCTION dna.scope_model(text, integer) IS
'The model_id a search of scope reads when the caller names none: the one with the most documents there '
'(of width dims when given; ties by model_id), NULL when the scope has none. dna.search''s default, and '
'what Client.search without an embedder searches (lexically). A scope with one model_id is answered by two index probes per '
'width table (its rows are not counted); with several, their documents are counted (dna.scope_models).';
