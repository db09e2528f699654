"""Revision 0022 topic identifiers upgrades a 0021_holds_in_use database holding documents (some sealed
into BM25 segments, some in the memtable) and memories whose texts name identifiers: after the upgrade
every stored row is tokenized as a row written at head is (the same lexical scores as a fresh database
holding the same texts), BM25's statistics agree with the tsvectors (dna.verify_integrity full, N and
total length recomputed), the query "on_commit" puts the transactions page above the page that repeats "commit", and the memory history's
tsvector holds the identifier; the downgrade gives 0021's tokenization back (the same scores as before the
upgrade, no identifier lexeme left, the new functions gone)."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_identifiers import DOCS, MODEL, lexical

ADDED = ("identifier_tokens", "identifier_lexemes", "identifier_tsvector", "identifier_weight", "identifier_headline")
QUERIES = ("on_commit", "transaction.atomic", "QuerySet", "commit", "atomic transaction", "set")
MEMORY = "Call transaction.on_commit so the e-mail goes out after the QuerySet is saved."


def _seed(conn):
    conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    names = list(DOCS)
    for name in names[:4]:
        conn.execute("SELECT dna.index_document('ids', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (name, DOCS[name], DOCS[name], MODEL))
    conn.execute("SELECT dna.bm25_compact('ids', full_merge => true)")         # these four in a segment
    for name in names[4:]:                                                    # these in the memtable
        conn.execute("SELECT dna.index_document('ids', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (name, DOCS[name], DOCS[name], MODEL))
    conn.execute("SELECT dna.remember('ids', %s, name => 'mail')", (Jsonb({"summary": MEMORY}),))


def _scores(conn):
    return {q: conn.execute(
        "SELECT name, lexical_score FROM dna.search('ids', %s, dna.fake_embed(%s), %s, k => 10) "
        "WHERE lexical_score IS NOT NULL ORDER BY lexical_score DESC, name", (q, q, MODEL)).fetchall()
        for q in QUERIES}


def _consistent(conn):
    report = conn.execute("SELECT dna.verify_integrity('ids', 'full')").fetchone()[0]
    assert report["ok"], report
    n, total = conn.execute("SELECT n_docs, total_len FROM dna.bm25_stats('ids', %s, '')", (MODEL,)).fetchone()
    assert (n, total) == conn.execute(
        "SELECT count(*), sum(dna.bm25_doc_length(tsv)) FROM dna.dna_search_docs_384 WHERE scope = 'ids'").fetchone()


def _history_lexemes(conn):
    return set(conn.execute("SELECT tsvector_to_array(text_tsv) FROM dna.dna_versions "
                            "WHERE scope = 'ids' AND name = 'mail'").fetchone()[0])


def test_upgrade_tokenizes_stored_rows_again_and_downgrades(empty_dsn, dna_dsn):
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _scores(conn)
        ranked = lexical(conn, "on_commit", k=10)                              # 0021: "on_commit" is "commit"
        assert ranked.index("transactions") > ranked.index("commits")
        assert "on_commit" not in _history_lexemes(conn)
        _consistent(conn)
    with psycopg.connect(dna_dsn, autocommit=True) as fresh:                  # the same texts written at head
        _seed(fresh)
        written_at_head = _scores(fresh)
        head_history = _history_lexemes(fresh)
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _scores(conn) == written_at_head
        ranked = lexical(conn, "on_commit", k=10)
        assert ranked.index("transactions") < ranked.index("commits")
        assert _history_lexemes(conn) == head_history and {"on_commit", "transaction.on_commit"} <= head_history
        _consistent(conn)
        for name in ADDED:
            assert conn.execute("SELECT to_regproc(%s)", (f"dna.{name}",)).fetchone()[0] is not None
        conn.execute("SELECT dna.bm25_compact('ids', full_merge => true)")    # a merge keeps the answers
        assert _scores(conn) == written_at_head
        _consistent(conn)
    migrate.downgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _scores(conn) == before
        assert "on_commit" not in _history_lexemes(conn)
        assert conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 AS d, unnest(d.tsv) AS u "
                            "WHERE u.lexeme LIKE '%\\_%'").fetchone()[0] == 0
        _consistent(conn)
        for name in ADDED:
            assert conn.execute("SELECT to_regproc(%s)", (f"dna.{name}",)).fetchone()[0] is None
