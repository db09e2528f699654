"""dna.search's second fusion (issue 15 item 5): fusion => 'convex' combines the lane scores, each z-score
normalised over its lane's candidates and shifted so the lowest is 0 (revision 0025; min-max before),
dense_weight x cosine + (1 - dense_weight) x BM25; it is the default (dense_weight 0.5, chosen on SciFact
train, the LoCoMo dev split and the hybrid at 1M); RRF per call or per scope (dna.set_search_config)."""
from __future__ import annotations

import statistics

import psycopg
import pytest

MODEL = "dna-fake-hash-v1"
DOCS = [("fruit", "banana apple fruit smoothie"), ("car", "engine wheel car road banana"),
        ("mixed", "banana car apple"), ("sea", "ocean wave salt water fruit")]
QUERY = "banana fruit apple"


@pytest.fixture
def docs(sql):
    for name, body in DOCS:
        sql.execute("SELECT dna.index_document('fz', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    return sql


def _search(sql, **args):
    named = "".join(f", {a} => %({a})s" for a in args)
    return sql.execute("SELECT name, score, similarity, lexical_score FROM dna.search('fz', %(q)s, dna.fake_embed(%(q)s), "
                       f"%(m)s{named})", {"q": QUERY, "m": MODEL, **args}).fetchall()


def test_convex_score_is_the_weighted_sum_of_z_score_normalised_lane_scores(docs):
    rows = _search(docs, fusion="convex", dense_weight=0.3)
    sims = [r[2] for r in rows if r[2] is not None]
    lex = [r[3] for r in rows if r[3] is not None]
    assert len(set(sims)) > 1 and len(set(lex)) > 1
    for name, score, sim, bm25 in rows:
        nd = 0 if sim is None else (sim - min(sims)) / statistics.pstdev(sims)
        nl = 0 if bm25 is None else (bm25 - min(lex)) / statistics.pstdev(lex)
        assert score == pytest.approx(0.3 * nd + 0.7 * nl, abs=1e-9), name
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)


def test_z_score_is_shifted_to_the_lowest_and_counts_equal_candidates_and_absence(sql):
    """dna.z_score(x, lo, sd): (x - lo) / sd; every candidate equal (sd 0): 1; absent (NULL): 0 — a lane of
    nearly equal candidates is not spread over [0, 1] as min-max spreads it."""
    assert sql.execute("SELECT dna.z_score(3, 1, 0.5), dna.z_score(1, 1, 0.5), dna.z_score(2, 2, 0), "
                       "dna.z_score(NULL, 1, 0.5)").fetchone() == (4.0, 0.0, 1.0, 0.0)
    flat = [10.0, 10.1, 10.2]
    lo, sd = min(flat), statistics.pstdev(flat)
    z = [sql.execute("SELECT dna.z_score(%s, %s, %s)", (x, lo, sd)).fetchone()[0] for x in flat]
    mm = [sql.execute("SELECT dna.min_max(%s, %s, %s)", (x, lo, max(flat))).fetchone()[0] for x in flat]
    assert z == pytest.approx([0.0, 1.2247448714, 2.4494897428]) and mm == pytest.approx([0.0, 0.5, 1.0])


def test_dense_weight_one_and_zero_are_the_lanes_alone(docs):
    by_cosine = [r[0] for r in sorted(_search(docs, weights=[1.0, 0.0]), key=lambda r: (-r[2], r[0]))]
    assert [r[0] for r in _search(docs, fusion="convex", dense_weight=1.0)][:len(by_cosine)] == by_cosine
    lexical = [r for r in _search(docs, fusion="convex", dense_weight=0.0) if r[3] is not None]
    assert [r[0] for r in lexical] == [r[0] for r in sorted(lexical, key=lambda r: (-r[3], r[0]))]


def test_convex_at_dense_weight_0_5_is_the_default_and_a_scope_can_choose(docs):
    assert _search(docs) == _search(docs, fusion="convex", dense_weight=0.5)
    assert _search(docs) != _search(docs, fusion="convex", dense_weight=0.4)
    assert _search(docs) != _search(docs, fusion="rrf")
    config = docs.execute("SELECT dna.set_search_config('fz', fusion => 'rrf')").fetchone()[0]
    assert config["fusion"] == "rrf" and config["dense_weight"] is None
    assert _search(docs) == _search(docs, fusion="rrf")
    docs.execute("SELECT dna.set_search_config('fz', fusion => 'convex', dense_weight => 0.7)")
    assert _search(docs) == _search(docs, fusion="convex", dense_weight=0.7)
    assert _search(docs, fusion="rrf") != _search(docs)           # the argument wins over the scope
    docs.execute("SELECT dna.set_search_config('fz', reset => true)")
    assert _search(docs) == _search(docs, fusion="convex", dense_weight=0.5)


@pytest.mark.parametrize("args,word", [({"fusion": "linear"}, "fusion"), ({"dense_weight": 1.5}, "dense_weight"),
                                       ({"dense_weight": float("nan")}, "dense_weight")])
def test_bad_fusion_arguments_are_refused(docs, args, word):
    with pytest.raises(psycopg.Error) as err:
        _search(docs, **args)
    assert err.value.sqlstate == "22023" and word in err.value.diag.message_primary
    named = ", ".join(f"{a} => %({a})s" for a in args)
    with pytest.raises(psycopg.Error) as err:
        docs.execute(f"SELECT dna.set_search_config('fz', {named})", args)
    assert err.value.sqlstate == "22023" and word in err.value.diag.message_primary


def test_the_client_passes_the_fusion(docs, client):
    hits = client.search("fz", QUERY, fusion="convex", dense_weight=0.3)
    assert [(h.name, h.score) for h in hits] == [r[:2] for r in _search(docs, fusion="convex", dense_weight=0.3)]


def test_weights_without_a_fusion_select_rrf(docs):
    """weights are RRF's: a caller turning the lexical lane off (weights => '{1,0}') gets the dense lane
    alone, as before the convex default; the same for a scope's weights."""
    dense_only = _search(docs, weights=[1.0, 0.0])
    assert dense_only == _search(docs, weights=[1.0, 0.0], fusion="rrf")
    assert [r[0] for r in dense_only if r[2] is not None] == [r[0] for r in sorted(
        (r for r in dense_only if r[2] is not None), key=lambda r: (-r[2], r[0]))]
    assert _search(docs, rrf_k=30.0) == _search(docs, rrf_k=30.0, fusion="rrf")
    docs.execute("SELECT dna.set_search_config('fz', weights => '{1,0}')")
    assert _search(docs) == dense_only
    assert _search(docs, fusion="convex") == _search(docs, fusion="convex", dense_weight=0.5)


@pytest.mark.parametrize("args,word", [({"fusion": "rrf", "dense_weight": 0.5}, "dense_weight is the convex fusion"),
                                       ({"fusion": "convex", "weights": [1.0, 1.5]}, "weights and rrf_k are RRF"),
                                       ({"fusion": "convex", "rrf_k": 60}, "weights and rrf_k are RRF")])
def test_a_knob_of_the_other_fusion_is_refused_not_ignored(docs, args, word):
    """An argument the asked fusion would ignore (found by a fresh-user trial: --fusion rrf
    --dense-weight 0.5 answered as RRF, silently) is refused with a hint naming the fusion's own."""
    with pytest.raises(psycopg.Error) as err:
        _search(docs, **args)
    assert err.value.sqlstate == "22023" and word in err.value.diag.message_primary
    assert "leave" in err.value.diag.message_hint
    # the scope's setting is not the call's: a scope set to convex still answers fusion => 'rrf'
    docs.execute("SELECT dna.set_search_config('fz', fusion => 'convex', dense_weight => 0.7)")
    assert _search(docs, fusion="rrf") == _search(docs, fusion="rrf", weights=[1.0, 1.5])
    docs.execute("SELECT dna.set_search_config('fz', reset => true)")
