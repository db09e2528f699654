"""sql/distribute.sql on a server without Citus, through plain SQL: dna.distribute and
dna.sync_tenancy_maps refuse (0A000, the message says Citus is not installed here, the hint names
docs/scale-out.md) and change nothing; dna.distribution_plan places every table from the catalog
and refuses a table it cannot place; dna.distribution reports the state; dna.clear_width (B8's
replacement for TRUNCATE) clears one width, scope by scope, and nothing else; dna.map_table_ddl
recreates a tenancy map as a worker would get it."""
from __future__ import annotations

import os

import psycopg
import pytest

MODEL = "dna-fake-hash-v1"
MODEL_768 = "test-768"
ROLE = f"dna_dist_app_{os.getpid()}"


def _catalog(conn):
    """What dna.distribute could change: tables, triggers, policies, the dna_* rows."""
    return {
        "tables": conn.execute("SELECT c.relname, c.relkind FROM pg_class AS c WHERE c.relnamespace = 'dna'::regnamespace "
                               "ORDER BY 1").fetchall(),
        "triggers": conn.execute("SELECT tgrelid::regclass::text, tgname, tgtype FROM pg_trigger WHERE NOT tgisinternal "
                                 "AND tgrelid::regclass::text LIKE 'dna.%' ORDER BY 1, 2").fetchall(),
        "policies": conn.execute("SELECT tablename, policyname, qual, with_check FROM pg_policies "
                                 "WHERE schemaname = 'dna' ORDER BY 1, 2").fetchall(),
        "maps": conn.execute("SELECT (SELECT count(*) FROM dna.dna_identities), "
                             "(SELECT count(*) FROM dna.dna_workspace_members)").fetchone(),
        "settings": conn.execute("SELECT current_setting('citus.enable_unsafe_triggers', true)").fetchone(),
    }


@pytest.mark.parametrize("call", ["SELECT dna.distribute()", "SELECT dna.distribute(8)", "SELECT dna.sync_tenancy_maps()"])
def test_without_citus_refuses_clearly_and_changes_nothing(sql, call):
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES ('someone', 'someone-oid')")
    before = _catalog(sql)
    with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
        sql.execute(call)
    diag = err.value.diag
    assert diag.sqlstate == "0A000"
    assert "Citus is not installed in this database" in diag.message_primary
    assert call.split("(")[0].removeprefix("SELECT ") in diag.message_primary     # names the function
    assert "docs/scale-out.md" in diag.message_hint
    assert _catalog(sql) == before


def test_citus_placement_names_every_pg_dist_partition_row(sql):
    """Every branch of the placement CASE on one server (D1: its last branch failed where Citus
    is installed, and only there did dna.citus_placement reach it)."""
    cases = [(None, None, "local"), ("h", "s", "distributed"), ("h", "c", "distributed"), ("n", "t", "reference"),
             ("n", "s", "citus_local"), ("a", "c", "citus:a"), ("r", "c", "citus:r"), ("x", None, "citus:x")]
    for method, model, expected in cases:
        got = sql.execute('SELECT dna.citus_placement_name(%s::"char", %s::"char")', (method, model)).fetchone()[0]
        assert got == expected, (method, model)
    assert sql.execute("SELECT dna.citus_placement('dna.dna_instances')").fetchone()[0] == "local"


def test_undistribute_refuses_without_citus(sql):
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="dna.undistribute: Citus is not installed"):
        sql.execute("SELECT dna.undistribute()")


def test_distribute_refuses_a_bad_shard_count(sql):
    for bad in (0, -1, 64001):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="shard_count"):
            sql.execute("SELECT dna.distribute(%s)", (bad,))


def test_plan_places_every_table_from_the_catalog(sql):
    plan = sql.execute("SELECT tbl::text, placement FROM dna.distribution_plan() ORDER BY ord").fetchall()
    tables = {r[0] for r in sql.execute("SELECT c.oid::regclass::text FROM pg_class AS c WHERE c.relnamespace = "
                                        "'dna'::regnamespace AND c.relkind IN ('r', 'p')")}
    assert {t for t, _ in plan} == tables                                          # every table, once
    assert len(plan) == len(tables)
    where = dict(plan)
    assert {t for t, p in plan if p == "reference"} == {"dna.dna_kinds", "dna.dna_models", "dna.dna_search_config"}
    assert {t for t, p in plan if p == "per_node"} == {"dna.dna_identities", "dna.dna_workspace_members"}
    assert {t for t, p in plan if p == "local"} == {"dna.dna_index_staging", "dna.dna_api_keys"}
    distributed = [t for t, p in plan if p == "distributed"]
    assert distributed[0] == "dna.dna_instances"                                   # the colocation anchor first
    widths = [w for (w,) in sql.execute("SELECT dna.search_widths()")]
    assert {f"dna.dna_search_docs_{w}" for w in widths} <= set(distributed)
    bm25 = {t for (t,) in sql.execute("SELECT c.oid::regclass::text FROM pg_class AS c WHERE c.relnamespace = "
                                      "'dna'::regnamespace AND c.relkind = 'r' AND c.relname LIKE 'dna\\_bm25\\_%'")}
    assert len(bm25) >= 7 and bm25 <= set(distributed)
    protected = {t for (t,) in sql.execute("SELECT dna.protected_tables()::text")}
    assert protected <= set(distributed)
    # reference tables come before every distributed table (the width tables' FK names dna_models)
    order = [t for t, _ in plan]
    assert max(order.index(t) for t, p in plan if p == "reference") < order.index("dna.dna_instances")
    assert where["dna.dna_versions"] == "distributed"


def test_plan_refuses_a_scope_keyed_table_without_scope_and_an_unplaced_table(sql):
    sql.execute("CREATE TABLE dna.dna_bm25_extra (tenant text NOT NULL DEFAULT '')")   # a protected name, no scope
    with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
        sql.execute("SELECT * FROM dna.distribution_plan()")
    assert "dna.dna_bm25_extra" in err.value.diag.message_primary and "no scope column" in err.value.diag.message_primary
    assert "scope column" in err.value.diag.message_hint
    sql.execute("DROP TABLE dna.dna_bm25_extra")
    sql.execute("CREATE TABLE dna.dna_misc (x int)")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="dna.dna_misc has no placement"):
        sql.execute("SELECT * FROM dna.distribution_plan()")
    sql.execute("DROP TABLE dna.dna_misc")
    sql.execute("CREATE TABLE dna.dna_scoped_extra (scope text NOT NULL, x int)")      # a scope column: distributed
    assert sql.execute("SELECT placement FROM dna.distribution_plan() WHERE tbl = 'dna.dna_scoped_extra'::regclass"
                       ).fetchone() == ("distributed",)


def test_distribution_reports_the_single_node_state(sql):
    state = sql.execute("SELECT dna.distribution()").fetchone()[0]
    assert state["citus_version"] is None and state["distributed"] is False
    assert {t["now"] for t in state["tables"]} == {"local"}
    by_table = {t["table"]: t for t in state["tables"]}
    for (w,) in sql.execute("SELECT dna.search_widths()"):
        assert by_table[f"dna.dna_search_docs_{w}"]["truncate_triggers"] == 1      # B8: dropped by dna.distribute
    assert by_table["dna.dna_instances"]["truncate_triggers"] == 0
    names = {f["function"].split("(")[0] for f in state["functions"]}
    assert names == {"dna.search", "dna.bm25", "dna.recall", "dna.remember", "dna.forget", "dna.revive",
                     "dna.consolidate", "dna.list_memories", "dna.index_document", "dna.index_documents",
                     "dna.delete_document", "dna.redact", "dna.reconcile", "dna.bm25_compact_scope"}
    assert not any(f["delegated"] for f in state["functions"])
    forced = {r[0].split("(")[0] for r in sql.execute("SELECT fn::text FROM dna.delegated_verbs() WHERE force_delegation")}
    assert forced == {"dna.search", "dna.bm25", "dna.bm25_compact_scope"}


# -- dna.clear_width -----------------------------------------------------------------------------


def _index(conn, scope, name, body, dims=384, model=MODEL):
    conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s, %s), %s)",
                 (scope, name, body, body, dims, model))


def _lexical(conn, model):
    out = {}
    for t in ("dna_bm25_postings", "dna_bm25_chunks", "dna_bm25_segments", "dna_bm25_docs", "dna_bm25_forward",
              "dna_bm25_tombstones", "dna_bm25_tombstone_terms"):
        out[t] = conn.execute(f"SELECT count(*) FROM dna.{t} WHERE model_id = %s", (model,)).fetchone()[0]
    return out


def test_clear_width_clears_one_width_scope_by_scope_and_nothing_else(sql):
    sql.execute("SELECT dna.register_model(%s, 768)", (MODEL_768,))
    bodies = [f"rank fusion document {i} about lexical and dense lanes" for i in range(30)]
    for i, body in enumerate(bodies):
        _index(sql, "a" if i % 2 else "b", f"d{i}", body)
    sql.execute("SELECT dna.bm25_compact(full_merge => true)")                      # segments and chunks too
    _index(sql, "a", "late", "a memtable document after the merge")
    sql.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 'b' AND name = 'd0'")   # a tombstone
    _index(sql, "a", "wide", "rank fusion at another width", dims=768, model=MODEL_768)
    assert all(n > 0 for t, n in _lexical(sql, MODEL).items() if t != "dna_bm25_postings")
    other = sql.execute("SELECT name, round(score::numeric, 9) FROM dna.search('a', 'rank fusion', NULL, %s)",
                        (MODEL_768,)).fetchall()
    other_lexical = _lexical(sql, MODEL_768)
    before = sql.execute("SELECT name, round(score::numeric, 9) FROM dna.search('a', 'rank fusion', NULL, %s)",
                         (MODEL,)).fetchall()
    assert before

    report = sql.execute("SELECT dna.clear_width(384)").fetchone()[0]
    assert report["dims"] == 384 and report["table"] == "dna.dna_search_docs_384"
    assert report["scopes"] == 2 and report["documents"] == 30 and MODEL in report["models"]
    assert report["lexical_rows"]["dna_bm25_docs"] == 30 and report["lexical_rows"]["dna_bm25_tombstones"] == 1
    assert sql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == 0
    assert set(_lexical(sql, MODEL).values()) == {0}
    assert sql.execute("SELECT count(*) FROM dna.search('a', 'rank fusion', NULL, %s)", (MODEL,)).fetchone()[0] == 0
    # the other width is untouched
    assert _lexical(sql, MODEL_768) == other_lexical
    assert sql.execute("SELECT name, round(score::numeric, 9) FROM dna.search('a', 'rank fusion', NULL, %s)",
                       (MODEL_768,)).fetchall() == other
    # the width works again, and answers as before once the same documents are back
    for i, body in enumerate(bodies):
        if i:
            _index(sql, "a" if i % 2 else "b", f"d{i}", body)
    _index(sql, "a", "late", "a memtable document after the merge")
    assert sql.execute("SELECT name, round(score::numeric, 9) FROM dna.search('a', 'rank fusion', NULL, %s)",
                       (MODEL,)).fetchall() == before
    # an empty width: nothing to do
    assert sql.execute("SELECT dna.clear_width(1024)").fetchone()[0]["documents"] == 0


def test_clear_width_refusals_change_nothing(sql, pg_server, dna_dsn):
    _index(sql, "a", "doc", "a plain document")
    sql.execute("SELECT dna.remember('a', '{\"summary\": \"deploys happen on thursdays\"}'::jsonb, "
                "embedding => dna.fake_embed('deploys happen on thursdays', 384), model_id => %s)", (MODEL,))
    rows = sql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0]
    lexical = _lexical(sql, MODEL)
    with pytest.raises(psycopg.errors.NullValueNotAllowed) as err:
        sql.execute("SELECT dna.clear_width(NULL)")
    assert "dims" in err.value.diag.message_primary and "384" in err.value.diag.message_hint
    with pytest.raises(psycopg.errors.UndefinedTable, match="no search table for embedding width 999"):
        sql.execute("SELECT dna.clear_width(999)")
    with pytest.raises(psycopg.errors.RestrictViolation) as err:
        sql.execute("SELECT dna.clear_width(384)")
    assert err.value.diag.sqlstate == "23001" and "memories" in err.value.diag.message_primary
    assert "'a'" in err.value.diag.message_primary and "dna.redact" in err.value.diag.message_hint
    # a forgotten memory keeps its search rows (its history answers as_of): still refused, as the hint says
    name = sql.execute("SELECT name FROM dna.dna_instances WHERE scope = 'a'").fetchone()[0]
    sql.execute("SELECT dna.forget('a', %s)", (name,))
    with pytest.raises(psycopg.errors.RestrictViolation, match="in scope"):
        sql.execute("SELECT dna.clear_width(384)")
    # an ordinary role sees only its rows: refused
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN")
    try:
        sql.execute("SELECT dna.grant_app_role(%s)", (ROLE,))
        with psycopg.connect(dna_dsn, user=ROLE, autocommit=True) as app:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
                app.execute("SELECT dna.clear_width(384)")
            assert "row-level security" in err.value.diag.message_primary and "BYPASSRLS" in err.value.diag.message_hint
    finally:
        sql.execute(f"DROP OWNED BY {ROLE}")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
    assert sql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == rows
    assert _lexical(sql, MODEL) == lexical


def test_map_table_ddl_recreates_a_map_as_the_coordinator_has_it(sql, pg_server, empty_dsn):
    """What dna.sync_tenancy_maps sends a worker that lacks a map builds the same table (here: an
    empty database standing in for the worker)."""
    def shape(conn, table):
        return {
            "columns": conn.execute("SELECT attname, format_type(atttypid, atttypmod), attnotnull, "
                                    "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute AS a LEFT JOIN pg_attrdef AS d "
                                    "ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = %s::regclass "
                                    "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", (table,)).fetchall(),
            "constraints": conn.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
                                        "%s::regclass ORDER BY 1", (table,)).fetchall(),
            "rls": conn.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass",
                                (table,)).fetchone(),
            "policies": conn.execute("SELECT policyname, permissive, roles, cmd, qual, with_check FROM pg_policies "
                                     "WHERE schemaname || '.' || tablename = %s ORDER BY 1", (table,)).fetchall(),
            "public_grants": conn.execute("SELECT x.privilege_type FROM pg_class AS c, aclexplode(c.relacl) AS x WHERE "
                                          "c.oid = %s::regclass AND x.grantee = 0 ORDER BY 1", (table,)).fetchall(),
        }
    with psycopg.connect(empty_dsn, autocommit=True) as worker:
        worker.execute("CREATE SCHEMA dna")
        for table in ("dna.dna_identities", "dna.dna_workspace_members"):
            for (stmt,) in sql.execute("SELECT unnest(dna.map_table_ddl(%s))", (table,)).fetchall():
                worker.execute(stmt)
            assert shape(worker, table) == shape(sql, table)
            # re-running the CREATE is harmless (IF NOT EXISTS): a re-sync of an existing worker
            worker.execute(sql.execute("SELECT (dna.map_table_ddl(%s))[1]", (table,)).fetchone()[0])
        # and the rows the sync copies land as they are on the coordinator
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES ('r1', 'o1'), ('r2', 'o2')")
        rows = sql.execute("SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]')::text FROM dna.dna_identities AS x").fetchone()[0]
        worker.execute("DELETE FROM dna.dna_identities")
        worker.execute("INSERT INTO dna.dna_identities SELECT * FROM "
                       "jsonb_populate_recordset(NULL::dna.dna_identities, %s::jsonb)", (rows,))
        assert worker.execute("SELECT role_name, oid FROM dna.dna_identities ORDER BY 1").fetchall() == \
            [("r1", "o1"), ("r2", "o2")]
