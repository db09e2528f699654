"""Every memory-scoring golden of the DNA SDK reproduced by the SQL functions, through plain SQL.

Goldens: tests/data/conformance/dna/memory-scoring.json (ruinosus/dna, MIT; tests/data/README.md). Floats to 1e-12.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb

GOLDEN = Path(__file__).resolve().parent / "data" / "conformance" / "dna" / "memory-scoring.json"
CASES = json.loads(GOLDEN.read_text(encoding="utf-8"))
TOL = 1e-12


def one(sql, query, params=()):
    return sql.execute(query, params).fetchone()[0]


def test_golden_file_has_every_key():
    assert set(CASES) - {"_note"} == {
        "ebbinghaus_retention", "currently_valid", "stability_from_spec", "confidence_score_numeric",
        "classify_memory_type", "time_of_day", "score_engram", "cosine_similarity_fake", "engram_text",
        "semantic_recall_fusion"}


def test_ebbinghaus_retention(sql):
    for case in CASES["ebbinghaus_retention"]:
        got = one(sql, "SELECT dna.ebbinghaus_retention(%s, %s)", (case["stability_days"], case["days_since_recall"]))
        assert abs(got - case["expected"]) <= TOL, case


def test_currently_valid(sql):
    for case in CASES["currently_valid"]:
        got = one(sql, "SELECT dna.currently_valid(%s, %s::timestamptz)", (case["valid_to"], case["now"]))
        assert got is case["expected"], case


def test_stability_from_spec(sql):
    for case in CASES["stability_from_spec"]:
        got = one(sql, "SELECT dna.stability_from_spec(%s)", (Jsonb(case["spec"]),))
        assert abs(got - case["expected"]) <= TOL, case


def test_confidence_score_numeric(sql):
    for case in CASES["confidence_score_numeric"]:
        got = one(sql, "SELECT dna.confidence_score_numeric(%s)", (Jsonb(case["spec"]),))
        assert abs(got - case["expected"]) <= TOL, case


def test_classify_memory_type(sql):
    for case in CASES["classify_memory_type"]:
        assert one(sql, "SELECT dna.classify_memory_type(%s)", (Jsonb(case["spec"]),)) == case["expected"], case


def test_time_of_day(sql):
    for case in CASES["time_of_day"]:
        assert one(sql, "SELECT dna.time_of_day(%s::integer)", (case["hour"],)) == case["expected"], case
        ts = f"2026-01-01T{case['hour']:02d}:00:00+00:00"
        assert one(sql, "SELECT dna.time_of_day(%s::text)", (ts,)) == case["expected"], case


def test_score_engram(sql):
    for case in CASES["score_engram"]:
        score, matched = sql.execute("SELECT s.score, s.matched FROM dna.score_engram(%s, %s) AS s",
                                     (Jsonb(case["engram"]["spec"]), Jsonb(case["cue_ctx"]))).fetchone()
        assert abs(score - case["expected_score"]) <= TOL, case
        assert matched == case["expected_matched"], case


def test_cosine_similarity_fake(sql):
    for case in CASES["cosine_similarity_fake"]:
        got = one(sql, "SELECT dna.cosine_similarity(dna.fake_embed_float8(%s), dna.fake_embed_float8(%s))",
                  (case["text_a"], case["text_b"]))
        assert abs(got - case["expected"]) <= TOL, case


def test_fake_embed_float8_agrees_with_the_vector_embedder(sql):
    # The float8 twin rounds to exactly the float32 vector dna.fake_embed stores.
    for text in ("mutating documents safely", "", "reciprocal rank fusion rank"):
        same = one(sql, "SELECT dna.fake_embed_float8(%s)::real[] = dna.fake_embed(%s)::real[]", (text, text))
        assert same, text


def test_engram_text(sql):
    for case in CASES["engram_text"]:
        assert one(sql, "SELECT dna.engram_text(%s)", (Jsonb(case["spec"]),)) == case["expected"], case


@pytest.mark.parametrize("case", CASES["semantic_recall_fusion"])
def test_semantic_recall_fusion(sql, case):
    # Cosines exactly as the reference computes them: the fake embedder on engram_text, in float8.
    semantic = {}
    for engram in case["engrams"]:
        cos = one(sql, "SELECT dna.cosine_similarity(dna.fake_embed_float8(%s), dna.fake_embed_float8(dna.engram_text(%s)))",
                  (case["query"], Jsonb(engram["spec"])))
        if cos > 0:
            semantic[engram["name"]] = cos
    assert set(semantic) == set(case["expected_semantic"])
    for name, cos in case["expected_semantic"].items():
        assert abs(semantic[name] - cos) <= TOL, name
    fused = one(sql, "SELECT dna.semantic_recall_fusion(%s, %s, %s, %s, %s::timestamptz)",
                (Jsonb(case["hits"]), Jsonb(case["engrams"]), case["query"], Jsonb(semantic), case["now"]))
    assert [h["name"] for h in fused] == case["expected_order"]
    for hit in fused:
        assert abs(hit["score"] - case["expected_scores"][hit["name"]]) <= TOL, hit
        if hit["name"] in case["expected_semantic"]:
            assert abs(hit["semantic"] - case["expected_semantic"][hit["name"]]) <= TOL, hit
        else:
            assert "semantic" not in hit
        assert hit.get("rank_ecphory") == case["expected_rank_ecphory"].get(hit["name"]), hit
        original = next(h for h in case["hits"] if h["name"] == hit["name"])
        assert hit["score_recall"] == original["score"]
    # The whole chain in one SQL statement, cosines computed inside the database.
    fused_sql = one(sql, """
        SELECT dna.semantic_recall_fusion(%(hits)s, %(engrams)s, %(q)s,
               (SELECT jsonb_object_agg(e ->> 'name', dna.cosine_similarity(dna.fake_embed_float8(%(q)s),
                                                          dna.fake_embed_float8(dna.engram_text(e -> 'spec'))))
                FROM jsonb_array_elements(%(engrams)s) AS e),
               %(now)s::timestamptz)""",
        {"hits": Jsonb(case["hits"]), "engrams": Jsonb(case["engrams"]), "q": case["query"], "now": case["now"]})
    assert [h["name"] for h in fused_sql] == case["expected_order"]
    for hit in fused_sql:
        assert abs(hit["score"] - case["expected_scores"][hit["name"]]) <= TOL, hit


def test_pure_functions_are_immutable_and_documented(sql):
    rows = sql.execute("""
        SELECT p.proname, p.provolatile, obj_description(p.oid, 'pg_proc')
        FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace
          AND p.proname IN ('ebbinghaus_retention', 'currently_valid', 'stability_from_spec',
                            'confidence_score_numeric', 'classify_memory_type', 'time_of_day', 'score_engram',
                            'cosine_similarity', 'engram_text', 'semantic_recall_fusion', 'fake_embed_float8')""").fetchall()
    assert len(rows) == 12
    for name, volatility, comment in rows:
        assert volatility == "i", name
        assert comment and len(comment) > 40, name
