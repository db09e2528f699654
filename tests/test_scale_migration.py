"""Revision 0010_scale upgrades a database that holds data at 0009_tenancy (the previous head)
and it answers the same; its downgrade gives the old layout back with the data.

The data: 400 SciFact abstracts without vectors (two tenants, a shadowing tenant row, a deleted
document) and a few memories with fake-embedder vectors, written through the verbs of the old head.
"""
from __future__ import annotations

import json

import psycopg

from conftest import DATA
from pydna import migrate
from test_bm25 import _postings_are_exact

MODEL = "dna-fake-hash-v1"
QUERIES = ["vitamin D deficiency and bone fractures", "gene expression in cancer cells", "randomized trial",
           "microRNA regulates apoptosis", "the effect of smoking on lung function", "insulin resistance obesity",
           "protein", "antibiotic resistance bacteria", "T cell receptor signalling", "zzzz nothing"]


def _corpus(n=400):
    with open(DATA / "scifact" / "corpus-400.jsonl", encoding="utf-8") as fh:  # tests/data/README.md
        return [json.loads(line) for _, line in zip(range(n), fh)]


def _top10(conn, query, tenant=""):
    """The top 10 as (score rounded to 1e-8, kind, name, tenant), cut where the 10th score ends (a
    tie at the cut may hold other members, in name order, since the old layout summed in another
    order and left 1-ulp differences)."""
    got = conn.execute("SELECT kind, name, tenant, score FROM dna.bm25('m', %s, %s, %s, k => 60)",
                       (query, MODEL, tenant)).fetchall()
    if len(got) > 10:
        got = [g for g in got if g[3] > got[9][3] + 1e-9]
    return Top(sorted((kind, name, ten) for kind, name, ten, _ in got), sorted(s for *_, s in got))


class Top:
    """A top-10: its documents (a set) and its scores (equal to 1e-9)."""

    def __init__(self, keys, scores):
        self.keys, self.scores = keys, scores

    def __eq__(self, other):
        return self.keys == other.keys and len(self.scores) == len(other.scores) and all(
            abs(a - b) <= 1e-9 for a, b in zip(self.scores, other.scores))

    def __repr__(self):
        return f"Top({self.keys}, {self.scores})"


def _search(conn, query, tenant=""):
    # The lexical lane through dna.search (its dense lane is HNSW, approximate, and not changed here:
    # after ANALYZE the planner may switch it between an exact scan and the index).
    return [(r[0], r[1], r[2], round(r[3], 6)) for r in conn.execute(
        "SELECT name, tenant, rank_lexical, lexical_score FROM dna.search('m', %s, NULL, %s, k => 10, tenant => %s, "
        "valid_time => NULL)", (query, MODEL, tenant)).fetchall()]


def test_upgrade_with_documents_keeps_answers_and_downgrade_keeps_data(empty_dsn):
    migrate.upgrade(empty_dsn, "0009_tenancy")
    docs = _corpus()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for i, d in enumerate(docs):
            tenant = "acme" if i % 7 == 0 else ""
            conn.execute("SELECT dna.index_document('m', 'Doc', %s, %s, NULL, %s, %s, %s)",   # lexical only: fast
                         (d["_id"], d["text"], MODEL, d["title"], tenant))
        conn.execute("SELECT dna.index_document('m', 'Doc', %s, 'acme shadows this abstract: cancer cells', NULL, %s, "
                     "NULL, 'acme')", (docs[1]["_id"], MODEL))
        conn.execute("SELECT dna.delete_document('m', 'Doc', %s)", (docs[2]["_id"],))
        for i in range(5):
            conn.execute("SELECT dna.remember('m', %s, embedding => dna.fake_embed(%s), model_id => %s)",
                         (json.dumps({"summary": f"memory {i} about protein folding"}), f"memory {i}", MODEL))
        before = {(q, t): _top10(conn, q, t) for q in QUERIES for t in ("", "acme")}
        search_before = {(q, t): _search(conn, q, t) for q in QUERIES for t in ("", "acme")}
        counts_before = conn.execute("SELECT (SELECT count(*) FROM dna.dna_instances), (SELECT count(*) FROM dna.dna_versions), "
                                     "(SELECT count(*) FROM dna.dna_search_docs_384)").fetchone()
        assert any(before.values())

    # Up to 0021, the last revision that tokenizes as 0009 did (0022 adds identifier lexemes: scores move).
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert migrate.current(conn) == "0021_holds_in_use"
        _postings_are_exact(conn)
        storage = conn.execute("SELECT dna.bm25_storage('m')").fetchone()[0]
        assert storage["memtable_documents"] == 0 and storage["segments"] >= 1   # sealed by the upgrade
        for (q, t), want in before.items():
            assert _top10(conn, q, t) == want, (q, t)
            assert all(r[0] for r in conn.execute("SELECT exact FROM dna.bm25('m', %s, %s, %s)", (q, MODEL, t)))
        for (q, t), want in search_before.items():
            assert _search(conn, q, t) == want, (q, t)
        assert conn.execute("SELECT (SELECT count(*) FROM dna.dna_instances), (SELECT count(*) FROM dna.dna_versions), "
                            "(SELECT count(*) FROM dna.dna_search_docs_384)").fetchone() == counts_before
        # The new layout keeps working: a write after the upgrade, then compaction.
        conn.execute("SELECT dna.index_document('m', 'Doc', 'new', 'protein folding in cancer cells', NULL, %s)", (MODEL,))
        conn.execute("SELECT dna.bm25_compact()")
        _postings_are_exact(conn)
        after_write = {(q, t): _top10(conn, q, t) for q in QUERIES[:3] for t in ("", "acme")}

    migrate.upgrade(empty_dsn)           # to head: re-tokenized, still exact and sealed, nothing lost
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert migrate.current(conn) == migrate.head()
        _postings_are_exact(conn)
        storage = conn.execute("SELECT dna.bm25_storage('m')").fetchone()[0]
        assert storage["memtable_documents"] == 0 and storage["segments"] >= 1   # sealed again by 0022
        assert conn.execute("SELECT (SELECT count(*) FROM dna.dna_instances), (SELECT count(*) FROM dna.dna_versions), "
                            "(SELECT count(*) FROM dna.dna_search_docs_384)").fetchone()[2] == counts_before[2] + 1

    migrate.downgrade(empty_dsn, "0009_tenancy")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert migrate.current(conn) == "0009_tenancy"
        assert conn.execute("SELECT to_regclass('dna.dna_bm25_stats') IS NOT NULL AND "
                            "to_regclass('dna.dna_bm25_chunks') IS NULL").fetchone()[0]
        for (q, t), want in after_write.items():
            assert _top10(conn, q, t) == want, (q, t)
    migrate.upgrade(empty_dsn)
