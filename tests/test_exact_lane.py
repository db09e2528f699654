"""dna.search's exact dense lane rounds only the head of the partition (revision 0024, topic exact_lane): the
partition is ordered by the raw cosine and its first depth + 64 rows (ties included) are rounded
(dna.score_round), the whole partition only when the last of those rounds as high as the depth-th. The
hits are those of rounding every row, then ordering by the rounded cosine and key (the reference below, the
lane as revision 0023 ran it): on distinct vectors (the head path), and on a tie of identical vectors across
the cut (the fallback), at several k and depths. Plain SQL."""
from __future__ import annotations

import random

import pytest

FAKE = "dna-fake-hash-v1"
REFERENCE = """SELECT name, s FROM (
    SELECT t.kind, t.name, t.tenant, t.passage, dna.score_round(1 - (t.embedding <=> dna.fake_embed(%(q)s))) AS s
    FROM dna.dna_search_docs_384 AS t
    WHERE t.scope = %(scope)s AND t.model_id = %(m)s AND t.embedding IS NOT NULL AND t.tenant = ''
    ORDER BY 5 DESC, 1, 2, 3, 4 LIMIT %(n)s) AS r"""
SEARCH = """SELECT name, similarity FROM dna.search(%(scope)s, 'zzqqxx', dna.fake_embed(%(q)s), %(m)s, k => %(k)s,
            candidates => %(depth)s, exact => true, diversity => 'off') ORDER BY rank_dense"""


def index(sql, scope, bodies):
    sql.execute("SELECT count(*) FROM dna.index_documents(%s, array_fill('Doc'::text, ARRAY[%s]), %s, %s, "
                "ARRAY(SELECT dna.fake_embed(b) FROM unnest(%s::text[]) AS b), %s)",
                (scope, len(bodies), [f"d{i:04d}" for i in range(len(bodies))], bodies, bodies, FAKE))


def hits(sql, scope, q, k, depth):
    return [tuple(r) for r in sql.execute(SEARCH, {"scope": scope, "q": q, "m": FAKE, "k": k, "depth": depth})]


def reference(sql, scope, q, k):
    return [tuple(r) for r in sql.execute(REFERENCE, {"scope": scope, "q": q, "m": FAKE, "n": k})]


@pytest.mark.parametrize("k,depth", [(1, 1), (10, 100), (37, 40), (100, 100)])
def test_distinct_vectors_rank_as_rounding_every_row(sql, k, depth):
    rng = random.Random(24)
    index(sql, "el", [" ".join(rng.choice("alpha beta gamma delta epsilon zeta eta theta".split()) + str(rng.randint(0, 99))
                               for _ in range(8)) for _ in range(400)])
    for q in ("alpha beta", "theta 7 zeta", "gamma"):
        assert hits(sql, "el", q, k, depth) == reference(sql, "el", q, k)


@pytest.mark.parametrize("k,depth", [(10, 100), (100, 100), (150, 150)])
def test_a_tie_across_the_cut_ranks_as_rounding_every_row(sql, k, depth):
    # 180 copies of one text (one vector, one cosine) and 60 others: the cut falls inside the tie,
    # which the head of depth + 64 rows cannot settle (the fallback rounds the whole partition)
    bodies = ["the same text every time"] * 180 + [f"another text number {i}" for i in range(60)]
    index(sql, "tie", bodies)
    got = hits(sql, "tie", "the same text every time", k, depth)
    assert got == reference(sql, "tie", "the same text every time", k)
    assert len({s for _n, s in got}) == 1 and [n for n, _s in got] == [f"d{i:04d}" for i in range(k)]   # by key


def test_a_scope_smaller_than_the_head_is_whole(sql):
    index(sql, "few", [f"a short text {i}" for i in range(12)])
    assert hits(sql, "few", "short text 3", 10, 100) == reference(sql, "few", "short text 3", 10)
