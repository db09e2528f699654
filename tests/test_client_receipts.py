"""Receipts from the Python client (issue 15): ``Client.search(..., receipt=True)`` and
``Client.memory.recall(..., receipt=True)`` answer through ``dna.take_receipt`` — the same hits as
the plain call — and carry the receipt's id, which ``Client.replay`` re-runs."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

import pydna

NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)
WORDS = ["banana", "apple", "smoothie", "engine", "wheel", "ocean", "salt", "fusion", "lane", "rank"]


@pytest.fixture
def docs(client):
    # 30 documents with overlapping words: ties, both lanes, and more than one page of hits.
    client.index("ex", [{"kind": "Doc", "name": f"d{i:02d}",
                         "body": " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 6)) + f" note {i}"}
                        for i in range(30)])
    return client


def receipts(client) -> int:
    return client.conn.execute("SELECT count(*) FROM dna.dna_search_receipts").fetchone()[0]


def test_search_with_receipt_answers_the_same_hits_and_replays(docs):
    plain = docs.search("ex", "banana smoothie lane", k=10)
    taken = docs.search("ex", "banana smoothie lane", k=10, receipt=True)
    assert plain.receipt_id is None
    assert uuid.UUID(taken.receipt_id)
    assert len(taken.hits) == 10
    assert taken.hits == plain.hits                      # every field, scores to the bit
    assert (taken.degraded, taken.model_id) == (plain.degraded, plain.model_id) == (False, "dna-fake-hash-v1")
    assert receipts(docs) == 1
    # Without keep_query the receipt holds only digests: the replay needs the query again.
    with pytest.raises(psycopg.Error) as err:
        docs.replay(taken.receipt_id)
    assert err.value.sqlstate == "22023" and "keep_query" in str(err.value)
    again = docs.replay(taken.receipt_id, "banana smoothie lane")
    assert again["match"] is True and again["scores_match"] is True
    assert [h["name"] for h in again["ids_now"]] == plain.names


def test_search_receipt_keeps_the_query_only_when_asked(docs):
    kept = docs.search("ex", "engine wheel", k=5, receipt=True, keep_query=True)
    row = docs.conn.execute("SELECT query, query_embedding IS NOT NULL FROM dna.dna_search_receipts "
                            "WHERE receipt_id = %s", (kept.receipt_id,)).fetchone()
    assert row == ("engine wheel", True)
    assert docs.replay(kept.receipt_id)["match"] is True
    plain = docs.search("ex", "engine wheel", k=5, receipt=True)
    row = docs.conn.execute("SELECT query, query_embedding FROM dna.dna_search_receipts WHERE receipt_id = %s",
                            (plain.receipt_id,)).fetchone()
    assert row == (None, None)


@pytest.mark.parametrize("options", [
    {"offset": 10, "k": 10},
    {"fusion": "rrf", "k": 7},
    {"fusion": "convex", "dense_weight": 0.8},
    {"min_similarity": 0.3, "k": 20},
    {"min_lexical_score": 1.0, "exact": True},
    {"passages": True, "kind": "Doc", "name_prefix": "d1", "weights": [1, 2], "candidates": 50},
    {"include_retired": True},
])
def test_search_with_receipt_is_the_same_search_whatever_the_options(docs, options):
    plain = docs.search("ex", "apple ocean rank", **options)
    taken = docs.search("ex", "apple ocean rank", receipt=True, **options)
    assert taken.hits == plain.hits and taken.receipt_id
    assert docs.replay(taken.receipt_id, "apple ocean rank")["match"] is True


def test_search_with_receipt_and_explain_returns_the_servers_explain(docs):
    at = datetime.now(timezone.utc)
    plain = docs.search("ex", "salt fusion", k=5, explain=True, valid_time=at)
    taken = docs.search("ex", "salt fusion", k=5, explain=True, valid_time=at, receipt=True)
    assert taken.hits == plain.hits
    assert taken.hits[0].explain["answer"]["fusion"]["method"] == "convex"
    assert docs.search("ex", "salt fusion", k=5, receipt=True).hits[0].explain is None


def test_search_with_receipt_refuses_bad_input_as_the_server_does_and_stores_nothing(docs):
    for options, word in (({"fusion": "linear"}, "fusion"), ({"offset": -1}, "offset"),
                          ({"dense_weight": 2.0}, "dense_weight"), ({"k": 5000}, "k must be")):
        with pytest.raises(psycopg.Error) as err:
            docs.search("ex", "banana", receipt=True, **options)
        assert err.value.sqlstate == "22023" and word in err.value.diag.message_primary
        assert err.value.diag.message_hint
    assert receipts(docs) == 0


def test_search_with_receipt_without_embedder_is_lexical_and_flagged(docs, dna_dsn):
    with pydna.connect(dna_dsn, embedder=None) as lexical:
        plain = lexical.search("ex", "banana smoothie", k=5)
        taken = lexical.search("ex", "banana smoothie", k=5, receipt=True)
        assert taken.hits == plain.hits and taken.degraded is True and plain.degraded is True
        assert taken.model_id == "dna-fake-hash-v1"
        assert lexical.replay(taken.receipt_id, "banana smoothie")["match"] is True


def test_recall_with_receipt_is_read_only_answers_the_same_and_replays(client):
    mem = client.memory
    for i, text in enumerate(["deploys happen on thursday", "the deploy checklist lives in the wiki",
                              "thursday lunch is pizza", "rollbacks need a deploy ticket"]):
        mem.remember("team", text, name=f"m{i}", now=NOW)
    at = NOW + timedelta(days=3)
    plain = mem.recall("team", "when do we deploy", k=3, now=at, reconsolidate=False)
    taken = mem.recall("team", "when do we deploy", k=3, now=at, receipt=True)
    assert uuid.UUID(taken["receipt_id"]) and taken["verb"] == "recall"
    assert taken["hits"] == plain["hits"] and len(taken["hits"]) == 3
    assert taken["reconsolidated"] == []                   # a receipt's recall reinforces nothing
    counts = client.conn.execute("SELECT sum((spec ->> 'surface_count')::int) FROM dna.dna_instances "
                                 "WHERE scope = 'team'").fetchone()[0]
    assert counts in (0, None)
    again = client.replay(taken["receipt_id"], "when do we deploy")
    assert again["match"] is True
    explained = mem.recall("team", "when do we deploy", k=3, now=at, receipt=True, explain=True, decay="off")
    assert explained["decay"] == "off" and explained["hits"][0]["explain"]["memory"]
    with pytest.raises(psycopg.Error) as err:
        mem.recall("team", "deploy", receipt=True, decay="sometimes")
    assert err.value.sqlstate == "22023" and "decay" in err.value.diag.message_primary
    assert "off: no decay" in err.value.diag.message_hint
