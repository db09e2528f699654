"""Pages of dna.recall, dna.list_memories and dna.search on a real coordinator (DNA_TEST_CITUS_DSN;
deselected without it): the single-node tests of tests/test_pagination.py run on the distributed
database (the verbs delegated by scope, with "offset"); a 0021 database distributed with rows upgrades
with the new signatures delegated (after_pagination.sql) and pages as before; the downgrade gives 0021's
signatures back and dna.distribute() delegates them again."""
from __future__ import annotations

import json

import psycopg

from pydna import migrate
from test_pagination import (listed, test_list_page_is_a_window_of_one_listing,  # noqa: F401
                             test_list_pages_walk_the_newest_first_order,
                             test_recall_offset_out_of_range_is_22023_with_a_hint,
                             test_recall_page_is_a_window_of_the_recall_at_offset_plus_k,
                             test_recall_pages_over_tied_memories_walk_one_ranking, varied_world)
from test_pagination_migration import OLD_LIST, OLD_RECALL

from .citus_env import SHARD_COUNT

MODEL = "dna-fake-hash-v1"
NEW = {OLD_RECALL[:-1] + ",integer)", OLD_LIST[:-1] + ",integer)"}     # the signatures with "offset"
NOW = "2026-12-01T12:00:00Z"


def _delegated(conn) -> dict[str, bool]:
    """Each delegated verb named recall or list_memories: is it delegated now?"""
    state = conn.execute("SELECT dna.distribution()").fetchone()[0]
    return {f["function"]: f["delegated"] for f in state["functions"]
            if f["function"].split("(")[0] in ("dna.recall", "dna.list_memories")}


def _seed(conn) -> None:
    for i in range(30):
        conn.execute("SELECT dna.index_document('pages', 'Doc', %s, 'rank fusion pages text', "
                     "dna.fake_embed('rank fusion pages text'), %s)", (f"d{i:02d}", MODEL))
    items = [{"name": f"m{i:02d}", "spec": {"summary": "rank fusion pages memory"}} for i in range(30)]
    conn.execute("SELECT dna.remember_many('pages', %s, now => %s, embeddings => "
                 "array_fill(dna.fake_embed('rank fusion pages memory'), ARRAY[30]), model_id => %s)",
                 (json.dumps(items), NOW, MODEL))


def _pages(conn, offset_arg: bool) -> dict[str, list[str]]:
    """recall, list and search in pages of 10 (offset_arg) or as one call each (k = 30)."""
    out = {"recall": [], "list": [], "search": []}
    for offset in ((0, 10, 20) if offset_arg else (None,)):
        k = 10 if offset_arg else 30
        extra = f', "offset" => {offset}' if offset is not None else ""
        r = conn.execute("SELECT dna.recall('pages', 'rank fusion', dna.fake_embed('rank fusion'), k => %s, "
                         f"reconsolidate => false, now => %s{extra})", (k, NOW)).fetchone()[0]
        out["recall"] += [h["name"] for h in r["hits"]]
        r = conn.execute(f"SELECT dna.list_memories('pages', max_rows => %s, now => %s{extra})", (k, NOW)).fetchone()[0]
        out["list"] += [m["name"] for m in r["memories"]]
        out["search"] += [n for (n,) in conn.execute(
            "SELECT name FROM dna.search('pages', 'rank fusion', dna.fake_embed('rank fusion'), k => %s, "
            f"kinds => ARRAY['Doc']{extra})", (k,))]
    return out


def test_pages_on_the_distributed_database_are_delegated(dna_dsn, sql):
    assert _delegated(sql) == dict.fromkeys(NEW, True)
    _seed(sql)
    whole = _pages(sql, offset_arg=False)
    assert whole["recall"] == whole["list"] == [f"m{i:02d}" for i in range(30)]
    assert whole["search"] == [f"d{i:02d}" for i in range(30)]
    assert _pages(sql, offset_arg=True) == whole
    with sql.transaction():                                                 # run on the coordinator instead
        assert _pages(sql, offset_arg=True) == whole


def test_upgrade_of_a_distributed_0021_database_delegates_the_new_signatures(cluster):
    name = "dna_citus_pages_upgrade"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn, "0021_holds_in_use")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            _seed(conn)
            whole = _pages(conn, offset_arg=False)
            assert _delegated(conn) == dict.fromkeys((OLD_RECALL, OLD_LIST), True)
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _delegated(conn) == dict.fromkeys(NEW, True)              # after_pagination.sql
            assert _pages(conn, offset_arg=False) == whole
            assert _pages(conn, offset_arg=True) == whole
        migrate.downgrade(dsn, "0021_holds_in_use")
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _delegated(conn) == dict.fromkeys((OLD_RECALL, OLD_LIST), False)   # 0021's, re-created
            assert _pages(conn, offset_arg=False) == whole
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))         # delegates them again
            assert _delegated(conn) == dict.fromkeys((OLD_RECALL, OLD_LIST), True)
            assert _pages(conn, offset_arg=False) == whole
    finally:
        cluster.drop_database(name)
