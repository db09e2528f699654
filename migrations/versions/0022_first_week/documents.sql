-- pydna SQL package — documents: index (one, or many set-based, whole or as passages), stage for
-- COPY, delete, and which documents need (re-)embedding. Each write lands in a
-- dna_search_docs_<width> table, one row per passage (a document indexed whole is its passage 0);
-- its BM25 index follows by statement trigger (sql/bm25_write.sql), so BM25 counts passages: N,
-- avglen and df are over passage rows, the unit dna.search ranks. Tables come from the alembic
-- revisions; this file only defines functions.

-- ---------------------------------------------------------------------------------------------
-- Index and delete
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.text_snippet(body text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- = left(regexp_replace(coalesce(body, ''), '\s+', ' ', 'g'), 240), the snippet since 0001: a
    -- run of one plain space is left alone instead of replaced by itself. PostgreSQL's
    -- regexp_replace pays ~1.5 µs per replacement, so the '\s+' form spent ~230 µs on a 1.5 KB
    -- abstract (one replacement per word), more than half of its tsvector's cost.
    SELECT left(regexp_replace(coalesce(body, ''), '\s\s+|(?! )\s', ' ', 'g'), 240)
$$;

COMMENT ON FUNCTION dna.text_snippet(text) IS
'The default snippet of a document: its first 240 characters after every run of white space (\s+) is '
'replaced by one space, i.e. left(regexp_replace(coalesce(body, ''''), ''\s+'', '' '', ''g''), 240), computed by '
'replacing only the runs that are not already one plain space. NULL body: ''''. Pure.';

CREATE OR REPLACE FUNCTION dna.heading_context(title text, heading text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- What a passage's heading path adds to its document's title: the path without a first title equal
    -- to the document's (a Markdown or RST file's first heading is usually its title, already indexed).
    SELECT nullif(btrim(CASE WHEN title IS NULL OR heading IS NULL THEN heading
                             WHEN heading = title THEN ''
                             WHEN starts_with(heading, title || ' > ') THEN substr(heading, length(title) + 4)
                             ELSE heading END), '')
$$;

COMMENT ON FUNCTION dna.heading_context(text, text) IS
'The heading context of a passage: its heading path (e.g. ''Django''''s cache framework > The per-view cache'') '
'without a first title equal to the document''s title (''The per-view cache''); NULL when that leaves nothing '
'or there is no heading. Part of every search row''s tsv since revision 0022_first_week: dna.text_tsvector('
'ts_config, title || '' '' || heading context || '' '' || body), so a passage is found lexically by the '
'section it sits in (a row without a heading is tokenized as before). pydna embeds the same text '
'(title, heading context, body) for a passage. Pure.';

DROP FUNCTION IF EXISTS dna.index_document(text, text, text, text, vector, text, text, text, text);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.index_document(
    scope text, kind text, name text, body text,
    embedding vector DEFAULT NULL, model_id text DEFAULT NULL,
    title text DEFAULT NULL, tenant text DEFAULT '', snippet text DEFAULT NULL, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    dims integer;
    tbl regclass;
    new_hash text;
    old_hash text;
    old_has_embedding boolean;
    has_passages boolean;
    action text;
    ts regconfig;
    memory boolean;
    valid tstzrange;
    meta jsonb;
    emb vector := dna.storable_vector(embedding);       -- beyond the halfvec range: unit length (sql/catalog.sql)
    written bigint;
BEGIN
    scope := dna.check_scope(scope);                     -- the name rule (sql/catalog.sql): 22023 / 22001
    kind := dna.check_kind(kind);
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    PERFORM dna.check_key('model_id', model_id, 200);
    IF coalesce(btrim(body), '') = '' AND coalesce(btrim(title), '') = '' THEN
        RAISE EXCEPTION 'nothing to index for %/%: title and body are both empty', kind, name
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(coalesce(body, '')) + octet_length(coalesce(title, '')) > 1000000 THEN
        RAISE EXCEPTION 'text of %/% is % bytes; the limit is 1000000 bytes per document: split it',
            kind, name, octet_length(coalesce(body, '')) + octet_length(coalesce(title, ''))
            USING ERRCODE = '22001';
    END IF;

    IF emb IS NOT NULL THEN
        dims := vector_dims(emb);
        PERFORM dna.register_model(model_id, dims);       -- routes (42P01) and checks the width (22023)
        IF vector_norm(emb) = 0 THEN
            emb := NULL;                                 -- no direction: a zero vector has no cosine; index lexically
        END IF;
    ELSE
        dims := dna.model_dims(model_id);                 -- unknown model without a vector: 22023
    END IF;
    tbl := dna.search_table(dims);
    new_hash := dna.text_hash(title, body);

    -- The stored passage 0 and whether passages 1… exist (the first two rows of the key: one probe).
    EXECUTE format('SELECT max(t.text_hash) FILTER (WHERE t.passage = 0), bool_or(t.has_embedding) FILTER (WHERE t.passage = 0),
                           coalesce(bool_or(t.passage > 0), false)
                    FROM (SELECT t.text_hash, t.embedding IS NOT NULL AS has_embedding, t.passage FROM %s AS t
                          WHERE t.scope = $1 AND t.kind = $2 AND t.name = $3 AND t.tenant = $4 AND t.model_id = $5
                          ORDER BY t.passage LIMIT 2) AS t', tbl)
        INTO old_hash, old_has_embedding, has_passages USING scope, kind, name, tenant, model_id;
    -- Indexed whole now: passages 1… of an earlier indexing as passages go (a statement only when
    -- there are some: each statement on the table runs its BM25 trigger).
    IF has_passages THEN
        EXECUTE format('DELETE FROM %s AS t WHERE t.scope = $1 AND t.kind = $2 AND t.name = $3 AND t.tenant = $4
                          AND t.model_id = $5 AND t.passage > 0', tbl)
            USING scope, kind, name, tenant, model_id;
    END IF;

    IF old_hash IS NULL THEN
        action := 'inserted';
    ELSIF old_hash <> new_hash THEN
        action := 'updated';                             -- a stale vector is dropped when none is given
    ELSIF emb IS NOT NULL AND NOT old_has_embedding THEN
        action := 'embedded';
    ELSE
        action := 'unchanged';
        RETURN jsonb_build_object('table', tbl::text, 'model_id', model_id, 'action', action,
                                  'text_hash', new_hash, 'embedded', old_has_embedding);
    END IF;

    -- ts_config: the scope's text-search configuration (dna.set_search_config; default english), read
    -- by its own statement (Citus: no function reading dna_* tables inside a statement on a shard).
    SELECT c.ts_config INTO ts FROM dna.search_config(scope) AS c;
    -- A memory's search row carries its record's world time (dna.search filters on it), read here
    -- by statements of their own: on Citus nothing inside the shard's INSERT may read a table (D5).
    -- The row trigger dna_search_docs_valid_at, which does the same for a plain INSERT or UPDATE,
    -- stands aside for this statement (dna.valid_at_mirrored). Other Kinds keep the valid_at they have.
    memory := dna.kind_has_trait(kind, 'memory.recallable');
    IF memory THEN
        valid := dna.record_valid_at(scope, kind, name, tenant);
        meta := dna.record_metadata(scope, kind, name, tenant);   -- and its metadata (sql/metadata.sql)
    END IF;
    -- One writing statement, so one event and one BM25 upkeep (the statement trigger
    -- dna.bm25_sync): an UPDATE of the stored row, or an INSERT of a new one, as the probe above
    -- found. INSERT … ON CONFLICT DO UPDATE would fire both the INSERT and the UPDATE statement
    -- triggers, two upkeeps per call. Under a race (the row came or went since the probe) the
    -- statement that found nothing to write is followed by the upsert, which writes in every case.
    PERFORM dna.mirror_valid_at(true);
    IF old_hash IS NOT NULL THEN
        EXECUTE format('UPDATE %s AS t
                        SET text_hash = $6, title = $7, snippet = $8, body = $9, embedding = $10, ts_config = $11,
                            heading = NULL, char_start = NULL, char_end = NULL, updated_at = $15,
                            valid_at = CASE WHEN $12 THEN $13 ELSE t.valid_at END,
                            metadata = CASE WHEN $12 THEN coalesce($14, ''{}''::jsonb) ELSE t.metadata END
                        WHERE t.scope = $1 AND t.kind = $2 AND t.name = $3 AND t.tenant = $4 AND t.model_id = $5
                          AND t.passage = 0', tbl)
            USING scope, kind, name, tenant, model_id, new_hash, title,
                  coalesce(snippet, dna.text_snippet(body)),
                  coalesce(body, ''), emb, ts, memory, valid, meta,
                  now();                                 -- the transaction's time, as a value (Citus: B3)
    ELSE
        EXECUTE format('INSERT INTO %s AS t (scope, kind, name, tenant, model_id, text_hash, title, snippet, body,
                                            embedding, ts_config, valid_at, metadata)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13, coalesce($14, ''{}''::jsonb))
                        ON CONFLICT (scope, kind, name, tenant, model_id, passage) DO NOTHING', tbl)
            USING scope, kind, name, tenant, model_id, new_hash, title,
                  coalesce(snippet, dna.text_snippet(body)),
                  coalesce(body, ''), emb, ts, memory, valid, meta;
    END IF;
    GET DIAGNOSTICS written = ROW_COUNT;
    IF written = 0 THEN                                  -- a concurrent writer came between: the upsert
        EXECUTE format('INSERT INTO %s AS t (scope, kind, name, tenant, model_id, text_hash, title, snippet, body,
                                            embedding, ts_config, valid_at, metadata)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13, coalesce($14, ''{}''::jsonb))
                        ON CONFLICT (scope, kind, name, tenant, model_id, passage) DO UPDATE
                        SET text_hash = excluded.text_hash, title = excluded.title, snippet = excluded.snippet,
                            body = excluded.body, embedding = excluded.embedding, ts_config = excluded.ts_config,
                            heading = NULL, char_start = NULL, char_end = NULL, updated_at = excluded.updated_at,
                            valid_at = CASE WHEN $12 THEN excluded.valid_at ELSE t.valid_at END,
                            metadata = CASE WHEN $12 THEN excluded.metadata ELSE t.metadata END', tbl)
            USING scope, kind, name, tenant, model_id, new_hash, title,
                  coalesce(snippet, dna.text_snippet(body)),
                  coalesce(body, ''), emb, ts, memory, valid, meta;
    END IF;
    PERFORM dna.mirror_valid_at(false);
    RETURN jsonb_build_object('table', tbl::text, 'model_id', model_id, 'action', action,
                              'text_hash', new_hash, 'embedded', emb IS NOT NULL);
END
$$;

COMMENT ON FUNCTION dna.index_document(text, text, text, text, vector, text, text, text, text, boolean) IS
'Upserts one document, whole (its passage 0; passages 1… of an earlier indexing as passages are deleted), '
'into dna.dna_search_docs_<width> keyed by (scope, kind, name, tenant, model_id, passage). '
'The width is vector_dims(embedding), or the registered width of model_id when embedding is NULL '
'(lexical-only). The text is tokenized with the scope''s ts_config (dna.search_config; default english) '
'and its BM25 postings and statistics are updated by trigger in the same transaction (one writing statement per call, an UPDATE or an INSERT: '
'one BM25 upkeep). Idempotent by dna.text_hash(title, body): unchanged text writes nothing. A zero vector '
'is stored as NULL (no cosine); a vector with a component beyond the halfvec range (|x| > 65504) is stored at unit '
'length (dna.storable_vector: the same cosine at every width; 3072-d is indexed as halfvec). Returns {table, model_id, action: inserted|updated|embedded|unchanged, '
'text_hash, embedded}. snippet: NULL = dna.text_snippet(body). Limits: keys <= 200/512 chars, text <= 1,000,000 bytes (title + body); every text within it is '
'indexed: its tsvector is dna.text_tsvector''s, bounded under PostgreSQL''s 1 MB tsvector limit (a text whose plain '
'tsvector would pass it, e.g. 720 KB of distinct random words, is found lexically by a prefix that fits; index a long '
'document as passages: dna index --passages, docs/passages.md). Errors: 22023 (blank '
'key, a scope or kind outside the name rule (dna.check_scope / dna.check_kind), empty text, unknown model_id without a vector, width differing from the registered one), '
'22000 (a NaN or infinite component: pgvector refuses the value as it is read, before this function runs; '
'nothing is written), 22001 (too long), 42P01 (no table for the width; nothing is written), 42501 (reserved tenant, not a member, no identity). personal => true indexes into the '
'caller''s personal partition (dna.resolve_tenant).';

DROP FUNCTION IF EXISTS dna.index_documents(text, text[], text[], text[], vector[], text, text[], text, text[], boolean);  -- before passages (0013_passages)
CREATE OR REPLACE FUNCTION dna.index_documents(
    scope text, kinds text[], names text[], bodies text[],
    embeddings vector[] DEFAULT NULL, model_id text DEFAULT NULL,
    titles text[] DEFAULT NULL, tenant text DEFAULT '', snippets text[] DEFAULT NULL, personal boolean DEFAULT false,
    passages integer[] DEFAULT NULL, headings text[] DEFAULT NULL,
    char_starts integer[] DEFAULT NULL, char_ends integer[] DEFAULT NULL)
RETURNS TABLE (ord integer, kind text, name text, action text, text_hash text, embedded boolean, passage integer)
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    n integer := coalesce(cardinality(names), 0);
    dims integer;
    lo integer;
    tbl regclass;
    cfg record;
    bad record;
    memory_kinds text[];
BEGIN
    scope := dna.check_scope(scope);                     -- the name rule (sql/catalog.sql): 22023 / 22001
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    PERFORM dna.check_key('model_id', model_id, 200);
    IF coalesce(cardinality(kinds), 0) <> n OR coalesce(cardinality(bodies), 0) <> n
       OR coalesce(cardinality(embeddings), n) <> n OR coalesce(cardinality(titles), n) <> n
       OR coalesce(cardinality(snippets), n) <> n OR coalesce(cardinality(passages), n) <> n
       OR coalesce(cardinality(headings), n) <> n OR coalesce(cardinality(char_starts), n) <> n
       OR coalesce(cardinality(char_ends), n) <> n THEN
        RAISE EXCEPTION 'the document arrays must have one element per name: names %, kinds %, bodies %, '
                        'embeddings %, titles %, snippets %, passages %, headings %, char_starts %, char_ends %',
                        n, cardinality(kinds), cardinality(bodies), cardinality(embeddings), cardinality(titles),
                        cardinality(snippets), cardinality(passages), cardinality(headings),
                        cardinality(char_starts), cardinality(char_ends)
            USING ERRCODE = '22023';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    IF n > 100000 THEN
        RAISE EXCEPTION '% documents in one call; the limit is 100000: send batches', n USING ERRCODE = '54000';
    END IF;

    -- Every document (passage) is checked before anything is written: the first bad one is named.
    SELECT u.i, u.kind, u.name,
           CASE WHEN u.kind IS NULL OR btrim(u.kind) = '' THEN '22023:kind is required'
                WHEN length(u.kind) > 200 THEN '22001:kind is longer than 200 characters'
                WHEN u.name IS NULL OR btrim(u.name) = '' THEN '22023:name is required'
                WHEN length(u.name) > 512 THEN '22001:name is longer than 512 characters'
                WHEN coalesce(btrim(u.body), '') = '' AND coalesce(btrim(u.title), '') = ''
                    THEN '22023:nothing to index: title and body are both empty'
                WHEN octet_length(coalesce(u.body, '')) + octet_length(coalesce(u.title, '')) > 1000000
                    THEN format('22001:text is %s bytes; the limit is 1000000 bytes per document: split it',
                                octet_length(coalesce(u.body, '')) + octet_length(coalesce(u.title, '')))
                WHEN passages IS NOT NULL AND u.passage IS NULL THEN '22023:passage ordinal is NULL'
                WHEN u.passage < 0 OR u.passage >= 100000 THEN
                    format('22023:passage ordinal %s is outside 0..99999', u.passage)
                WHEN u.cs < 0 OR u.ce < u.cs OR (u.cs IS NULL) <> (u.ce IS NULL) THEN
                    format('22023:character span [%s, %s) is not a span (0 <= char_start <= char_end, both or neither)',
                           coalesce(u.cs::text, 'NULL'), coalesce(u.ce::text, 'NULL'))
           END AS reason
    INTO bad
    FROM unnest(kinds, names, titles, bodies, passages, char_starts, char_ends)
         WITH ORDINALITY AS u (kind, name, title, body, passage, cs, ce, i)
    WHERE u.kind IS NULL OR btrim(u.kind) = '' OR length(u.kind) > 200
       OR u.name IS NULL OR btrim(u.name) = '' OR length(u.name) > 512
       OR (coalesce(btrim(u.body), '') = '' AND coalesce(btrim(u.title), '') = '')
       OR octet_length(coalesce(u.body, '')) + octet_length(coalesce(u.title, '')) > 1000000
       OR (passages IS NOT NULL AND u.passage IS NULL) OR u.passage < 0 OR u.passage >= 100000
       OR u.cs < 0 OR u.ce < u.cs OR (u.cs IS NULL) <> (u.ce IS NULL)
    ORDER BY u.i
    LIMIT 1;
    IF bad.reason IS NOT NULL THEN
        RAISE EXCEPTION 'document % (%/%): %', bad.i, coalesce(bad.kind, 'NULL'), coalesce(bad.name, 'NULL'),
            substr(bad.reason, 7) USING ERRCODE = left(bad.reason, 5);
    END IF;
    PERFORM dna.check_kind(k.kind) FROM (SELECT DISTINCT u.kind FROM unnest(kinds) AS u (kind)) AS k;
    IF passages IS NULL THEN
        SELECT u.kind, u.name, count(*) AS n, min(u.i) AS first, max(u.i) AS last INTO bad
        FROM unnest(kinds, names) WITH ORDINALITY AS u (kind, name, i)
        GROUP BY u.kind, u.name HAVING count(*) > 1 ORDER BY min(u.i) LIMIT 1;
        IF bad.n IS NOT NULL THEN
            RAISE EXCEPTION 'document %/% appears % times in one call (positions % and %)', bad.kind, bad.name,
                bad.n, bad.first, bad.last
                USING ERRCODE = '22023', HINT = 'Send each (kind, name) once per call; the last text wins only across calls.';
        END IF;
    ELSE
        -- A document named in the call gets exactly the passages given: 0..n-1, each once.
        SELECT u.kind, u.name, count(*) AS n, count(DISTINCT u.passage) AS distinct_n, max(u.passage) AS last,
               min(u.i) AS first INTO bad
        FROM unnest(kinds, names, passages) WITH ORDINALITY AS u (kind, name, passage, i)
        GROUP BY u.kind, u.name
        HAVING count(DISTINCT u.passage) <> count(*) OR max(u.passage) <> count(*) - 1
        ORDER BY min(u.i) LIMIT 1;
        IF bad.n IS NOT NULL THEN
            RAISE EXCEPTION 'document %/% (from position %): its % passages must be numbered 0..% once each, '
                            'got % distinct ordinals up to %', bad.kind, bad.name, bad.first, bad.n, bad.n - 1,
                            bad.distinct_n, bad.last
                USING ERRCODE = '22023',
                      HINT = 'Send all passages of a document in one call, ordinals 0, 1, 2, … (the document is replaced by them).';
        END IF;
    END IF;

    -- One width per call: the vectors' (all equal), else the registered width of model_id.
    SELECT min(vector_dims(e)), max(vector_dims(e)) INTO lo, dims FROM unnest(embeddings) AS e WHERE e IS NOT NULL;
    IF lo IS DISTINCT FROM dims THEN
        RAISE EXCEPTION 'embeddings of one call must have one width, got % and %', lo, dims USING ERRCODE = '22023';
    END IF;
    IF dims IS NOT NULL THEN
        PERFORM dna.register_model(model_id, dims);       -- routes (42P01) and checks the width (22023)
    ELSE
        dims := dna.model_dims(model_id);                 -- unknown model without a vector: 22023
    END IF;
    tbl := dna.search_table(dims);
    SELECT * INTO cfg FROM dna.search_config(scope);
    -- The memory Kinds among the call's (a statement of its own: Citus, D5): their rows carry their
    -- record's world time, read by the statement below; the valid_at row trigger stands aside for it.
    memory_kinds := ARRAY(SELECT k.kind FROM unnest(dna.recallable_kinds()) AS k (kind) WHERE k.kind = ANY (kinds));

    -- One statement: classify every passage against the stored row of its ordinal, reuse the vector
    -- of an unchanged text that moved to another ordinal, upsert what changed in (kind, name,
    -- passage) order (so concurrent batches lock rows in one order), delete the passages a document
    -- no longer has, and answer one row per input element (plus one per deleted passage).
    PERFORM dna.mirror_valid_at(true);
    RETURN QUERY EXECUTE format($sql$
        WITH src AS (
            SELECT u.i::integer AS ord, u.kind, u.name, coalesce(u.passage, 0) AS passage, u.title,
                   coalesce(u.body, '') AS body,
                   coalesce(u.snippet, dna.text_snippet(u.body)) AS snippet,
                   u.heading, u.cs, u.ce,
                   CASE WHEN u.emb IS NOT NULL AND vector_norm(u.emb) > 0 THEN dna.storable_vector(u.emb) END AS emb,
                   dna.text_hash(u.title, u.body) AS h,
                   CASE WHEN u.kind = ANY ($15::text[]) THEN (
                       SELECT i.valid_at FROM dna.dna_instances AS i
                       JOIN dna.dna_kinds AS k ON k.kind = i.kind AND k.api_version = i.api_version
                       WHERE i.scope = $1 AND i.kind = u.kind AND i.name = u.name AND i.tenant = $2) END AS valid,
                   CASE WHEN u.kind = ANY ($15::text[]) THEN (
                       SELECT i.metadata FROM dna.dna_instances AS i
                       JOIN dna.dna_kinds AS k ON k.kind = i.kind AND k.api_version = i.api_version
                       WHERE i.scope = $1 AND i.kind = u.kind AND i.name = u.name AND i.tenant = $2) END AS meta
            FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::vector[], $11::integer[],
                        $12::text[], $13::integer[], $14::integer[])
                 WITH ORDINALITY AS u (kind, name, title, body, snippet, emb, passage, heading, cs, ce, i)),
        cls AS (
            SELECT s.*, t.embedding IS NOT NULL AS had_embedding,
                   CASE WHEN t.text_hash IS NULL THEN 'inserted'
                        WHEN t.text_hash <> s.h THEN 'updated'
                        WHEN coalesce(s.emb, r.embedding) IS NOT NULL AND t.embedding IS NULL THEN 'embedded'
                        WHEN t.heading IS DISTINCT FROM s.heading OR t.char_start IS DISTINCT FROM s.cs
                          OR t.char_end IS DISTINCT FROM s.ce OR t.snippet IS DISTINCT FROM s.snippet THEN 'moved'
                        ELSE 'unchanged' END AS action,
                   coalesce(s.emb, CASE WHEN t.text_hash = s.h THEN t.embedding END, r.embedding) AS new_emb
            FROM src AS s
            -- One unique-key probe per element (LATERAL … OFFSET 0, never a hash join over a scan of
            -- the whole table: that grew every batch of a bulk load with the table).
            LEFT JOIN LATERAL (
                SELECT t.text_hash, t.embedding, t.heading, t.char_start, t.char_end, t.snippet FROM %1$s AS t
                WHERE t.scope = $1 AND t.kind = s.kind AND t.name = s.name AND t.tenant = $2
                  AND t.model_id = $3 AND t.passage = s.passage OFFSET 0) AS t ON true
            -- The same text stored at another ordinal of the document keeps its vector (no re-embedding).
            LEFT JOIN LATERAL (
                SELECT x.embedding FROM %1$s AS x
                WHERE s.emb IS NULL AND t.text_hash IS DISTINCT FROM s.h
                  AND x.scope = $1 AND x.kind = s.kind AND x.name = s.name AND x.tenant = $2 AND x.model_id = $3
                  AND x.text_hash = s.h AND x.embedding IS NOT NULL
                LIMIT 1) AS r ON true),
        w AS (
            INSERT INTO %1$s AS t (scope, kind, name, tenant, model_id, passage, text_hash, title, snippet, body,
                                   embedding, ts_config, heading, char_start, char_end, valid_at, metadata)
            SELECT $1, c.kind, c.name, $2, $3, c.passage, c.h, c.title,
                   c.snippet, c.body, c.new_emb, $10,
                   c.heading, c.cs, c.ce, c.valid, coalesce(c.meta, '{}'::jsonb)
            FROM cls AS c WHERE c.action <> 'unchanged'
            ORDER BY c.kind, c.name, c.passage
            ON CONFLICT (scope, kind, name, tenant, model_id, passage) DO UPDATE
            SET text_hash = excluded.text_hash, title = excluded.title, snippet = excluded.snippet,
                body = excluded.body, embedding = excluded.embedding, ts_config = excluded.ts_config,
                heading = excluded.heading, char_start = excluded.char_start, char_end = excluded.char_end,
                updated_at = excluded.updated_at,
                valid_at = CASE WHEN t.kind = ANY ($15::text[]) THEN excluded.valid_at ELSE t.valid_at END,
                metadata = CASE WHEN t.kind = ANY ($15::text[]) THEN excluded.metadata ELSE t.metadata END
            RETURNING 1),
        docs AS (
            SELECT s.kind, s.name, max(s.passage) AS last FROM src AS s GROUP BY s.kind, s.name),
        gone AS (
            -- the passages past each document's last, found by key probes (as above), deleted by
            -- doc_id (its unique (scope, doc_id) index; Citus refuses a ctid here, citus-probe-3 D4)
            DELETE FROM %1$s AS t
            WHERE t.scope = $1 AND t.doc_id = ANY (ARRAY(
                SELECT x.doc_id FROM docs AS d
                CROSS JOIN LATERAL (SELECT y.doc_id FROM %1$s AS y
                                    WHERE y.scope = $1 AND y.kind = d.kind AND y.name = d.name AND y.tenant = $2
                                      AND y.model_id = $3 AND y.passage > d.last OFFSET 0) AS x))
            RETURNING t.kind, t.name, t.passage)
        SELECT c.ord, c.kind, c.name, c.action, c.h,
               CASE WHEN c.action = 'unchanged' THEN c.had_embedding ELSE c.new_emb IS NOT NULL END, c.passage
        FROM cls AS c
        WHERE (SELECT count(*) FROM w) >= 0
        UNION ALL
        SELECT NULL::integer, g.kind, g.name, 'deleted', NULL::text, false, g.passage FROM gone AS g
        ORDER BY 1 NULLS LAST, 2, 3, 7$sql$, tbl)
        USING scope, tenant, model_id, kinds, names, titles, bodies, snippets, embeddings, cfg.ts_config,
              passages, headings, char_starts, char_ends, memory_kinds;
    PERFORM dna.mirror_valid_at(false);
END
$$;

COMMENT ON FUNCTION dna.index_documents(text, text[], text[], text[], vector[], text, text[], text, text[], boolean, integer[], text[], integer[], integer[]) IS
'Set-based dna.index_document: upserts many documents of one scope, tenant and model_id in one statement, '
'whole or as passages. kinds, names, bodies (and titles, snippets, embeddings, passages, headings, '
'char_starts, char_ends when given) are parallel arrays, one element per document — or, with passages, one '
'per passage: passages[i] is the 0-based ordinal of element i in its document (kind, name), heading its '
'heading path (e.g. ''Install > From source''), [char_start, char_end) its span in the parent''s text '
'(characters). A document named in a call ends up with exactly the passages given (ordinals 0..n-1, each '
'once; the ones it no longer has are deleted); without passages each element is a whole document (passage 0, '
'its passages 1… deleted). At most 100000 elements per call. Embeddings: one width per call (a NULL element: '
'lexical only, unless the same text — dna.text_hash(title, body) — is already stored with a vector at any '
'ordinal of that document, which it then keeps: unchanged passages are never re-embedded); a zero vector '
'is stored as NULL; without any, model_id must be registered. Idempotent by text hash. Returns one row per '
'input element in input order: ord (1-based position), kind, name, action (inserted|updated|embedded|moved|'
'unchanged; moved = same text, new heading/span/snippet), text_hash, embedded, passage; then one row per '
'deleted passage (ord NULL, action deleted). A NULL title is stored as NULL; a NULL snippet as dna.text_snippet(body). Every element is '
'checked before anything is written; the error names the first bad one by position. Errors: 22023 (blank '
'keys, a scope or kind outside the name rule (dna.check_scope / dna.check_kind), empty text, arrays of different lengths, a (kind, name) twice without passages, passage ordinals not '
'0..n-1, a bad span, mixed widths, unknown model_id without vectors), 22001 (kind > 200, name > 512 '
'characters, text > 1000000 bytes per element; every text within it is indexed, its tsvector bounded by '
'dna.text_tsvector as in dna.index_document), 54000 (more than 100000 elements), 42P01 (no table for the '
'width), 42501 (reserved tenant, not a member, no identity).';

DROP FUNCTION IF EXISTS dna.index_staged(text, uuid, text, text, boolean);  -- before passages (0013_passages)
CREATE OR REPLACE FUNCTION dna.index_staged(scope text, batch uuid, model_id text, tenant text DEFAULT '',
                                            personal boolean DEFAULT false)
RETURNS TABLE (ord integer, kind text, name text, action text, text_hash text, embedded boolean, passage integer)
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    b record;
BEGIN
    IF batch IS NULL THEN
        RAISE EXCEPTION 'batch is required' USING ERRCODE = '22023';
    END IF;
    WITH gone AS (
        DELETE FROM dna.dna_index_staging AS s WHERE s.batch = batch AND s.owner = current_user::text
        RETURNING s.ord, s.kind, s.name, s.title, s.body, s.snippet, s.embedding, s.passage, s.heading,
                  s.char_start, s.char_end)
    SELECT array_agg(g.ord ORDER BY g.ord) AS ords, array_agg(g.kind ORDER BY g.ord) AS kinds,
           array_agg(g.name ORDER BY g.ord) AS names, array_agg(g.title ORDER BY g.ord) AS titles,
           array_agg(g.body ORDER BY g.ord) AS bodies, array_agg(g.snippet ORDER BY g.ord) AS snippets,
           array_agg(g.embedding ORDER BY g.ord) AS embeddings,
           CASE WHEN count(g.passage) > 0 THEN array_agg(g.passage ORDER BY g.ord) END AS passages,
           array_agg(g.heading ORDER BY g.ord) AS headings, array_agg(g.char_start ORDER BY g.ord) AS char_starts,
           array_agg(g.char_end ORDER BY g.ord) AS char_ends, count(DISTINCT g.ord) AS distinct_ords,
           count(*) AS n
    INTO b FROM gone AS g;
    IF b.n = 0 THEN
        RAISE NOTICE 'no staged rows for batch % (of role %): nothing indexed', batch, current_user
            USING ERRCODE = '02000', HINT = 'COPY into dna.dna_index_staging and call dna.index_staged in one transaction.';
        RETURN;
    END IF;
    IF b.distinct_ords <> b.n THEN
        RAISE EXCEPTION 'staged batch % has % rows but % distinct ord values', batch, b.n, b.distinct_ords
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT b.ords[r.ord], r.kind, r.name, r.action, r.text_hash, r.embedded, r.passage
    FROM dna.index_documents(scope, b.kinds, b.names, b.bodies, b.embeddings, model_id, b.titles, tenant,
                             b.snippets, personal, b.passages, b.headings, b.char_starts, b.char_ends) AS r;
END
$$;

COMMENT ON FUNCTION dna.index_staged(text, uuid, text, text, boolean) IS
'The COPY path of dna.index_documents: in one transaction, COPY documents into dna.dna_index_staging '
'(batch uuid, ord integer, kind, name, title, body, snippet, embedding, and for passages passage, heading, '
'char_start, char_end) under a fresh batch uuid, then call this: it consumes the batch''s rows and indexes '
'them (result as dna.index_documents, ord = the staged ord; a batch whose passage column is all NULL holds '
'whole documents). Only the role that staged a batch consumes it, and a transaction that leaves staged rows cannot '
'commit (55000 at COMMIT, from the constraint trigger dna_index_staging_consumed), so staged text is '
'never visible to another session. An unknown or empty batch returns no rows. Errors: as '
'dna.index_documents (on error the staged rows go with the rolled-back transaction); 22023 for a NULL '
'batch or ord values repeated in a batch.';

CREATE OR REPLACE FUNCTION dna.index_staging_consumed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM dna.dna_index_staging AS s WHERE s.batch = NEW.batch AND s.ord = NEW.ord) THEN
        RAISE EXCEPTION 'staged batch % was not consumed: call dna.index_staged(scope, batch, model_id) in the '
                        'transaction that staged it (or roll it back)', NEW.batch
            USING ERRCODE = '55000';
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION dna.index_staging_consumed() IS
'Deferred constraint trigger on dna.dna_index_staging: at COMMIT, refuses (55000) a transaction that '
'staged rows and did not consume them with dna.index_staged.';

CREATE OR REPLACE FUNCTION dna.stale_documents(
    scope text, model_id text, kinds text[], names text[], titles text[], bodies text[],
    tenants text[] DEFAULT NULL)
RETURNS SETOF integer
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    tbl regclass := dna.search_table(dna.model_dims(model_id));
BEGIN
    PERFORM dna.check_tenant(t) FROM unnest(tenants) AS t;   -- personal:* refused (42501)
    -- 1-based positions of the given texts (documents or passages) that need an embedding: no row of
    -- that document (any passage ordinal) stores this text with a vector.
    RETURN QUERY EXECUTE format(
        'SELECT d.ord::integer
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
              AS d(kind, name, title, body, tenant, ord)
         WHERE NOT EXISTS (
             SELECT 1 FROM %s AS t
             WHERE t.scope = $1 AND t.kind = d.kind AND t.name = d.name AND t.tenant = coalesce(d.tenant, '''')
               AND t.model_id = $7 AND t.text_hash = dna.text_hash(d.title, d.body) AND t.embedding IS NOT NULL)
         ORDER BY d.ord', tbl)
        USING scope, kinds, names, titles, bodies, tenants, model_id;
END
$$;

COMMENT ON FUNCTION dna.stale_documents(text, text, text[], text[], text[], text[], text[]) IS
'Given parallel arrays describing documents (or passages: one element per passage, kind and name of its '
'document), returns the 1-based positions that need an embedding for model_id in scope: no row of that '
'document, at any passage ordinal, stores the same text (dna.text_hash(title, body)) with a vector. Clients call it before '
'embedding so unchanged text is never re-embedded. Errors: as dna.model_dims.';

DROP FUNCTION IF EXISTS dna.delete_document(text, text, text, text, text);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.delete_document(scope text, kind text, name text, tenant text DEFAULT '',
                                               model_id text DEFAULT NULL, personal boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    w integer;
    n integer;
    total integer := 0;
BEGIN
    scope := dna.check_key('scope', scope, 200);
    kind := dna.check_key('kind', kind, 200);
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('DELETE FROM dna.%I AS t WHERE t.scope = $1 AND t.kind = $2 AND t.name = $3
                        AND t.tenant = $4 AND ($5::text IS NULL OR t.model_id = $5)', 'dna_search_docs_' || w)
            USING scope, kind, name, tenant, model_id;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    RETURN total;
END
$$;

COMMENT ON FUNCTION dna.delete_document(text, text, text, text, text, boolean) IS
'Removes a document from both lanes of every width table (for one model_id, or all when NULL); its '
'BM25 postings and statistics go with it (trigger). '
'Returns the number of rows deleted (0 when absent). personal => true: the caller''s personal partition. '
'Errors: 22023 for blank keys, 42501 (reserved tenant, not a member, no identity).';

