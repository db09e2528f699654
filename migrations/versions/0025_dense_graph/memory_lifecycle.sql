-- pydna SQL package — memory plane: retiring, reopening and listing memories.
--
-- dna.forget (close a memory's world-time window: the only way to retire one), dna.revive (reopen
-- it, the closed interval appended to spec.revivals: the only way back) and dna.list_memories (the
-- scope's memories, without ranking). Split from sql/memory_verbs.sql (dna.remember, dna.recall) by
-- migration 0017_recall_past_ingest; run right after it.
--
-- SQLSTATEs used: 22023 invalid argument, 22007 bad timestamp, P0002 no such memory, 23503 no such
-- successor (superseded_by), 42501 reserved tenant (dna.resolve_tenant).

-- ---------------------------------------------------------------------------------------------
-- Verbs
-- ---------------------------------------------------------------------------------------------

DROP FUNCTION IF EXISTS dna.forget(text, text, text, text, text, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.forget(scope text, name text, superseded_by text DEFAULT NULL,
                                      kind text DEFAULT 'Engram', tenant text DEFAULT '',
                                      now timestamptz DEFAULT NULL, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    updated jsonb;
    already boolean;
    memory_kinds text[];
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    IF superseded_by IS NOT NULL THEN
        superseded_by := dna.check_key('superseded_by', superseded_by, 512);
    END IF;
    at := coalesce(dna.check_now(now), now());
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant, 'forget') AS l;
    IF superseded_by IS NOT NULL AND NOT dna.json_truthy(stored -> 'superseded_by_memory') THEN
        -- The successor is a memory of a memory Kind the caller can see in this scope: its own
        -- partition or the shared base (row-level security hides the rest).
        IF superseded_by = name THEN
            RAISE EXCEPTION 'forget: %/% cannot be superseded by itself', kind, name USING ERRCODE = '22023';
        END IF;
        memory_kinds := dna.recallable_kinds();          -- by its own statement (sql/tenancy.sql, "Citus rules")
        IF NOT EXISTS (SELECT 1 FROM dna.dna_instances AS i
                       WHERE i.scope = scope AND i.name = superseded_by AND i.tenant IN (tenant, '')
                         AND i.kind = ANY (memory_kinds)) THEN
            RAISE EXCEPTION 'forget: superseded_by names no memory: no % in scope % (tenant %)',
                quote_literal(superseded_by), quote_literal(scope), quote_literal(tenant)
                USING ERRCODE = '23503',
                      HINT = 'Remember the successor first (dna.remember), then forget this one with superseded_by => its name.';
        END IF;
    END IF;
    already := dna.json_truthy(stored -> 'valid_to');
    updated := stored;
    IF NOT already THEN
        updated := updated || jsonb_build_object('valid_to', dna.iso8601(at));
    END IF;
    IF superseded_by IS NOT NULL AND NOT dna.json_truthy(stored -> 'superseded_by_memory') THEN
        updated := updated || jsonb_build_object('superseded_by_memory', superseded_by);
    END IF;
    IF updated <> stored THEN
        UPDATE dna.dna_instances AS i SET spec = updated, op = 'forget'
        WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
    END IF;
    RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                              'valid_to', updated -> 'valid_to', 'already_forgotten', already,
                              'superseded_by', updated -> 'superseded_by_memory', 'written', updated <> stored);
END
$$;

COMMENT ON FUNCTION dna.forget(text, text, text, text, text, timestamptz, boolean) IS
'Retires a memory in world time: sets spec.valid_to = now (default now(); valid_at closes there) and '
'records superseded_by in spec.superseded_by_memory. Never deletes. Idempotent: a memory already '
'forgotten keeps its first valid_to (and its first superseded_by) and reports already_forgotten = '
'true; nothing is written when nothing changes. Returns {kind, name, scope, tenant, valid_to, '
'already_forgotten, superseded_by, written}. personal => true acts on the caller''s personal memory (42501 without an identity). '
'superseded_by must name a memory (any memory Kind) of the scope in the same partition or the shared base. '
'Errors: P0002 (no such memory), 23503 (superseded_by names no memory), 22023 (not a memory '
'Kind, blank key, superseded by itself, scope outside the name rule), 22007 (infinite now), 42501 (reserved tenant).';

DROP FUNCTION IF EXISTS dna.revive(text, text, text, text, text, timestamptz);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.revive(scope text, name text, revived_by text DEFAULT NULL,
                                      kind text DEFAULT 'Engram', tenant text DEFAULT '',
                                      now timestamptz DEFAULT NULL, personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    revival jsonb;
    revivals jsonb;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    at := coalesce(dna.check_now(now), now());
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant, 'revive') AS l;
    revivals := CASE WHEN jsonb_typeof(stored -> 'revivals') = 'array' THEN stored -> 'revivals' ELSE '[]'::jsonb END;
    IF NOT dna.json_truthy(stored -> 'valid_to') THEN
        RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                                  'revived', false, 'already_in_force', true, 'revivals', jsonb_array_length(revivals));
    END IF;
    revival := jsonb_strip_nulls(jsonb_build_object('valid_to', stored -> 'valid_to', 'revived_at', dna.iso8601(at),
                                                    'superseded_by', stored -> 'superseded_by_memory',
                                                    'revived_by', revived_by));
    UPDATE dna.dna_instances AS i
    SET spec = (stored - 'valid_to' - 'superseded_by_memory') || jsonb_build_object('revivals', revivals || jsonb_build_array(revival)),
        op = 'revive'
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
    RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                              'revived', true, 'already_in_force', false, 'revival', revival,
                              'revivals', jsonb_array_length(revivals) + 1);
END
$$;

COMMENT ON FUNCTION dna.revive(text, text, text, text, text, timestamptz, boolean) IS
'Reopens the world-time window of a forgotten memory: removes spec.valid_to and '
'superseded_by_memory and appends {valid_to, revived_at (now, default now()), superseded_by?, '
'revived_by?} to the append-only spec.revivals (which is what lets the bitemporal guard accept '
'the dropped valid_to). A memory already in force returns already_in_force = true and writes nothing '
'(no version). Returns {kind, name, scope, tenant, revived, already_in_force, revival?, revivals (count)}. '
'personal => true acts on the caller''s personal memory (42501 without an identity). Errors: P0002 (no such memory), 22023 (not a memory Kind, blank key), 22007, 42501.';

DROP FUNCTION IF EXISTS dna.list_memories(text, text[], text, boolean, timestamptz, integer);  -- before the personal parameter (0009_tenancy)
CREATE OR REPLACE FUNCTION dna.list_memories(scope text, kinds text[] DEFAULT NULL, tenant text DEFAULT '',
                                             include_invalid boolean DEFAULT false, now timestamptz DEFAULT NULL,
                                             max_rows integer DEFAULT 100, personal boolean DEFAULT false,
                                             filter jsonb DEFAULT NULL, "offset" integer DEFAULT 0)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    world timestamptz;
    items jsonb;
    total bigint;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    IF max_rows IS NULL OR max_rows < 0 OR max_rows > 10000 THEN
        RAISE EXCEPTION 'max_rows must be between 0 and 10000, got %', coalesce(max_rows::text, 'NULL') USING ERRCODE = '22023',
            HINT = 'max_rows is the size of the page: an integer from 0 to 10000; page on with "offset".';
    END IF;
    IF "offset" IS NULL OR "offset" < 0 OR "offset" > 1000000 THEN
        RAISE EXCEPTION 'offset must be between 0 and 1000000, got %', coalesce("offset"::text, 'NULL') USING ERRCODE = '22023',
            HINT = 'offset is the number of memories skipped in the listing''s order (newest first): an integer from '
                   '0 to 1000000; the answer''s next_offset is where the next page starts (NULL: none).';
    END IF;
    kinds := dna.check_memory_kinds(kinds);             -- NULL: every memory Kind
    filter := dna.check_filter(filter);                 -- 22023 with a hint when malformed (sql/metadata.sql)
    world := coalesce(dna.check_now(now), now());
    -- The metadata filter is a condition of the scan (its literals inlined; the GIN index of
    -- dna_instances.metadata serves its containments), so the statement is run by EXECUTE.
    -- m is planned on its own (OFFSET 0: the validity test of f is not pushed into its scan). Under
    -- row-level security the planner may not use the statistics of valid_at for a role (@> is not
    -- leakproof): its default selectivity (0.5%) made the role's estimate of the scan a few rows where
    -- the superuser's was the scope, and the tenant overlay's NOT EXISTS was then probed per base row
    -- (one index search each: 3,000 for a personal partition of 3,000 memories) where the superuser
    -- hashed the partition's keys once (0025, topic policy_personal; bench/policy_cost.py).
    EXECUTE format($q$
    WITH m AS (
        SELECT i.*, (i.valid_at @> $4 AND dna.currently_valid(i.spec ->> 'valid_to', $4)) AS valid
        FROM dna.dna_instances AS i
        WHERE i.scope = $1 AND i.kind = ANY ($2)
          AND %s
          AND (i.tenant = $3 OR (i.tenant = '' AND NOT EXISTS (
                 SELECT 1 FROM dna.dna_instances AS t
                 WHERE t.scope = $1 AND t.kind = i.kind AND t.api_version = i.api_version
                   AND t.name = i.name AND t.tenant = $3)))
        OFFSET 0
    ), f AS (
        SELECT m.* FROM m WHERE $5 OR m.valid
    )
    SELECT (SELECT count(*) FROM f),
           (SELECT coalesce(jsonb_agg(x.obj ORDER BY x.created DESC, x.name COLLATE "C", x.kind COLLATE "C", x.tenant COLLATE "C"), '[]'::jsonb)
            FROM (SELECT f.name, f.kind, f.tenant, lower(f.valid_at) AS created_sort,
                         coalesce(dna.parse_timestamptz(f.spec ->> 'created_at'), f.created_at) AS created,
                         dna.memory_display(jsonb_strip_nulls(jsonb_build_object(
                             'kind', f.kind, 'name', f.name, 'tenant', f.tenant, 'personal', starts_with(f.tenant, 'personal:'),
                             'valid', f.valid,
                             'retention', CASE WHEN f.kind = 'Engram' THEN round(dna.memory_retention(f.spec, $4)::numeric, 4) END,
                             'surface_count', f.spec -> 'surface_count', 'superseded_by', f.spec -> 'superseded_by_memory',
                             'redacted', f.spec -> 'redacted',
                             'metadata', CASE WHEN f.metadata <> '{}'::jsonb THEN f.metadata END)),
                             f.spec) AS obj
                  FROM f ORDER BY created DESC, f.name COLLATE "C", f.kind COLLATE "C", f.tenant COLLATE "C"
                  LIMIT $6 OFFSET $7) AS x)
    $q$, dna.filter_sql(filter, 'i.metadata'))
    INTO total, items
    USING scope, kinds, tenant, world, include_invalid, max_rows, "offset";
    -- One total order (created desc, then the key bytewise), so that the pages of a listing are windows of
    -- it: page p of size n is "offset" (p - 1) * n, and next_offset says where the next one starts.
    RETURN jsonb_build_object('scope', scope, 'tenant', tenant, 'personal', personal IS TRUE, 'now', dna.iso8601(world),
                              'include_invalid', include_invalid, 'total', total, 'memories', items,
                              'offset', "offset",
                              'next_offset', CASE WHEN "offset" + jsonb_array_length(items) < total AND max_rows > 0
                                                  THEN "offset" + jsonb_array_length(items) END)
        || CASE WHEN filter IS NOT NULL THEN jsonb_build_object('filter', filter) ELSE '{}'::jsonb END;
END
$$;

COMMENT ON FUNCTION dna.list_memories(text, text[], text, boolean, timestamptz, integer, boolean, jsonb, integer) IS
'Lists the memories of a scope (kinds default dna.recallable_kinds(); tenant overlay: the tenant''s '
'rows shadow base rows), newest created_at first then name, kind, tenant (bytewise: one total order); by default only those valid '
'at world time now (default now()), all with include_invalid. At most max_rows (0..10000, default 100), after skipping '
'"offset" (0..1000000, default 0) of that order: page p of size n is offset (p - 1) * n, and the pages of one listing '
'(the same arguments, no write between) are windows of one order, so they compose; next_offset = offset + the '
'memories returned while total is larger, else NULL (the last page). '
'Read-only. personal => true lists the caller''s personal memories over the shared base (42501 without '
'an identity). Returns {scope, tenant, personal, now, include_invalid, total, offset, next_offset, memories[{kind, name, tenant, valid, '
'retention, surface_count?, superseded_by?, redacted? (the tombstone of dna.redact: {at, by, reason, '
'digest}), summary, area, affect, tags, memory_type, created_at, valid_from, valid_to?, title, metadata? (dna.memory_metadata, '
'when not empty)}][, filter]}. filter (jsonb, default NULL): only the memories whose metadata passes it (sql/metadata.sql; '
'a condition of the scan, total counts them). Errors: 22023 (max_rows, offset, kinds, a malformed filter; with a hint), 22001 (filter too large), 22007, 42501.';
