"""Revision 0025_dense_graph, topic fusion_scale: a 0024 database with documents upgrades to the z-score
convex fusion at dense_weight 0.5 (dna.z_score) and downgrades to 0024's min-max at 0.4, same rows and
lanes throughout; a scope's own dense_weight stays its own."""
from __future__ import annotations

import statistics

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pydna import migrate

FAKE = "dna-fake-hash-v1"
BODIES = ["banana apple fruit smoothie", "engine wheel car road banana", "banana car apple",
          "ocean wave salt water fruit", "apple orchard fruit harvest", "banana bread recipe"]
QUERY = "banana fruit apple"
SEARCH = ("SELECT name, score, similarity, lexical_score FROM dna.search('fm', %(q)s, dna.fake_embed(%(q)s), "
          "%(m)s, k => 10)")


def _rows(conn):
    return conn.execute(SEARCH, {"q": QUERY, "m": FAKE}).fetchall()


def _expected(rows, w, norm):
    sims = [r[2] for r in rows if r[2] is not None]
    lex = [r[3] for r in rows if r[3] is not None]

    def n(x, xs):
        if x is None:
            return 0.0
        if norm == "z":
            return (x - min(xs)) / statistics.pstdev(xs)
        return (x - min(xs)) / (max(xs) - min(xs))
    return {r[0]: w * n(r[2], sims) + (1 - w) * n(r[3], lex) for r in rows}


def _check(rows, w, norm):
    expected = _expected(rows, w, norm)
    for name, score, _sim, _lex in rows:
        assert score == pytest.approx(expected[name], abs=1e-9), (name, norm, w)


def test_upgrade_from_0024_fuses_by_z_score_at_0_5_and_downgrades_to_min_max_at_0_4(empty_dsn):
    migrate.upgrade(empty_dsn, "0024_at_scale")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for i, body in enumerate(BODIES):
            conn.execute("SELECT dna.index_document('fm', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (f"d{i}", body, body, FAKE))
        conn.execute("SELECT dna.index_document('own', 'Doc', 'o', 'banana', dna.fake_embed('banana'), %s)", (FAKE,))
        conn.execute("SELECT dna.set_search_config('own', dense_weight => 0.7)")
        before = _rows(conn)
        _check(before, 0.4, "minmax")
        receipt = conn.execute("SELECT dna.take_receipt('search', %s, keep_query => true)",
                               (Jsonb({"scope": "fm", "query": QUERY, "model_id": FAKE, "k": 10}),)).fetchone()[0]
        assert conn.execute("SELECT dna.replay(%s)", (receipt["receipt_id"],)).fetchone()[0]["match"]
        assert conn.execute("SELECT to_regprocedure('dna.z_score(float8, float8, float8)')").fetchone()[0] is None
    migrate.upgrade(empty_dsn, "0025_dense_graph")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        after = _rows(conn)
        assert {(r[0], r[2], r[3]) for r in after} == {(r[0], r[2], r[3]) for r in before}
        _check(after, 0.5, "z")
        assert max(r[1] for r in after) > 1          # standard deviations above the lowest, not [0, 1]
        assert conn.execute("SELECT dense_weight FROM dna.search_config('own')").fetchone()[0] == 0.7
        answer = conn.execute("SELECT explain -> 'answer' -> 'fusion' FROM dna.search('fm', %s, dna.fake_embed(%s), %s, "
                              "explain => true) LIMIT 1", (QUERY, QUERY, FAKE)).fetchone()[0]
        assert answer["dense_weight"] == 0.5 and answer["normalisation"].startswith("z-score")
        # a receipt taken at 0024 replays with other scores and names the settings that moved; what it
        # recorded stays (the order here is the lexical lane's, the receipt having no query embedding)
        replayed = conn.execute("SELECT dna.replay(%s)", (receipt["receipt_id"],)).fetchone()[0]
        assert not replayed["scores_match"]
        assert [h["score"] for h in replayed["ids_then"]] == [h["score"] for h in receipt["hits"]]
        assert {c["setting"]: (c["then"], c["now"]) for c in replayed["settings_changed"]} == {
            "answer.fusion.dense_weight": (0.4, 0.5),
            "answer.fusion.normalisation": ("min-max over the lane's candidates",
                                            "z-score over the lane's candidates, the lowest 0"),
            "revision": ("0024_at_scale", "0025_dense_graph")}
    migrate.downgrade(empty_dsn, "0024_at_scale")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _rows(conn) == before
        assert conn.execute("SELECT to_regprocedure('dna.z_score(float8, float8, float8)')").fetchone()[0] is None
        assert conn.execute("SELECT dense_weight FROM dna.search_config('own')").fetchone()[0] == 0.7
