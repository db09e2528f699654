-- pydna SQL package — memory plane: the verbs.
--
-- Memory is not a new store: it is the Kinds that declare the trait `memory.recallable` (seeded:
-- Engram, Research, Evidence) in dna.dna_instances, indexed into the search tables like any record.
-- Every verb is one function returning jsonb: dna.remember, dna.recall (here), dna.forget, dna.revive,
-- dna.list_memories (sql/memory_lifecycle.sql) and dna.consolidate (sql/consolidate.sql). Pure scoring functions take `now`
-- as an argument and reproduce ../shared/conformance/dna/memory-scoring.json (the DNA SDK goldens,
-- ruinosus/dna, MIT) to 1e-12.
--
-- Two clocks. World (valid) time: spec.valid_from / spec.valid_to, mirrored into the column
-- valid_at = [valid_from, valid_to); `now` arguments read it. Transaction time: dna.dna_versions
-- .created_at, the instant a version was written; `as_of` arguments read it.
--
-- Triggers (created by migration 0002_memory): dna.instances_before_write (bitemporal guard +
-- valid_at mirror), dna.instances_after_write (append the envelope to dna_versions, prune past
-- the Kind's retention), dna.instances_refuse_delete and dna.search_docs_refuse_delete (DELETE of
-- an invalidate-only Kind is refused; the error names dna.forget).
--
-- SQLSTATEs used: 22023 invalid argument, 22001 too long, 22007 bad timestamp, P0002 no such
-- memory, 23001 refused delete (restrict_violation), 42501 reserved tenant (dna.check_tenant).
--
-- The memory plane's files, in the order a fresh install runs them (migration 0017_recall_past_ingest):
-- memory_time.sql (time helpers), memory_scoring.sql (pure scoring, conformance goldens),
-- memory_ranking.sql (how the factors enter recall's ranking), memory_kinds.sql (memory Kinds,
-- specs and claims), memory_write.sql (the write path's trigger functions), memory_as_of.sql
-- (reading the past), memory_verbs.sql (dna.remember, dna.recall), memory_lifecycle.sql (forget,
-- revive, list_memories), memory_erasure.sql, memory_integrity.sql, memory_contradictions.sql.

-- ---------------------------------------------------------------------------------------------
-- Verbs
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.memory_name(kind text, spec jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT 'rem-' || left(encode(sha256(convert_to(kind || E'\n' || dna.engram_text(spec) || E'\n' ||
                                                       coalesce(spec ->> 'summary', ''), 'UTF8')), 'hex'), 16)
    );
END
$$;

COMMENT ON FUNCTION dna.memory_name(text, jsonb) IS
'The stable name of a memory given without one: rem- and 16 hex digits of SHA-256 over its Kind and '
'text, so remembering the same text twice names the same memory. Pure.';

CREATE OR REPLACE FUNCTION dna.memory_not_found(verb text, scope text, kind text, name text, tenant text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
BEGIN
    -- Most often a typo: the hint names the nearest names of the partition (dna.nearest_names over
    -- the 200 names beside it in sort order, so that the error path stays cheap in a large scope), or,
    -- when no row the caller can see stands under the scope (a misspelt scope), the nearest scopes.
    IF NOT dna.scope_exists(scope) THEN
        RAISE EXCEPTION '%: no %/% in scope % (tenant %)', verb, kind, name, quote_literal(scope), quote_literal(tenant)
            USING ERRCODE = 'P0002',
                  HINT = format('Scope %s has no documents or memories you can see; nearest scopes: %s '
                                '(dna.scopes() lists them).', quote_literal(scope), dna.nearest_scopes_text(scope, 3));
    END IF;
    RAISE EXCEPTION '%: no %/% in scope % (tenant %)', verb, kind, name, quote_literal(scope), quote_literal(tenant)
        USING ERRCODE = 'P0002',
              HINT = format('Nearest %s names here: %s (dna.list_memories lists them).', kind,
                            dna.nearest_names_text(name, ARRAY(
                                (SELECT i.name FROM dna.dna_instances AS i
                                 WHERE i.scope = memory_not_found.scope AND i.kind = memory_not_found.kind
                                   AND i.tenant = memory_not_found.tenant AND i.name >= memory_not_found.name
                                 ORDER BY i.name LIMIT 100)
                                UNION
                                (SELECT i.name FROM dna.dna_instances AS i
                                 WHERE i.scope = memory_not_found.scope AND i.kind = memory_not_found.kind
                                   AND i.tenant = memory_not_found.tenant AND i.name < memory_not_found.name
                                 ORDER BY i.name DESC LIMIT 100)), 3));
END
$$;

COMMENT ON FUNCTION dna.memory_not_found(text, text, text, text, text) IS
'Internal (dna.lock_memory for the write verbs, dna.get_memory, dna.memory_history): raises P0002 '
'"<verb>: no <kind>/<name> in scope … (tenant …)" with the nearest names of the partition in the hint '
'(dna.nearest_names over the 200 names beside it); when no row the caller can see stands under the scope '
'(dna.scope_exists false: most often a misspelt scope), the hint names the nearest scopes instead '
'(dna.nearest_scopes_text): "Scope ''x'' has no documents or memories you can see; nearest scopes: …".';

DROP FUNCTION IF EXISTS dna.lock_memory(text, text, text, text);  -- before required_by
CREATE OR REPLACE FUNCTION dna.lock_memory(scope text, kind text, name text, tenant text,
                                           required_by text DEFAULT NULL, OUT api text, OUT stored jsonb)
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
BEGIN
    SELECT k.api_version INTO api FROM dna.dna_kinds AS k WHERE k.kind = kind;
    -- A name that has no row yet has nothing FOR UPDATE can lock: writers of one key queue on a
    -- transaction-level advisory lock of it first, so the second sees the first's row (the next
    -- statement reads a new snapshot) and answers updated, never a second created.
    PERFORM pg_advisory_xact_lock(hashtextextended(
        'dna.memory' || chr(31) || scope || chr(31) || kind || chr(31) || name || chr(31) || tenant, 0));
    SELECT i.spec INTO stored FROM dna.dna_instances AS i
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant
    FOR UPDATE;
    IF stored IS NULL AND required_by IS NOT NULL THEN   -- spec is NOT NULL: no such row
        PERFORM dna.memory_not_found(required_by, scope, kind, name, tenant);
    END IF;
END
$$;

COMMENT ON FUNCTION dna.lock_memory(text, text, text, text, text) IS
'The row of one memory for a write verb (dna.remember, dna.forget, dna.revive): api = the Kind''s '
'api_version, stored = its spec (NULL when there is no such row), the key locked until the end of the '
'transaction (a transaction-level advisory lock of the key, so that two writers of a new name queue, '
'then the row FOR UPDATE). Arguments are already validated by the caller. required_by (a verb that needs '
'the row, e.g. ''forget''): no such row raises P0002 naming that verb; otherwise no error of its own.';

CREATE OR REPLACE FUNCTION dna.restated_spec(kind text, given jsonb, prepared jsonb, stored jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    lifecycle constant text[] := ARRAY['created_at', 'valid_from', 'valid_to', 'superseded_by_memory', 'revivals',
                                       'cues_history', 'last_surfaced', 'surface_count'];
    f text;
BEGIN
    IF stored IS NULL THEN
        RETURN prepared;
    END IF;
    -- Remembering an existing memory again restates it: the new spec replaces the stored one,
    -- but its life history (lifecycle keys the caller did not give) is kept.
    FOREACH f IN ARRAY lifecycle LOOP
        IF stored ? f AND NOT given ? f THEN
            prepared := jsonb_set(prepared, ARRAY[f], stored -> f);
        END IF;
    END LOOP;
    -- A derived encoding context is the record's own: its time of day is that of the kept created_at.
    IF kind = 'Engram' AND NOT coalesce(jsonb_typeof(given -> 'encoding_context') = 'object'
                                         AND given -> 'encoding_context' <> '{}'::jsonb, false) THEN
        prepared := prepared || jsonb_build_object('encoding_context', dna.derive_encoding_context(prepared));
    END IF;
    RETURN prepared;
END
$$;

COMMENT ON FUNCTION dna.restated_spec(text, jsonb, jsonb, jsonb) IS
'The spec a remember writes over a stored one (NULL: none, prepared is written): prepared (given, through '
'dna.prepare_memory_spec) with the stored lifecycle keys (created_at, valid_from, valid_to, superseded_by_memory, '
'revivals, cues_history, last_surfaced, surface_count) the caller did not give, and an Engram''s derived '
'encoding context recomputed from the kept created_at. dna.remember and dna.remember_many write it. Pure.';

DROP FUNCTION IF EXISTS dna.remember(text, jsonb, text, text, text, timestamptz, vector, text);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.remember(
    scope text, spec jsonb, kind text DEFAULT 'Engram', name text DEFAULT NULL, tenant text DEFAULT '',
    now timestamptz DEFAULT NULL, embedding vector DEFAULT NULL, model_id text DEFAULT NULL,
    personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    merged jsonb;
    action text;
    idx jsonb;
    ver record;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    at := coalesce(dna.check_now(now), now());
    model_id := coalesce(model_id, 'dna-fake-hash-v1');
    merged := dna.prepare_memory_spec(kind, spec, at);     -- validates (22023/22001/22007) before any write
    name := dna.check_key('name', coalesce(name, dna.memory_name(kind, merged)), 512);
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant) AS l;
    IF stored IS NOT NULL THEN
        -- A restatement keeps the stored life history (dna.restated_spec).
        merged := dna.restated_spec(kind, spec, merged, stored);
        action := CASE WHEN merged = stored THEN 'unchanged' ELSE 'updated' END;
    ELSE
        action := 'created';
    END IF;

    IF action <> 'unchanged' THEN
        -- The verb's label rides in the row (op), read by the history trigger wherever it runs.
        INSERT INTO dna.dna_instances AS i (scope, kind, api_version, name, tenant, spec, op)
        SELECT scope, kind, api, name, tenant, merged, 'remember'
        ON CONFLICT ON CONSTRAINT dna_instances_pkey DO UPDATE SET spec = excluded.spec, op = excluded.op;
    END IF;
    SELECT i.spec INTO merged FROM dna.dna_instances AS i
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
    SELECT v.version, v.created_at INTO ver FROM dna.dna_versions AS v
    WHERE v.scope = scope AND v.kind = kind AND v.api_version = api AND v.name = name AND v.tenant = tenant
    ORDER BY v.version DESC LIMIT 1;

    idx := dna.index_document(scope, kind, name, dna.memory_text(kind, merged), embedding, model_id,
                              NULL, CASE WHEN personal IS TRUE THEN '' ELSE tenant END,
                              left(coalesce(nullif(merged ->> 'summary', ''), dna.memory_text(kind, merged)), 240),
                              personal => personal IS TRUE);
    RETURN jsonb_build_object('kind', kind, 'name', name, 'tenant', tenant, 'personal', personal IS TRUE, 'scope', scope, 'spec', merged,
                              'action', action, 'indexed', true, 'index', idx,
                              'version', ver.version, 'recorded_at', dna.iso8601(ver.created_at));
END
$$;

COMMENT ON FUNCTION dna.remember(text, jsonb, text, text, text, timestamptz, vector, text, boolean) IS
'Writes a memory of a memory Kind (default Engram) and indexes it. spec is validated and stamped by '
'dna.prepare_memory_spec at world time now (default now()): created_at, encoding_context and '
'memory_type (Engram), valid_from. name defaults to dna.memory_name (stable: rem-<sha256 of kind and '
'text>). Remembering an existing name restates it: the new spec replaces the stored one, keeping its '
'lifecycle keys (created_at, valid_from, valid_to, superseded_by_memory, revivals, cues_history, '
'last_surfaced, surface_count) unless given, and an encoding context not given is derived from the kept '
'created_at; an identical spec writes nothing. Two writers of the same new name queue (dna.lock_memory): '
'one is answered created, the other updated (or unchanged). The write appends a '
'version (transaction time) through the dna_instances triggers. The text dna.memory_text(kind, spec) '
'(Engram: area title summary body) is indexed by dna.index_document with embedding (NULL = lexical '
'only) under model_id (default dna-fake-hash-v1). personal => true writes the caller''s personal memory '
'(tenant ''personal:<oid>'', resolved from the connected role; 42501 without an identity). Returns {kind, name, tenant, personal, scope, spec, action: '
'created|updated|unchanged, indexed, index, version, recorded_at}. Errors: 22023 (not a memory Kind, '
'bad spec, claims, unknown model_id), 22001 (summary > 280 chars, key too long), 22007 (bad timestamp '
'or infinite now), 42501 (reserved tenant), 42P01 (no table for the embedding width). Atomic.';

CREATE OR REPLACE FUNCTION dna.memory_display(hit jsonb, spec jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    extra jsonb := jsonb_strip_nulls(jsonb_build_object(
        'summary', spec -> 'summary',
        'area', spec -> 'area',
        'affect', coalesce(spec -> 'affect', spec #> '{encoding_context,affect}'),
        'tags', spec -> 'tags',
        'memory_type', spec -> 'memory_type',
        'created_at', coalesce(spec -> 'created_at', spec -> 'valid_from', spec #> '{cues_history,0,at}'),
        'valid_from', spec -> 'valid_from',
        'valid_to', spec -> 'valid_to',
        'title', CASE WHEN coalesce(hit ->> 'title', '') = '' THEN
                      to_jsonb(coalesce(nullif(spec ->> 'title', ''), nullif(spec ->> 'summary', ''))) END));
BEGIN
    IF hit ->> 'title' IS NULL THEN
        hit := hit - 'title';                              -- a JSON null title is replaced
    END IF;
    RETURN extra || hit;                                   -- the hit's own keys win
END
$$;

COMMENT ON FUNCTION dna.memory_display(jsonb, jsonb) IS
'Adds the display fields of a memory spec to a hit without overwriting any: summary, area, affect '
'(or encoding_context.affect), tags, memory_type, created_at (else valid_from, else the first cue), '
'valid_from, valid_to, and title (spec title, else summary) when the hit has none. Absent fields are '
'never fabricated. Pure.';

CREATE OR REPLACE FUNCTION dna.reconsolidated_spec(spec jsonb, now timestamptz, cue text, actor text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN (
        SELECT spec
            || jsonb_build_object(
                   'cues_history',
                   (SELECT coalesce(jsonb_agg(c.value ORDER BY c.ord), '[]'::jsonb)
                    FROM (SELECT e.value, e.ord, count(*) OVER () AS n
                          FROM jsonb_array_elements(
                                   CASE WHEN jsonb_typeof(spec -> 'cues_history') = 'array' THEN spec -> 'cues_history' ELSE '[]' END
                                   || jsonb_build_array(jsonb_build_object('at', dna.iso8601(now), 'cue', left(coalesce(cue, ''), 120),
                                                                           'actor', coalesce(nullif(actor, ''), 'unknown'))))
                               WITH ORDINALITY AS e(value, ord)) AS c
                    WHERE c.ord > c.n - 50),
                   'last_surfaced', dna.iso8601(now),
                   'surface_count', coalesce(CASE WHEN jsonb_typeof(spec -> 'surface_count') = 'number'
                                                  THEN least(greatest((spec ->> 'surface_count')::numeric, 0), 1e15)::bigint END, 0) + 1)
            || CASE WHEN jsonb_typeof(spec -> 'confidence_score') = 'number'
                    THEN jsonb_build_object('confidence_score',
                                            round(least(10.0, (spec ->> 'confidence_score')::numeric + 0.05), 3))
                    ELSE '{}'::jsonb END
    );
END
$$;

COMMENT ON FUNCTION dna.reconsolidated_spec(jsonb, timestamptz, text, text) IS
'A surfaced Engram''s spec after reconsolidation at now: appends {at, cue (first 120 chars), actor} '
'to cues_history (keeps the last 50), sets last_surfaced, surface_count + 1, and a numeric '
'confidence_score becomes min(10, c + 0.05) rounded to 3 places (tiers are left alone). Pure.';

DROP FUNCTION IF EXISTS dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.recall(
    scope text, query text, query_embedding vector DEFAULT NULL, model_id text DEFAULT NULL,
    kinds text[] DEFAULT NULL, k integer DEFAULT 5, tenant text DEFAULT '', reconsolidate boolean DEFAULT true,
    actor text DEFAULT NULL, now timestamptz DEFAULT NULL, as_of timestamptz DEFAULT NULL,
    personal boolean DEFAULT false, decay text DEFAULT NULL, explain boolean DEFAULT false,
    min_similarity double precision DEFAULT NULL, min_lexical_score double precision DEFAULT NULL,
    filter jsonb DEFAULT NULL, context integer DEFAULT 0, "offset" integer DEFAULT 0,
    diversity text DEFAULT NULL, duplicate_similarity double precision DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    world timestamptz;
    depth integer;
    lane_depth integer;
    pooled integer;
    in_force integer;
    semantic_on boolean;
    blank boolean := coalesce(btrim(query), '') = '';
    cands jsonb;
    truncated jsonb := '[]'::jsonb;
    hits jsonb;
    top jsonb;
    h jsonb;
    done jsonb := '[]'::jsonb;
    failed jsonb := '[]'::jsonb;
    result jsonb;
    past_rows dna.past_text[];                       -- as_of: the memories restated since (dna.as_of_past_texts)
    past_keys text[] := '{}';                        -- their keys: name, kind, tenant joined by chr(31)
    removed_dense bigint;                            -- candidates the relevance floors removed (dna.search)
    removed_lexical bigint;
    search_hits dna.search_hit[];                    -- dna.search's answer, by its own statement (Citus)
    upto integer;                                    -- the page's last rank: "offset" + k
    next_offset integer;                             -- where the next page starts (NULL: no more)
    collapsed integer;                               -- diversity: memories collapsed on the way to offset + k
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF k IS NULL OR k < 0 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 0 and 1000, got %', k USING ERRCODE = '22023', HINT = 'k is the number of memories: an integer from 0 to 1000 (0: none).';
    END IF;
    IF "offset" IS NULL OR "offset" < 0 OR "offset" + k > 1000 THEN
        RAISE EXCEPTION 'offset must be between 0 and 1000 - k (%), got %', 1000 - k, coalesce("offset"::text, 'NULL')
            USING ERRCODE = '22023',
            HINT = 'offset is the number of ranks skipped: the page is ranks offset+1 .. offset+k of the recall at '
                   'k => offset + k, which is at most 1000; page p of size k is offset (p - 1) * k, and the answer''s '
                   'next_offset is where the next page starts (NULL: none).';
    END IF;
    upto := "offset" + k;
    kinds := dna.check_memory_kinds(kinds);             -- NULL: every memory Kind
    filter := dna.check_filter(filter);                 -- 22023 with a hint when malformed (sql/metadata.sql)
    IF context IS NULL OR context < 0 OR context > 20 THEN
        RAISE EXCEPTION 'context must be between 0 and 20, got %', coalesce(context::text, 'NULL') USING ERRCODE = '22023',
            HINT = 'context => n returns with each hit of a conversation (Kind Turn) the n turns before and after it; 0: none.';
    END IF;
    PERFORM dna.check_now(now);
    PERFORM dna.check_now(as_of, 'as_of');
    diversity := coalesce(lower(btrim(diversity)), 'collapse');      -- dna.diversify's collapse (sql/fusion.sql)
    PERFORM dna.check_diversity(diversity, duplicate_similarity, NULL, 'dna.recall');
    duplicate_similarity := CASE WHEN diversity = 'collapse' THEN coalesce(duplicate_similarity, dna.default_duplicate_similarity()) END;
    decay := coalesce(lower(btrim(decay)), 'surfaced');
    IF decay NOT IN ('surfaced', 'written', 'off') THEN
        RAISE EXCEPTION 'decay must be surfaced, written or off, got %', quote_literal(decay) USING ERRCODE = '22023',
            HINT = 'surfaced (default): retention counts from last_surfaced; written: from when a never-surfaced '
                   'memory was written; off: no decay.';
    END IF;
    IF as_of IS NOT NULL THEN
        reconsolidate := false;                            -- a read of the past never writes
    END IF;
    world := coalesce(now, as_of, now());                  -- world time follows as_of unless pinned
    -- No model_id: the scope's model with the most documents (of the query vector's width), so a
    -- lexical-only recall reads the rows the scope was indexed with; a scope with none: the fake.
    -- (dna.scope_model: two index probes per width table when the scope has one model, 0024)
    model_id := coalesce(model_id, dna.scope_model(scope, vector_dims(query_embedding)), 'dna-fake-hash-v1');
    semantic_on := query_embedding IS NOT NULL AND vector_norm(query_embedding) > 0 AND NOT blank;
    -- A page is ranks offset+1 .. offset+k of the recall at k => offset + k: the pool and the lanes are
    -- those of that recall (upto), so a page is a window of one ranking.
    depth := least(greatest(3 * upto, 10), 1000);
    actor := coalesce(nullif(actor, ''), session_user::text);
    -- The lanes as deep as dna.search's own at k (its default max(4k, 100), unless the scope sets a
    -- depth), so that the pool's first k are the answer dna.search gives at k.
    lane_depth := (SELECT CASE WHEN sc.dense_candidates IS NULL AND sc.lexical_candidates IS NULL
                               THEN greatest(4 * upto, 100) END FROM dna.search_config(scope) AS sc);

    IF as_of IS NOT NULL THEN
        -- A read of the past ranks the past's text: the memories whose text believed at as_of is not
        -- today's (dna.as_of_past_texts, sql/memory_as_of.sql) are ranked by their text then, not by
        -- their search rows (which hold today's): dna.search(past => …) leaves those rows out of both
        -- lanes and ranks the past tsvector in the lexical lane (BM25 with the lane's own idf and
        -- avg_len), fused with every other candidate (no dense lane: the vector embeds today's text).
        past_rows := ARRAY(SELECT p FROM dna.as_of_past_texts(scope, as_of, query, kinds, tenant) AS p);
        past_keys := ARRAY(SELECT p.name || chr(31) || p.kind || chr(31) || p.tenant FROM unnest(past_rows) AS p);
    END IF;

    -- Candidates: hybrid search over the memory Kinds (the filters run inside each lane), run as its
    -- own statement (on Citus no function reading dna_* tables runs inside a statement pushed to a
    -- shard: sql/tenancy.sql, "Citus rules"); then the spec in force (now) or believed (as_of, from
    -- dna_versions), validity at world time, re-score.
    search_hits := ARRAY(
        SELECT x FROM dna.search(scope, query, query_embedding, model_id, k => depth, kinds => kinds,
                        -- the lanes as deep as dna.search's own at k (its default, unless the scope sets one),
                        -- so that the pool's first k are the answer dna.search gives at k
                        candidates => lane_depth,
                        tenant => CASE WHEN personal IS TRUE THEN '' ELSE tenant END, personal => personal IS TRUE,
                        -- in force at world time inside the lanes; a read of the past (as_of) judges
                        -- validity from the versions believed then, below
                        valid_time => CASE WHEN as_of IS NULL THEN world END,
                        -- as_of: the memories restated since, ranked by their past text (above)
                        past => past_rows,
                        -- relevance floors, each on its own lane (22023 out of range, dna.search's hints)
                        min_similarity => min_similarity, min_lexical_score => min_lexical_score,
                        -- the metadata filter, inside both lanes before their top k
                        filter => filter,
                        -- the whole pool: duplicates are collapsed below, in recall's own order
                        diversity => 'off') AS x);
    WITH s AS MATERIALIZED (
        SELECT row_number() OVER (ORDER BY x.score DESC, x.kind, x.name, x.tenant) AS ord, x.*
        FROM unnest(search_hits) AS x
    ), c AS (
        SELECT s.*, i.spec AS cur_spec, i.valid_at AS cur_valid, i.created_at AS cur_created, i.name IS NOT NULL AS stored,
               dk.embed_fields AS kind_fields,
               av.spec AS past_spec, av.valid_at AS past_valid, av.version AS past_version,
               av.created_at AS past_recorded, hist.first_version
        FROM s
        LEFT JOIN dna.dna_kinds AS dk ON dk.kind = s.kind
        LEFT JOIN LATERAL (SELECT i.spec, i.valid_at, i.created_at, i.name FROM dna.dna_instances AS i   -- one index probe per hit
                           WHERE i.scope = scope AND i.kind = s.kind AND i.api_version = dk.api_version
                             AND i.name = s.name AND i.tenant = s.tenant LIMIT 1) AS i ON true
        LEFT JOIN LATERAL (SELECT v.spec, v.valid_at, v.version, v.created_at FROM dna.dna_versions AS v
                           WHERE as_of IS NOT NULL AND v.scope = scope AND v.kind = s.kind
                             AND v.api_version = dk.api_version AND v.name = s.name AND v.tenant = s.tenant
                             AND v.created_at <= as_of
                           ORDER BY v.version DESC LIMIT 1) AS av ON true
        LEFT JOIN LATERAL (SELECT min(v.version) AS first_version FROM dna.dna_versions AS v
                           WHERE as_of IS NOT NULL AND v.scope = scope AND v.kind = s.kind
                             AND v.api_version = dk.api_version AND v.name = s.name AND v.tenant = s.tenant) AS hist ON true
    ), r AS (
        SELECT c.*, (c.name || chr(31) || c.kind || chr(31) || c.tenant) = ANY (past_keys) AS by_past,
               CASE WHEN as_of IS NULL THEN coalesce(c.cur_spec, '{}'::jsonb) ELSE c.past_spec END AS spec,
               CASE WHEN as_of IS NULL THEN c.cur_valid ELSE c.past_valid END AS valid_at,
               -- blind: no version believed at as_of although the record existed then (its history
               -- was pruned past as_of); a record created after as_of (dna_instances.created_at,
               -- immutable) simply was not there, whatever retention later pruned of its versions
               as_of IS NOT NULL AND c.past_version IS NULL
                   AND (c.first_version IS NULL OR c.first_version > 1)
                   AND (c.cur_created IS NULL OR c.cur_created <= as_of) AS blind
        FROM c
    ), scored AS MATERIALIZED (                            -- the memory factors computed once per row
        SELECT r.*, mf.factor, mf.retention, mf.ecphory
        FROM r
        CROSS JOIN LATERAL dna.memory_factors(r.kind, r.spec, query, world, decay) AS mf
        WHERE NOT r.blind AND r.spec IS NOT NULL
          AND (r.valid_at IS NULL OR r.valid_at @> world)
          AND dna.currently_valid(r.spec ->> 'valid_to', world)
    ), ranked AS (
        -- The hybrid score times the memory's standing (dna.memory_factors: retention × affect); ecphory
        -- breaks ties only. A factor equal for every candidate leaves dna.search's order; no second
        -- ranking (the dense lane counts once).
        SELECT sc.*, sc.score * sc.factor AS rescored
        FROM scored AS sc
    )
    SELECT (SELECT coalesce(jsonb_agg(to_jsonb(r.name) ORDER BY r.name COLLATE "C"), '[]'::jsonb)
            FROM (SELECT DISTINCT r2.name FROM r AS r2 WHERE r2.blind) AS r),
           (SELECT coalesce(jsonb_agg(jsonb_build_object('x', dna.memory_display(
                   jsonb_strip_nulls(jsonb_build_object(
                       'key', rk.name || chr(31) || rk.kind || chr(31) || rk.tenant,
                       'scope', scope, 'kind', rk.kind, 'name', rk.name, 'tenant', rk.tenant,
                       'personal', starts_with(rk.tenant, 'personal:'),
                       'score', rk.rescored, 'search_score', rk.score, 'rank_search', rk.ord,
                       'memory_factor', rk.factor, 'ecphory', rk.ecphory,
                       'retention', round(rk.retention::numeric, 4),
                       -- ranked by its past text: title and snippet from that text, not today's row
                       'title', CASE WHEN NOT rk.by_past THEN rk.title END,
                       'snippet', CASE WHEN rk.by_past THEN left(dna.memory_text_of(rk.kind_fields, rk.spec), 240)
                                       ELSE rk.snippet END,
                       'ranked_by', CASE WHEN rk.by_past THEN 'past_text' END, 'similarity', rk.similarity,
                       'lexical_score', rk.lexical_score, 'rank_dense', rk.rank_dense, 'rank_lexical', rk.rank_lexical,
                       'metadata', CASE WHEN rk.metadata <> '{}'::jsonb THEN rk.metadata END,
                       'recorded_at', dna.iso8601(rk.past_recorded), 'as_of_version', rk.past_version,
                       'explain', CASE WHEN explain THEN jsonb_build_object(
                                      'memory', dna.memory_explain(rk.kind, rk.spec, query, world, decay)) END)),
                   rk.spec), 'spec', rk.spec)
                   ORDER BY rk.rescored DESC, rk.ecphory DESC, rk.name COLLATE "C", rk.kind COLLATE "C",
                            rk.tenant COLLATE "C"), '[]'::jsonb)
            FROM ranked AS rk),
           (SELECT count(*) FROM s), (SELECT count(*) FROM scored),
           (SELECT max(s.floor_removed_dense) FROM s), (SELECT max(s.floor_removed_lexical) FROM s)
    INTO truncated, cands, pooled, in_force, removed_dense, removed_lexical;

    hits := coalesce((SELECT jsonb_agg(e.value -> 'x' ORDER BY e.ord) FROM jsonb_array_elements(cands) WITH ORDINALITY AS e(value, ord)), '[]');
    -- Diversity (collapse): in recall's own order (after the re-score, so the memory of better standing
    -- stays), a memory whose text is a near-duplicate of one above it leaves (dna.diversify: the same
    -- dna.text_key, its text inside the other's, or a cosine >= duplicate_similarity between their vectors;
    -- a past text, ranked by a text its row does not hold, is compared by neither). explain: each hit's
    -- explain.collapsed names the memories collapsed into it. It keeps one more than the page's last rank,
    -- so next_offset knows whether the ranking goes on. Each hit's key is read out of its JSON in a
    -- MATERIALIZED h, so the join to the search rows compares plain columns (leakproof): beneath the
    -- row-level-security policy it stays an index probe per hit (d.kind = h.hit ->> 'kind' is not
    -- leakproof, and a role hashed the whole scope).
    IF diversity = 'collapse' AND jsonb_array_length(hits) > 1 THEN
        EXECUTE format(
            'WITH h AS MATERIALIZED (SELECT e.value AS hit, e.ord::integer AS ord, e.value ->> ''kind'' AS kind,
                                        e.value ->> ''name'' AS name, e.value ->> ''tenant'' AS tenant
                                 FROM jsonb_array_elements($1) WITH ORDINALITY AS e(value, ord)),
             p AS MATERIALIZED (
                 SELECT h.ord, h.hit, CASE WHEN h.hit ->> ''ranked_by'' IS NULL THEN d.embedding END AS embedding,
                        CASE WHEN h.hit ->> ''ranked_by'' IS NULL AND dna.collapses_by_text(h.kind) THEN d.body END AS body
                 FROM h LEFT JOIN %s AS d ON d.scope = $2 AND d.model_id = $3 AND d.kind = h.kind
                                         AND d.name = h.name AND d.tenant = h.tenant AND d.passage = 0),
             x AS MATERIALIZED (
                 SELECT * FROM dna.diversify(ARRAY(SELECT p.embedding FROM p ORDER BY p.ord),
                                             ARRAY(SELECT p.body FROM p ORDER BY p.ord),
                                             ARRAY(SELECT (p.hit ->> ''score'')::float8 FROM p ORDER BY p.ord),
                                             ''collapse'', $4, NULL, $5))
             SELECT coalesce(jsonb_agg(p.hit || CASE WHEN $6 THEN jsonb_build_object(''explain'', p.hit -> ''explain'' || jsonb_strip_nulls(
                        jsonb_build_object(''collapsed'', (SELECT jsonb_agg(jsonb_build_object(
                                ''kind'', q.hit ->> ''kind'', ''name'', q.hit ->> ''name'', ''tenant'', q.hit ->> ''tenant'',
                                ''score'', q.hit -> ''score'', ''rank'', c.pos, ''reason'', c.reason, ''similarity'', c.similarity) ORDER BY c.pos)
                            FROM x AS c JOIN p AS q ON q.ord = c.pos WHERE c.duplicate_of = x.pos))))
                        ELSE ''{}''::jsonb END ORDER BY x.place) FILTER (WHERE x.place IS NOT NULL), ''[]''),
                    count(*) FILTER (WHERE x.duplicate_of IS NOT NULL)
             FROM x JOIN p ON p.ord = x.pos', dna.search_table(dna.model_dims(model_id, scope)))
            INTO hits, collapsed USING hits, scope, model_id, duplicate_similarity, upto + 1, explain IS TRUE;
    END IF;

    top := coalesce((SELECT jsonb_agg(e.value - 'key' ORDER BY e.ord)
                     FROM jsonb_array_elements(hits) WITH ORDINALITY AS e(value, ord)
                     WHERE e.ord > "offset" AND e.ord <= upto), '[]');
    -- A next page when this one is full and the ranking goes on: more ranked memories past it, or a
    -- pool cut at its depth (dna.search had more); within the bound offset + k <= 1000.
    next_offset := CASE WHEN k > 0 AND jsonb_array_length(top) = k AND upto < 1000
                             AND (jsonb_array_length(hits) > upto OR pooled >= depth) THEN upto END;
    -- context => n: each turn of a conversation with the turns around it (sql/conversations.sql)
    top := dna.turn_neighbours(scope, tenant, top, context);
    -- a hit whose claim a newer memory in force contradicts says so, naming it (sql/memory_contradictions.sql)
    IF as_of IS NULL THEN                                  -- a read of the past shows what was believed then
        top := dna.flag_contradicted(scope, tenant, top, world);
    END IF;

    IF reconsolidate THEN
        -- Light reconsolidation of the surfaced Engrams, in one statement; fail-soft and never waits:
        -- a row locked by another writer is skipped (SKIP LOCKED) and named in reconsolidation_errors.
        BEGIN
            WITH want AS (
                SELECT e.value ->> 'name' AS name, e.value ->> 'tenant' AS tenant, e.ord
                FROM jsonb_array_elements(top) WITH ORDINALITY AS e(value, ord) WHERE e.value ->> 'kind' = 'Engram'
                  AND e.value ->> 'tenant' = tenant   -- the cue never lands in another partition (INV-PERSONAL)
            ), locked AS (
                SELECT i.scope, i.kind, i.api_version, i.name, i.tenant
                FROM dna.dna_instances AS i JOIN want AS w ON i.name = w.name AND i.tenant = w.tenant
                WHERE i.scope = scope AND i.kind = 'Engram'
                FOR UPDATE OF i SKIP LOCKED
            ), upd AS (
                UPDATE dna.dna_instances AS i SET spec = dna.reconsolidated_spec(i.spec, world, query, actor),
                                                  op = 'reconsolidate'
                FROM locked AS l
                WHERE i.scope = scope AND i.scope = l.scope AND i.kind = l.kind AND i.api_version = l.api_version
                  AND i.name = l.name AND i.tenant = l.tenant
                RETURNING i.name, i.tenant
            )
            SELECT coalesce((SELECT jsonb_agg(to_jsonb(u.name) ORDER BY w.ord)
                             FROM upd AS u JOIN want AS w ON w.name = u.name AND w.tenant = u.tenant), '[]'::jsonb),
                   coalesce((SELECT jsonb_agg(jsonb_build_object('name', w.name, 'sqlstate', '55P03',
                                                                 'error', 'row locked by another writer; skipped')
                                              ORDER BY w.ord)
                             FROM want AS w WHERE NOT EXISTS (SELECT 1 FROM locked AS l WHERE l.name = w.name
                                                                                      AND l.tenant = w.tenant)), '[]'::jsonb)
            INTO done, failed;
        EXCEPTION WHEN OTHERS THEN
            failed := jsonb_build_array(jsonb_build_object('name', NULL, 'sqlstate', SQLSTATE, 'error', SQLERRM));
            done := '[]'::jsonb;
        END;
    END IF;

    result := jsonb_build_object('query', query, 'scope', scope, 'tenant', tenant, 'personal', personal IS TRUE, 'k', k,
                                 'offset', "offset", 'next_offset', next_offset, 'model_id', model_id,
                                 'degraded', NOT blank AND NOT semantic_on, 'semantic', semantic_on,
                                 'now', dna.iso8601(world), 'decay', decay, 'hits', top,
                                 'reconsolidated', done);
    IF jsonb_array_length(failed) > 0 THEN
        result := result || jsonb_build_object('reconsolidation_errors', failed);
    END IF;
    IF min_similarity IS NOT NULL OR min_lexical_score IS NOT NULL THEN
        -- What the floors removed (dna.search's counts; an answer they emptied has none to read:
        -- dna.search's NOTICE names both counts then, and removed_* are NULL here).
        result := result || jsonb_build_object('floors', jsonb_build_object(
            'min_similarity', min_similarity, 'min_lexical_score', min_lexical_score,
            'removed_dense', removed_dense, 'removed_lexical', removed_lexical));
    END IF;
    IF explain THEN
        -- The memory part of the explanation (each hit's lanes are its rank_dense/similarity and
        -- rank_lexical/lexical_score, its fusion search_score and rank_search).
        result := result || jsonb_build_object('explain', jsonb_strip_nulls(jsonb_build_object(
            'ranking', 'search_score × memory_factor (dna.memory_factors: max(0.05, retention) × affect), ordered '
                       '(score desc, ecphory desc, name, kind, tenant)',
            'decay', decay,
            'diversity', jsonb_build_object('method', diversity, 'duplicate_similarity', duplicate_similarity,
                                            'text_key', CASE WHEN diversity = 'collapse' THEN 'dna.text_key(memory text)' END,
                                            'collapsed', coalesce(collapsed, 0)),
            'pool', jsonb_build_object('asked', depth, 'returned', pooled, 'in_force', in_force,
                                       'dropped', pooled - in_force,
                                       'lane_candidates', coalesce(to_jsonb(lane_depth), '"the scope''s setting"'::jsonb)),
            'filters', jsonb_build_object('kinds', to_jsonb(kinds), 'tenant', tenant, 'personal', personal IS TRUE,
                                          'valid_time', CASE WHEN as_of IS NULL THEN dna.iso8601(world) END,
                                          'world_time', dna.iso8601(world), 'as_of', dna.iso8601(as_of),
                                          'filter', filter),
            'degradations', to_jsonb(array_remove(ARRAY[
                CASE WHEN NOT blank AND query_embedding IS NULL THEN 'no query embedding: lexical lane only' END,
                CASE WHEN NOT blank AND query_embedding IS NOT NULL AND NOT semantic_on
                     THEN 'zero query embedding: lexical lane only' END,
                CASE WHEN cardinality(past_keys) > 0
                     THEN 'as_of: memories restated since ranked by their past text, in dna.search''s lexical lane only' END,
                CASE WHEN jsonb_array_length(truncated) > 0 THEN 'as_of: history pruned past as_of for some candidates' END],
                NULL)))));
    END IF;
    IF as_of IS NOT NULL THEN
        -- as_of, as_of_truncated, as_of_past_text, as_of_redacted (sql/memory_as_of.sql)
        result := result || dna.as_of_report(scope, as_of, kinds, tenant, truncated, past_rows);
    END IF;
    RETURN result;
END
$$;

COMMENT ON FUNCTION dna.recall(text, text, vector, text, text[], integer, text, boolean, text, timestamptz, timestamptz, boolean, text, boolean, double precision, double precision, jsonb, integer, integer, text, double precision) IS
'Recall over the memory Kinds (kinds, default dna.recallable_kinds()). Steps: dna.search over-fetches '
'max(3k, 10) candidates, its lanes as deep as at k (candidates max(4k, 100) unless the scope sets them; k there is '
'offset + k with "offset"), so the pool''s first k are dna.search''s answer at k (dense lane when query_embedding is given, lexical lane always; model_id default: '
'the scope''s model_id with the most documents (dna.scope_models; of query_embedding''s width when given), '
'else dna-fake-hash-v1; tenant overlay); each candidate''s spec is the stored one, or with as_of the version '
'of dna_versions recorded at or before as_of (transaction time); memories not valid at world time now '
'(default as_of, else now()) — valid_at not containing now or dna.currently_valid false — are dropped; '
'each candidate''s score becomes search_score × memory_factor, memory_factor = dna.memory_factors(kind, spec, '
'query, now, decay) = max(0.05, retention) × affect, the memory''s standing (Engrams only; 1 for other Kinds), '
'in [0.05, 1.5]: a factor equal for every candidate leaves dna.search''s order; ordered (score desc, ecphory '
'desc, name, kind, tenant): ecphory (dna.ecphory_score with no cosine) only breaks ties between equal scores '
'(revision 0017; before, the factor was (1 + ecphory) × …, and the ecphory adjustments, e.g. + 0.10 for a memory '
'written within 24 h, moved near-equal hybrid scores: LoCoMo dev R@10 0.692 against dna.search''s 0.699 under '
'the convex fusion, bench/locomo.py). decay (default surfaced): retention counts from last_surfaced, a memory never '
'surfaced keeps 1 (surfaced), or from when it was written when never surfaced (written), or not at all '
'(off); case and blanks ignored, anything else 22023; the answer says which ran. semantic = true with a '
'non-zero query_embedding; otherwise semantic = false and degraded = true (a blank query has no hits and '
'is not degraded). The first k (0..1000, default 5), after "offset" ranks (below), are returned with display fields (dna.memory_display), '
'search_score, rank_search (place in dna.search''s ranking), memory_factor, ecphory and retention (Engram, '
'4 places). explain => true adds to each hit explain.memory = dna.memory_explain(kind, spec, query, now, decay) '
'(factor, retention, affect, decay, stability_days, days_since, decays_from, tie_break {ecphory, cue_match, matched, '
'adjustment}; '
'its lanes and fusion are the hit''s rank_dense, similarity, rank_lexical, lexical_score, search_score and '
'rank_search) and to the answer explain = {ranking, decay, pool {asked, returned, in_force, dropped, '
'lane_candidates}, filters {kinds, tenant, personal, valid_time, world_time, as_of}, degradations[]}. Then, unless reconsolidate is '
'false or as_of is given, each surfaced Engram is reconsolidated (dna.reconsolidated_spec; actor '
'default session_user), fail-soft: a locked or failing row is skipped and named in '
'reconsolidation_errors. An as_of read never writes; memories that existed at as_of (dna_instances.created_at) '
'but whose history was pruned past it (or that have none) are dropped from hits and named in as_of_truncated; '
'a memory created after as_of is simply absent. Only memories of the partition read '
'(tenant, or the personal partition) are reconsolidated: a cue never lands in a shared base row. personal => '
'true reads the caller''s personal partition plus the shared base, nothing from any workspace (42501 '
'without an identity); each hit says personal true|false. Returns {query, scope, tenant, personal, k, offset, next_offset, '
'model_id, degraded, semantic, now, decay, hits, reconsolidated[, reconsolidation_errors][, as_of, '
'as_of_truncated, as_of_past_text, as_of_redacted (memories of the scope erased by dna.redact that existed at '
'as_of)]}. With as_of, a memory whose text believed at as_of is not today''s is ranked by that text (not by '
'its search row, which holds today''s): the past text against the query''s lexemes (the scope''s '
'regconfig), BM25 in dna.search''s lexical lane and fused there, no dense lane (its vector embeds today''s text), the hit '
'marked ranked_by = past_text (title and snippet from that text); as_of_past_text names every such memory '
'(sorted bytewise, as as_of_truncated and as_of_redacted; dna.as_of_report). dna.as_of_past_texts finds them '
'(sql/memory_as_of.sql: the history''s text_digest and text_tsv, dna_versions, set by dna.versions_append_only; '
'recomputed under another ts_config; one index probe per memory restated since as_of), and dna.search(past => '
'dna.past_text[]) ranks them: those memories leave both lanes (their search '
'rows hold today''s text) and their past tsvector is BM25-scored in the lexical lane with the lane''s own idf and '
'avg_len, then fused with every other candidate (the default convex fusion, or the scope''s), so a past text '
'scores on the same scale as today''s texts. Relevance floors: min_similarity (cosine in [-1, 1]) and '
'min_lexical_score (BM25 >= 0) go to dna.search (each drops its lane''s candidates below it; default NULL: no '
'floor); with either, the answer carries floors {min_similarity, min_lexical_score, removed_dense, '
'removed_lexical} (the candidates each floor removed; NULL when the floors emptied the pool, whose count '
'dna.search''s NOTICE gives). filter (jsonb, default NULL): the metadata filter (sql/metadata.sql), passed to '
'dna.search, which applies it inside both lanes before their top k (a memory''s metadata: dna.memory_metadata, its '
'spec.metadata with tags, area, created_at, valid_from/valid_to, conversation, session, speaker...); each hit carries '
'its metadata when it has any, and explain.filters.filter echoes it. context (0..20, default 0): each hit of Kind Turn '
'(a conversation''s, dna.remember_conversation) carries context, the turns of its session within context places before '
'and after it (dna.turn_neighbours). A hit whose declared claim a newer memory in force contradicts carries '
'contradicted_by (dna.flag_contradicted: the rival, its claim, and accept, the dna.forget call that takes it as '
'the successor; not on an as_of read). Pages: "offset" (default 0; offset + k at most 1000) returns ranks '
'offset+1 .. offset+k of the recall at k => offset + k (its pool and lane depths), so page p of size k is '
'offset (p - 1) * k and equals those ranks of one call with k => p * k; the pages of one size concatenate into that '
'call when the memory factors do not reach past its pool (equal standing, as over tied documents: dna.search''s '
'top k is a prefix of its top 2k). A page that reinforces (reconsolidate, the default) changes the standing of '
'what it surfaced and so the ranking the next page is cut from (a surfaced memory loses ties to unsurfaced ones): '
'walk pages as pure reads (reconsolidate => false, or as_of) for windows of one ranking. '
'The answer says offset and next_offset (offset + k when the page is full and the ranking goes on, else NULL). '
'Errors: 22023 (k, offset, kinds, model_id, embedding '
'width, decay, floors, a malformed filter, context), 22001 (query > 10000 chars, filter > 65536 bytes), '
'22007 (infinite now/as_of), 42501 (reserved tenant). diversity (default NULL = ''collapse''; or ''off''; case and '
'blanks ignored) and duplicate_similarity (cosine in (0, 1]; NULL: dna.default_duplicate_similarity(), 1, the text '
'rules alone: two facts that differ by one value are ~0.97 apart): after '
'the re-score, in recall''s order, a memory whose text is a near-duplicate of one ranked above it (dna.diversify: the '
'same dna.text_key, its text of >= 100 characters inside the other''s (neither for a Turn: dna.collapses_by_text), or that cosine between their vectors; a past '
'text by neither) leaves the answer, so the one of better standing stays (dna.search runs with diversity => ''off'' '
'for the pool); explain names on each hit the memories collapsed into it (explain.collapsed [{kind, name, tenant, '
'score, rank, reason, similarity}]) and on the answer explain.diversity {method, duplicate_similarity, text_key, '
'collapsed}. ''mmr'', duplicate_similarity with ''off'': 22023 (dna.check_diversity; MMR is dna.search''s).';
