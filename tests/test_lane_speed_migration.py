"""Revision 0011_lane_speed upgrades a database that holds data at 0010_scale and it answers the same
(the exact path, the budgeted path and through dna.search; in the plain state after a compaction
and with memtable rows, tombstones and a shadowing tenant); its downgrade gives 0010_scale's lane
text back, answering the same again.
"""
from __future__ import annotations

import json

import psycopg

from conftest import DATA
from pydna import migrate

MODEL = "dna-fake-hash-v1"
QUERIES = ["vitamin D deficiency and bone fractures", "gene expression in cancer cells", "randomized trial",
           "microRNA regulates apoptosis", "the effect of smoking on lung function", "insulin resistance obesity",
           "protein", "antibiotic resistance bacteria", "T cell receptor signalling", "zzzz nothing"]


def _corpus(n=300):
    with open(DATA / "scifact" / "corpus-400.jsonl", encoding="utf-8") as fh:  # tests/data/README.md
        return [json.loads(line) for _, line in zip(range(n), fh)]


def _answers(conn) -> dict:
    out = {}
    for q in QUERIES:
        for tenant in ("", "acme"):
            for budget in (None, 50, 400):
                out[(q, tenant, budget)] = [
                    (kind, name, ten, round(score, 9), exact) for kind, name, ten, score, exact in conn.execute(
                        "SELECT kind, name, tenant, score, exact FROM dna.bm25('m', %s, %s, %s, k => 10, budget => %s)",
                        (q, MODEL, tenant, budget)).fetchall()]
            out[(q, tenant, "exact")] = [
                (name, round(score, 9)) for name, score in conn.execute(
                    "SELECT name, score FROM dna.bm25('m', %s, %s, %s, k => 20, exact => true)", (q, MODEL, tenant)).fetchall()]
            out[(q, tenant, "search")] = [
                (name, ten, r, round(s, 9)) for name, ten, r, s in conn.execute(
                    "SELECT name, tenant, rank_lexical, lexical_score FROM dna.search('m', %s, NULL, %s, k => 10, "
                    "tenant => %s, valid_time => NULL)", (q, MODEL, tenant)).fetchall()]
    return out


def _lane_text(conn) -> str:
    return conn.execute("SELECT pg_get_functiondef('dna.bm25_lane(text, text, text, text[], double precision, "
                        "double precision, integer, text[], integer, boolean, boolean, integer)'::regprocedure)").fetchone()[0]


# The released lanes of 0010/0011 have no SET jit = off (0019 added it): on a server with JIT (Debian's
# PostgreSQL 15) every call compiled their statements anew, 15 minutes for this test. The answers are
# what it compares; the session runs without JIT.
NO_JIT = "-c jit=off"


def test_upgrade_from_0010_keeps_answers_and_downgrade_restores_the_lane(empty_dsn):
    migrate.upgrade(empty_dsn, "0010_scale")
    docs = _corpus()
    with psycopg.connect(empty_dsn, autocommit=True, options=NO_JIT) as conn:
        conn.execute("SELECT count(*) FROM dna.index_documents('m', %s, %s, %s, NULL, %s)",
                     (["Doc"] * 250, [d["_id"] for d in docs[:250]], [d["text"] for d in docs[:250]], MODEL))
        conn.execute("SELECT dna.bm25_compact('m', full_merge => true)")
        plain = _answers(conn)                                  # sealed only: the plain statements
        for d in docs[250:]:                                    # memtable rows
            conn.execute("SELECT dna.index_document('m', 'Doc', %s, %s, NULL, %s)", (d["_id"], d["text"], MODEL))
        conn.execute("SELECT dna.index_document('m', 'Doc', %s, 'acme shadows this abstract: cancer cells', NULL, %s, "
                     "NULL, 'acme')", (docs[1]["_id"], MODEL))
        conn.execute("SELECT dna.delete_document('m', 'Doc', %s)", (docs[2]["_id"],))   # a tombstone
        conn.execute("SELECT dna.index_document('m', 'Doc', %s, 'cancer cells and gene expression', NULL, %s)",
                     (docs[3]["_id"], MODEL))                    # an update: tombstone + memtable row
        mixed = _answers(conn)
        assert "IF plain THEN" not in _lane_text(conn)
    assert any(v for v in plain.values()) and plain != mixed

    migrate.upgrade(empty_dsn, "0011_lane_speed")
    with psycopg.connect(empty_dsn, autocommit=True, options=NO_JIT) as conn:
        assert "IF plain THEN" in _lane_text(conn)
        assert _answers(conn) == mixed
        conn.execute("SELECT dna.delete_document('m', 'Doc', %s)", (docs[1]["_id"],))  # the shadowed base row: back
        conn.execute("SELECT dna.delete_document('m', 'Doc', %s, tenant => 'acme')", (docs[1]["_id"],))
        conn.execute("SELECT dna.index_document('m', 'Doc', %s, %s, NULL, %s)", (docs[1]["_id"], docs[1]["text"], MODEL))
        conn.execute("SELECT dna.index_document('m', 'Doc', %s, %s, NULL, %s)", (docs[3]["_id"], docs[3]["text"], MODEL))
        conn.execute("SELECT dna.index_document('m', 'Doc', %s, %s, NULL, %s)", (docs[2]["_id"], docs[2]["text"], MODEL))
        for d in docs[250:]:
            conn.execute("SELECT dna.delete_document('m', 'Doc', %s)", (d["_id"],))
        conn.execute("SELECT dna.bm25_compact('m', full_merge => true)")
        after = _answers(conn)                                  # the first 250 again, all sealed: plain
        assert conn.execute("SELECT count(*) FROM dna.dna_bm25_tombstones").fetchone()[0] == 0

    migrate.downgrade(empty_dsn, "0010_scale")
    with psycopg.connect(empty_dsn, autocommit=True, options=NO_JIT) as conn:
        assert "IF plain THEN" not in _lane_text(conn)
        assert _answers(conn) == after
    # the same 250 documents again (three under new doc_ids): every exact-path answer as at the start
    # (budgeted ones may differ: equal impacts are ordered by doc_id inside a chunk)
    exact_keys = [key for key in plain if key[2] in (None, "exact", "search")]
    assert [after[key] for key in exact_keys] == [plain[key] for key in exact_keys]
