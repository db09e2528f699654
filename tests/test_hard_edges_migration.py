"""Topic hard_edges of revision 0021_holds_in_use: a 0020_real_use database holding data (the seed of
test_citus_migration, plus 300 documents whose scores tie) answers the same after the upgrade, and its
pages of any k compose over the tied documents on the non-exact route (test_hard_edges); the downgrade
gives 0020's dna.search back, answering the same."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_citus_migration import _answers, _seed
from test_hard_edges import MODEL, TEXT, _check_pages_compose

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

DEFINITION = ("SELECT string_agg(pg_get_functiondef(p.oid), '') FROM pg_proc AS p "
              "WHERE p.proname = 'search' AND p.pronamespace = 'dna'::regnamespace")


def _seed_tied(conn):
    for i in range(300):
        conn.execute("SELECT dna.index_document('tied', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (f"doc-{(i * 7) % 300:03d}", TEXT, TEXT, MODEL))


def test_upgrade_from_0020_composes_pages_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        _seed_tied(conn)
        before = _answers(conn)
        assert "WITH TIES" not in conn.execute(DEFINITION).fetchone()[0]
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert "WITH TIES" in conn.execute(DEFINITION).fetchone()[0]
        _check_pages_compose(conn, False)
        _check_pages_compose(conn, None)
    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert "WITH TIES" not in conn.execute(DEFINITION).fetchone()[0]
