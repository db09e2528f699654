"""Receipts pin the diversity their answer ran with (revision 0023, topic receipt_diversity): dna.search and
dna.recall collapse near-duplicates by default since 0022_first_week, and a receipt did not record it, so a
receipt taken before 0022 (no diversity then) replayed with collapse on and lost the duplicates it had
answered. dna.take_receipt now stores diversity (and duplicate_similarity / mmr_lambda where the answer
used them) in the receipt's args, from the answer's own account; dna.replay runs a receipt that recorded
none with the one it ran with: its answer's account (0022), else 'off' (taken before 0022_first_week).
Plain SQL; the receipts "taken before" are copies of real ones with what those releases did not store
removed (tests/test_receipt_diversity_migration.py takes them at 0021 and 0022 themselves)."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

MODEL = "dna-fake-hash-v1"
COPIED = "one paragraph copied into two files about rank fusion"
QUERY = "rank fusion paragraph"


@pytest.fixture
def docs(sql):
    for name, body in (("copy-a.md", COPIED), ("copy-b.md", COPIED), ("other.md", "rank fusion in another text")):
        sql.execute("SELECT dna.index_document('rd', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    for name in ("m-a", "m-b"):
        sql.execute("SELECT dna.remember('rdm', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                    (Jsonb({"summary": COPIED}), name, COPIED, MODEL))
    return sql


def _take(conn, verb="search", **args):
    base = {"scope": "rd" if verb == "search" else "rdm", "query": QUERY, "model_id": MODEL, **args}
    return conn.execute("SELECT dna.take_receipt(%s, %s::jsonb || jsonb_build_object('query_embedding', "
                        "dna.fake_embed(%s)::text), keep_query => true)", (verb, Jsonb(base), QUERY)).fetchone()[0]


def _args(conn, receipt):
    return conn.execute("SELECT args FROM dna.dna_search_receipts WHERE receipt_id = %s",
                        (receipt["receipt_id"],)).fetchone()[0]


def _names(receipt):
    return sorted(h["name"] for h in receipt["hits"])


def _as_taken_by(conn, receipt, revision: str, account: bool) -> str:
    """A copy of the receipt as an older release stored it: no diversity in args, the schema revision
    ``revision``, and the answer's diversity account only when that release gave one (0022)."""
    return conn.execute(
        "INSERT INTO dna.dna_search_receipts (receipt_id, verb, scope, tenant, args, settings, results, inputs_digest, "
        "query_digest, embedding_digest, query, query_embedding, taken_at) "
        "SELECT gen_random_uuid(), verb, scope, tenant, args - 'diversity' - 'duplicate_similarity' - 'mmr_lambda', "
        "jsonb_set(CASE WHEN %s THEN settings ELSE settings #- '{answer,diversity}' END, '{revision}', to_jsonb(%s::text)), "
        "results, inputs_digest, query_digest, embedding_digest, query, query_embedding, taken_at "
        "FROM dna.dna_search_receipts WHERE receipt_id = %s RETURNING receipt_id::text",
        (account, revision, receipt["receipt_id"])).fetchone()[0]


def _replay(conn, receipt_id):
    return conn.execute("SELECT dna.replay(%s::uuid)", (receipt_id,)).fetchone()[0]


def test_a_receipt_records_the_diversity_it_ran_with(docs):
    default = _take(docs)
    assert _names(default) == ["copy-a.md", "other.md"]                       # one copy collapsed
    assert {k: _args(docs, default).get(k) for k in ("diversity", "duplicate_similarity", "mmr_lambda")} == \
        {"diversity": "collapse", "duplicate_similarity": 1.0, "mmr_lambda": None}
    off = _take(docs, diversity="OFF ")                                       # as the verb reads it
    assert _names(off) == ["copy-a.md", "copy-b.md", "other.md"]
    assert {k: _args(docs, off).get(k) for k in ("diversity", "duplicate_similarity")} == {"diversity": "off",
                                                                                       "duplicate_similarity": None}
    mmr = _take(docs, mmr_lambda=0.5)
    assert {k: _args(docs, mmr).get(k) for k in ("diversity", "duplicate_similarity", "mmr_lambda")} == \
        {"diversity": "mmr", "duplicate_similarity": 1.0, "mmr_lambda": 0.5}
    recall = _take(docs, verb="recall")
    assert _names(recall) == ["m-a"] and _args(docs, recall)["diversity"] == "collapse"
    recall_off = _take(docs, verb="recall", diversity="off")
    assert _names(recall_off) == ["m-a", "m-b"] and "duplicate_similarity" not in _args(docs, recall_off)
    for r in (default, off, mmr, recall, recall_off):
        assert _replay(docs, r["receipt_id"])["match"] is True


def test_a_receipt_with_no_diversity_replays_as_its_release_answered(docs):
    for verb in ("search", "recall"):
        off = _take(docs, verb=verb, diversity="off")                         # what 0021 answered (no diversity)
        old = _as_taken_by(docs, off, "0021_holds_in_use", account=False)
        out = _replay(docs, old)
        assert out["match"] is True and len(out["ids_now"]) == len(off["hits"]), verb   # both copies, as then
        collapsed = _take(docs, verb=verb)                                    # what 0022 answered by default
        at_0022 = _as_taken_by(docs, collapsed, "0022_first_week", account=True)
        assert _replay(docs, at_0022)["match"] is True, verb


def test_receipt_diversity_in_sql(sql):
    pin = "SELECT dna.receipt_diversity(%s::jsonb, %s::jsonb, %s)"
    account = {"diversity": {"method": "mmr", "duplicate_similarity": 0.9, "mmr_lambda": 0.3, "collapsed": 2}}
    assert sql.execute(pin, (Jsonb({"k": 3}), Jsonb(account), "off")).fetchone()[0] == \
        {"k": 3, "diversity": "mmr", "duplicate_similarity": 0.9, "mmr_lambda": 0.3}
    assert sql.execute(pin, (Jsonb({"diversity": "off"}), None, "collapse")).fetchone()[0] == {"diversity": "off"}
    assert sql.execute(pin, (Jsonb({}), Jsonb({"dense": {}}), "off")).fetchone()[0] == {"diversity": "off"}
    assert sql.execute(pin, (Jsonb({"mmr_lambda": 0.4}), None, "collapse")).fetchone()[0] == \
        {"mmr_lambda": 0.4, "diversity": "mmr"}
    with pytest.raises(psycopg.errors.InvalidParameterValue):               # the verb still judges the values
        sql.execute("SELECT dna.take_receipt('search', %s)", (Jsonb({"scope": "rd", "query": "x", "diversity": "off",
                                                                      "duplicate_similarity": 0.9}),))
