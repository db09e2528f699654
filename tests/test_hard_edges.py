"""Issue 27 item 8, the rough edges of paging: over documents whose scores tie, dna.search's top k is the
prefix of its top 2k on every route of the dense lane. The lane's cut at its depth (max(4k, 100)) took
whichever of several equal cosines the graph or a bounded sort returned first, differently for each depth:
pages of k = 10 read as the last 10 of k = 10, 20, ... 50 gave 31 distinct names in 50 places. Plain SQL."""
from __future__ import annotations

import random

import pytest

MODEL = "dna-fake-hash-v1"
TEXT = "the same words in every document"
QUERY = "same words"


@pytest.fixture
def tied(sql):
    names = [f"doc-{i:03d}" for i in range(300)]
    random.Random(27).shuffle(names)                  # written out of name order
    for name in names:
        sql.execute("SELECT dna.index_document('tied', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                    (name, TEXT, TEXT, MODEL))
    return sql


def _names(sql, k, exact, offset=0):
    return [r[0] for r in sql.execute(
        "SELECT name FROM dna.search('tied', %s, dna.fake_embed(%s), %s, k => %s, \"offset\" => %s, exact => %s)",
        (QUERY, QUERY, MODEL, k, offset, exact)).fetchall()]


def _dense_path(sql, exact):
    answer = sql.execute("SELECT explain -> 'answer' FROM dna.search('tied', %s, dna.fake_embed(%s), %s, k => 10, "
                         "exact => %s, explain => true) LIMIT 1", (QUERY, QUERY, MODEL, exact)).fetchone()[0]
    return answer["dense"]["path"]


def _check_pages_compose(sql, exact):
    every = _names(sql, 300, exact)
    assert sorted(every) == sorted(f"doc-{i:03d}" for i in range(300))
    assert every == sorted(every)                     # equal scores: by key
    for k in (1, 5, 10, 20, 25, 30, 50, 100, 150):
        assert _names(sql, k, exact) == every[:k], k  # top k is a prefix of top 2k (and of every deeper answer)
    by_k = [n for page in range(1, 6) for n in _names(sql, 10 * page, exact)[-10:]]
    assert by_k == every[:50]                         # 50 distinct names in 50 places
    by_offset = [n for page in range(5) for n in _names(sql, 10, exact, offset=10 * page)]
    assert by_offset == every[:50]


@pytest.mark.parametrize("exact", [None, True, False])
def test_pages_of_any_k_compose_over_tied_documents(tied, exact):
    """exact => NULL (the rule: an exact scan here) and true cut by key; exact => false leaves the path to the
    planner (here a sort of the scope's rows, whose bounded top-N kept arbitrary ties)."""
    _check_pages_compose(tied, exact)


def test_pages_compose_when_the_graph_answers(tied):
    """The same over the HNSW graph (sorts and bitmap scans off for this session, so the planner takes it):
    every tie of the cut is read, and the depth is taken by key."""
    tied.execute("SET enable_sort = off")
    tied.execute("SET enable_bitmapscan = off")
    assert _dense_path(tied, False) == "hnsw"
    _check_pages_compose(tied, False)
