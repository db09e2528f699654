"""Pages of dna.recall, dna.list_memories and dna.search on a real coordinator (DNA_TEST_CITUS_DSN;
deselected without it): the single-node tests of tests/test_pagination.py run on the distributed
database (the verbs delegated by scope, with "offset"); a 0021 database distributed with rows upgrades
with the new signatures delegated (after_pagination.sql) and pages as before, its memory history tokenized
again with the identifiers' lexemes (after_identifiers.sql, which lifts dna_versions' append-only trigger on
the shards for that one UPDATE and enables it again on every shard); the downgrade gives 0021's signatures
and tokenization back and dna.distribute() delegates them again."""
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
NEW = {OLD_RECALL[:-1] + ",integer,text,double precision)",         # + "offset", diversity, duplicate_similarity
       OLD_LIST[:-1] + ",integer)"}                                    # + "offset"
NOW = "2026-12-01T12:00:00Z"
MEMORY = "Call transaction.on_commit so the e-mail goes out after the QuerySet is saved."   # identifiers


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


def _history_lexemes(conn) -> set[str]:
    return set(conn.execute("SELECT tsvector_to_array(text_tsv) FROM dna.dna_versions "
                            "WHERE scope = 'ids' AND name = 'mail'").fetchone()[0])


def _append_only_on_every_shard(conn) -> None:
    """dna_versions_append_only (dna_versions_append_only_<shard id> on a shard) is enabled on every shard of dna.dna_versions and refuses an UPDATE there
    (and through the coordinator)."""
    states = conn.execute("SELECT result FROM run_command_on_shards('dna.dna_versions', "
                          "$$SELECT string_agg(tgenabled::text, '') FROM pg_trigger "
                          "WHERE tgrelid = '%s'::regclass AND tgname LIKE 'dna_versions_append_only%%'$$)").fetchall()
    assert len(states) == SHARD_COUNT and {r[0] for r in states} == {"O"}
    updates = conn.execute("SELECT success, result FROM run_command_on_shards('dna.dna_versions', "
                           "$$UPDATE %s SET text_tsv = text_tsv$$)").fetchall()
    assert len(updates) == SHARD_COUNT
    # a shard holding rows refuses the UPDATE; an empty shard has no row to fire the trigger
    assert any(not ok for ok, _ in updates) and all("append-only" in r for ok, r in updates if not ok)
    assert all(r == "UPDATE 0" for ok, r in updates if ok), updates
    try:
        conn.execute("UPDATE dna.dna_versions SET text_tsv = text_tsv WHERE scope = 'ids'")
    except psycopg.errors.InsufficientPrivilege as refused:           # 42501, from the trigger
        assert "append-only" in str(refused)
    else:
        raise AssertionError("an UPDATE of dna.dna_versions passed")


def _pages(conn, offset_arg: bool, head: bool = True) -> dict[str, list[str]]:
    """recall, list and search in pages of 10 (offset_arg) or as one call each (k = 30). At head
    (0022 on) recall and search ask diversity => 'off': the 30 memories (documents) have one text, which
    collapse (the default) answers once; 0021's recall and search have no diversity and never collapse."""
    out = {"recall": [], "list": [], "search": []}
    for offset in ((0, 10, 20) if offset_arg else (None,)):
        k = 10 if offset_arg else 30
        extra = f', "offset" => {offset}' if offset is not None else ""
        off = ", diversity => 'off'" if head else ""
        r = conn.execute("SELECT dna.recall('pages', 'rank fusion', dna.fake_embed('rank fusion'), k => %s, "
                         f"reconsolidate => false, now => %s{off}{extra})", (k, NOW)).fetchone()[0]
        out["recall"] += [h["name"] for h in r["hits"]]
        r = conn.execute(f"SELECT dna.list_memories('pages', max_rows => %s, now => %s{extra})", (k, NOW)).fetchone()[0]
        out["list"] += [m["name"] for m in r["memories"]]
        out["search"] += [n for (n,) in conn.execute(
            "SELECT name FROM dna.search('pages', 'rank fusion', dna.fake_embed('rank fusion'), k => %s, "
            f"kinds => ARRAY['Doc']{off}{extra})", (k,))]
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
            conn.execute("SELECT dna.remember('ids', jsonb_build_object('summary', %s::text), name => 'mail')",
                         (MEMORY,))
            assert "on_commit" not in _history_lexemes(conn)                 # 0021: "on_commit" is "commit"
            whole = _pages(conn, offset_arg=False, head=False)
            assert _delegated(conn) == dict.fromkeys((OLD_RECALL, OLD_LIST), True)
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _delegated(conn) == dict.fromkeys(NEW, True)              # after_pagination.sql
            assert {"on_commit", "transaction.on_commit"} <= _history_lexemes(conn)   # after_identifiers.sql
            _append_only_on_every_shard(conn)
            assert _pages(conn, offset_arg=False) == whole
            assert _pages(conn, offset_arg=True) == whole
        migrate.downgrade(dsn, "0021_holds_in_use")
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _delegated(conn) == dict.fromkeys((OLD_RECALL, OLD_LIST), False)   # 0021's, re-created
            assert "on_commit" not in _history_lexemes(conn)                 # undo_identifiers.sql
            _append_only_on_every_shard(conn)
            assert _pages(conn, offset_arg=False, head=False) == whole
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))         # delegates them again
            assert _delegated(conn) == dict.fromkeys((OLD_RECALL, OLD_LIST), True)
            assert _pages(conn, offset_arg=False, head=False) == whole
    finally:
        cluster.drop_database(name)
