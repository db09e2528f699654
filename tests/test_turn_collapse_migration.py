"""Revision 0023 topic turn_collapse upgrades a 0022_first_week database holding a conversation and
documents: 0022 collapses the turn whose text the next turn's indexed text holds; after the upgrade search
and recall return both turns, and the documents' answers are the same; the downgrade gives 0022's answer
back."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import _answers, _seed
from test_turn_collapse import LONG, SESSIONS

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

SEARCH = ("SELECT coalesce(jsonb_agg(s.name ORDER BY s.name), '[]') FROM dna.search('tc', "
          "'support group stories transition moving', k => 10, kinds => '{Turn}') AS s")
RECALL = ("SELECT coalesce(jsonb_agg(h ->> 'name' ORDER BY h ->> 'name'), '[]') FROM jsonb_array_elements(dna.recall('tc', "
          "'support group stories transition moving', k => 10, kinds => '{Turn}', reconsolidate => false) -> 'hits') AS h")


def _turns(conn) -> tuple[list, list]:
    return conn.execute(SEARCH).fetchone()[0], conn.execute(RECALL).fetchone()[0]


def test_upgrade_keeps_each_turn_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("SELECT dna.remember_conversation('tc', 'c1', %s, sessions => %s)", (Jsonb(LONG), Jsonb(SESSIONS)))
        before, (search, recall) = _answers(conn), _turns(conn)
        assert len(search) == 2 and len(recall) == 2                  # 0022: one turn collapsed into the next
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        search_now, recall_now = _turns(conn)
        assert len(search_now) == 3 and set(search) < set(search_now) and recall_now == search_now
    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before and _turns(conn) == (search, recall)
