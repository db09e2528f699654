"""Revision 0024_at_scale (topics scope_model, write_statistics): a 0023_still_open database holding
documents of two models and memories upgrades to head and back with the same default model, the same
dna.search and dna.recall answers without a model_id, and its search table's statistics kept by the write
path at head only (0023's dna.bm25_sync leaves them to autovacuum)."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

FAKE = "dna-fake-hash-v1"
WIDE_SEARCH = "SELECT name FROM dna.search('docs', 'river stones', array_fill(0.5, ARRAY[768])::vector, k => 5)"


def _state(conn):
    model = [conn.execute("SELECT dna.scope_model(%s, %s)", (s, d)).fetchone()[0]
             for s in ("docs", "mem", "none") for d in (None, 384)]
    search = [tuple(r) for r in conn.execute("SELECT name, score FROM dna.search('docs', 'river stones', k => 5)")]
    recall = conn.execute("SELECT dna.recall('mem', 'river', k => 3, reconsolidate => false)").fetchone()[0]
    return model, search, recall["model_id"], [h["name"] for h in recall["hits"]]


def _analyzes(conn, n):
    """Write n documents in one statement into a table analyzed empty, autovacuum off: was it analyzed?"""
    conn.execute("ALTER TABLE dna.dna_search_docs_1024 SET (autovacuum_enabled = off)")
    conn.execute("ANALYZE dna.dna_search_docs_1024")
    conn.execute("SELECT count(*) FROM dna.index_documents('wide', array_fill('Doc'::text, ARRAY[%s]), %s, %s, NULL, "
                 "'lex-1024')", (n, [f"w{i}" for i in range(n)], [f"wide body {i}" for i in range(n)]))
    return conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'dna.dna_search_docs_1024'::regclass").fetchone()[0] > 0


def test_upgrade_from_0023_keeps_the_default_model_and_answers_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0023_still_open")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.register_model('other-384', 384), dna.register_model('wide-768', 768), "
                     "dna.register_model('lex-1024', 1024)")
        for i in range(6):
            conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                         (f"f{i}", f"river stones number {i}", f"f{i}", FAKE))
        for i in range(3):
            conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, NULL, 'other-384')",
                         (f"o{i}", f"river stones other {i}"))
            conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, NULL, 'wide-768')",
                         (f"w{i}", f"river stones wide {i}"))
        for i, text in enumerate(["river stones are smooth", "mountain air is thin", "river fish swim"]):
            conn.execute("SELECT dna.remember('mem', %s, name => %s, embedding => dna.fake_embed(%s))",
                         (Jsonb({"summary": text}), f"m{i}", text))
        before = _state(conn)
        # 0023's dna.scope_model (LANGUAGE sql) compared m.dims with itself: its parameter dims was shadowed
        # by the column, so a 768-dim query of this scope got the 384 model and dna.search refused it
        assert conn.execute("SELECT dna.scope_model('docs', 768)").fetchone()[0] == FAKE
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="768 dimensions"):
            conn.execute(WIDE_SEARCH)
        assert not _analyzes(conn, 400)
        conn.execute("SELECT dna.delete_document('wide', 'Doc', n) FROM unnest(%s::text[]) AS n",
                     ([f"w{i}" for i in range(400)],))
    assert before[0] == [FAKE, FAKE, FAKE, FAKE, None, None]
    assert before[2] == FAKE and len(before[1]) == 5
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == before
        assert conn.execute("SELECT dna.scope_model('docs', 768)").fetchone()[0] == "wide-768"
        assert {r[0] for r in conn.execute(WIDE_SEARCH)} == {"w0", "w1", "w2"}
        assert _analyzes(conn, 400)
        conn.execute("SELECT dna.delete_document('wide', 'Doc', n) FROM unnest(%s::text[]) AS n",
                     ([f"w{i}" for i in range(400)],))
    migrate.downgrade(empty_dsn, "0023_still_open")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == before
        assert not _analyzes(conn, 400)
