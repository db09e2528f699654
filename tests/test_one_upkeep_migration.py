"""Revision 0022 topic one_upkeep upgrades a 0021_holds_in_use database holding data (the seed of
test_citus_migration, documents and memories written through dna.index_document and dna.remember): every
answer is the same after the upgrade, the documents indexed before it are found, a re-index and new writes
run one BM25 upkeep per call; the downgrade gives 0021's upsert back (two statement triggers per call),
answering the same and writing on."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import _answers, _seed
from test_one_upkeep import MODEL, delta

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

DOCS = [("a", "rank fusion of lexical lanes"), ("b", "dense vectors in lisbon"), ("c", "office porto")]


def _found(conn) -> dict:
    return {q: conn.execute("SELECT array_agg(name ORDER BY name) FROM dna.bm25('up', %s, %s, k => 10)",
                            (q, MODEL)).fetchone()[0]
            for q in ("lexical lanes", "lisbon", "porto", "friday deploys", "monday")}


def _syncs(conn, statement: str, params=()) -> int:
    conn.execute("BEGIN")
    conn.execute("SET LOCAL track_functions = 'pl'")
    # counts not yet flushed to the shared statistics may include earlier transactions': a difference
    n = delta(conn, statement, params).get("bm25_sync", 0)
    conn.execute("COMMIT")
    return n


INDEX = "SELECT dna.index_document('up', 'Doc', %s, %s, NULL, %s)"
REMEMBER = "SELECT dna.remember('up', %s, name => %s, now => '2026-06-01T12:00:00Z')"


def test_upgrade_keeps_the_index_and_runs_one_upkeep_then_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        for name, body in DOCS:
            assert _syncs(conn, INDEX, (name, body, MODEL)) == 2          # 0021: INSERT and UPDATE triggers
        conn.execute(REMEMBER, (Jsonb({"summary": "deploys happen on friday"}), "m1"))
        before, found = _answers(conn), _found(conn)
        assert found["lisbon"] == ["b"] and found["friday deploys"] == ["m1"]
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and _found(conn) == found
        assert _syncs(conn, INDEX, ("b", "dense vectors in porto", MODEL)) == 1      # a re-index: one UPDATE
        assert _syncs(conn, INDEX, ("d", "monday lanes", MODEL)) == 1                # a new one: one INSERT
        assert _syncs(conn, REMEMBER, (Jsonb({"summary": "deploys happen on monday"}), "m1")) == 1
        after = _found(conn)
        assert after["lisbon"] is None and after["porto"] == ["b", "c"] and after["monday"] == ["d", "m1"]
        assert after["friday deploys"] == ["m1"]                       # "deploys" still matches it
        report = conn.execute("SELECT dna.verify_integrity('up', 'full')").fetchone()[0]
        assert report["ok"], report
        written = _answers(conn)
    migrate.downgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == written and _found(conn) == after
        assert _syncs(conn, INDEX, ("e", "lexical tuesday", MODEL)) == 2           # 0021's upsert again
        assert _syncs(conn, INDEX, ("b", "dense vectors in lisbon", MODEL)) == 2
        assert _found(conn)["lisbon"] == ["b"]
        report = conn.execute("SELECT dna.verify_integrity('up', 'full')").fetchone()[0]
        assert report["ok"], report
