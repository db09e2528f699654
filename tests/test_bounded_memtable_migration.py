"""Revision 0021 topic bounded_memtable upgrades a 0020_real_use database holding data (the seed of
test_citus_migration, plus a scope whose memtable 0020 let grow past the limit) with every answer the same;
after the upgrade the next write to that scope seals its memtable and a bulk statement leaves its tables
analyzed; the downgrade gives 0020 back (no dna.bm25_memtable_limit, the memtable grows again), answering
the same."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_bounded_memtable import LIMIT, MODEL, answers, memtable, segments, write
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

ADDED = ("bm25_memtable_limit", "bm25_bound_memtable", "bm25_keep_statistics")


def test_upgrade_bounds_the_memtable_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        write(conn, "grown", 1, LIMIT + 100)                      # 0020: all of it in the memtable
        assert memtable(conn, "grown") == LIMIT + 100 and segments(conn, "grown") == 0
        before, grown = _answers(conn), answers(conn, "grown")
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and answers(conn, "grown") == grown
        assert memtable(conn, "grown") == LIMIT + 100             # nothing rebuilt by the upgrade
        for name in ADDED:
            assert conn.execute("SELECT to_regproc(%s)", (f"dna.{name}",)).fetchone()[0] is not None
        write(conn, "grown", LIMIT + 101, LIMIT + 101)            # the next write seals
        assert memtable(conn, "grown") == 0 and segments(conn, "grown") == 1
        after = answers(conn, "grown")
        conn.execute("SELECT dna.delete_document('grown', 'Doc', %s, model_id => %s)", (f"d{LIMIT + 101}", MODEL))
        assert answers(conn, "grown") == grown                    # the same documents: the same answers
        conn.execute("SELECT dna.bm25_compact('grown', full_merge => true)")
        assert answers(conn, "grown") == grown
        assert after[0][0] == grown[0][0] + 1
    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and answers(conn, "grown") == grown
        for name in ADDED:
            assert conn.execute("SELECT to_regproc(%s)", (f"dna.{name}",)).fetchone()[0] is None
        write(conn, "again", 1, LIMIT + 1)                        # 0020 again: no seal on write
        assert memtable(conn, "again") == LIMIT + 1
