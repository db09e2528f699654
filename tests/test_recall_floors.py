"""dna.recall's relevance floors (issue 15 item 3, for the verb agents use): min_similarity and
min_lexical_score go to dna.search's lanes, and the answer says what each removed — an unrelated
query no longer comes back with k memories at a score that only looks meaningful."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

S = "team"
NOW = "2026-06-01T12:00:00Z"
TEXTS = ["the office is in lisbon", "deploys happen on fridays", "the office cat is called miso",
         "coffee at nine in the office kitchen"]


def _seed(sql):
    for i, text in enumerate(TEXTS):
        sql.execute("SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                    (S, Jsonb({"summary": text}), f"m{i}", NOW, text))


def recall(sql, query, **floors):
    args = ", ".join(f"{k} => %({k})s" for k in floors)
    return sql.execute(f"SELECT dna.recall(%(s)s, %(q)s, dna.fake_embed(%(q)s), 'dna-fake-hash-v1', k => 4, "
                       f"reconsolidate => false, now => %(now)s{', ' + args if args else ''})",
                       {"s": S, "q": query, "now": NOW, **floors}).fetchone()[0]


def test_without_floors_an_unrelated_query_still_fills_k(sql):
    _seed(sql)
    r = recall(sql, "office quarterly tax")
    assert len(r["hits"]) >= 3 and "floors" not in r


def test_floors_drop_weak_matches_and_say_how_many(sql):
    _seed(sql)
    plain = recall(sql, "office quarterly tax")
    sims = sorted(h["similarity"] for h in plain["hits"] if h.get("similarity") is not None)
    floor = (sims[0] + sims[-1]) / 2                      # between the weakest and the best cosine
    r = recall(sql, "office quarterly tax", min_similarity=floor, min_lexical_score=10.0)
    assert r["floors"]["min_similarity"] == floor and r["floors"]["min_lexical_score"] == 10.0
    kept = [h for h in r["hits"]]
    assert 0 < len(kept) < len(plain["hits"])
    assert all(h["similarity"] >= floor for h in kept)   # only the dense lane's strong matches survive
    assert r["floors"]["removed_dense"] >= 1 and r["floors"]["removed_lexical"] >= 1
    # the same counts as dna.search with the same floors over the same candidates
    row = sql.execute("SELECT floor_removed_dense, floor_removed_lexical FROM dna.search(%s, %s, dna.fake_embed(%s), "
                      "'dna-fake-hash-v1', k => 12, kinds => dna.recallable_kinds(), candidates => 100, "
                      "min_similarity => %s, min_lexical_score => 10.0, valid_time => %s) LIMIT 1",
                      (S, "office quarterly tax", "office quarterly tax", floor, NOW)).fetchone()
    assert (r["floors"]["removed_dense"], r["floors"]["removed_lexical"]) == row


def test_floors_that_empty_the_answer_notice_the_counts(sql):
    _seed(sql)
    notices = []
    sql.add_notice_handler(lambda d: notices.append(d.message_primary))
    r = recall(sql, "office quarterly tax", min_similarity=0.99, min_lexical_score=100.0)
    assert r["hits"] == [] and r["floors"]["removed_dense"] is None
    assert any("relevance floors" in n for n in notices), notices


@pytest.mark.parametrize("floors, hint", [({"min_similarity": 1.5}, "cosine"), ({"min_lexical_score": -1.0}, "BM25")])
def test_bad_floors_are_refused_with_a_hint(sql, floors, hint):
    _seed(sql)
    with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
        recall(sql, "office", **floors)
    assert hint in (info.value.diag.message_hint or "") + info.value.diag.message_primary
