"""Revision 0021_holds_in_use, topic index_digests: a 0020_real_use database holding data (the seed of
test_citus_migration, and recorded document sources) upgrades with every answer and every source the
same and an empty digest per source; after it, recorded digests make dna.unchanged_sources answer; the
downgrade gives 0020's dna_document_sources back (no digests column, no digest functions), answering
the same."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

SOURCES = "SELECT kind, name, tenant, source FROM dna.dna_document_sources ORDER BY 1, 2, 3"


def test_upgrade_from_0020_adds_digests_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.index_document('src', 'Doc', 'a.md', 'alpha', dna.fake_embed('alpha'), 'dna-fake-hash-v1')")
        conn.execute("SELECT dna.record_document_sources('src', ARRAY['Doc'], ARRAY['a.md'], ARRAY[''], ARRAY['/x/a.md'])")
        before, sources = _answers(conn), conn.execute(SOURCES).fetchall()
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and conn.execute(SOURCES).fetchall() == sources
        assert conn.execute("SELECT digests FROM dna.dna_document_sources").fetchall() == [({},)]
        conn.execute("SELECT dna.record_source_digests('src', 'dna-fake-hash-v1', ARRAY['Doc'], ARRAY['a.md'], "
                     "ARRAY[''], ARRAY['/x/a.md'], ARRAY['d1'])")
        assert conn.execute("SELECT ord, passages FROM dna.unchanged_sources('src', 'dna-fake-hash-v1', ARRAY['Doc'], "
                            "ARRAY['a.md'], ARRAY[''], ARRAY['d1'])").fetchall() == [(1, 1)]
    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and conn.execute(SOURCES).fetchall() == sources
        assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'dna' "
                            "AND table_name = 'dna_document_sources' AND column_name = 'digests'").fetchone()[0] == 0
        assert conn.execute("SELECT to_regproc('dna.unchanged_sources'), to_regproc('dna.record_source_digests')"
                            ).fetchone() == (None, None)
