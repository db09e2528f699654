"""Revision 0021_holds_in_use, topic memory_reads: a 0020_real_use database holding data (the seed of
test_citus_migration) upgrades with every answer and every version the same and recorded_by NULL for the
versions written before; after it dna.get_memory and dna.memory_history read them and new versions name
their writer; the downgrade gives 0020's dna_versions back (no recorded_by, no read functions), answering
the same."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

VERSIONS = ("SELECT scope, kind, name, tenant, version, op, spec FROM dna.dna_versions "
            "ORDER BY scope, kind, name, tenant, version")


def test_upgrade_from_0020_reads_memories_by_name_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.remember('reads', %s, name => 'old')", (Jsonb({"summary": "written at 0020"}),))
        before, versions = _answers(conn), conn.execute(VERSIONS).fetchall()
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and conn.execute(VERSIONS).fetchall() == versions
        old = conn.execute("SELECT dna.memory_history('reads', 'old')").fetchone()[0]["versions"]
        assert [(v["summary"], v["recorded_by"]) for v in old] == [("written at 0020", None)]
        conn.execute("SELECT dna.forget('reads', 'old')")
        me = conn.execute("SELECT current_user").fetchone()[0]
        assert conn.execute("SELECT dna.get_memory('reads', 'old') ->> 'last_recorded_by'").fetchone()[0] == me
    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'dna' "
                            "AND table_name = 'dna_versions' AND column_name = 'recorded_by'").fetchone()[0] == 0
        assert conn.execute("SELECT to_regproc('dna.get_memory'), to_regproc('dna.memory_history'), "
                            "to_regproc('dna.memory_not_found')").fetchone() == (None, None, None)
        conn.execute("SELECT dna.revive('reads', 'old')")                    # 0020's write path still writes
        assert _answers(conn) == before
