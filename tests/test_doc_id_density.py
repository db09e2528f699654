"""citus-probe S4: on Citus a doc_id comes from the sequence of the node that inserts the row (1… on
the coordinator, 2^48·group + … on a worker running a delegated verb), so a scope's doc_ids are not
dense. On one server: the same documents loaded with a gap in their doc_ids (setval mid-load) answer
exactly as the dense load — hybrid and lexical dna.search, dna.bm25, tie-breaks between equal
scores — in the memtable, in sealed segments and after a full merge. A packed posting holds a 33-bit
doc_id offset from its segment's base, so a merge whose documents lie more than 2^33 apart writes one
segment per run of doc_ids that fits (0019, dna.bm25_doc_ranges; it refused with 54000 before): answers
unchanged (docs/scale-out.md, "doc_ids")."""
from __future__ import annotations

import pytest

MODEL = "dna-fake-hash-v1"
SEQ = "dna.dna_search_doc_id_seq"
# 40 documents, some with the same text (equal scores: the order is the tie-break by key)
DOCS = [(f"n{i:02d}", f"rank fusion of lexical and dense lanes, note {i % 7} on shard {i % 3}") for i in range(40)]
QUERIES = ["rank fusion", "dense lanes note 3", "lexical shard 1", "note 5 on shard 2"]


def _load(conn, scope, docs):
    for name, body in docs:
        conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)", (scope, name, body, body, MODEL))


def _answers(conn, scope):
    out = {}
    for q in QUERIES:
        out[("hybrid", q)] = conn.execute(
            "SELECT name, round(score::numeric, 9), rank_dense, rank_lexical FROM dna.search(%s, %s, dna.fake_embed(%s), "
            "%s, k => 40)", (scope, q, q, MODEL)).fetchall()
        out[("lexical", q)] = conn.execute(
            "SELECT name, round(score::numeric, 9), rank_lexical FROM dna.search(%s, %s, NULL, %s, k => 40)",
            (scope, q, MODEL)).fetchall()
        for exact in (True, False):
            out[("bm25", q, exact)] = conn.execute(
                "SELECT kind, name, round(score::numeric, 9) FROM dna.bm25(%s, %s, %s, k => 40, exact => %s)",
                (scope, q, MODEL, exact)).fetchall()
    out["stats"] = conn.execute("SELECT n_docs, total_len, avg_len FROM dna.bm25_partition_stats(%s, %s)",
                                (scope, MODEL)).fetchone()
    return out


def _layout(conn, scope):
    return conn.execute("SELECT count(*) FILTER (WHERE seg_id IS NULL), count(DISTINCT seg_id), max(doc_id) - min(doc_id) "
                        "FROM dna.dna_bm25_docs WHERE scope = %s", (scope,)).fetchone()


@pytest.mark.parametrize("gap", [2 ** 32, 2 ** 48])
def test_answers_do_not_depend_on_doc_id_density(sql, gap):
    half = len(DOCS) // 2
    _load(sql, "dense", DOCS[:half])
    sql.execute("SELECT dna.bm25_compact('dense')")                          # a sealed segment
    _load(sql, "dense", DOCS[half:])                                          # and the memtable
    _load(sql, "sparse", DOCS[:half])
    sql.execute("SELECT dna.bm25_compact('sparse')")
    sql.execute("SELECT setval(%s, %s)", (SEQ, gap))                          # the other node's range
    _load(sql, "sparse", DOCS[half:])
    assert _layout(sql, "sparse")[2] >= gap - 100 > _layout(sql, "dense")[2]
    dense = _answers(sql, "dense")
    assert dense[("hybrid", "rank fusion")] and any(
        a[1] == b[1] for a, b in zip(dense[("lexical", "rank fusion")], dense[("lexical", "rank fusion")][1:]))  # ties
    assert _answers(sql, "sparse") == dense                                   # segment + memtable

    for scope in ("dense", "sparse"):
        sql.execute("SELECT dna.bm25_compact(%s)", (scope,))                 # seal: two segments each
        assert _layout(sql, scope)[:2] == (0, 2)
    assert _answers(sql, "sparse") == dense and _answers(sql, "dense") == dense

    sql.execute("SELECT dna.bm25_compact('dense', full_merge => true)")
    assert _layout(sql, "dense")[:2] == (0, 1) and _answers(sql, "dense") == dense
    report = sql.execute("SELECT dna.bm25_compact('sparse', full_merge => true)").fetchone()[0]
    # one segment per run of doc_ids a packed posting can span (dna.bm25_doc_ranges, 0019)
    assert _layout(sql, "sparse")[:2] == (0, 1 if gap < 2 ** 33 else 2)
    assert report["partitions"][0]["segments"] == (1 if gap < 2 ** 33 else 2)
    assert _answers(sql, "sparse") == dense
    sql.execute("SELECT dna.bm25_compact('sparse', full_merge => true)")    # again: the same two, nothing lost
    assert _layout(sql, "sparse")[:2] == (0, 1 if gap < 2 ** 33 else 2)
    assert _answers(sql, "sparse") == dense
