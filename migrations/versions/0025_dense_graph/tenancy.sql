-- pydna SQL package — tenancy and privacy (INV-PERSONAL), enforced by the database itself.
--
-- Partitions (the `tenant` column of every table that holds row data):
--   ''                the shared base: visible to every role that has been granted access;
--   '<workspace>'     a workspace (slug, dna.check_tenant): visible to its members only;
--   'personal:<oid>'  the personal memory of one identity: visible to that identity only.
--
-- Identity is the connected role: current_user (the login role, or the role a pooler switched to
-- with SET ROLE, which needs a membership the DBA granted), looked up in the DBA-managed
-- dna.dna_identities. Workspace membership is the DBA-managed dna.dna_workspace_members. Nothing
-- here reads a session variable, and no function takes an identity as an argument: a caller
-- cannot claim to be someone else (and a plain SET would not reach Citus workers anyway).
--
-- Enforcement is row-level security, ENABLEd and FORCEd (table owners are subject to it) on
-- dna_instances, dna_versions, every dna_search_docs_<N> and every dna_bm25_* table (the lexical index),
-- by one policy per table (dna.protect_table): a row is readable and writable only when its tenant
-- is in dna.visible_tenants(). Superusers and BYPASSRLS roles are outside the model (PostgreSQL
-- never applies row-level security to them). No function of schema dna is SECURITY DEFINER, so
-- every verb runs with the caller's rights and sees exactly what the caller's own SELECT would.
--
-- Tables come from revision 0009_tenancy; this file only defines functions.
-- SQLSTATEs: 42501 no identity / not a member / reserved tenant, 22023 invalid argument.
--
-- Citus rules (issue 16, revision 0018_citus_ready). Past one machine the tables are distributed by
-- scope (the maps, dna_kinds, dna_models and dna_search_config are reference or per-node tables).
-- Every function of the package follows these rules, so that Citus runs it as a single node does;
-- tests/test_citus_ready.py reads the plans of the verbs' statements to check them:
--   1. No sublink in a row-level-security policy (Citus refuses the policy): with the citus
--      extension installed dna.tenant_policy() is tenant = '' OR dna.tenant_visible(tenant,
--      dna.visible_tenants()); on one node dna.visible_tenants() stays an InitPlan (once per
--      statement, ~6x cheaper on personal rows) and dna.tenant_visible's test is written out inline
--      (no SQL function call per row); dna.protect_table re-run after CREATE EXTENSION citus switches.
--   2. No volatile or stable function in ON CONFLICT DO UPDATE SET: a time is excluded.<column>
--      (the proposed row's default now(), the same value) or a value computed before.
--   3. No LANGUAGE sql set-returning function that reads dna_* tables (Citus cannot plan it once
--      inlined into a parameterized query): PL/pgSQL with RETURN QUERY (dna.search_config,
--      dna.model_prefixes, dna.source_conflicts).
--   4. No function that reads dna_* tables called inside a statement that reads dna_* tables (Citus
--      pushes that statement to a shard and refuses the nested distributed read): the function runs
--      by its own statement into a variable or an array, which the next statement unnests
--      (dna.bm25_lane in dna.search and dna.bm25, dna.search in dna.recall, dna.search_config in
--      dna.index_document), or the statement joins the table itself and calls a pure function
--      (dna.memory_text_of). Triggers are exempt (Citus allows nested reads in triggers).
--   5. No INSERT ... ON CONFLICT into a reference table (its upsert takes a lock that needs UPDATE
--      rights): SELECT first, a plain INSERT only when absent, inside BEGIN ... EXCEPTION WHEN
--      unique_violation (dna.register_model, dna.set_search_config).
--   6. Every UPDATE/DELETE of a scope-keyed table names scope = <the argument> in its WHERE, so
--      that it is a single-shard statement (the reconsolidation UPDATE of dna.recall; the passage
--      DELETE of dna.index_documents).
--   7. A correlated sublink on a scope-keyed table compares scope with the scope argument, not with
--      the outer row's column (Citus cannot route t.scope inside an OR and scatters the query to
--      every shard): the tenant overlay of dna.search and dna.list_memories.
--   8. Nothing a trigger needs comes from a session setting (set_config never reaches a worker): the
--      verb label of dna_versions.op is written by the verb into dna_instances.op.

-- ---------------------------------------------------------------------------------------------
-- Who is calling
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.current_identity()
RETURNS text
LANGUAGE sql STABLE
AS $$
    -- dna_identities is readable by PUBLIC but row-level security shows each role its own rows.
    SELECT min(i.oid) FROM dna.dna_identities AS i WHERE i.role_name = current_user::text
$$;

COMMENT ON FUNCTION dna.current_identity() IS
'The identity (oid) of the connected role, current_user, from the DBA-managed dna.dna_identities; '
'NULL when the role is not mapped. Takes no argument: the identity is never chosen by the caller.';

CREATE OR REPLACE FUNCTION dna.require_identity()
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    who text := dna.current_identity();
BEGIN
    IF who IS NULL THEN
        RAISE EXCEPTION 'personal memory needs an identity, and role % has none', quote_ident(current_user::text)
            USING ERRCODE = '42501',
                  HINT = format('A DBA maps the role to an identity: INSERT INTO dna.dna_identities (role_name, oid) '
                                'VALUES (%L, ''<oid>'');', current_user::text);
    END IF;
    RETURN who;
END
$$;

COMMENT ON FUNCTION dna.require_identity() IS
'dna.current_identity(), or SQLSTATE 42501 (fail closed) when the connected role is not mapped; '
'the hint shows the INSERT a DBA runs.';

CREATE OR REPLACE FUNCTION dna.personal_tenant()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT 'personal:' || dna.require_identity()
$$;

COMMENT ON FUNCTION dna.personal_tenant() IS
'The personal partition of the connected identity, ''personal:<oid>''; 42501 when the role has no identity.';

CREATE OR REPLACE FUNCTION dna.privileged()
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles AS r
                     WHERE r.rolname = current_user), false)
$$;

COMMENT ON FUNCTION dna.privileged() IS
'True when current_user is a superuser or has BYPASSRLS: PostgreSQL applies no row-level security to '
'such a role, so it is outside the privacy model (and skips the membership check of dna.tenancy_resolve).';

CREATE OR REPLACE FUNCTION dna.visible_tenants()
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- '' always; the caller's personal partition when mapped; each workspace the caller is a
    -- member of ('*' = every workspace, never a personal partition).
    -- PL/pgSQL, not SQL (0025, topic policy_personal): the one-node policy names this function twice
    -- per protected table of every statement, and the planner tried to inline a LANGUAGE sql one at
    -- each planning (parsing and analysing this body, then giving up on its sub-selects), then ran it
    -- through the SQL-function executor: ~70 us of the ~160 us the application role paid beyond the
    -- superuser on a statement of two protected tables (bench/policy_cost.py). A PL/pgSQL function is
    -- never inlined and keeps its statement's plan for the session (replanned when the role changes:
    -- row-level security on the maps).
    RETURN ARRAY[''] || coalesce((SELECT array_agg('personal:' || i.oid ORDER BY i.oid)
                                  FROM dna.dna_identities AS i WHERE i.role_name = current_user::text), '{}')
                     || coalesce((SELECT array_agg(m.workspace ORDER BY m.workspace)
                                  FROM dna.dna_workspace_members AS m WHERE m.role_name = current_user::text), '{}');
END
$$;

COMMENT ON FUNCTION dna.visible_tenants() IS
'The tenants the connected role (current_user) may read and write: '''' (the shared base), '
'''personal:<its oid>'' when mapped in dna.dna_identities, and every workspace it is a member of in '
'dna.dna_workspace_members (''*'' stands for every workspace, never for a personal partition). The '
'row-level-security policies of the data tables test a row''s tenant against this list.';

CREATE OR REPLACE FUNCTION dna.tenant_visible(tenant text, visible text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT tenant = ANY (visible) OR ('*' = ANY (visible) AND NOT starts_with(tenant, 'personal:'))
$$;

COMMENT ON FUNCTION dna.tenant_visible(text, text[]) IS
'The row-level-security test: tenant is in visible (dna.visible_tenants()), or visible holds ''*'' '
'(member of every workspace) and tenant is not a personal partition. Pure. The Citus policy calls it; the '
'one-node policy writes the same test out inline (dna.tenant_policy).';

CREATE OR REPLACE FUNCTION dna.is_workspace_member(workspace text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM dna.dna_workspace_members AS m
                   WHERE m.role_name = current_user::text AND m.workspace IN (is_workspace_member.workspace, '*'))
$$;

COMMENT ON FUNCTION dna.is_workspace_member(text) IS
'True when the connected role is a member of workspace (or of every workspace, ''*'').';

CREATE OR REPLACE FUNCTION dna.tenancy_resolve(tenant text, personal boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- tenant has passed dna.check_tenant (dna.resolve_tenant): never 'personal:…'.
    IF coalesce(personal, false) THEN
        RETURN dna.personal_tenant();                    -- the workspace the caller is in does not matter
    END IF;
    IF coalesce(tenant, '') <> '' AND NOT dna.is_workspace_member(tenant) AND NOT dna.privileged() THEN
        RAISE EXCEPTION 'role % is not a member of workspace %', quote_ident(current_user::text), quote_literal(tenant)
            USING ERRCODE = '42501',
                  HINT = format('A DBA adds the membership: INSERT INTO dna.dna_workspace_members (workspace, role_name) '
                                'VALUES (%L, %L);', tenant, current_user::text);
    END IF;
    RETURN coalesce(tenant, '');
END
$$;

COMMENT ON FUNCTION dna.tenancy_resolve(text, boolean) IS
'The partition a verb works in, given a validated tenant: personal => the caller''s ''personal:<oid>'' '
'(42501 without an identity); else the tenant, after checking that the caller is a member of that '
'workspace (42501 otherwise; superusers and BYPASSRLS roles are not checked). Called by '
'dna.resolve_tenant; row-level security enforces the same rules on every row regardless.';

-- ---------------------------------------------------------------------------------------------
-- DBA helpers (run by the table owner or a superuser, never by data-access code)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.tenant_policy(citus boolean DEFAULT NULL)
RETURNS text
LANGUAGE sql STABLE
AS $$
    -- A base row passes on its own column. Any other row: on one node dna.visible_tenants() once per
    -- statement (an InitPlan); on Citus, which refuses a sublink in a policy, once per row (measured
    -- on 10,000 personal memories read by their owner: a lexical search 349 ms with the InitPlan,
    -- 2,031 ms per row; base rows 33-36 ms either way, 122 ms before the base short-cut: bench/RESULTS.md).
    -- On one node the test of dna.tenant_visible is written out (0021, topic policy_inline): PostgreSQL
    -- does not inline a SQL function whose argument holds a sub-select used twice in its body, so
    -- dna.tenant_visible(tenant, (SELECT ...)) ran the SQL-function executor once per non-base row
    -- (bench/policy_cost.py). The arms keep dna.tenant_visible's meaning, in an order that reads the
    -- second InitPlan (the '*' arm) only for a row that is neither base, nor listed, nor personal.
    SELECT CASE WHEN coalesce(citus, EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus'))
                THEN $p$tenant = '' OR dna.tenant_visible(tenant, dna.visible_tenants())$p$
                ELSE $p$tenant = '' OR tenant = ANY ((SELECT dna.visible_tenants())::text[]) OR (NOT starts_with(tenant, 'personal:') AND '*' = ANY ((SELECT dna.visible_tenants())::text[]))$p$ END
$$;

COMMENT ON FUNCTION dna.tenant_policy(boolean) IS
'The USING and WITH CHECK expression of the row-level-security policy dna.protect_table creates '
'(revision 0018_citus_ready; 0021_holds_in_use writes the one-node form out): a row of the shared base '
'('''') passes on its tenant alone; any other row is visible when dna.tenant_visible(tenant, '
'dna.visible_tenants()). citus => true (default: when the citus extension is installed): that call, without '
'a sublink, as Citus requires of a policy (dna.visible_tenants() per non-base row); false: the same test '
'written out inline, tenant = ANY ((SELECT dna.visible_tenants())::text[]) OR (NOT starts_with(tenant, ''personal:'') '
'AND ''*'' = ANY ((SELECT dna.visible_tenants())::text[])): the list an InitPlan (once per statement), no '
'function call per row. Both forms admit the same rows. A server that gains Citus re-runs '
'dna.protect_table on every protected table.';

CREATE OR REPLACE FUNCTION dna.protect_table(tbl regclass)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    rel text;
BEGIN
    -- Only a table of schema dna with a tenant column (its name from the catalog, quoted by %I).
    SELECT format('%I.%I', n.nspname, c.relname) INTO rel
    FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.oid = tbl AND n.nspname = 'dna' AND c.relkind IN ('r', 'p')
      AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute AS a
                  WHERE a.attrelid = c.oid AND a.attname = 'tenant' AND NOT a.attisdropped);
    IF rel IS NULL THEN
        RAISE EXCEPTION 'dna.protect_table: % is not a table of schema dna with a tenant column', tbl
            USING ERRCODE = '22023', HINT = 'dna.protected_tables() lists the tables the policy guards.';
    END IF;
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', rel);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', rel);
    EXECUTE format('DROP POLICY IF EXISTS dna_tenant_isolation ON %s', rel);
    -- dna.tenant_policy(): a base row passes on its own column; any other row asks
    -- dna.visible_tenants(), without a sublink where Citus is installed (Citus refuses one).
    EXECUTE format('CREATE POLICY dna_tenant_isolation ON %s AS PERMISSIVE FOR ALL TO PUBLIC '
                   'USING (%s) WITH CHECK (%s)', rel, dna.tenant_policy(), dna.tenant_policy());
    EXECUTE format('COMMENT ON POLICY dna_tenant_isolation ON %s IS %L', rel,
                   'INV-PERSONAL: a row is visible and writable only when its tenant is in dna.visible_tenants() '
                   '(the shared base, the caller''s own personal partition, the workspaces it is a member of).');
END
$$;

COMMENT ON FUNCTION dna.protect_table(regclass) IS
'Migration helper: ENABLE and FORCE row-level security on a table with a tenant column and (re)create '
'its policy dna_tenant_isolation (USING and WITH CHECK dna.tenant_policy(): tenant = '''' OR '
'dna.tenant_visible(tenant, dna.visible_tenants()) where Citus is installed, no sublink; on one node the '
'same test written out inline with dna.visible_tenants() an InitPlan). '
'A revision that adds a width table calls it; so does a server that gains Citus, for every protected table. '
'Needs the table owner or a superuser. 22023 when tbl is not a table of schema dna with a tenant column.';

CREATE OR REPLACE FUNCTION dna.protected_tables()
RETURNS SETOF regclass
LANGUAGE sql STABLE
AS $$
    SELECT c.oid::regclass FROM pg_catalog.pg_class AS c
    WHERE c.relnamespace = 'dna'::regnamespace AND c.relkind IN ('r', 'p')
      AND (c.relname IN ('dna_instances', 'dna_versions', 'dna_document_sources', 'dna_search_receipts')
           OR c.relname ~ '^dna_search_docs_\d+$' OR c.relname ~ '^dna_bm25_')
    ORDER BY c.relname
$$;

COMMENT ON FUNCTION dna.protected_tables() IS
'The tables that hold row data and therefore carry the tenant policy: dna_instances, dna_versions, '
'dna_document_sources (0012_first_day), dna_search_receipts (0016_answers_and_bounds: stored receipts), '
'every dna_search_docs_<N> and every dna_bm25_* table of the lexical index (from the catalog).';

CREATE OR REPLACE FUNCTION dna.grant_app_role(role_name text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    r text := quote_ident(role_name);
    t regclass;
    data text[] := '{}';
BEGIN
    IF role_name IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS x WHERE x.rolname = role_name) THEN
        RAISE EXCEPTION 'no role %', coalesce(quote_literal(role_name), 'NULL') USING ERRCODE = '22023';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA dna TO %s', r);
    EXECUTE format('GRANT SELECT ON dna.dna_kinds, dna.dna_models, dna.dna_search_config, '
                   'dna.dna_identities, dna.dna_workspace_members TO %s', r);
    EXECUTE format('GRANT INSERT ON dna.dna_models TO %s', r);                 -- dna.register_model
    EXECUTE format('GRANT USAGE ON SEQUENCE dna.dna_search_doc_id_seq TO %s', r);
    IF to_regclass('dna.dna_bm25_seg_id_seq') IS NOT NULL THEN                    -- 0010_scale to 0018
        EXECUTE format('GRANT USAGE ON SEQUENCE dna.dna_bm25_seg_id_seq TO %s', r);
    END IF;
    IF to_regclass('dna.dna_index_staging') IS NOT NULL THEN                      -- 0010_scale
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON dna.dna_index_staging TO %s', r);
    END IF;
    FOR t IN SELECT dna.protected_tables() LOOP
        -- No TRUNCATE: TRUNCATE is not subject to row-level security.
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s', t, r);
        data := data || t::text;
    END LOOP;
    IF to_regclass('public.dna_alembic_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON public.dna_alembic_version TO %s', r);   -- the client checks the revision
    END IF;
    RETURN jsonb_build_object('role', role_name, 'data_tables', to_jsonb(data));
END
$$;

COMMENT ON FUNCTION dna.grant_app_role(text) IS
'DBA helper: grants an application role what the verbs need — USAGE on schema dna, SELECT on the '
'reference and mapping tables, INSERT on dna_models, the doc_id sequence, the COPY '
'staging table dna_index_staging (its rows are visible to their writer only), SELECT/INSERT/UPDATE/DELETE '
'(never TRUNCATE, which row-level security does not cover) on every protected table, and SELECT on '
'the version table. What the role then sees is decided by row-level security. Needs grant rights.';

CREATE OR REPLACE FUNCTION dna.revoke_app_role(role_name text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    r text := quote_ident(role_name);
    identities bigint;
    memberships bigint;
BEGIN
    IF role_name IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS x WHERE x.rolname = role_name) THEN
        RAISE EXCEPTION 'no role %', coalesce(quote_literal(role_name), 'NULL') USING ERRCODE = '22023';
    END IF;
    -- Every privilege on schema dna's objects, not only those dna.grant_app_role gave: afterwards
    -- DROP ROLE finds nothing of pydna's that depends on the role (on Citus the REVOKEs reach every
    -- shard, the coordinator's placements of the reference tables too: D10 of citus-probe-3.md).
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA dna FROM %s', r);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA dna FROM %s', r);
    EXECUTE format('REVOKE ALL ON SCHEMA dna FROM %s', r);
    IF to_regclass('public.dna_alembic_version') IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON public.dna_alembic_version FROM %s', r);
    END IF;
    -- Off the maps: the role no longer reads any partition. Its identity's personal rows stay (other
    -- roles may be mapped to the same oid; dna.redact erases memories).
    DELETE FROM dna.dna_identities AS i WHERE i.role_name = revoke_app_role.role_name;
    GET DIAGNOSTICS identities = ROW_COUNT;
    DELETE FROM dna.dna_workspace_members AS m WHERE m.role_name = revoke_app_role.role_name;
    GET DIAGNOSTICS memberships = ROW_COUNT;
    IF dna.citus_version() IS NOT NULL AND to_regclass('pg_catalog.pg_dist_node') IS NOT NULL THEN
        PERFORM dna.sync_tenancy_maps();                  -- the workers' copies of the maps too
    END IF;
    RETURN jsonb_build_object('role', role_name, 'identities_removed', identities, 'memberships_removed', memberships);
END
$$;

COMMENT ON FUNCTION dna.revoke_app_role(text) IS
'DBA helper, the inverse of dna.grant_app_role (off-boarding): revokes every privilege the role holds '
'on schema dna, its tables and sequences and on the version table, deletes its rows of dna_identities '
'and dna_workspace_members (on Citus it then copies the maps to the workers, dna.sync_tenancy_maps), '
'so that DROP ROLE succeeds. The rows the role wrote stay (its identity''s personal rows too). Returns '
'{role, identities_removed, memberships_removed}. Errors: 22023 for an unknown role; 42501 without '
'grant rights on the tables.';
