-- pydna SQL package — memory reads by name: one memory as it stands, and its history (revision 0021).
--
-- dna.get_memory(scope, name)     the record (spec, metadata, validity, latest version and who wrote it)
-- dna.memory_history(scope, name) every version dna_versions keeps of it, oldest first: what each write
--                                 did (op), when (transaction time), who (recorded_by, the role that ran
--                                 it: who retired a shared memory), and the record then.
--
-- Both read with the caller's rights: row-level security decides what is visible (a personal memory is
-- its owner's; personal => true reads the caller's own partition). A name that is not there raises
-- P0002 with the nearest names of the partition (dna.memory_not_found, sql/memory_verbs.sql), as dna.forget
-- does. Read-only.

CREATE OR REPLACE FUNCTION dna.get_memory(scope text, name text, kind text DEFAULT 'Engram', tenant text DEFAULT '',
                                          personal boolean DEFAULT false, now timestamptz DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    v record;
    at timestamptz;
BEGIN
    scope := dna.check_scope(scope);               -- 22023 outside the name rule (sql/catalog.sql)
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);       -- personal: the caller's own partition
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    at := coalesce(dna.check_now(now), now());
    SELECT i.kind, i.name, i.tenant, i.spec, i.metadata, i.valid_at, i.created_at, i.updated_at INTO r
    FROM dna.dna_instances AS i
    WHERE i.scope = scope AND i.kind = kind AND i.name = name AND i.tenant = tenant;
    IF NOT FOUND THEN
        PERFORM dna.memory_not_found('get_memory', scope, kind, name, tenant);
    END IF;
    SELECT x.version, x.op, x.created_at, x.recorded_by INTO v
    FROM dna.dna_versions AS x
    WHERE x.scope = scope AND x.kind = kind AND x.name = name AND x.tenant = tenant
    ORDER BY x.version DESC LIMIT 1;
    RETURN jsonb_build_object(
        'scope', scope, 'kind', r.kind, 'name', r.name, 'tenant', r.tenant, 'spec', r.spec, 'metadata', r.metadata,
        'valid_from', dna.iso8601(lower(r.valid_at)), 'valid_to', dna.iso8601(upper(r.valid_at)),
        'in_force', r.valid_at @> at, 'created_at', dna.iso8601(r.created_at), 'updated_at', dna.iso8601(r.updated_at),
        'version', v.version, 'last_op', v.op, 'last_recorded_at', dna.iso8601(v.created_at),
        'last_recorded_by', v.recorded_by);
END
$$;

COMMENT ON FUNCTION dna.get_memory(text, text, text, text, boolean, timestamptz) IS
'One memory by name, as it stands: {scope, kind, name, tenant, spec, metadata, valid_from, valid_to (ISO-8601, '
'NULL = open), in_force (valid at now, default the transaction''s time), created_at, updated_at, version (its '
'latest in dna_versions), last_op (remember, forget, revive, …), last_recorded_at, last_recorded_by (the role '
'that wrote it, NULL before revision 0021)}. kind default Engram; personal => true reads the caller''s own '
'partition. Nothing is reinforced. Errors: P0002 (no such memory visible to the caller; the hint names the '
'nearest names), 22023 (bad scope, name, kind or now), 42501 (tenant).';

CREATE OR REPLACE FUNCTION dna.memory_history(scope text, name text, kind text DEFAULT 'Engram', tenant text DEFAULT '',
                                              personal boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET jit = off                -- many short statements: compiling them would cost more than running them
AS $$
#variable_conflict use_variable
DECLARE
    versions jsonb;
BEGIN
    scope := dna.check_scope(scope);
    name := dna.check_key('name', name, 512);
    tenant := dna.resolve_tenant(tenant, personal);
    kind := dna.check_memory_kind(coalesce(kind, 'Engram'));
    SELECT jsonb_agg(jsonb_build_object(
               'version', x.version, 'op', x.op, 'recorded_at', dna.iso8601(x.created_at),
               'recorded_by', x.recorded_by, 'valid_from', dna.iso8601(lower(x.valid_at)),
               'valid_to', dna.iso8601(upper(x.valid_at)), 'summary', x.spec ->> 'summary', 'spec', x.spec)
               ORDER BY x.version)
    INTO versions
    FROM dna.dna_versions AS x
    WHERE x.scope = scope AND x.kind = kind AND x.name = name AND x.tenant = tenant;
    IF versions IS NULL THEN
        PERFORM dna.memory_not_found('memory_history', scope, kind, name, tenant);
    END IF;
    RETURN jsonb_build_object('scope', scope, 'kind', kind, 'name', name, 'tenant', tenant, 'versions', versions);
END
$$;

COMMENT ON FUNCTION dna.memory_history(text, text, text, text, boolean) IS
'The versions dna_versions keeps of one memory, oldest first: {scope, kind, name, tenant, versions: [{version, op '
'(remember, forget, revive, …), recorded_at (transaction time, ISO-8601), recorded_by (the role that wrote the '
'version — who forgot a shared memory; NULL for versions written before revision 0021), valid_from, valid_to, '
'summary, spec}]}. A Kind''s version_retention and dna.redact may have removed older versions. Read-only. '
'Errors: P0002 (no version of such a memory visible to the caller), 22023, 42501 (tenant).';
