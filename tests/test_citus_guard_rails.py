"""Guard rails for Citus, without Citus (issue 16): the SQL package as a migrated database holds it
(pg_proc, pg_policies, dna.distribution_plan) and the revisions from 0018 on are checked for the
patterns a Citus coordinator refuses or answers differently for (../shared/research/citus-probe.md);
see tests/citus_guard.py for the rules. Each check's test fails with the list of its findings.

The self-tests at the end feed the checker a known-bad snippet per pattern and its known-good twin,
so a checker that stopped seeing a pattern fails here too."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pglast
import psycopg
import pytest

import citus_guard as guard
import citus_guard_shards as shards
from pydna import migrate

REPO = Path(__file__).resolve().parents[1]
VERSIONS = REPO / "migrations" / "versions"

# Findings that are not a Citus problem, each with the reason (a stale entry fails
# test_allow_list_entries_are_live).
ALLOWED = {
    ("B7", "dna.bm25_truncate"):
        "B8: only AFTER TRUNCATE triggers call it (test_allow_list_entries_are_live checks), and dna.distribute "
        "drops those triggers from every distributed table; on Citus dna.clear_width clears a width scope by scope",
}
# Dynamic statements the checker cannot read (their text is built from values it cannot follow),
# by function: a new one fails test_dynamic_sql_the_checker_cannot_read_is_known, so it gets looked at.
UNCHECKED = {
    "dna.bm25_build_segment": "the segment's source query is its argument (bm25_seal / bm25_merge pass scope-pinned texts)",
    "dna.integrity_findings": "the width table and its column list come from the catalog loop",
    "dna.receipt_run": "replays a receipt's stored verb call (a dna.search / dna.recall call text)",
    "dna.scope_names": "a union over every width table, built from the catalog",
    "dna.distribute": "ALTER TABLE … DISABLE/ENABLE TRIGGER of the tables it distributes, built from the catalog",
}


@pytest.fixture(scope="module")
def package(pg_server, dna_template):
    """The model of a database migrated to head (a clone of the template of this session), with the
    tenant policies as dna.distribute() leaves them on a Citus coordinator: dna.protect_table re-run
    where the citus extension is installed, i.e. dna.tenant_policy(true) (one node keeps the InitPlan
    form, dna.tenant_policy(false): tests/test_citus_ready.py checks that both admit the same rows)."""
    name = f"dna_guard_{os.getpid()}"
    with pg_server.janitor(name, template=dna_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            conn.execute("""
                DO $$
                DECLARE t regclass;
                BEGIN
                    FOR t IN SELECT * FROM dna.protected_tables() LOOP
                        EXECUTE format('ALTER POLICY dna_tenant_isolation ON %s USING (%s) WITH CHECK (%s)',
                                       t, dna.tenant_policy(true), dna.tenant_policy(true));
                    END LOOP;
                END
                $$""")
            yield guard.from_database(conn)


def test_distribute_recreates_the_policies_before_it_distributes(sql):
    """What the package fixture models: dna.distribute re-creates every protected table's policy (the
    citus extension then installed, so dna.tenant_policy() gives the sublink-free form) before its
    first create_distributed_table."""
    body = sql.execute("SELECT prosrc FROM pg_proc WHERE oid = 'dna.distribute(integer)'::regprocedure").fetchone()[0]
    assert "dna.protect_table(t) FROM dna.protected_tables()" in body
    assert body.index("dna.protect_table(") < body.index("create_distributed_table")
    assert sql.execute("SELECT strpos(dna.tenant_policy(true), 'SELECT') = 0 AND "
                       "strpos(dna.tenant_policy(false), '(SELECT dna.visible_tenants())') > 0").fetchone()[0]


ALL_CHECKS = {**guard.CHECKS, **shards.CHECKS}


def _open(findings):
    return [f for f in findings if (f.pattern, f.where.split(" ")[0]) not in ALLOWED]


def _report(findings) -> str:
    return "\n".join(str(f) for f in findings)


# -- the package at head ----------------------------------------------------------------------------


def test_every_plane_file_and_fragment_parses():
    files = sorted((REPO / "sql").glob("*.sql")) + sorted((VERSIONS / "0018_citus_ready").glob("*.sql"))
    assert files
    for path in files:
        stmts = guard.parse(path.read_text(encoding="utf-8"))
        assert stmts, path.name


def test_every_function_body_parses(package):
    assert len(list(package.all_functions())) > 150
    for fn in package.all_functions():
        if fn.lang in ("sql", "plpgsql"):
            assert fn.statements, fn.name


def test_policies_have_no_sublink_and_read_no_citus_table(package):
    """B1 (a sublink in a policy of a Citus table) and B5c (a policy's function reads a Citus table)."""
    found = _open(guard.check_policies(package))
    assert not found, _report(found)


def test_on_conflict_is_immutable_and_never_into_a_reference_table(package):
    """B3 (now() & co. in ON CONFLICT DO UPDATE) and B6 (INSERT … ON CONFLICT into dna_models & co.)."""
    found = _open(guard.check_on_conflict(package))
    assert not found, _report(found)


def test_no_sql_set_returning_function_reads_a_citus_table(package):
    """B4."""
    found = _open(guard.check_sql_srfs(package))
    assert not found, _report(found)


def test_no_nested_reads_of_citus_tables(package):
    """B5 (a and b): no statement pushed to a shard calls a function that reads Citus tables."""
    found = _open(guard.check_nested_reads(package))
    assert not found, _report(found)


def test_updates_and_deletes_of_distributed_tables_pin_a_scope(package):
    """B7."""
    found = _open(guard.check_unscoped_writes(package))
    assert not found, _report(found)


def test_no_correlated_scope_sublink_under_or(package):
    """S3."""
    found = _open(guard.check_scope_sublinks(package))
    assert not found, _report(found)


def test_no_set_config_read_by_a_trigger(package):
    """S2."""
    found = _open(guard.check_session_settings(package))
    assert not found, _report(found)


def test_every_key_of_a_distributed_table_includes_scope(package):
    """K1 (D3: dna_search_receipts' primary key was receipt_id alone)."""
    assert package.keys and any(k.table == "dna.dna_search_receipts" for k in package.keys)
    found = _open(shards.check_keys(package))
    assert not found, _report(found)


def test_when_clauses_and_defaults_read_no_citus_table(package):
    """W1 (D5: the WHEN clause of dna_search_docs_valid_at called dna.kind_has_trait, which reads dna_kinds)."""
    assert any(t.when for t in package.triggers) and package.defaults
    found = _open(shards.check_shard_expressions(package))
    assert not found, _report(found)


def test_no_coordinator_only_sequence_is_used_on_a_worker(package):
    """Q1 (D7: dna_bm25_seg_id_seq, used by dna.bm25_sync on the workers, exists on the coordinator only)."""
    assert "dna.dna_search_doc_id_seq" in shards.propagated_sequences(package)
    assert "dna.remember" in shards.worker_functions(package)
    found = _open(shards.check_worker_sequences(package))
    assert not found, _report(found)


def test_no_transition_table_is_read_by_a_statement_citus_plans(package):
    """T1 (D8: dna.bm25_sync inserted into the BM25 tables from its new_rows)."""
    found = _open(shards.check_transition_tables(package))
    assert not found, _report(found)


def test_every_branch_of_citus_placement_is_evaluated(sql):
    """BR (D1: the last branch of dna.citus_placement's CASE, reached only where pg_dist_partition
    exists, had no unique operator): every WHEN and THEN of the placement functions runs once here."""
    definitions = shards.definitions_of(sql)
    assert set(definitions) == set(shards.BRANCHED)
    parts = sum(len(shards.branches(d)[0]) for d in definitions.values())
    assert parts >= 9                                              # 4 WHEN/THEN pairs and the ELSE
    found = shards.check_branches(sql, definitions)
    assert not found, _report(found)


def test_the_new_checks_fail_on_the_0018_schema(empty_dsn):
    """Each check of tests/citus_guard_shards.py finds its defect in a database at 0018_citus_ready,
    the schema of main that the live cluster refused (../shared/research/citus-probe-3.md)."""
    migrate.upgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        old = guard.from_database(conn)
        assert [str(f) for f in shards.check_keys(old)] == [
            "K1 dna.dna_search_receipts dna_search_receipts_pkey: PRIMARY KEY (receipt_id) does not include scope"]
        whens = shards.check_shard_expressions(old)
        assert {f.where for f in whens} >= {f"trigger dna_search_docs_valid_at ON dna.dna_search_docs_{w}"
                                            for w in (384, 768, 1024, 1536, 3072)}
        assert all("dna.kind_has_trait()" in f.detail and "dna.dna_kinds" in f.detail for f in whens), _report(whens)
        seqs = shards.check_worker_sequences(old)
        assert any(f.where.startswith("dna.bm25_sync") and "dna.dna_bm25_seg_id_seq" in f.detail for f in seqs), _report(seqs)
        transitions = shards.check_transition_tables(old)
        assert any(f.where.startswith("dna.bm25_sync") and "new_rows" in f.detail for f in transitions), _report(transitions)
        branches = shards.check_branches(conn, shards.definitions_of(conn, ("dna.citus_placement",)))
        assert [(f.pattern, f.where) for f in branches] == [("BR", "dna.citus_placement")]
        assert "'citus:' || method" in branches[0].detail and "42725" in branches[0].detail


def test_dynamic_sql_the_checker_cannot_read_is_known(package):
    unread = {fn.name for fn in package.all_functions() if fn.unchecked}
    assert unread <= set(UNCHECKED), f"dynamic SQL the guard rails cannot read: {sorted(unread - set(UNCHECKED))}"


def test_allow_list_entries_are_live(package, sql):
    every = [f for check in ALL_CHECKS.values() for f in check(package)]
    for pattern, where in ALLOWED:
        assert any(f.pattern == pattern and f.where.split(" ")[0] == where for f in every), (pattern, where)
    types = [t for (t,) in sql.execute("SELECT tgtype FROM pg_trigger WHERE tgfoid = 'dna.bm25_truncate'::regproc")]
    assert types and all(t & 32 for t in types)                  # called by TRUNCATE triggers only


def _revision(path: Path):
    sys.path.insert(0, str(VERSIONS.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Recorder:
    """Stands in for alembic's ``op``: keeps every text given to op.execute."""

    def __init__(self):
        self.texts: list[str] = []

    def execute(self, statement):
        text = getattr(statement, "text", statement)
        self.texts.append(text.replace("\\:", ":"))


def test_revisions_from_0018_run_one_statement_per_execute():
    """B9: Citus forwards an op.execute string as one prepared statement, which holds one command.
    Statically (the source) and by running upgrade() and downgrade() against a recorder."""
    paths = guard.revision_sources(VERSIONS)
    assert [p.name for p in paths][:1] == ["0018_citus_ready.py"]
    for path in paths:
        found = guard.check_revision_source(path)
        assert not found, _report(found)
        module = _revision(path)
        for step in (module.upgrade, module.downgrade):
            rec = _Recorder()
            module.op = rec
            step()
            # a revision with plane files or fragments to run runs them; the head may not have a topic yet
            has_work = bool(module.changed_files() or any(module._fragments(p) for p in ("before", "after", "undo")))
            assert rec.texts or not has_work, (path.name, step.__name__)
            several = [t[:120] for t in rec.texts if guard.count_statements(t) != 1]
            assert not several, (path.name, step.__name__, several)


def test_the_checker_sees_main_s_patterns_in_a_database(sql):
    """Reintroduced into a migrated database, each pattern is found (the checks read the catalog)."""
    sql.execute("CREATE OR REPLACE FUNCTION dna.guard_srf(s text) RETURNS SETOF dna.dna_kinds LANGUAGE sql STABLE "
                "AS $$ SELECT * FROM dna.dna_kinds $$")
    sql.execute("DROP POLICY IF EXISTS dna_tenant_isolation ON dna.dna_versions")
    sql.execute("CREATE POLICY dna_tenant_isolation ON dna.dna_versions USING "
                "(dna.tenant_visible(tenant, (SELECT dna.visible_tenants())))")
    sql.execute("""CREATE OR REPLACE FUNCTION dna.guard_touch(scope text) RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE dna.dna_instances AS i SET updated_at = i.updated_at WHERE i.name = 'x';
        END $$""")
    pkg = guard.from_database(sql)
    assert any(f.where == "dna.guard_srf" for f in guard.check_sql_srfs(pkg))
    assert any(f.pattern == "B1" and "dna.dna_versions" in f.where for f in guard.check_policies(pkg))
    assert any(f.where.startswith("dna.guard_touch") for f in guard.check_unscoped_writes(pkg))


# -- self-tests: a known-bad snippet per pattern, and its known-good twin -----------------------------

PLACEMENT = {"dna.dna_instances": "distributed", "dna.dna_versions": "distributed",
             "dna.dna_search_docs_384": "distributed", "dna.dna_bm25_postings": "distributed",
             "dna.dna_models": "reference", "dna.dna_kinds": "reference", "dna.dna_search_config": "reference",
             "dna.dna_identities": "per_node", "dna.dna_workspace_members": "per_node",
             "dna.dna_index_staging": "local"}

MAPS = """
CREATE FUNCTION dna.visible_tenants() RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT ARRAY[''] || coalesce((SELECT array_agg(m.workspace) FROM dna.dna_workspace_members AS m
                                  WHERE m.role_name = current_user::text), '{}') $$;
CREATE FUNCTION dna.tenant_visible(tenant text, visible text[]) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT tenant = ANY (visible) $$;
"""
LANE = """
CREATE FUNCTION dna.lane(scope text) RETURNS TABLE (doc_id bigint, score float8) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT p.doc_id, sum(p.tf)::float8 FROM dna.dna_bm25_postings AS p WHERE p.scope = lane.scope GROUP BY 1;
END $$;
"""


def _findings(check, sql, volatility=None):
    return check(guard.from_sql(sql, PLACEMENT, volatility))


@pytest.mark.parametrize("bad, good", [
    ("CREATE POLICY p ON dna.dna_instances USING (dna.tenant_visible(tenant, (SELECT dna.visible_tenants())));",
     "CREATE POLICY p ON dna.dna_instances USING (tenant = '' OR dna.tenant_visible(tenant, dna.visible_tenants()));"),
    ("CREATE POLICY p ON dna.dna_versions WITH CHECK (EXISTS (SELECT 1 FROM dna.dna_workspace_members AS m));",
     "CREATE POLICY p ON dna.dna_workspace_members WITH CHECK (EXISTS (SELECT 1 FROM dna.dna_identities AS m));"),
])
def test_self_b1_sublink_in_a_policy(bad, good):
    assert [f.pattern for f in _findings(guard.check_policies, MAPS + bad)] == ["B1"]
    assert _findings(guard.check_policies, MAPS + good) == []


def test_self_b5c_policy_reads_a_citus_table():
    policy = "CREATE POLICY p ON dna.dna_instances USING (dna.tenant_visible(tenant, dna.visible_tenants()));"
    on_reference = MAPS.replace("dna.dna_workspace_members", "dna.dna_models")     # the maps as reference tables
    found = _findings(guard.check_policies, on_reference + policy)
    assert [f.pattern for f in found] == ["B5c"] and "dna.visible_tenants" in found[0].detail
    assert _findings(guard.check_policies, MAPS + policy) == []                     # per-node maps


UPSERT = """
CREATE FUNCTION dna.put(scope text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dna.dna_search_docs_384 AS d (scope, name, updated_at) VALUES (scope, 'n', now())
    ON CONFLICT (scope, name) DO UPDATE SET updated_at = {value};
END $$;
"""


@pytest.mark.parametrize("value", ["now()", "CURRENT_TIMESTAMP", "clock_timestamp()", "coalesce(now(), d.updated_at)"])
def test_self_b3_stable_function_in_do_update(value):
    found = _findings(guard.check_on_conflict, UPSERT.format(value=value))
    assert [f.pattern for f in found] == ["B3"] and "dna.put" in found[0].where


def test_self_b3_immutable_do_update_passes():
    assert _findings(guard.check_on_conflict, UPSERT.format(value="excluded.updated_at")) == []
    assert _findings(guard.check_on_conflict, UPSERT.format(value="greatest(d.updated_at, excluded.updated_at)")) == []
    # a local (coordinator-only) table may upsert as it likes
    local = UPSERT.format(value="now()").replace("dna.dna_search_docs_384", "dna.dna_index_staging")
    assert _findings(guard.check_on_conflict, local) == []


def test_self_b6_on_conflict_into_a_reference_table():
    bad = """CREATE FUNCTION dna.reg(m text) RETURNS void LANGUAGE sql AS $$
        INSERT INTO dna.dna_models (model_id, dims) VALUES (m, 384) ON CONFLICT (model_id) DO NOTHING $$;"""
    good = """CREATE FUNCTION dna.reg(m text) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM dna.dna_models AS x WHERE x.model_id = m) THEN
            BEGIN
                INSERT INTO dna.dna_models (model_id, dims) VALUES (m, 384);
            EXCEPTION WHEN unique_violation THEN NULL;
            END;
        END IF;
    END $$;"""
    assert [f.pattern for f in _findings(guard.check_on_conflict, bad)] == ["B6"]
    assert _findings(guard.check_on_conflict, good) == []


def test_self_b4_sql_set_returning_function_over_a_citus_table():
    bad = "CREATE FUNCTION dna.cfg(s text) RETURNS SETOF dna.dna_search_config LANGUAGE sql STABLE AS $$ " \
          "SELECT * FROM dna.dna_search_config AS c WHERE c.scope = s $$;"
    good = "CREATE FUNCTION dna.cfg(s text) RETURNS SETOF dna.dna_search_config LANGUAGE plpgsql STABLE AS $$ " \
           "BEGIN RETURN QUERY SELECT * FROM dna.dna_search_config AS c WHERE c.scope = s; END $$;"
    catalog_only = "CREATE FUNCTION dna.widths() RETURNS SETOF integer LANGUAGE sql STABLE AS $$ " \
                   "SELECT 384 FROM pg_catalog.pg_class AS c WHERE c.relname ~ '^dna_search_docs_' $$;"
    scalar = "CREATE FUNCTION dna.one(s text) RETURNS integer LANGUAGE sql STABLE AS $$ " \
             "SELECT count(*)::integer FROM dna.dna_search_config AS c WHERE c.scope = s $$;"
    assert [f.pattern for f in _findings(guard.check_sql_srfs, bad)] == ["B4"]
    assert _findings(guard.check_sql_srfs, good + catalog_only + scalar) == []


NESTED_BAD = [
    # B5a: the lane's function in the FROM of the statement over the width table
    """CREATE FUNCTION dna.find(scope text) RETURNS TABLE (name text) LANGUAGE plpgsql AS $$
    BEGIN
        RETURN QUERY SELECT d.name FROM dna.lane(scope) AS c JOIN dna.dna_search_docs_384 AS d
                     ON d.scope = scope AND d.doc_id = c.doc_id;
    END $$;""",
    # the same, built as dynamic SQL in pieces (as dna.search does)
    """CREATE FUNCTION dna.find(scope text, tbl regclass) RETURNS TABLE (name text) LANGUAGE plpgsql AS $$
    DECLARE
        lexical text;
    BEGIN
        lexical := 'SELECT c.doc_id FROM dna.lane($1) AS c';
        RETURN QUERY EXECUTE format('WITH l AS (%s) SELECT d.name FROM l JOIN %s AS d ON d.doc_id = l.doc_id',
                                    lexical, tbl) USING scope;
    END $$;""",
    # B5b: a verb inside the candidate query of another, through a materialized CTE
    """CREATE FUNCTION dna.find(scope text) RETURNS TABLE (name text) LANGUAGE plpgsql AS $$
    BEGIN
        RETURN QUERY WITH s AS MATERIALIZED (SELECT c.doc_id FROM dna.lane(scope) AS c)
                     SELECT i.name FROM s JOIN dna.dna_instances AS i ON i.scope = scope AND i.name = s.doc_id::text;
    END $$;""",
    # a scalar function reading a reference table, per row of a distributed one
    """CREATE FUNCTION dna.kinds_of(k text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
    BEGIN RETURN EXISTS (SELECT 1 FROM dna.dna_kinds AS x WHERE x.kind = k); END $$;
    CREATE FUNCTION dna.find(scope text) RETURNS TABLE (name text) LANGUAGE plpgsql AS $$
    BEGIN
        RETURN QUERY SELECT i.name FROM dna.dna_instances AS i WHERE i.scope = scope AND dna.kinds_of(i.kind);
    END $$;""",
]
NESTED_GOOD = [
    # the lane as its own statement, its answer passed in
    """CREATE FUNCTION dna.find(scope text) RETURNS TABLE (name text) LANGUAGE plpgsql AS $$
    DECLARE
        ids bigint[];
    BEGIN
        ids := ARRAY(SELECT c.doc_id FROM dna.lane(scope) AS c);
        RETURN QUERY SELECT d.name FROM dna.dna_search_docs_384 AS d WHERE d.scope = scope AND d.doc_id = ANY (ids);
    END $$;""",
    # a PERFORM whose argument reads a table in a sublink (Citus plans the sublink first)
    """CREATE FUNCTION dna.find(scope text) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM dna.lane(CASE WHEN EXISTS (SELECT 1 FROM dna.dna_instances AS i WHERE i.scope = scope) THEN scope END);
    END $$;""",
    # a trigger may nest (Citus runs nested reads from triggers)
    """CREATE FUNCTION dna.trg() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM 1 FROM dna.dna_instances AS i, dna.lane(NEW.scope) AS c WHERE i.scope = NEW.scope;
        RETURN NEW;
    END $$;""",
]


@pytest.mark.parametrize("bad", NESTED_BAD)
def test_self_b5_nested_read(bad):
    found = _findings(guard.check_nested_reads, LANE + bad)
    assert found and all(f.pattern == "B5" and f.where.startswith("dna.find") for f in found), _report(found)


@pytest.mark.parametrize("good", NESTED_GOOD)
def test_self_b5_no_nested_read(good):
    assert _findings(guard.check_nested_reads, LANE + good) == []


RECONSOLIDATE = """
CREATE FUNCTION dna.touch(scope text) RETURNS void LANGUAGE plpgsql AS $$
#variable_conflict use_variable
BEGIN
    WITH locked AS (SELECT i.id FROM dna.dna_instances AS i WHERE i.scope = scope FOR UPDATE SKIP LOCKED)
    UPDATE dna.dna_instances AS i SET updated_at = now() FROM locked AS l WHERE {where};
END $$;
"""


@pytest.mark.parametrize("where", ["i.id = l.id", "i.scope = l.scope AND i.id = l.id", "scope = scope AND i.id = l.id",
                                   "i.id = l.id OR i.scope = scope"])
def test_self_b7_unscoped_update(where):
    assert [f.pattern for f in _findings(guard.check_unscoped_writes, RECONSOLIDATE.format(where=where))] == ["B7"]


@pytest.mark.parametrize("where", ["i.scope = scope AND i.id = l.id", "i.id = l.id AND i.scope = $1",
                                   "i.scope = ANY (ARRAY[scope]) AND i.id = l.id"])
def test_self_b7_scoped_update(where):
    assert _findings(guard.check_unscoped_writes, RECONSOLIDATE.format(where=where)) == []


def test_self_b7_delete_forms():
    trigger = """CREATE FUNCTION dna.prune() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM dna.dna_versions AS v WHERE v.scope = NEW.scope AND v.name = NEW.name;
        RETURN NULL;
    END $$;"""
    dynamic = """CREATE FUNCTION dna.wipe(t text) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN EXECUTE format('DELETE FROM dna.%I AS x WHERE x.model_id = $1', t) USING 'm'; END $$;"""
    local = """CREATE FUNCTION dna.wipe() RETURNS void LANGUAGE sql AS $$
        DELETE FROM dna.dna_index_staging AS s WHERE s.owner = current_user $$;"""
    assert _findings(guard.check_unscoped_writes, trigger + local) == []
    assert [f.pattern for f in _findings(guard.check_unscoped_writes, dynamic)] == ["B7"]
    assert _findings(guard.check_unscoped_writes, dynamic.replace("WHERE x.model_id", "WHERE x.scope = $1 AND x.model_id")) == []


OVERLAY = """
CREATE FUNCTION dna.lane_rows(scope text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT t.name FROM dna.dna_search_docs_384 AS t
    WHERE t.scope = $1 AND (t.tenant = 'acme' OR (t.tenant = '' AND NOT EXISTS (
        SELECT 1 FROM dna.dna_search_docs_384 AS s WHERE s.scope = {scope} AND s.name = t.name AND s.tenant = 'acme')));
END $$;
"""


def test_self_s3_correlated_scope_sublink_under_or():
    assert [f.pattern for f in _findings(guard.check_scope_sublinks, OVERLAY.format(scope="t.scope"))] == ["S3"]
    assert _findings(guard.check_scope_sublinks, OVERLAY.format(scope="$1")) == []
    # without the OR the router can follow the correlation
    and_only = OVERLAY.format(scope="t.scope").replace("t.tenant = 'acme' OR", "t.tenant = 'acme' AND")
    assert _findings(guard.check_scope_sublinks, and_only) == []


SET_OP = """
CREATE FUNCTION dna.set_op(op text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    {write};
END $$;
CREATE FUNCTION dna.current_op() RETURNS text LANGUAGE sql STABLE AS $$ SELECT current_setting('dna.op', true) $$;
CREATE FUNCTION dna.after_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dna.dna_versions (scope, op) VALUES (NEW.scope, coalesce(dna.current_op(), 'insert'));
    RETURN NULL;
END $$;
"""


def test_self_s2_set_config_read_by_a_trigger():
    bad = SET_OP.format(write="PERFORM set_config('dna.op', op, true)")
    assert [f.pattern for f in _findings(guard.check_session_settings, bad)] == ["S2"]
    assert _findings(guard.check_session_settings, SET_OP.format(write="EXECUTE format('SET LOCAL dna.op = %L', op)")) == []
    # a planner setting no trigger reads is not S2 (S1 is fixed by delegation, docs/scale-out.md)
    assert _findings(guard.check_session_settings, SET_OP.format(write="PERFORM set_config('hnsw.ef_search', '100', true)")) == []


@pytest.mark.parametrize("source, flagged", [
    ('op.execute("""\nDROP TRIGGER a ON dna.t;\nDROP TRIGGER b ON dna.t;\n""")', True),       # 0002's downgrade before
    ('op.execute(read_sql("search.sql"))', True),
    ('op.execute(" ".join(f"DROP FUNCTION IF EXISTS dna.{n};" for n in names))', True),
    ('op.execute(f"DROP TRIGGER {a} ON dna.t; DROP TRIGGER {b} ON dna.t")', True),
    ('op.execute("DROP TRIGGER a ON dna.t")', False),
    ('op.execute("DO $$ BEGIN PERFORM 1; PERFORM 2; END $$;")', False),                      # one statement
    ('for s in read_statements("search.sql"):\n    op.execute(s)', False),
    ('op.execute(f"DROP FUNCTION IF EXISTS dna.{name}")', False),
])
def test_self_b9_multi_statement_op_execute(source, flagged):
    found = guard.check_revision_source(Path("0099_example.py"), source)
    assert bool(found) is flagged, _report(found)
    assert all(f.pattern == "B9" for f in found)


def test_self_the_parsers_read_postgresql_18_and_dynamic_sql():
    assert pglast.parser.get_postgresql_version()[0] >= 18
    statements, unchecked = guard.plpgsql_statements("""
        CREATE FUNCTION dna.x(t regclass) RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            q text := 'SELECT 1 FROM dna.dna_instances AS i WHERE i.scope = $1';
        BEGIN
            EXECUTE q || ' AND i.name = $2' USING 's', 'n';
            EXECUTE dna.build_query(t);
        END $$""")
    assert unchecked == 1                                        # the second EXECUTE's text is not known
    assert any(s.dynamic and guard.tables(s.tree) == {"dna.dna_instances"} for s in statements)
    # dna.shard_explained(statement, ...) runs its statement (over tbl or tbl's local shard): read as given
    statements, unchecked = guard.plpgsql_statements("""
        CREATE FUNCTION dna.x(t regclass) RETURNS text LANGUAGE plpgsql AS $$
        DECLARE
            q text := 'SELECT 1 FROM dna.dna_versions AS v WHERE v.scope = $1';
            plan text;
        BEGIN
            EXECUTE 'EXPLAIN ' || dna.shard_explained(q, t, 's') INTO plan USING 's';
            RETURN plan;
        END $$""")
    assert unchecked == 0
    assert any(s.dynamic and guard.tables(s.tree) == {"dna.dna_versions"} for s in statements)


# -- self-tests of tests/citus_guard_shards.py ---------------------------------------------------------

SHARD_PLACEMENT = dict(PLACEMENT, **{"dna.dna_search_receipts": "distributed", "dna.dna_bm25_docs": "distributed"})


def _shard_findings(check, sql, delegated=()):
    return check(guard.from_sql(sql, SHARD_PLACEMENT, delegated=set(delegated)))


@pytest.mark.parametrize("bad", [
    "CREATE TABLE dna.dna_search_receipts (receipt_id uuid PRIMARY KEY, scope text NOT NULL);",      # 0016's
    "CREATE TABLE dna.dna_search_receipts (receipt_id uuid, scope text, UNIQUE (receipt_id));",
    "ALTER TABLE dna.dna_search_receipts ADD CONSTRAINT k PRIMARY KEY (receipt_id);",
    "CREATE UNIQUE INDEX i ON dna.dna_search_receipts (receipt_id);",
    "CREATE TABLE dna.dna_versions (scope text, id int, t tstzrange, EXCLUDE USING gist (id WITH =, t WITH &&));",
    "CREATE TABLE dna.dna_versions (scope text, id int, t tstzrange, EXCLUDE USING gist (scope WITH <>, t WITH &&));",
])
def test_self_k1_key_without_scope(bad):
    assert [f.pattern for f in _shard_findings(shards.check_keys, bad)] == ["K1"]


@pytest.mark.parametrize("good", [
    "CREATE TABLE dna.dna_search_receipts (receipt_id uuid, scope text, PRIMARY KEY (scope, receipt_id));",
    "ALTER TABLE dna.dna_search_receipts ADD CONSTRAINT k PRIMARY KEY (scope, receipt_id);",
    "CREATE UNIQUE INDEX i ON dna.dna_search_receipts (scope, receipt_id);",
    "CREATE INDEX i ON dna.dna_search_receipts (receipt_id);",                                       # not unique
    "CREATE TABLE dna.dna_versions (scope text, id int, t tstzrange, EXCLUDE USING gist (scope WITH =, id WITH =, t WITH &&));",
    "CREATE TABLE dna.dna_kinds (kind text PRIMARY KEY);",                                              # a reference table
    "CREATE TABLE dna.dna_index_staging (id bigint PRIMARY KEY);",                                      # coordinator-local
])
def test_self_k1_key_with_scope(good):
    assert _shard_findings(shards.check_keys, good) == []


KIND_TRAIT = """
CREATE FUNCTION dna.kind_has_trait(kind text, trait text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce((SELECT trait = ANY (k.traits) FROM dna.dna_kinds AS k WHERE k.kind = kind_has_trait.kind), false));
END $$;
CREATE FUNCTION dna.is_memory_kind(kind text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT kind IN ('Engram', 'Note') $$;
CREATE FUNCTION dna.valid_at() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
"""


@pytest.mark.parametrize("bad", [
    # 0017's trigger (before_ingest.sql)
    "CREATE TRIGGER dna_search_docs_valid_at BEFORE INSERT OR UPDATE ON dna.dna_search_docs_384 FOR EACH ROW "
    "WHEN (dna.kind_has_trait(new.kind, 'memory.recallable')) EXECUTE FUNCTION dna.valid_at();",
    "CREATE TABLE dna.dna_search_docs_384 (scope text, kind text, flag boolean DEFAULT dna.kind_has_trait('Doc', 'x'));",
])
def test_self_w1_when_or_default_reads_a_citus_table(bad):
    found = _shard_findings(shards.check_shard_expressions, KIND_TRAIT + bad)
    assert [f.pattern for f in found] == ["W1"] and "dna.dna_kinds" in found[0].detail


@pytest.mark.parametrize("good", [
    "CREATE TRIGGER v BEFORE INSERT ON dna.dna_search_docs_384 FOR EACH ROW WHEN (dna.is_memory_kind(new.kind)) "
    "EXECUTE FUNCTION dna.valid_at();",
    "CREATE TRIGGER v BEFORE INSERT ON dna.dna_search_docs_384 FOR EACH ROW EXECUTE FUNCTION dna.valid_at();",
    # a coordinator-local table's trigger runs on the coordinator
    "CREATE TRIGGER v BEFORE INSERT ON dna.dna_index_staging FOR EACH ROW WHEN (dna.kind_has_trait(new.kind, 'x')) "
    "EXECUTE FUNCTION dna.valid_at();",
    "CREATE TABLE dna.dna_search_docs_384 (scope text, doc_id bigint DEFAULT nextval('dna.dna_search_doc_id_seq'));",
])
def test_self_w1_when_and_default_that_read_nothing(good):
    assert _shard_findings(shards.check_shard_expressions, KIND_TRAIT + good) == []


SYNC = """
CREATE FUNCTION dna.add_docs(scope text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    seg integer;
BEGIN
    seg := nextval('{seq}');
END $$;
CREATE FUNCTION dna.sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dna.add_docs(NEW.scope);
    RETURN NULL;
END $$;
CREATE TABLE dna.dna_search_docs_384 (scope text, doc_id bigint DEFAULT nextval('dna.dna_search_doc_id_seq'::regclass));
CREATE TRIGGER s AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION dna.sync();
"""


def test_self_q1_coordinator_sequence_on_a_worker():
    bad = SYNC.format(seq="dna.dna_bm25_seg_id_seq", table="dna.dna_search_docs_384")
    found = _shard_findings(shards.check_worker_sequences, bad)
    assert [(f.pattern, f.where.split(" ")[0]) for f in found] == [("Q1", "dna.add_docs")]
    assert "dna.dna_bm25_seg_id_seq" in found[0].detail and "through dna.sync" in found[0].detail
    # the sequence of a Citus table's column default exists on every node
    assert _shard_findings(shards.check_worker_sequences,
                           SYNC.format(seq="dna.dna_search_doc_id_seq", table="dna.dna_search_docs_384")) == []
    # a trigger of a coordinator-local table runs on the coordinator; a delegated verb on a worker
    local = SYNC.format(seq="dna.dna_bm25_seg_id_seq", table="dna.dna_index_staging")
    assert _shard_findings(shards.check_worker_sequences, local) == []
    assert [f.pattern for f in _shard_findings(shards.check_worker_sequences, local, delegated={"dna.add_docs"})] == ["Q1"]


TRANSITION = """
CREATE FUNCTION dna.bm25_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    scopes text[];
BEGIN
    {body}
    RETURN NULL;
END $$;
CREATE TRIGGER t AFTER INSERT ON dna.dna_search_docs_384 REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dna.bm25_sync();
"""


@pytest.mark.parametrize("body", [
    "INSERT INTO dna.dna_bm25_docs (scope, doc_id) SELECT n.scope, n.doc_id FROM new_rows AS n;",
    "EXECUTE 'WITH added AS (SELECT n.scope, n.doc_id FROM new_rows AS n) "
    "INSERT INTO dna.dna_bm25_docs (scope, doc_id) SELECT a.scope, a.doc_id FROM added AS a';",
    "PERFORM 1 FROM new_rows AS n JOIN dna.dna_instances AS i ON i.scope = n.scope;",
])
def test_self_t1_transition_table_in_a_citus_statement(body):
    assert [f.pattern for f in _shard_findings(shards.check_transition_tables, TRANSITION.format(body=body))] == ["T1"]


def test_self_t1_transition_table_read_alone_passes():
    body = ("SELECT array_agg(n.doc_id), array_agg(n.scope) INTO ids, scopes FROM new_rows AS n; "
            "INSERT INTO dna.dna_bm25_docs (scope, doc_id) SELECT * FROM unnest(scopes, ids);")
    assert _shard_findings(shards.check_transition_tables, TRANSITION.format(body=body)) == []


@pytest.mark.parametrize("expr, bad", [
    ("'citus:' || method", True),                      # 0018's last branch: unknown || "char"
    ("'citus:' || method::text", False),
    ("method = 'h'", False),
    ("no_such_name", True),
])
def test_self_br_every_case_branch_is_evaluated(sql, expr, bad):
    definition = f"""CREATE FUNCTION dna.placement(tbl regclass) RETURNS text LANGUAGE plpgsql AS $$
    DECLARE
        method "char";
    BEGIN
        RETURN CASE WHEN method IS NULL THEN 'local' ELSE {expr} END;
    END $$"""
    parts, names = shards.branches(definition)
    assert parts[:2] == ["method IS NULL", "'local'"] and names == {"tbl": "regclass", "method": '"char"'}
    found = shards.check_branches(sql, {"dna.placement": definition})
    assert bool(found) is bad and all(f.pattern == "BR" for f in found)
