"""dna.distribute on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): where every table
went, the delegated verbs, the per-node maps on every worker and dna.sync_tenancy_maps, idempotence,
no TRUNCATE trigger left, dna.clear_width scope by scope, and a routed single-shard plan for a scope."""
from __future__ import annotations

import psycopg

from .citus_env import CITUS_DSN, reset_and_distribute

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
    assert all(f["delegated"] for f in state["functions"]), state["functions"]
    assert {f["function"].split("(")[0] for f in state["functions"] if f["forced"]} == {"dna.search", "dna.bm25", "dna.bm25_compact_scope"}


def test_distribute_is_idempotent(dna_dsn, sql):
    again = sql.execute("SELECT dna.distribute()").fetchone()[0]
    assert again["reference"] == [] and again["distributed"] == [] and again["truncate_triggers_dropped"] == []
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


def test_reset_gives_a_fresh_distributed_database():
    report = reset_and_distribute(CITUS_DSN)
    assert "dna.dna_instances" == report["distributed"][0]
    with psycopg.connect(CITUS_DSN) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_instances").fetchone()[0] == 0
