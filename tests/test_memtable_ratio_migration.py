"""Revision 0023 topic memtable_ratio upgrades a 0022_first_week database holding data (the seed of
test_citus_migration, plus a one-document-at-a-time scope with a segment and 1,500 documents in its memtable,
more than the new limit) with every answer the same; after the upgrade the next write seals that memtable and
the one after merges the small segments in pairs; the downgrade gives 0022 back (limit 2000, no
dna.bm25_write_merge_cap), answering the same."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_bounded_memtable import MODEL, answers, memtable, segments, write
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"


def sizes(conn, scope: str) -> list[int]:
    return [n for (n,) in conn.execute("SELECT n_docs FROM dna.dna_bm25_segments WHERE scope = %s ORDER BY n_docs",
                                       (scope,))]


def test_upgrade_keeps_the_memtable_then_writes_bound_it_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        assert conn.execute("SELECT dna.bm25_memtable_limit()").fetchone()[0] == 2000
        write(conn, "live", 1, 3500)                              # 0022: sealed at 2,001, then 1,499 more
        assert sizes(conn, "live") == [2001] and memtable(conn, "live") == 1499
        before, live = _answers(conn), answers(conn, "live")
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT dna.bm25_memtable_limit(), dna.bm25_write_merge_cap()").fetchone() == (1000, 16000)
        assert _answers(conn) == before and answers(conn, "live") == live
        assert memtable(conn, "live") == 1499                     # nothing rebuilt by the upgrade
        write(conn, "live", 3501, 3501)                           # the next write seals: 2001 + 1500, two classes
        assert sizes(conn, "live") == [1500, 2001] and memtable(conn, "live") == 0
        write(conn, "live", 3502, 4502)                           # 1001 more: 1500 + 1001 → 2501, then + 2001
        assert sizes(conn, "live") == [4502] and memtable(conn, "live") == 0
        conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 'live' AND name ~ '^d(350[1-9]|35[1-9][0-9]|3[6-9][0-9][0-9]|4[0-9]{3})$'")
        assert answers(conn, "live") == live                      # the same documents: the same answers
        conn.execute("SELECT dna.bm25_compact('live', full_merge => true)")
        assert answers(conn, "live") == live
        write(conn, "grow", 1, 1500)
        assert memtable(conn, "grow") == 499 and sizes(conn, "grow") == [1001]
    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and answers(conn, "live") == live
        assert conn.execute("SELECT dna.bm25_memtable_limit()").fetchone()[0] == 2000
        assert conn.execute("SELECT to_regproc('dna.bm25_write_merge_cap')").fetchone()[0] is None
        write(conn, "grow", 1501, 2500)                           # 0022 again: 499 + 1000 stay in the memtable
        assert memtable(conn, "grow") == 1499 and sizes(conn, "grow") == [1001]
