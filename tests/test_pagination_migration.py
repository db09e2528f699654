"""Revision 0022_first_week, topic pagination: a 0021_holds_in_use database holding data (the seed of
test_citus_migration: documents, memories restated and forgotten, a workspace overlay, a personal memory)
upgrades with every answer the same; after it dna.recall and dna.list_memories have one overload each,
the one with "offset", whose pages are windows of the answers of before; a receipt taken at 0021 replays;
the downgrade gives 0021's signatures back (no "offset"), answering the same."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import NOW, S, _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

OLD_RECALL = ("dna.recall(text,text,vector,text,text[],integer,text,boolean,text,timestamp with time zone,"
              "timestamp with time zone,boolean,text,boolean,double precision,double precision,jsonb,integer)")
OLD_LIST = "dna.list_memories(text,text[],text,boolean,timestamp with time zone,integer,boolean,jsonb)"


def _signatures(conn, name: str) -> set[str]:
    return {r[0] for r in conn.execute("SELECT p.oid::regprocedure::text FROM pg_proc AS p "
                                       "WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = %s", (name,))}


def _recall(conn, k: int, offset: int | None = None) -> list[str]:
    extra = ', "offset" => %s' if offset is not None else ""
    r = conn.execute("SELECT dna.recall(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), k => %s, "
                     f"reconsolidate => false, now => %s{extra})",
                     (S, k, NOW) + ((offset,) if offset is not None else ())).fetchone()[0]
    return [h["name"] for h in r["hits"]]


def _listed(conn, n: int, offset: int | None = None) -> list[str]:
    extra = ', "offset" => %s' if offset is not None else ""
    r = conn.execute(f"SELECT dna.list_memories(%s, include_invalid => true, max_rows => %s, now => %s{extra})",
                     (S, n, NOW) + ((offset,) if offset is not None else ())).fetchone()[0]
    return [m["name"] for m in r["memories"]]


def test_upgrade_from_0021_pages_the_same_answers_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        recall_20, listed_40 = _recall(conn, 20), _listed(conn, 40)
        assert _signatures(conn, "recall") == {OLD_RECALL} and _signatures(conn, "list_memories") == {OLD_LIST}
        receipt = conn.execute("SELECT dna.take_receipt('recall', %s, keep_query => true)",
                               (Jsonb({"scope": S, "query": "alpha gamma", "k": 5, "now": NOW.isoformat()}),)
                               ).fetchone()[0]["receipt_id"]
        with pytest.raises(psycopg.errors.UndefinedFunction):               # no "offset" at 0021
            _recall(conn, 5, 5)
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _signatures(conn, "recall") == {OLD_RECALL[:-1] + ",integer,text,double precision)"}  # + diversity
        assert _signatures(conn, "list_memories") == {OLD_LIST[:-1] + ",integer)"}
        assert _recall(conn, 20) == recall_20 and _listed(conn, 40) == listed_40
        assert _recall(conn, 10) + _recall(conn, 10, 10) == recall_20        # the data's pages compose
        assert _listed(conn, 15) + _listed(conn, 15, 15) + _listed(conn, 15, 30) == listed_40
        assert conn.execute("SELECT dna.replay(%s) ->> 'match'", (receipt,)).fetchone()[0] == "true"
        paged = conn.execute("SELECT dna.take_receipt('recall', %s)", (Jsonb(
            {"scope": S, "query": "alpha gamma", "k": 5, "offset": 5, "now": NOW.isoformat()}),)).fetchone()[0]
        assert [h["name"] for h in paged["hits"]] == _recall(conn, 10)[5:] and paged["offset"] == 5
    migrate.downgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn, "recall") == {OLD_RECALL} and _signatures(conn, "list_memories") == {OLD_LIST}
        assert _answers(conn) == before
        assert _recall(conn, 20) == recall_20 and _listed(conn, 40) == listed_40
        with pytest.raises(psycopg.errors.UndefinedFunction):
            _listed(conn, 5, 5)
