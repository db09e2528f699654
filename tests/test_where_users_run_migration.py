"""Revision 0019_where_users_run upgrades a 0018_citus_ready database holding data (the seed of
test_citus_migration: documents whole and as passages, memories restated and forgotten, a workspace
overlay, a personal memory) with every answer the same, and the downgrade gives 0018 back, answering
the same. Its topics: versions (dna.bm25_build_segment's presorted-aggregate setting only where it
exists) and jit (the verbs' entry points run with jit off)."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

NO_JIT = ("SELECT p.proname FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace "
          "AND 'jit=off' = ANY (p.proconfig) ORDER BY 1")
ENTRY_POINTS = {"search", "bm25", "bm25_explain", "bm25_lane", "bm25_compact", "bm25_sync", "index_document",
                "index_documents", "index_staged", "remember", "recall", "forget", "revive", "list_memories",
                "consolidate", "redact", "verify_integrity", "reconcile", "take_receipt", "replay",
                "remember_many", "remember_conversation", "conversation_plan", "set_document_metadata"}


def test_upgrade_from_0018_answers_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        assert conn.execute(NO_JIT).fetchall() == []
        # (no compaction here: at 0018 it fails on PostgreSQL 15, R1, which 0019 fixes)
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert ENTRY_POINTS <= {r[0] for r in conn.execute(NO_JIT)}
        # A JIT-enabled session (every plan past the threshold) still runs the verbs without JIT.
        conn.execute("SET jit = on")
        conn.execute("SET jit_above_cost = 0")
        assert _answers(conn) == before
        conn.execute("SELECT dna.bm25_compact('mem')")             # compacts on 15 too (R1)
        assert _answers(conn) == before
        conn.execute("SELECT dna.bm25_compact('mem', full_merge => true)")
        assert _answers(conn) == before
    migrate.downgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert conn.execute(NO_JIT).fetchall() == []
