"""Revision 0011_lane_speed rewrote the statements of dna.bm25_lane for speed (a plain form of each
scoring statement when nothing needs merging or leaving out, postings decoded by unnest() in the
select list, the rescoring limited to candidates that can still reach the top k). Answers must be
unchanged: the oracle is the lane exactly as revision 0010_scale released it
(``migrations/versions/0010_scale/bm25.sql``), loaded beside it under another schema, on the same
data — a scope with segments, a memtable, tombstones, two Kinds and a shadowing tenant (the general
form), and the same scope compacted (the plain form).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_bm25 import MODEL, _compact
from test_bm25_budget import QUERIES, _index_many, dna_dsn, mixed_scope, mixed_template  # noqa: F401 - fixtures, used by name

RELEASED = Path(__file__).resolve().parents[1] / "migrations" / "versions" / "0010_scale" / "bm25.sql"


def _load_released_lane(sql) -> None:
    text = RELEASED.read_text(encoding="utf-8")
    lane = re.search(r"CREATE OR REPLACE FUNCTION dna\.bm25_lane\(.*?\n\$\$;\n", text, re.S).group(0)
    sql.execute("CREATE SCHEMA IF NOT EXISTS released")
    sql.execute(lane.replace("dna.bm25_lane", "released.bm25_lane"))
    # The oracle runs without JIT, as dna.bm25_lane does from 0019 (on a server with JIT, PostgreSQL
    # 15's Debian build for one, every call compiled its statements anew: seconds per call).
    for (f,) in sql.execute("SELECT oid::regprocedure::text FROM pg_proc WHERE proname = 'bm25_lane' "
                            "AND pronamespace = 'released'::regnamespace").fetchall():
        sql.execute(f"ALTER FUNCTION {f} SET jit = off")


def _lane(sql, schema: str, query: str, tenant: str, k: int | None, kinds, budget, exhaustive=False, candidates=None):
    return sql.execute(
        f"SELECT doc_id, score, exact FROM {schema}.bm25_lane('z', %s, %s, dna.bm25_terms(%s, 'simple'), 1.2, 0.4, %s, %s, "
        "%s, %s, false, %s) ORDER BY score DESC, doc_id", (MODEL, tenant, query, k, kinds, budget, exhaustive, candidates)).fetchall()


def _same(got, want):
    assert [(d, e) for d, _, e in got] == [(d, e) for d, _, e in want]
    assert all(abs(a[1] - b[1]) <= 1e-9 for a, b in zip(got, want))


def _at_least_as_good(got, want, full):
    """With tombstones the budgeted path rescores every candidate whose partial sum may still count
    removed postings, beside the best C others (the released lane: the best C by their partial sums
    without them): a superset of the released candidates under a cut no higher. So where the
    released answer is certified, ours is too and the same; every score is exact; and our i-th
    score is at least the released i-th (a top k chosen from more exactly rescored documents)."""
    score = {d: s for d, s, _ in full}
    assert all(abs(s - score[d]) <= 1e-9 for d, s, _ in got)
    if want and want[0][2]:
        _same(got, want)
    if got and got[0][2]:
        assert [d for d, _, _ in got] == [d for d, _, _ in full[:len(got)]]
    assert len(got) >= len(want)
    assert all(a[1] >= b[1] - 1e-9 for a, b in zip(got, want))


def _compare_everything(sql, tombstones: bool = False) -> int:
    checked = 0
    for tenant in ("", "acme"):
        for kinds in (None, ["Doc"]):
            for q in QUERIES:
                full = _lane(sql, "dna", q, tenant, None, kinds, None)
                for budget in (1, 10, 60, 300, None):
                    for k in (1, 5, 10):
                        for cand in (None, 3, 20):   # small C: the first chunks hold more than C (cut floor)
                            want = _lane(sql, "released", q, tenant, k, kinds, budget, candidates=cand)
                            got = _lane(sql, "dna", q, tenant, k, kinds, budget, candidates=cand)
                            if tombstones:
                                _at_least_as_good(got, want, full)
                            else:
                                _same(got, want)
                            checked += bool(want)
                _same(_lane(sql, "dna", q, tenant, None, kinds, None), _lane(sql, "released", q, tenant, None, kinds, None))
                _same(_lane(sql, "dna", q, tenant, 10, kinds, None, True), _lane(sql, "released", q, tenant, 10, kinds, None, True))
    return checked


def test_lane_answers_as_released_in_0010(sql, mixed_scope):  # noqa: F811 - pytest fixture
    _load_released_lane(sql)
    _index_many(sql, "z", {f"r{i:03d}": ["w00", "w01", f"w{50 + i % 10}"] for i in range(60)}, kind="Note")
    _index_many(sql, "z", {"d0050": ["w00", "w00", "w00", "w01"], "t1": ["w00", "w02"]}, tenant="acme")
    # general form: memtable rows, tombstones and a shadowed base row
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 'z'").fetchone()[0] > 0
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = 'z'").fetchone()[0] > 0
    assert _compare_everything(sql, tombstones=True) > 100
    # plain form: everything sealed and merged, no tombstone left (the tenant still shadows d0050)
    _compact(sql)
    sql.execute("SELECT dna.bm25_compact('z', full_merge => true)")
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 'z'").fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = 'z'").fetchone()[0] == 0
    assert _compare_everything(sql) > 100


@pytest.mark.parametrize("budget", [10, 60, 300])
def test_plain_budgeted_path_is_exact_where_it_says_so(sql, mixed_scope, budget):  # noqa: F811 - pytest fixture
    _compact(sql)
    sql.execute("SELECT dna.bm25_compact('z', full_merge => true)")
    for q in QUERIES:
        full = _lane(sql, "dna", q, "", None, None, None)
        score = {d: s for d, s, _ in full}
        for k in (1, 5, 10):
            got = _lane(sql, "dna", q, "", k, None, budget)
            assert len(got) >= min(k, len(full))
            assert all(abs(s - score[d]) <= 1e-9 for d, s, _ in got), (q, k, budget)
            if got and got[0][2]:
                assert [(d, s) for d, s, _ in got] == [(d, s) for d, s, _ in full[:len(got)]]
