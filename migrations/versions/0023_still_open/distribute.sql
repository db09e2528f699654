-- pydna SQL package — scale-out on Citus: distribute the tables by scope, delegate the verbs.
--
-- Past one machine the engine is Citus (DESIGN.md, "Scale-out"); `scope` is the distribution
-- column. A DBA runs, once, on the coordinator, after `dna db upgrade` and after CREATE EXTENSION
-- citus on every node:
--
--     SELECT dna.distribute();
--
-- and, after every change to dna.dna_identities or dna.dna_workspace_members, on the coordinator:
--
--     SELECT dna.sync_tenancy_maps();
--
-- What goes where is read from the catalog (dna.distribution_plan), never listed by hand:
--   reference tables   dna_kinds, dna_models, dna_search_config (small, read by every shard query);
--   per-node maps      dna_identities, dna_workspace_members: plain tables on the coordinator AND on
--                      every worker, copied by dna.sync_tenancy_maps (the row-level-security policy
--                      reads them from inside every shard query, and a policy must not read a Citus
--                      table: citus-probe B5c);
--   distributed        every table with a tenant column (dna.protected_tables: dna_instances first,
--                      dna_versions, every dna_search_docs_<N>, every dna_bm25_* table, the receipts,
--                      the document sources) and any other table with a scope column, by `scope`,
--                      colocated with dna.dna_instances;
--   coordinator-local  dna_index_staging (a COPY staging table, consumed in the writer's
--                      transaction) and dna_api_keys (read by the doors, which run beside the
--                      coordinator).
-- A dna table in none of these classes is refused (0A000): a revision that adds a table says
-- where it goes here.
--
-- Every call to Citus goes through EXECUTE, so this file installs, and dna.distribution_plan,
-- dna.distribution and dna.clear_width run, on a server without Citus; dna.distribute and
-- dna.sync_tenancy_maps then refuse with SQLSTATE 0A000 and change nothing.
-- Figures and the reasons for each choice: ../shared/research/citus-probe.md, docs/scale-out.md.

-- ---------------------------------------------------------------------------------------------
-- Is Citus here?
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.citus_version()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus'
$$;

COMMENT ON FUNCTION dna.citus_version() IS
'The version of the citus extension installed in this database (pg_extension.extversion), or NULL '
'when Citus is not installed.';

CREATE OR REPLACE FUNCTION dna.require_citus(verb text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v text := dna.citus_version();
BEGIN
    IF v IS NULL THEN
        RAISE EXCEPTION '%: Citus is not installed in this database (%)', verb, current_database()
            USING ERRCODE = '0A000',
                  DETAIL = 'pg_extension has no row for citus, so there is nothing to distribute to; nothing was changed.',
                  HINT = 'On a Citus cluster: CREATE EXTENSION citus on the coordinator and every worker, add the '
                         'workers (citus_add_node), then run this on the coordinator. On one server pydna needs '
                         'no distribution. See docs/scale-out.md.';
    END IF;
    RETURN v;
END
$$;

COMMENT ON FUNCTION dna.require_citus(text) IS
'Internal: the citus extension version, or SQLSTATE 0A000 (message "<verb>: Citus is not installed in '
'this database", HINT pointing to docs/scale-out.md) when it is absent. Changes nothing.';

-- ---------------------------------------------------------------------------------------------
-- The plan: where each table goes (from the catalog)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.distribution_plan()
RETURNS TABLE (ord integer, tbl regclass, placement text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r record;
    protected regclass[] := ARRAY(SELECT dna.protected_tables());
    n integer := 0;
BEGIN
    -- placement: 'reference' | 'per_node' | 'local' | 'distributed'; ord: the order dna.distribute
    -- runs them in (reference tables before the tables whose foreign keys name them; dna_instances
    -- first among the distributed, the colocation group's anchor).
    FOR r IN
        SELECT c.oid::regclass AS t, c.relname,
               EXISTS (SELECT 1 FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = c.oid AND a.attname = 'scope'
                         AND a.attnum > 0 AND NOT a.attisdropped) AS has_scope,
               c.oid::regclass = ANY (protected) AS has_tenant_policy
        FROM pg_catalog.pg_class AS c
        WHERE c.relnamespace = 'dna'::regnamespace AND c.relkind IN ('r', 'p')
        ORDER BY CASE c.relname WHEN 'dna_instances' THEN 0 ELSE 1 END, c.relname
    LOOP
        n := n + 1;
        tbl := r.t;
        IF r.relname IN ('dna_kinds', 'dna_models', 'dna_search_config') THEN
            placement := 'reference';
            ord := 2000 + n;                                   -- before every distributed table
        ELSIF r.relname IN ('dna_identities', 'dna_workspace_members') THEN
            placement := 'per_node';
            ord := 1000 + n;
        ELSIF r.relname IN ('dna_index_staging', 'dna_api_keys') THEN
            placement := 'local';
            ord := n;
        ELSIF r.has_tenant_policy OR r.has_scope THEN
            IF NOT r.has_scope THEN
                RAISE EXCEPTION 'dna.distribution_plan: table % holds row data (it carries the tenant policy) but has no scope column', r.t
                    USING ERRCODE = '0A000',
                          DETAIL = 'Every scope-keyed table is distributed by scope, colocated with dna.dna_instances.',
                          HINT = 'Add a scope column (and put it in every key) in the revision that created the table; see docs/scale-out.md.';
            END IF;
            placement := 'distributed';
            ord := 3000 + n;
        ELSE
            RAISE EXCEPTION 'dna.distribution_plan: table % has no placement (not a reference table, a tenancy map, a '
                            'coordinator-local table, nor scope-keyed)', r.t
                USING ERRCODE = '0A000',
                      HINT = 'Give it a scope column, or name its placement in dna.distribution_plan (sql/distribute.sql).';
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION dna.distribution_plan() IS
'Where each table of schema dna goes on Citus, from the catalog: rows (ord, tbl, placement) with '
'placement ''reference'' (dna_kinds, dna_models, dna_search_config), ''per_node'' (dna_identities, '
'dna_workspace_members: plain copies on every node), ''local'' (dna_index_staging, dna_api_keys: the '
'coordinator only) or ''distributed'' (every dna.protected_tables() table and any other table with a '
'scope column, by scope, colocated with dna_instances, which comes first). Ordered by ord: the order '
'dna.distribute runs them in. Errors: 0A000 for a table that carries the tenant policy without a scope '
'column, or a table with no placement. Runs without Citus; changes nothing.';

CREATE OR REPLACE FUNCTION dna.delegated_verbs()
RETURNS TABLE (fn regprocedure, force_delegation boolean)
LANGUAGE sql STABLE
AS $$
    -- The scope-routed verbs: their first argument is the scope, and every statement they run
    -- stays in that scope. dna.search and dna.bm25 are forced (citus-probe S1: hnsw.* set_config
    -- then reaches the node that runs the lanes; B5a); so is dna.bm25_compact_scope, whose advisory
    -- locks and segment ids must be taken where the partition's writers (the BM25 triggers, on the
    -- shard) take theirs, inside a transaction too. The memory verbs and the document writers are
    -- not forced (forcing dna.recall is refused by Citus while it reads other tables than the
    -- scope's colocation group): in a transaction block they run on the coordinator, their
    -- statements routed to the shard, where the triggers keep the index.
    SELECT p.oid::regprocedure, p.proname IN ('search', 'bm25', 'bm25_compact_scope')
    FROM pg_catalog.pg_proc AS p
    WHERE p.pronamespace = 'dna'::regnamespace
      AND p.proname IN ('search', 'bm25', 'recall', 'remember', 'forget', 'revive', 'consolidate', 'list_memories',
                        'index_document', 'index_documents', 'delete_document', 'redact', 'reconcile',
                        'bm25_compact_scope')
      AND (p.proargnames)[1] = 'scope'
    ORDER BY p.proname, p.oid
$$;

COMMENT ON FUNCTION dna.delegated_verbs() IS
'The verbs dna.distribute delegates with create_distributed_function(fn, ''scope'', colocate_with := '
'''dna.dna_instances'', force_delegation := force_delegation): every overload of dna.search, dna.bm25 and '
'dna.bm25_compact_scope (forced) and of recall, remember, forget, revive, consolidate, list_memories, '
'index_document, index_documents, delete_document, redact and reconcile whose first argument is scope. From '
'pg_proc; runs without Citus.';

-- ---------------------------------------------------------------------------------------------
-- The per-node tenancy maps
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.map_table_ddl(tbl regclass)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    cols text;
    out text[];
BEGIN
    -- The statements that recreate tbl as on the coordinator: columns (types, NOT NULL, defaults),
    -- constraints, row-level security and its policies, and the grants (from the catalog).
    SELECT string_agg(format('%I %s%s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                             CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END,
                             coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')), ', ' ORDER BY a.attnum)
      INTO cols
    FROM pg_catalog.pg_attribute AS a
    LEFT JOIN pg_catalog.pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped;
    out := ARRAY[format('CREATE TABLE IF NOT EXISTS %s (%s)', tbl, cols)];
    out := out || ARRAY(SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s', tbl, c.conname, pg_get_constraintdef(c.oid))
                        FROM pg_catalog.pg_constraint AS c
                        WHERE c.conrelid = tbl AND c.contype IN ('p', 'u', 'c') ORDER BY c.conname);
    out := out || ARRAY(SELECT format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl)
                        FROM pg_catalog.pg_class AS c WHERE c.oid = tbl AND c.relrowsecurity);
    out := out || ARRAY(SELECT format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl)
                        FROM pg_catalog.pg_class AS c WHERE c.oid = tbl AND c.relforcerowsecurity);
    out := out || ARRAY(SELECT format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', p.policyname, tbl, p.permissive,
                                      p.cmd, array_to_string(p.roles, ', '),
                                      coalesce(' USING (' || p.qual || ')', ''),
                                      coalesce(' WITH CHECK (' || p.with_check || ')', ''))
                        FROM pg_catalog.pg_policies AS p
                        WHERE p.schemaname = 'dna' AND p.tablename = (SELECT c.relname FROM pg_catalog.pg_class AS c WHERE c.oid = tbl)
                        ORDER BY p.policyname);
    out := out || ARRAY(SELECT format('GRANT %s ON %s TO %s', x.privilege_type, tbl,
                                      CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END)
                        FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS x
                        LEFT JOIN pg_catalog.pg_roles AS r ON r.oid = x.grantee
                        WHERE c.oid = tbl AND x.grantee <> c.relowner
                        ORDER BY 1);
    RETURN out;
END
$$;

COMMENT ON FUNCTION dna.map_table_ddl(regclass) IS
'Internal (dna.sync_tenancy_maps): the statements that create a per-node map table as the coordinator '
'has it — CREATE TABLE IF NOT EXISTS with its columns, constraints, row-level security, policies and '
'grants — read from the catalog.';

CREATE OR REPLACE FUNCTION dna.sync_tenancy_maps()
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    t regclass;
    rows jsonb;
    stmt text;
    created boolean;
    report jsonb := '{}';
    failed text;
BEGIN
    PERFORM dna.require_citus('dna.sync_tenancy_maps');
    FOR t IN SELECT p.tbl FROM dna.distribution_plan() AS p WHERE p.placement = 'per_node' ORDER BY p.ord LOOP
        -- 1. the table on every worker (once: a worker without it gets the coordinator's DDL)
        EXECUTE 'SELECT bool_and(r.result = ''t'') FROM run_command_on_workers($1) AS r'
            INTO created USING format('SELECT to_regclass(%L) IS NOT NULL', t::text);
        IF NOT coalesce(created, true) THEN
            FOREACH stmt IN ARRAY dna.map_table_ddl(t) LOOP
                EXECUTE 'SELECT string_agg(r.nodename || '':'' || r.nodeport || '' '' || r.result, ''; '') '
                        'FROM run_command_on_workers($1) AS r WHERE NOT r.success AND r.result NOT LIKE ''%already exists%'''
                    INTO failed USING stmt;
                IF failed IS NOT NULL THEN
                    RAISE EXCEPTION 'dna.sync_tenancy_maps: creating % on a worker failed: %', t, failed
                        USING ERRCODE = '58000', HINT = 'Fix the worker, then run SELECT dna.sync_tenancy_maps(); again.';
                END IF;
            END LOOP;
        END IF;
        -- 2. its rows, replaced in one transaction per worker
        EXECUTE format('SELECT coalesce(jsonb_agg(to_jsonb(x)), ''[]'') FROM %s AS x', t) INTO rows;
        stmt := format('DELETE FROM %1$s; INSERT INTO %1$s SELECT * FROM jsonb_populate_recordset(NULL::%1$s, %2$L::jsonb)',
                       t, rows);
        EXECUTE 'SELECT string_agg(r.nodename || '':'' || r.nodeport || '' '' || r.result, ''; '') '
                'FROM run_command_on_workers($1) AS r WHERE NOT r.success'
            INTO failed USING stmt;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'dna.sync_tenancy_maps: copying % to a worker failed: %', t, failed
                USING ERRCODE = '58000', HINT = 'Fix the worker, then run SELECT dna.sync_tenancy_maps(); again.';
        END IF;
        report := report || jsonb_build_object(t::text, jsonb_array_length(rows));
    END LOOP;
    RETURN jsonb_build_object('maps', report);
END
$$;

COMMENT ON FUNCTION dna.sync_tenancy_maps() IS
'Citus only, on the coordinator: makes every worker''s copy of the per-node maps (dna_identities, '
'dna_workspace_members) equal to the coordinator''s — creates a missing table from the coordinator''s '
'catalog (columns, constraints, row-level security, policies, grants), then replaces its rows in one '
'transaction per worker (run_command_on_workers). The step a DBA runs after every change to a map: '
'until then a worker answers with the old map (off-boarding is not atomic across nodes; see '
'docs/scale-out.md). Returns {"maps": {table: rows copied}}. Errors: 0A000 without Citus (nothing '
'changed); 58000 naming the worker whose command failed.';

-- ---------------------------------------------------------------------------------------------
-- dna.distribute: the one step that puts an installed pydna on Citus
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.citus_placement_name(partmethod "char", repmodel "char")
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    -- A pure function of the two pg_dist_partition columns, so that one server evaluates every
    -- branch (tests/test_citus_guard_rails.py): inside dna.citus_placement the CASE is reached only
    -- where pg_dist_partition exists, and its last branch failed there (42725: unknown || "char" has
    -- no unique operator; D1 of ../shared/research/citus-probe-3.md).
    SELECT CASE WHEN partmethod IS NULL THEN 'local'
                WHEN partmethod = 'h' THEN 'distributed'
                WHEN partmethod = 'n' AND repmodel = 't' THEN 'reference'
                WHEN partmethod = 'n' THEN 'citus_local'
                ELSE 'citus:' || partmethod::text END
$$;

COMMENT ON FUNCTION dna.citus_placement_name("char", "char") IS
'What a pg_dist_partition row (partmethod, repmodel) is to dna.distribute: partmethod NULL -> ''local'' '
'(not a Citus table), h -> ''distributed'', n with repmodel t -> ''reference'', any other n -> '
'''citus_local'', any other method m -> ''citus:m''. Pure; runs without Citus.';

CREATE OR REPLACE FUNCTION dna.citus_placement(tbl regclass)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    method "char";
    model "char";
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN 'local';
    END IF;
    EXECUTE 'SELECT p.partmethod, p.repmodel FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = $1'
        INTO method, model USING tbl;
    RETURN dna.citus_placement_name(method, model);
END
$$;

COMMENT ON FUNCTION dna.citus_placement(regclass) IS
'What Citus holds tbl as now (its pg_dist_partition row, named by dna.citus_placement_name): '
'''distributed'' (partmethod h), ''reference'' (n, replicated to every node), ''citus_local'' (n, one '
'placement: a table Citus converted because it references a reference table by foreign key, as the '
'width tables do once dna_models is one), ''local'' (not a Citus table, or no Citus). Reads '
'pg_dist_partition only through EXECUTE, so it runs without Citus.';

CREATE OR REPLACE FUNCTION dna.holds_scope(scope text)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    held boolean;
BEGIN
    IF dna.citus_placement('dna.dna_bm25_docs') <> 'distributed' THEN
        RETURN true;                                     -- one server, or not distributed yet
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement AS p, pg_catalog.pg_dist_local_group AS l
                            WHERE p.shardid = get_shard_id_for_distribution_column(''dna.dna_bm25_docs'', $1)
                              AND p.groupid = l.groupid)'
        INTO held USING scope;
    RETURN held;
END
$$;

COMMENT ON FUNCTION dna.holds_scope(text) IS
'Whether this node holds the shards of scope (pg_dist_placement of its dna_bm25_docs shard against '
'pg_dist_local_group): true on a server without Citus or before dna.distribute. Reads Citus catalogs '
'only through EXECUTE.';

CREATE OR REPLACE FUNCTION dna.shard_explained(statement text, tbl regclass, scope text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    shard regclass;
BEGIN
    IF dna.citus_version() IS NULL OR dna.citus_placement(tbl) <> 'distributed' THEN
        RETURN statement;                                -- one server, or not distributed yet
    END IF;
    shard := to_regclass(shard_name(tbl, get_shard_id_for_distribution_column(tbl, scope)));
    IF shard IS NULL THEN
        RETURN statement;                                -- the scope's shard is on another node
    END IF;
    RETURN replace(statement, 'FROM ' || tbl::text || ' AS ', 'FROM ' || shard::text || ' AS ');
END
$$;

COMMENT ON FUNCTION dna.shard_explained(text, regclass, text) IS
'The statement to EXPLAIN for a statement over tbl of scope (shapes: a statement text naming tbl as '
'"FROM <tbl> AS <alias>", returns text): on Citus, when tbl is distributed and the shard of scope is on '
'this node, the statement over that shard (the plan Citus runs there); else the statement as given. '
'Citus EXPLAINs a distributed table by asking the shard''s node over a connection, which a delegated '
'call (on the node holding the scope, executing its shards locally) cannot open: 0023 fixed dna.search''s '
'explain => true there (XX000 "cannot switch local execution status"). Reads Citus catalogs only when '
'Citus is installed.';

CREATE OR REPLACE FUNCTION dna.distribute(shard_count integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    version text;
    r record;
    trig record;
    names text[];
    placements text[];
    paused text[];
    stmt text;
    tbl regclass;
    reference text[] := '{}';
    distributed text[] := '{}';
    skipped text[] := '{}';
    triggers text[] := '{}';
    functions text[] := '{}';
    maps jsonb;
BEGIN
    IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
        RAISE EXCEPTION 'dna.distribute: shard_count must be between 1 and 64000 (got %)', shard_count
            USING ERRCODE = '22023', HINT = 'Leave it NULL for citus.shard_count (32 by default).';
    END IF;
    version := dna.require_citus('dna.distribute');
    -- The plan first: an unplaceable table refuses before anything is distributed.
    PERFORM count(*) FROM dna.distribution_plan();
    -- Triggers on distributed tables are opt-in (B2); DDL after a parallel access in the same
    -- transaction needs sequential mode (B9). Both transaction-local.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    IF shard_count IS NOT NULL THEN
        PERFORM set_config('citus.shard_count', shard_count::text, true);
    END IF;
    -- 0. the tenant policy without a sublink (B1: Citus refuses one on a distributed table):
    -- dna.tenant_policy() gives that form now that the citus extension is installed
    PERFORM dna.protect_table(t) FROM dna.protected_tables() AS t;
    -- 1. the tenancy maps: plain tables on every node (B5c)
    maps := dna.sync_tenancy_maps() -> 'maps';
    -- 2. reference tables, then 3. the scope-keyed tables, dna_instances first. The plan is read as
    -- names, all of them before the first step, and each name is resolved at its own step: Citus
    -- turns a converted table's relation into its shard (create_reference_table of dna_models makes
    -- the width tables Citus local tables; create_distributed_table replaces a table again), so an
    -- OID read earlier may name a shard by then (D2 of ../shared/research/citus-probe-3.md).
    names := ARRAY(SELECT format('dna.%I', c.relname) FROM dna.distribution_plan() AS p
                   JOIN pg_catalog.pg_class AS c ON c.oid = p.tbl
                   WHERE p.placement IN ('reference', 'distributed') ORDER BY p.ord);
    placements := ARRAY(SELECT p.placement FROM dna.distribution_plan() AS p
                        WHERE p.placement IN ('reference', 'distributed') ORDER BY p.ord);
    -- Citus copies a table's rows into its shards with COPY, which fires the shards' triggers:
    -- dna_instances' rows would record their versions again (into a dna_versions not distributed
    -- yet), the width tables' rows would be indexed again. The copy moves rows, it writes none, so
    -- the dna triggers of the tables still to distribute are paused for it (ALTER TABLE … DISABLE
    -- TRIGGER, in this transaction) and enabled again, on every shard, once all are distributed.
    paused := ARRAY(SELECT format('ALTER TABLE %s <state> TRIGGER %I', g.tgrelid::regclass, g.tgname)
                    FROM dna.distribution_plan() AS p
                    JOIN pg_catalog.pg_trigger AS g ON g.tgrelid = p.tbl
                    JOIN pg_catalog.pg_proc AS f ON f.oid = g.tgfoid
                    WHERE p.placement = 'distributed' AND dna.citus_placement(p.tbl) <> 'distributed'
                      AND NOT g.tgisinternal AND g.tgenabled <> 'D' AND (g.tgtype & 32) = 0
                      AND f.pronamespace = 'dna'::regnamespace
                    ORDER BY p.ord, g.tgname);
    FOREACH stmt IN ARRAY paused LOOP
        EXECUTE replace(stmt, '<state>', 'DISABLE');
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
        tbl := names[i]::regclass;
        -- Done already: skipped. A Citus local table (a width table, converted when dna_models
        -- became a reference table, since it references it) is distributed like a plain one.
        IF dna.citus_placement(tbl) = placements[i] THEN
            skipped := skipped || names[i];
            CONTINUE;
        END IF;
        IF placements[i] = 'reference' THEN
            EXECUTE 'SELECT create_reference_table($1)' USING tbl;
            reference := reference || names[i];
        ELSE
            -- B8: a statement trigger AFTER TRUNCATE fires on every shard and deletes across all
            -- shards from inside it; on Citus a width is cleared with dna.clear_width instead.
            FOR trig IN SELECT g.tgname FROM pg_catalog.pg_trigger AS g
                        WHERE g.tgrelid = tbl AND NOT g.tgisinternal AND (g.tgtype & 32) <> 0 ORDER BY g.tgname LOOP
                EXECUTE format('DROP TRIGGER %I ON %s', trig.tgname, names[i]);
                triggers := triggers || format('%s ON %s', trig.tgname, names[i]);
            END LOOP;
            IF names[i] = 'dna.dna_instances' THEN
                EXECUTE 'SELECT create_distributed_table($1, ''scope'')' USING tbl;
            ELSE
                EXECUTE 'SELECT create_distributed_table($1, ''scope'', colocate_with => ''dna.dna_instances'')' USING tbl;
            END IF;
            distributed := distributed || names[i];
        END IF;
    END LOOP;
    -- The paused triggers back on (the shells' ALTER reaches every shard). The statements were
    -- formatted with the tables' names before the first step: those names still hold.
    FOREACH stmt IN ARRAY paused LOOP
        EXECUTE replace(stmt, '<state>', 'ENABLE');
    END LOOP;
    -- 4. the scope-routed verbs run on the worker that holds the scope (S1, B5)
    FOR r IN SELECT v.fn, v.force_delegation FROM dna.delegated_verbs() AS v LOOP
        EXECUTE 'SELECT create_distributed_function($1, ''scope'', colocate_with := ''dna.dna_instances'', '
                'force_delegation := $2)' USING r.fn, r.force_delegation;
        functions := functions || r.fn::text;
    END LOOP;
    RETURN jsonb_build_object('citus_version', version, 'reference', to_jsonb(reference),
                              'distributed', to_jsonb(distributed), 'already_citus', to_jsonb(skipped),
                              'truncate_triggers_dropped', to_jsonb(triggers),
                              'triggers_paused_for_copy', coalesce(array_length(paused, 1), 0), 'per_node_maps', maps,
                              'delegated_functions', to_jsonb(functions));
END
$$;

COMMENT ON FUNCTION dna.distribute(integer) IS
'Citus only, on the coordinator, as a superuser, once after `dna db upgrade` (and again after a revision '
'that adds a table): puts pydna on the cluster as dna.distribution_plan() says. In one transaction, with '
'citus.enable_unsafe_triggers = on and citus.multi_shard_modify_mode = sequential (SET LOCAL): re-creates the '
'tenant policy of every protected table in its sublink-free form (dna.protect_table, dna.tenant_policy), copies '
'the tenancy maps to every worker (dna.sync_tenancy_maps), makes dna_kinds, dna_models and '
'dna_search_config reference tables, drops the AFTER TRUNCATE triggers of the scope-keyed tables (use '
'dna.clear_width) and distributes them by scope, dna_instances first and the rest colocated with it '
'(shard_count: NULL = citus.shard_count, else 1..64000), the dna triggers of those tables paused while '
'Citus copies their existing rows into the shards (the copy writes no version, no index row), then '
'delegates dna.delegated_verbs() with '
'create_distributed_function(…, ''scope'', colocate_with := ''dna.dna_instances''). Idempotent: a table '
'Citus already holds as planned is skipped (listed under already_citus; a Citus local table is '
'distributed); create_distributed_function is re-run (it updates). Returns {citus_version, reference, '
'distributed, already_citus, truncate_triggers_dropped, triggers_paused_for_copy, per_node_maps, '
'delegated_functions}, tables by name. The way back: dna.undistribute(). Errors: 0A000 without Citus (nothing changed; hint: '
'docs/scale-out.md) or for a table with no placement; 22023 for a bad shard_count.';

CREATE OR REPLACE FUNCTION dna.distribution()
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    tables jsonb;
    functions jsonb := '[]';
BEGIN
    SELECT jsonb_agg(jsonb_build_object('table', p.tbl::text, 'plan', p.placement,
                                        'now', dna.citus_placement(p.tbl),
                                        'truncate_triggers', (SELECT count(*) FROM pg_catalog.pg_trigger AS g
                                                              WHERE g.tgrelid = p.tbl AND NOT g.tgisinternal
                                                                AND (g.tgtype & 32) <> 0))
                     ORDER BY p.ord)
      INTO tables
    FROM dna.distribution_plan() AS p;
    IF to_regclass('pg_catalog.pg_dist_object') IS NOT NULL THEN
        EXECUTE 'SELECT coalesce(jsonb_agg(jsonb_build_object(''function'', v.fn::text, ''delegated'', '
                '(o.distribution_argument_index IS NOT NULL), ''forced'', coalesce(o.force_delegation, false)) '
                'ORDER BY v.fn::text), ''[]'') FROM dna.delegated_verbs() AS v '
                'LEFT JOIN pg_catalog.pg_dist_object AS o ON o.classid = ''pg_proc''::regclass AND o.objid = v.fn'
            INTO functions;
    ELSE
        SELECT coalesce(jsonb_agg(jsonb_build_object('function', v.fn::text, 'delegated', false, 'forced', false)
                                  ORDER BY v.fn::text), '[]')
          INTO functions FROM dna.delegated_verbs() AS v;
    END IF;
    RETURN jsonb_build_object('citus_version', dna.citus_version(),
                              'distributed', coalesce((SELECT bool_and(t ->> 'now' = CASE t ->> 'plan'
                                                                          WHEN 'per_node' THEN 'local' WHEN 'local' THEN 'local'
                                                                          ELSE t ->> 'plan' END)
                                                       FROM jsonb_array_elements(tables) AS t), false)
                                             AND dna.citus_version() IS NOT NULL,
                              'tables', tables, 'functions', functions);
END
$$;

COMMENT ON FUNCTION dna.distribution() IS
'The state of the scale-out: {citus_version (NULL without Citus), distributed (true when every table is '
'where dna.distribution_plan() puts it), tables: [{table, plan, now (dna.citus_placement), '
'truncate_triggers}], functions: [{function, delegated, forced}]}. Runs anywhere; changes nothing.';

-- ---------------------------------------------------------------------------------------------
-- dna.undistribute: back to one node (the way down before a downgrade, D6)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.undistribute()
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    t text;
    tables text[] := '{}';
    triggers text[] := '{}';
    w integer;
BEGIN
    PERFORM dna.require_citus('dna.undistribute');
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    -- One table at a time, with the tables its foreign keys reach (the width tables and
    -- dna_models): Citus brings every shard's rows back into a plain table on the coordinator.
    LOOP
        EXECUTE 'SELECT c.oid::regclass::text FROM pg_catalog.pg_dist_partition AS p '
                'JOIN pg_catalog.pg_class AS c ON c.oid = p.logicalrelid '
                'WHERE c.relnamespace = ''dna''::regnamespace ORDER BY p.partmethod DESC, c.relname LIMIT 1' INTO t;
        EXIT WHEN t IS NULL;
        EXECUTE 'SELECT undistribute_table($1, cascade_via_foreign_keys => true)' USING t;
        tables := tables || t;
    END LOOP;
    -- The AFTER TRUNCATE triggers dna.distribute dropped (B8), as the revisions created them.
    IF to_regprocedure('dna.bm25_truncate()') IS NOT NULL THEN
        FOR w IN SELECT dna.search_widths() LOOP
            t := format('dna_search_docs_%s_bm25_truncate', w);
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS g WHERE g.tgname = t
                             AND g.tgrelid = dna.search_table(w)) THEN
                EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %s FOR EACH STATEMENT '
                               'EXECUTE FUNCTION dna.bm25_truncate(%L)', t, dna.search_table(w), w);
                triggers := triggers || format('%s ON %s', t, dna.search_table(w));
            END IF;
        END LOOP;
    END IF;
    RETURN jsonb_build_object('undistributed', to_jsonb(tables), 'truncate_triggers_created', to_jsonb(triggers));
END
$$;

COMMENT ON FUNCTION dna.undistribute() IS
'Citus only, on the coordinator, as a superuser: the inverse of dna.distribute, for a database that '
'leaves Citus (the way down before `alembic downgrade` below 0019_where_users_run, which refuses '
'while Citus holds a dna table). undistribute_table(…, cascade_via_foreign_keys => true) for every '
'dna table Citus holds (the rows come back to plain tables on the coordinator), then re-creates the '
'AFTER TRUNCATE triggers dna.distribute dropped. Returns {undistributed: [the tables named, each '
'with those its foreign keys reach], truncate_triggers_created}. Idempotent. Errors: 0A000 without '
'Citus (nothing changed).';

-- ---------------------------------------------------------------------------------------------
-- dna.clear_width: TRUNCATE of a width, scope by scope (B8)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dna.clear_width(dims integer)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    tbl regclass;
    models text[];
    recallable text[];
    memories bigint;
    s text;
    n bigint;
    docs bigint := 0;
    scopes integer := 0;
    lexical jsonb := '{}';
    t text;
BEGIN
    IF dims IS NULL THEN
        RAISE EXCEPTION 'dna.clear_width: dims must not be NULL' USING ERRCODE = '22004',
              HINT = format('Widths with a table: %s.', (SELECT string_agg(w::text, ', ' ORDER BY w) FROM dna.search_widths() AS w));
    END IF;
    tbl := dna.search_table(dims);                                    -- 42P01 naming the widths there are
    IF NOT dna.privileged() THEN
        RAISE EXCEPTION 'dna.clear_width(%): role % is subject to row-level security, so it would clear only the rows it sees',
                        dims, quote_ident(current_user::text)
            USING ERRCODE = '42501', HINT = 'Run it as a superuser or a BYPASSRLS role (as TRUNCATE needs the table owner).';
    END IF;
    EXECUTE format('LOCK TABLE %s IN EXCLUSIVE MODE', tbl);            -- readers go on; writers wait
    -- The memory Kinds first, in a statement of their own: no dna function that reads a table is
    -- called from inside a statement Citus pushes to a shard (B5).
    recallable := dna.recallable_kinds();
    EXECUTE format('SELECT count(*), string_agg(DISTINCT quote_literal(d.scope), '', '') FROM %s AS d '
                   'WHERE d.kind = ANY ($1) AND EXISTS ('
                   'SELECT 1 FROM dna.dna_instances AS i WHERE i.scope = d.scope AND i.kind = d.kind AND i.name = d.name '
                   'AND i.tenant = d.tenant AND NOT dna.is_redacted(i.spec))', tbl) INTO memories, s USING recallable;
    IF memories > 0 THEN
        RAISE EXCEPTION 'dna.clear_width(%): % holds % search row(s) of stored memories, in scope(s) %', dims, tbl, memories, s
            USING ERRCODE = '23001',
                  DETAIL = 'A memory''s search rows go only with the memory: forgotten memories keep theirs '
                           '(their history answers as_of), so only dna.redact removes them.',
                  HINT = 'Erase those memories with dna.redact first (dna.forget is not enough); nothing was changed.';
    END IF;
    s := NULL;
    models := ARRAY(SELECT m.model_id FROM dna.dna_models AS m WHERE m.dims = dims ORDER BY m.model_id);
    -- Every scope that has rows of this width (documents, or index rows left by a model of it),
    -- one at a time: each statement names its scope, so on Citus it runs on one shard.
    FOR s IN EXECUTE format('SELECT d.scope FROM %s AS d UNION SELECT b.scope FROM dna.dna_bm25_docs AS b '
                            'WHERE b.model_id = ANY ($1) UNION SELECT g.scope FROM dna.dna_bm25_segments AS g '
                            'WHERE g.model_id = ANY ($1) UNION SELECT x.scope FROM dna.dna_bm25_tombstones AS x '
                            'WHERE x.model_id = ANY ($1) ORDER BY 1', tbl) USING models LOOP
        scopes := scopes + 1;
        -- The lexical index first, so the documents' DELETE trigger (dna.bm25_sync) finds nothing to tombstone.
        FOREACH t IN ARRAY ARRAY['dna_bm25_postings', 'dna_bm25_chunks', 'dna_bm25_segments', 'dna_bm25_docs',
                                 'dna_bm25_forward', 'dna_bm25_tombstones', 'dna_bm25_tombstone_terms'] LOOP
            EXECUTE format('DELETE FROM dna.%I AS x WHERE x.scope = $1 AND x.model_id = ANY ($2)', t) USING s, models;
            GET DIAGNOSTICS n = ROW_COUNT;
            lexical := jsonb_set(lexical, ARRAY[t], to_jsonb(coalesce((lexical ->> t)::bigint, 0) + n));
        END LOOP;
        EXECUTE format('DELETE FROM %s AS d WHERE d.scope = $1', tbl) USING s;
        GET DIAGNOSTICS n = ROW_COUNT;
        docs := docs + n;
    END LOOP;
    RETURN jsonb_build_object('dims', dims, 'table', tbl::text, 'models', to_jsonb(models), 'scopes', scopes,
                              'documents', docs, 'lexical_rows', lexical);
END
$$;

COMMENT ON FUNCTION dna.clear_width(integer) IS
'Admin (superuser or BYPASSRLS; the replacement for TRUNCATE dna.dna_search_docs_<dims>, whose AFTER '
'TRUNCATE trigger dna.distribute drops on Citus, citus-probe B8): deletes every document of the width '
'table and the lexical index rows (memtable, segments, chunks, forward rows, tombstones) of every model '
'of that width, scope by scope (each statement filters one scope: one shard on Citus), under an '
'EXCLUSIVE lock of the width table (reads go on). Works on one server too. Returns {dims, table, models, '
'scopes, documents, lexical_rows: {table: rows deleted}}. Errors: 22004 dims NULL, 42P01 no table for '
'the width (dna.search_table), 42501 for a role subject to row-level security, 23001 when the width '
'holds search rows of stored memories, forgotten ones included (erase them with dna.redact first; the '
'message names the scopes). A refusal '
'changes nothing.';
