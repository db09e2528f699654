"""Revision 0021_holds_in_use, topic reindex_documents: a 0020_real_use database holding data (the seed of
test_citus_migration) upgrades with every answer the same; after it `dna.reconcile(scope, 'reembed',
model_id)` also lists the documents a model lacks (`documents_to_embed`), and the downgrade gives 0020's
reconcile back (no such key, dna.reembed_documents gone), answering the same."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

REEMBED = "SELECT dna.reconcile('rd', 'reembed', 'other-model')"


def _seed_documents(conn):
    conn.execute("SELECT dna.index_document('rd', 'Doc', 'a.md', 'caching a whole view', "
                 "dna.fake_embed('caching a whole view'), 'dna-fake-hash-v1', 'A')")
    conn.execute("SELECT dna.register_model('other-model', 384)")


def test_upgrade_from_0020_lists_documents_to_reembed_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        _seed_documents(conn)
        before = _answers(conn)
        old = conn.execute(REEMBED).fetchone()[0]
        assert "documents_to_embed" not in old
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        new = conn.execute(REEMBED).fetchone()[0]
        assert {k: v for k, v in new.items() if k != "documents_to_embed"} == old
        assert [(d["name"], [p["body"] for p in d["passages"]]) for d in new["documents_to_embed"]] == [
            ("a.md", ["caching a whole view"])]
    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert conn.execute(REEMBED).fetchone()[0] == old
        assert conn.execute("SELECT to_regproc('dna.reembed_documents')").fetchone()[0] is None
