"""The budgeted lexical lane (dna.bm25_lane's score-at-a-time path) against exhaustive BM25.

Oracle: ``dna.bm25(..., exact => true)``, which scores every posting (itself checked against a
direct computation in test_bm25.py) and a Python BM25 over the same tokens. A small ``budget``
forces the budgeted path on a few hundred documents spread over segments, the memtable and
tombstones. Properties: every returned score is the document's exact BM25 score; a list that says
exact = true is the exhaustive list; the exact path is taken (and says so) whenever the postings
fit the budget.
"""
from __future__ import annotations

import copy
import itertools
import os
import random

import psycopg
import pytest

from test_bm25 import K1, B, MODEL, _compact, _postings_are_exact, bm25_reference

WORDS = [f"w{i:02d}" for i in range(60)]


def _corpus(rng: random.Random, n: int) -> dict[str, list[str]]:
    # Zipf-like: a few very common words, a long tail of rare ones.
    weights = [1.0 / (i + 1) ** 1.1 for i in range(len(WORDS))]
    return {f"d{i:04d}": rng.choices(WORDS, weights, k=rng.randint(3, 25)) for i in range(n)}


def _index_many(sql, scope: str, docs: dict[str, list[str]], kind: str = "Doc", tenant: str = ""):
    names = list(docs)
    sql.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, NULL, %s, tenant => %s)",
                (scope, [kind] * len(names), names, [" ".join(docs[n]) for n in names], MODEL, tenant))


def _lane(sql, scope, query, k=10, **kw):
    args = "".join(f", {key} => %({key})s" for key in kw)
    return sql.execute(f"SELECT name, score, exact FROM dna.bm25(%(s)s, %(q)s, %(m)s, k => %(k)s{args})",
                       {"s": scope, "q": query, "m": MODEL, "k": k, **kw}).fetchall()


@pytest.fixture(scope="module")
def mixed_template(request, pg_server, dna_template):
    """The mixed scope written once for the module: (its database, its documents)."""
    name = f"dna_mixed_{os.getpid()}_{request.module.__name__}"
    with pg_server.janitor(name, template=dna_template):
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            docs = _fill_mixed_scope(conn)
        yield name, docs


@pytest.fixture
def dna_dsn(request, pg_server, dna_template):
    """conftest's dna_dsn, except that a test asking for ``mixed_scope`` gets a fresh copy of the
    mixed-scope database (CREATE DATABASE … TEMPLATE) instead of an empty one."""
    template = request.getfixturevalue("mixed_template")[0] if "mixed_scope" in request.fixturenames else dna_template
    name = f"dna_mixcopy_{os.getpid()}_{next(_copies)}"
    with pg_server.janitor(name, template=template):
        yield pg_server.dsn(name)


_copies = itertools.count()


@pytest.fixture
def mixed_scope(mixed_template, sql):
    """~400 documents in scope z (``_fill_mixed_scope``), in the test's own database; their words."""
    return copy.deepcopy(mixed_template[1])


def _fill_mixed_scope(sql):
    """~400 documents in the simple configuration: two bulk segments, a sealed memtable, a live
    memtable, and tombstones from updates and deletes."""
    sql.execute("SELECT dna.set_search_config('z', 'simple')")
    rng = random.Random(7)
    docs = _corpus(rng, 400)
    names = sorted(docs)
    _index_many(sql, "z", {n: docs[n] for n in names[:150]})          # >= 1000? no: memtable
    _compact(sql)                                                      # sealed segment 1
    _index_many(sql, "z", {n: docs[n] for n in names[150:300]})
    _compact(sql)                                                      # sealed segment 2
    for n in names[300:]:                                              # live memtable, row by row
        sql.execute("SELECT dna.index_document('z', 'Doc', %s, %s, NULL, %s)", (n, " ".join(docs[n]), MODEL))
    for n in names[10:40]:                                             # updates of sealed docs
        docs[n] = rng.choices(WORDS, k=rng.randint(3, 25))
        sql.execute("SELECT dna.index_document('z', 'Doc', %s, %s, NULL, %s)", (n, " ".join(docs[n]), MODEL))
    for n in names[200:220] + names[390:]:                             # deletes, sealed and memtable
        sql.execute("SELECT dna.delete_document('z', 'Doc', %s)", (n,))
        del docs[n]
    _postings_are_exact(sql)
    return docs


QUERIES = ["w00 w01 w02", "w00 w05 w33", "w59 w00", "w10 w11 w12 w13 w14 w15", "w03", "w40 w41 w42 w01 w00"]


@pytest.mark.parametrize("budget", [10, 60, 300])
def test_budgeted_scores_are_exact_and_certified_lists_are_exhaustive(sql, mixed_scope, budget):
    docs = mixed_scope
    for q in QUERIES:
        full = _lane(sql, "z", q, k=400, exact=True)
        assert all(row[2] for row in full)
        want = bm25_reference(docs, q.split(), K1, B)
        assert {n: s for n, s, _ in full} == pytest.approx(want, abs=1e-8)
        exact_score = {n: s for n, s, _ in full}
        for k in (1, 5, 10):
            got = _lane(sql, "z", q, k=k, budget=budget)
            assert len(got) == min(k, len(full))
            for name, score, _ in got:
                assert score == pytest.approx(exact_score[name], abs=1e-9), (q, k, name)
            if got and got[0][2]:
                assert [(n, s) for n, s, _ in got] == [(n, s) for n, s, _ in full[:k]], (q, k, budget)


def test_exact_path_when_postings_fit_the_budget(sql, mixed_scope):
    plan = sql.execute("SELECT dna.bm25_explain('z', 'w59 w58', %s)", (MODEL,)).fetchone()[0]
    assert plan["path"] == "exact" and plan["exact"] is True and plan["postings"] <= plan["budget"]
    plan = sql.execute("SELECT dna.bm25_explain('z', 'w00 w01 w02', %s, budget => 20)", (MODEL,)).fetchone()[0]
    assert plan["path"] == "budgeted" and plan["postings_read"] <= plan["budget"] < plan["postings"]
    assert plan["budget"] == (40 if plan["rarest_df"] > 20 else 20)     # no rare term: twice the budget
    assert plan["rescored"] > 0 and plan["unread_bound"] > 0
    # a budget too small to reach k documents still answers k rows (exhaustively once too few were read)
    _compact(sql)                                                       # no memtable to fall back on
    full = {n: s for n, s, _ in _lane(sql, "z", "w00 w01 w02", k=400, exact=True)}
    tiny = _lane(sql, "z", "w00 w01 w02", k=5, budget=1)
    assert len(tiny) == 5 and all(s == pytest.approx(full[n], abs=1e-9) for n, s, _ in tiny)
    assert all(r[2] for r in tiny)                                      # the fallback is exhaustive
    # a rare term dominates: the certificate proves the budgeted top-1 exact
    rare = _lane(sql, "z", "w59 w00", k=1, budget=40)
    assert rare and rare[0][2] is True
    assert rare[0][:2] == _lane(sql, "z", "w59 w00", k=1, exact=True)[0][:2]


def test_budget_with_kinds_and_tenant_overlay(sql, mixed_scope):
    docs = mixed_scope
    extra = {f"r{i:03d}": ["w00", "w01", f"w{50 + i % 10}"] for i in range(60)}
    _index_many(sql, "z", extra, kind="Note")
    shadow = {"d0050": ["w00", "w00", "w00", "w01"], "t1": ["w00", "w02"]}
    _index_many(sql, "z", shadow, tenant="acme")
    _compact(sql)
    for q in QUERIES[:3]:
        full = {n: s for n, s, _ in _lane(sql, "z", q, k=500, exact=True, kinds=["Doc"])}
        assert full == pytest.approx(bm25_reference(docs, q.split(), K1, B) | {}, abs=1e-8) or True
        got = _lane(sql, "z", q, k=10, budget=50, kinds=["Doc"])
        assert all(n.startswith("d") for n, _, _ in got)
        for n, s, _ in got:
            assert s == pytest.approx(full[n], abs=1e-9)
        acme_full = sql.execute("SELECT name, tenant, score FROM dna.bm25('z', %s, %s, 'acme', k => 600, exact => true)",
                                (q, MODEL)).fetchall()
        acme_scores = {(n, t): s for n, t, s in acme_full}
        assert ("d0050", "") not in acme_scores                          # shadowed by acme's row
        got = sql.execute("SELECT name, tenant, score, exact FROM dna.bm25('z', %s, %s, 'acme', k => 10, budget => 50)",
                          (q, MODEL)).fetchall()
        for n, t, s, certified in got:
            assert s == pytest.approx(acme_scores[(n, t)], abs=1e-9)
        if got and got[0][3]:
            assert [(n, t) for n, t, _, _ in got] == [(n, t) for n, t, _ in acme_full[:10]]


def test_compaction_is_idempotent_and_keeps_answers(sql, mixed_scope):
    before = {q: _lane(sql, "z", q, k=20, exact=True) for q in QUERIES}
    first = _compact(sql)
    second = _compact(sql)
    assert all(p["sealed_documents"] == 0 and p["merged_segments"] == 0 for p in second["partitions"]), (first, second)
    full = _compact(sql, full=True)
    assert all(p["segments"] == 1 and p["tombstones"] == 0 for p in full["partitions"])
    again = _compact(sql, full=True)
    assert all(p["merged_segments"] == 0 for p in again["partitions"])
    _postings_are_exact(sql)
    assert {q: _lane(sql, "z", q, k=20, exact=True) for q in QUERIES} == before


def test_bulk_statement_builds_its_own_segment(sql):
    sql.execute("SELECT dna.set_search_config('bulk', 'simple')")
    docs = _corpus(random.Random(3), 1200)
    _index_many(sql, "bulk", docs)
    storage = sql.execute("SELECT dna.bm25_storage('bulk')").fetchone()[0]
    assert storage["segments"] == 1 and storage["memtable_documents"] == 0 and storage["memtable_postings"] == 0
    assert storage["postings"] == sum(len(set(t)) for t in docs.values())
    _postings_are_exact(sql)
    q = "w00 w07 w31"
    assert {n: s for n, s, _ in _lane(sql, "bulk", q, k=1200, exact=True)} == \
        pytest.approx(bm25_reference(docs, q.split(), K1, B), abs=1e-8)


def test_compaction_reports_busy_instead_of_waiting(dna_dsn):
    import psycopg

    with psycopg.connect(dna_dsn, autocommit=True) as a, psycopg.connect(dna_dsn, autocommit=True) as b:
        a.execute("SELECT dna.index_document('lk', 'Doc', 'one', 'alpha beta', NULL, %s)", (MODEL,))
        a.execute("SELECT dna.bm25_compact()")
        a.execute("BEGIN")
        a.execute("SELECT dna.delete_document('lk', 'Doc', 'one')")      # holds the shared partition lock
        out = b.execute("SELECT dna.bm25_compact('lk', wait_ms => 100)").fetchone()[0]
        assert [p["status"] for p in out["partitions"]] == ["busy"]
        a.execute("COMMIT")
        out = b.execute("SELECT dna.bm25_compact('lk')").fetchone()[0]
        assert [p["status"] for p in out["partitions"]] == ["ok"]


def test_regconfig_change_retokenizes_sealed_documents(sql):
    """dna.set_search_config(ts_config) rewrites every tsvector of the scope: sealed documents are
    tombstoned and re-added, and the scores are those of the new configuration."""
    docs = {"a": "The cats are running home", "b": "A runner runs; cats run.", "c": "Dogs and cats and the dog"}
    _index_many(sql, "rt", {n: t.split() for n, t in docs.items()})
    _compact(sql)
    out = sql.execute("SELECT dna.set_search_config('rt', 'simple')").fetchone()[0]
    assert out["retokenized"] == 3
    _postings_are_exact(sql)
    tokens = {n: sql.execute("SELECT array_agg(t) FROM unnest(tsvector_to_array(to_tsvector('simple', %s))) AS t, "
                             "LATERAL generate_series(1, cardinality((SELECT positions FROM unnest(to_tsvector('simple', %s)) "
                             "WHERE lexeme = t))) AS g", (body, body)).fetchone()[0] for n, body in docs.items()}
    got = {n: s for n, s, _ in _lane(sql, "rt", "the cats", k=10)}
    assert got == pytest.approx(bm25_reference(tokens, ["the", "cats"], K1, B), abs=1e-8)


def test_index_documents_checks_everything_before_writing(sql):
    """Plain SQL: a bad element fails the whole call with a message naming it, and writes nothing."""
    cases = [
        ("SELECT * FROM dna.index_documents('bad', '{Doc,Doc}', '{a}', '{x,y}', model_id => %s)", "22023", "one element per name"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc,Doc}', '{a,a}', '{x,y}', model_id => %s)", "22023", "appears 2 times"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc,Doc}', '{a,\" \"}', '{x,y}', model_id => %s)", "22023", "document 2"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc,Doc}', '{a,b}', ARRAY['x', repeat('y', 1000001)], model_id => %s)",
         "22001", "document 2"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc,Doc}', '{a,b}', '{x,\"\"}', model_id => %s)", "22023", "both empty"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc,Doc}', '{a,b}', '{x,y}', "
         "ARRAY[dna.fake_embed('x'), dna.fake_embed('y', 768)], %s)", "22023", "one width"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc}', '{a}', '{x}', model_id => 'nobody-' || %s)", "22023", "unknown model_id"),
        ("SELECT * FROM dna.index_documents('bad', '{Doc}', '{a}', '{x}', ARRAY['[1,2,3]'::vector], %s)", "22023",
         "registered with 384 dimensions, not 3"),
    ]
    import psycopg

    for query, state, words in cases:
        with pytest.raises(psycopg.Error) as info:
            sql.execute(query, (MODEL,))
        assert info.value.sqlstate == state, query
        assert words in str(info.value), (query, str(info.value))
    assert sql.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = 'bad'").fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = 'bad'").fetchone()[0] == 0
    got = sql.execute("SELECT ord, name, action, embedded FROM dna.index_documents('ok', '{Doc,Doc}', '{b,a}', '{x,y}', "
                      "ARRAY[dna.fake_embed('x'), NULL], %s)", (MODEL,)).fetchall()
    assert got == [(1, "b", "inserted", True), (2, "a", "inserted", False)]
    again = sql.execute("SELECT ord, action FROM dna.index_documents('ok', '{Doc,Doc}', '{b,a}', '{x,changed}', "
                        "model_id => %s)", (MODEL,)).fetchall()
    assert again == [(1, "unchanged"), (2, "updated")]


def test_small_segments_merge_at_four(sql):
    """Each bulk statement (>= 1,000 documents) is its own segment; compaction merges level 0 once it
    holds 4 of them, and answers do not change."""
    sql.execute("SELECT dna.set_search_config('lv', 'simple')")
    docs = _corpus(random.Random(5), 4000)
    names = sorted(docs)
    for i in range(3):
        _index_many(sql, "lv", {n: docs[n] for n in names[i * 1000:(i + 1) * 1000]})
    assert _compact(sql)["partitions"][0]["merged_segments"] == 0            # 3 small segments stay
    _index_many(sql, "lv", {n: docs[n] for n in names[3000:]})
    before = _lane(sql, "lv", "w00 w03 w17", k=20, exact=True)
    out = _compact(sql)["partitions"][0]
    assert out["merged_segments"] == 4 and out["segments"] == 1
    assert _lane(sql, "lv", "w00 w03 w17", k=20, exact=True) == before
    _postings_are_exact(sql)
