-- pydna SQL package — memory plane: erasure.
--
-- dna.redact erases a memory for real (a person's request to delete their data): its text and
-- vectors leave the record, every version, the search rows and the lexical index, and a tombstone
-- stays in their place — {redacted: {at, by, reason, digest}} plus the memory's own timestamps —
-- that dna.list_memories and an as_of dna.recall report as redacted. Who may redact: a member of
-- the role dna_redactor (a DBA grant; the role is created by migration 0015_governed_history), or
-- the owner of a personal memory (its identity's own partition). The write path enforces the same
-- rule for raw SQL (dna.instances_before_write): only a redactor turns a record into a tombstone,
-- and a tombstone never changes again.
--
-- SQLSTATEs: 42501 not allowed to redact, P0002 no such memory, 22023 bad argument, 55000 a write
-- to a redacted memory.
-- Runs after memory_verbs.sql (migration 0015_governed_history).

CREATE OR REPLACE FUNCTION dna.is_redacted(spec jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(jsonb_typeof(spec -> 'redacted') = 'object', false)
$$;

COMMENT ON FUNCTION dna.is_redacted(jsonb) IS
'Whether a memory spec is the tombstone dna.redact leaves (spec.redacted is an object). Pure.';

CREATE OR REPLACE FUNCTION dna.may_redact(tenant text)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF dna.privileged() OR pg_catalog.pg_has_role(current_user, 'dna_redactor', 'MEMBER') THEN
        RETURN true;
    END IF;
    -- The owner of a personal memory may redact their own.
    RETURN starts_with(tenant, 'personal:') AND dna.current_identity() IS NOT NULL
           AND tenant = 'personal:' || dna.current_identity();
END
$$;

COMMENT ON FUNCTION dna.may_redact(text) IS
'Whether the connected role may redact a memory of partition tenant: a member of role dna_redactor '
'(granted by the DBA: GRANT dna_redactor TO <role>), a superuser or BYPASSRLS role, or the identity '
'whose personal partition it is (tenant = personal:<its oid>).';

CREATE OR REPLACE FUNCTION dna.redact(scope text, name text, reason text, kind text DEFAULT 'Engram',
                                      tenant text DEFAULT '', personal boolean DEFAULT false,
                                      now timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    at timestamptz;
    api text;
    stored jsonb;
    tombstone jsonb;
    w integer;
    n bigint;
    searched bigint := 0;
    versions_erased bigint;
    p record;
BEGIN
    scope := dna.check_scope(scope);
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    at := coalesce(dna.check_now(now), now());
    IF reason IS NULL OR btrim(reason) = '' OR length(reason) > 500 THEN
        RAISE EXCEPTION 'redact: give a reason (1 to 500 characters; it is kept in the tombstone, so not the text itself)'
            USING ERRCODE = '22023';
    END IF;
    IF NOT dna.may_redact(tenant) THEN
        RAISE EXCEPTION 'redact: role % may not redact memories of partition %', quote_ident(current_user::text),
            quote_literal(tenant)
            USING ERRCODE = '42501', HINT = 'A DBA grants it: GRANT dna_redactor TO <role>; the owner of a personal memory may redact their own.';
    END IF;
    SELECT l.api, l.stored INTO api, stored FROM dna.lock_memory(scope, kind, name, tenant, 'redact') AS l;
    IF dna.is_redacted(stored) THEN
        RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                                  'redacted', stored -> 'redacted', 'already_redacted', true);
    END IF;
    tombstone := jsonb_strip_nulls(jsonb_build_object(
        'redacted', jsonb_build_object('at', dna.iso8601(at), 'by', session_user::text, 'reason', btrim(reason),
                                       'digest', 'sha256:' || encode(sha256(convert_to(stored::text, 'UTF8')), 'hex')),
        'created_at', stored -> 'created_at', 'valid_from', stored -> 'valid_from',
        'valid_to', coalesce(CASE WHEN dna.json_truthy(stored -> 'valid_to') THEN stored -> 'valid_to' END,
                             to_jsonb(dna.iso8601(at)))));
    -- 1. The record becomes its tombstone (the write path appends it as a version).
    UPDATE dna.dna_instances AS i SET spec = tombstone, op = 'redact'
    WHERE i.scope = scope AND i.kind = kind AND i.api_version = api AND i.name = name AND i.tenant = tenant;
    -- 2. Every earlier version goes (dna.versions_append_only allows it for a tombstone's record).
    DELETE FROM dna.dna_versions AS v
    WHERE v.scope = scope AND v.kind = kind AND v.api_version = api AND v.name = name AND v.tenant = tenant
      AND NOT dna.is_redacted(v.spec);
    GET DIAGNOSTICS versions_erased = ROW_COUNT;
    -- 3. Its search rows, every model_id (the BM25 sync trigger removes postings and forward rows;
    --    a sealed segment keeps a tombstone until its merge, done below).
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('WITH d AS (DELETE FROM dna.%I AS t WHERE t.scope = $1 AND t.kind = $2 AND t.name = $3 AND t.tenant = $4
                                   RETURNING 1)
                        SELECT count(*) FROM d', 'dna_search_docs_' || w)
            INTO n USING scope, kind, name, tenant;
        searched := searched + n;
    END LOOP;
    -- 4. Sealed segments that held it are merged, so no posting of its lexemes remains.
    FOR p IN SELECT DISTINCT t.model_id FROM dna.dna_bm25_tombstones AS t
             WHERE t.scope = scope AND t.tenant = tenant LOOP
        PERFORM dna.bm25_compact(scope, p.model_id, tenant, full_merge => true);
    END LOOP;
    RETURN jsonb_build_object('kind', kind, 'name', name, 'scope', scope, 'tenant', tenant,
                              'redacted', tombstone -> 'redacted', 'already_redacted', false,
                              'versions_erased', versions_erased, 'search_rows_erased', searched);
END
$$;

COMMENT ON FUNCTION dna.redact(text, text, text, text, text, boolean, timestamptz) IS
'Erases a memory for real: its spec becomes the tombstone {redacted: {at (now, default now()), by '
'(session_user), reason, digest (sha256 of the erased spec)}, created_at, valid_from, valid_to (its '
'forget, else now)}, every earlier version of dna_versions is deleted (the tombstone is the one version '
'left), its search rows of every width and model_id are deleted with their vectors, and the BM25 '
'segments of the partition that still held its postings are fully merged (dna.bm25_compact), so no '
'table of schema dna keeps its text. The tombstone is never indexed; dna.list_memories (include_invalid) '
'lists it with redacted, an as_of dna.recall names it in as_of_redacted. Who: dna.may_redact (role '
'dna_redactor, or the owner of a personal memory: personal => true). Idempotent (already_redacted). '
'Returns {kind, name, scope, tenant, redacted, already_redacted, versions_erased?, search_rows_erased?}. '
'Errors: 42501 (not allowed, reserved tenant), P0002 (no such memory), 22023 (no reason, bad argument).';
