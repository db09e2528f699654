"""dna.distribute on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): where every table
went, the delegated verbs, the per-node maps on every worker and dna.sync_tenancy_maps, idempotence,
no TRUNCATE trigger left, distributing a database that already holds rows, dna.clear_width scope by
scope, a routed single-shard plan for a scope, the "nearest scopes" hint of an empty scope (D9), the
downgrade's refusal (D6) and dna.undistribute, the way back to one node."""
from __future__ import annotations

import json

import psycopg
import pytest
from pydna import migrate

from test_catalog import test_nearest_scopes_names_the_typo_first, test_nearest_scopes_text_is_none_without_scopes  # noqa: F401
from test_integrity import test_a_scope_with_no_rows_is_named_not_silently_ok  # noqa: F401

from .citus_env import SHARD_COUNT, migrate_and_distribute

MODEL = "dna-fake-hash-v1"


def test_distribute_places_every_table_and_delegates_the_verbs(dna_dsn, sql):
    plan = dict(sql.execute("SELECT tbl::text, placement FROM dna.distribution_plan()").fetchall())
    state = sql.execute("SELECT dna.distribution()").fetchone()[0]
    assert state["distributed"] and state["citus_version"]
    for t in state["tables"]:
        expected = {"reference": "reference", "distributed": "distributed"}.get(plan[t["table"]], "local")
        assert t["now"] == expected, t
        if plan[t["table"]] == "distributed":
            assert t["truncate_triggers"] == 0, t                        # B8
    colocated = sql.execute("SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h' "
                            "AND logicalrelid::text LIKE 'dna.%'").fetchone()[0]
    assert colocated == 1                                                 # one colocation group, by scope
    shards = sql.execute("SELECT DISTINCT shardcount FROM pg_dist_partition AS p JOIN pg_dist_colocation AS c "
                         "USING (colocationid) WHERE p.partmethod = 'h'").fetchall()
    assert shards == [(SHARD_COUNT,)]
    assert all(f["delegated"] for f in state["functions"]), state["functions"]
    forced = {r[0] for r in sql.execute("SELECT fn::text FROM dna.delegated_verbs() WHERE force_delegation")}
    assert {f["function"] for f in state["functions"] if f["forced"]} == forced
    assert {"dna.search", "dna.bm25"} <= {f.split("(")[0] for f in forced}


def test_distribute_reports_names_not_oids(citus_database):
    report = citus_database.report
    assert report["reference"] == ["dna.dna_kinds", "dna.dna_models", "dna.dna_search_config"]
    assert report["distributed"][0] == "dna.dna_instances"
    assert all(t.startswith("dna.dna_") for t in report["distributed"])                # D2: never a bare OID
    assert {f"dna.dna_search_docs_{w}" for w in (384, 768, 1024, 1536, 3072)} <= set(report["distributed"])


def test_distribute_is_idempotent(dna_dsn, sql):
    again = sql.execute("SELECT dna.distribute()").fetchone()[0]
    assert again["reference"] == [] and again["distributed"] == [] and again["truncate_triggers_dropped"] == []
    assert again["triggers_paused_for_copy"] == 0
    planned = [t for (t,) in sql.execute("SELECT tbl::text FROM dna.distribution_plan() "
                                         "WHERE placement IN ('reference', 'distributed') ORDER BY ord")]
    assert again["already_citus"] == planned


def test_maps_are_plain_tables_on_every_worker_and_sync_copies_them(dna_dsn, sql):
    workers = sql.execute("SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0").fetchone()[0]
    assert workers >= 1
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES ('citus_probe_role', 'probe-oid')")
    stale = sql.execute("SELECT array_agg(result ORDER BY nodeport) FROM run_command_on_workers("
                        "'SELECT count(*) FROM dna.dna_identities WHERE role_name = ''citus_probe_role''')").fetchone()[0]
    assert set(stale) == {"0"}                                            # until the DBA syncs
    report = sql.execute("SELECT dna.sync_tenancy_maps()").fetchone()[0]
    assert report["maps"]["dna.dna_identities"] >= 1
    fresh = sql.execute("SELECT array_agg(result ORDER BY nodeport) FROM run_command_on_workers("
                        "'SELECT count(*) FROM dna.dna_identities WHERE role_name = ''citus_probe_role''')").fetchone()[0]
    assert set(fresh) == {"1"} and len(fresh) == workers
    local = sql.execute("SELECT array_agg(result) FROM run_command_on_workers("
                        "'SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = ''dna.dna_identities''::regclass')"
                        ).fetchone()[0]
    assert set(local) == {"0"}                                            # not a Citus table anywhere


def test_clear_width_on_citus(dna_dsn, sql):
    for scope in ("a", "b"):
        for i in range(5):
            sql.execute("SELECT dna.index_document(%s, 'Doc', %s, 'rank fusion text', dna.fake_embed('rank fusion text'), %s)",
                        (scope, f"d{i}", MODEL))
    report = sql.execute("SELECT dna.clear_width(384)").fetchone()[0]
    assert report["scopes"] == 2 and report["documents"] == 10
    assert sql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_docs").fetchone()[0] == 0


def test_a_scope_s_search_runs_on_one_shard(dna_dsn, sql):
    sql.execute("SELECT dna.index_document('one', 'Doc', 'd', 'rank fusion text', dna.fake_embed('rank fusion text'), %s)",
                (MODEL,))
    plan = "\n".join(r[0] for r in sql.execute("EXPLAIN SELECT * FROM dna.dna_search_docs_384 WHERE scope = 'one'"))
    assert "Task Count: 1" in plan


def test_search_recall_receipt_and_integrity_of_an_empty_scope_hint_the_nearest(dna_dsn, sql):
    """D9: the "nearest scopes" hint of a scope with no rows reads the scope names with DISTINCT on
    Citus (the loose index scan's recursive CTE is refused there)."""
    sql.execute("SELECT dna.index_document('team', 'Doc', 'd', 'rank fusion text', NULL, %s)", (MODEL,))
    notices = []
    sql.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    assert sql.execute("SELECT count(*) FROM dna.search('teem', 'fusion')").fetchone()[0] == 0
    assert sql.execute("SELECT jsonb_array_length(dna.recall('teem', 'fusion') -> 'hits')").fetchone()[0] == 0
    assert sql.execute("SELECT (dna.verify_integrity('teem', 'quick')) ->> 'scope_exists'").fetchone()[0] == "false"
    receipt = sql.execute("SELECT dna.take_receipt('search', %s)",
                          (json.dumps({"scope": "teem", "query": "fusion"}),)).fetchone()[0]
    assert receipt["hits"] == []
    hinted = [n for n in notices if "nearest scopes" in n]
    # A call Citus runs as a shard's task (take_receipt's, inside its EXECUTE) cannot read the other
    # shards' scopes: its hint says where to look instead of failing the call.
    assert len(hinted) >= 4 and all("'team'" in n or "not listed from here" in n for n in hinted), notices
    assert "'team'" in hinted[0]                                           # the delegated dna.search's
    assert [r[0] for r in sql.execute("SELECT * FROM dna.scope_names()")] == ["team"]
    with sql.transaction():
        assert sql.execute("SELECT count(*) FROM dna.search('teem', 'fusion')").fetchone()[0] == 0
    assert "nearest scopes" in notices[-1]


def test_distribute_keeps_the_rows_a_database_already_holds(cluster):
    """A database used on one node first (documents, memories with history, a receipt) and then
    distributed: Citus copies the rows into the shards with the dna triggers paused, so nothing is
    recorded or indexed twice, and the answers are those of before."""
    name = "dna_citus_predistributed"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for i in range(12):
                text = f"reciprocal rank fusion note {i} " + "lexical " * (i % 3)
                conn.execute("SELECT dna.index_document('pre', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                             (f"d{i}", text, text, MODEL))
            conn.execute("SELECT dna.remember('pre', %s, name => 'm1', embedding => dna.fake_embed('fusion memory'), "
                         "model_id => %s)", (json.dumps({"summary": "fusion memory"}), MODEL))
            conn.execute("SELECT dna.forget('pre', 'm1')")
            conn.execute("SELECT dna.revive('pre', 'm1')")
            counts = _counts(conn)
            answer = conn.execute("SELECT name, score FROM dna.search('pre', 'fusion lexical', dna.fake_embed('fusion lexical'), "
                                  "k => 10, exact => true)").fetchall()
            report = conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,)).fetchone()[0]
            assert report["triggers_paused_for_copy"] > 0
            assert conn.execute("SELECT dna.distribution() ->> 'distributed'").fetchone()[0] == "true"
            assert _counts(conn) == counts
            again = conn.execute("SELECT name, score FROM dna.search('pre', 'fusion lexical', dna.fake_embed('fusion lexical'), "
                                 "k => 10, exact => true)").fetchall()
            assert [n for n, _ in again] == [n for n, _ in answer]
            assert all(abs(a - b) <= 1e-9 for (_, a), (_, b) in zip(again, answer))
            triggers = conn.execute("SELECT result FROM run_command_on_shards('dna.dna_instances', "
                                    "$$SELECT string_agg(DISTINCT tgenabled::text, '') FROM pg_trigger "
                                    "WHERE tgrelid = '%s'::regclass AND NOT tgisinternal$$)").fetchall()
            assert {r[0] for r in triggers} == {"O"}                          # enabled again on every shard
    finally:
        cluster.drop_database(name)


def _counts(conn) -> dict:
    tables = [t for (t,) in conn.execute("SELECT tbl::text FROM dna.distribution_plan() WHERE placement = 'distributed' "
                                         "ORDER BY ord")]
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_downgrade_refuses_on_citus_and_undistribute_is_the_way_back(cluster):
    """D6: below 0019 the revisions do not run on Citus, so the downgrade refuses up front, naming
    dna.undistribute and docs/scale-out.md, and changes nothing; after dna.undistribute() (the rows
    back on the coordinator) it runs, and the database upgrades and distributes again."""
    name = "dna_citus_downgrade"
    dsn = cluster.create_database(name)
    try:
        migrate_and_distribute(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.index_document('s', 'Doc', 'd1', 'rank fusion text', NULL, %s)", (MODEL,))
            conn.execute("SELECT dna.remember('s', %s, name => 'm1')", (json.dumps({"summary": "a memory"}),))
            before = _counts(conn)
        with pytest.raises(Exception) as info:
            migrate.downgrade(dsn, "0018_citus_ready")
        cause = info.value.__cause__ or info.value
        assert getattr(cause, "sqlstate", None) == "0A000", info.value
        assert "Citus holds tables of schema dna" in str(cause) and "docs/scale-out.md" in cause.diag.message_hint
        assert "dna.undistribute()" in cause.diag.message_hint
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT version_num FROM dna_alembic_version").fetchone()[0] == migrate.head()
            assert conn.execute("SELECT dna.distribution() ->> 'distributed'").fetchone()[0] == "true"
            report = conn.execute("SELECT dna.undistribute()").fetchone()[0]
            assert report["undistributed"]
            assert len(report["truncate_triggers_created"]) == 5
            assert conn.execute("SELECT count(*) FROM pg_dist_partition").fetchone()[0] == 0
            assert _counts(conn) == before
        migrate.downgrade(dsn, "0017_recall_past_ingest")
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _counts(conn) == before
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            assert conn.execute("SELECT dna.distribution() ->> 'distributed'").fetchone()[0] == "true"
            assert [r[0] for r in conn.execute("SELECT name FROM dna.search('s', 'fusion')")] == ["d1"]
    finally:
        cluster.drop_database(name)
