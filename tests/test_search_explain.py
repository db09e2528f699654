"""explain => true on dna.search (issue 15 item 2, search part): per hit each lane's rank, raw score
and fusion term; for the answer the dense lane's path (HNSW or exact scan, ef_search, iterative scan),
candidates per lane, filters, floors and degradation."""
from __future__ import annotations

import pytest

MODEL = "dna-fake-hash-v1"
DOCS = [("fruit", "banana apple fruit smoothie"), ("car", "engine wheel car road banana"),
        ("mixed", "banana car apple"), ("sea", "ocean wave salt water fruit")]
QUERY = "banana fruit apple"


@pytest.fixture
def docs(sql):
    for name, body in DOCS:
        sql.execute("SELECT dna.index_document('ex', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    return sql


def _explain(sql, vec=True, **args):
    named = "".join(f", {a} => %({a})s" for a in args)
    return sql.execute("SELECT name, score, similarity, lexical_score, rank_dense, rank_lexical, explain "
                       f"FROM dna.search('ex', %(q)s, {'dna.fake_embed(%(q)s)' if vec else 'NULL'}, %(m)s, "
                       f"explain => true{named})", {"q": QUERY, "m": MODEL, **args}).fetchall()


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_the_terms_add_up_to_the_score_and_carry_the_lane_scores(docs, fusion):
    rows = _explain(docs, fusion=fusion)
    assert rows
    for name, score, sim, bm25, rd, rl, ex in rows:
        lanes = [ex[lane] for lane in ("dense", "lexical") if ex[lane] is not None]
        assert score == pytest.approx(sum(x["term"] for x in lanes), abs=1e-11)
        assert ex["score"] == score
        assert (ex["dense"] or {}).get("rank") == rd and (ex["lexical"] or {}).get("rank") == rl
        assert (ex["dense"] or {}).get("similarity") == sim and (ex["lexical"] or {}).get("bm25") == bm25
        assert ex["answer"]["fusion"]["method"] == fusion
    answer = rows[0][6]["answer"]
    assert answer == rows[-1][6]["answer"]                        # one receipt for the answer
    assert answer["dense"]["candidates"] == 4 and answer["lexical"]["candidates"] == 4
    assert answer["lexical"]["terms"] == ["appl", "banana", "fruit"] and answer["lexical"]["exact"] is True
    assert answer["dense"]["path"] == "exact scan" and answer["degraded"] is False
    assert answer["filters"]["tenant"] == "" and answer["k"] == 10 and answer["offset"] == 0


def test_the_receipt_names_floors_filters_and_degradation(docs):
    rows = _explain(docs, vec=False, min_lexical_score=0.5, kinds=["Doc"])
    answer = rows[0][6]["answer"]
    assert answer["degraded"] is True and "no query embedding" in answer["degradation"]
    assert answer["dense"]["path"] == "none" and answer["dense"]["candidates"] == 0
    assert answer["lexical"]["min_lexical_score"] == 0.5 and answer["lexical"]["removed_by_floor"] is not None
    assert answer["filters"]["kinds"] == ["Doc"]
    assert all(r[6]["dense"] is None for r in rows)


def test_the_dense_path_is_read_from_the_plan(docs):
    docs.execute("SET enable_seqscan = off")                      # leave the planner only the graph for
    docs.execute("SET enable_sort = off")                         # ORDER BY distance LIMIT n
    answer = _explain(docs, exact=False, k=2)[0][6]["answer"]
    assert answer["dense"]["path"] == "hnsw"
    # ef_search = dna.hnsw_ef_search(k, depth) = least(1000, greatest(40, 4 x 100, 10 x 2)) (tests/test_dense_depth.py)
    assert answer["dense"]["ef_search"] == 400 and answer["dense"]["iterative_scan"] == "strict_order"
    assert answer["dense"]["ef_search_rule"] == "least(1000, greatest(40, 4 x depth, 10 x k) x (1 + 0.5 x max(0, log10(graph_rows) - 5)))"
    assert answer["dense"]["exact_rule"] == "exact => false"


def test_without_explain_there_is_none_and_the_client_passes_it(docs, client):
    assert {r[0] for r in docs.execute("SELECT explain FROM dna.search('ex', 'banana', NULL, %s)", (MODEL,))} == {None}
    hits = client.search("ex", QUERY, explain=True).hits
    assert hits and hits[0].explain["answer"]["fusion"]["method"] == "convex"
