"""Revision 0020_real_use upgrades a 0019_where_users_run database holding data (the seed of
test_citus_migration: documents whole and as passages, memories restated and forgotten, a workspace
overlay, a personal memory; plus two memories whose claims contradict) with every answer the same,
and the downgrade gives 0019 back, answering the same. Topic stale_claims: after the upgrade the older
of the two contradicting memories is flagged in recall (contradicted_by), and the flag goes with the
downgrade."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

CLAIMS = [("prod16", "prod is PostgreSQL 16", "postgres16", "2026-03-01T00:00:00Z"),
          ("prod17", "prod was upgraded to PostgreSQL 17", "postgres17", "2026-09-01T00:00:00Z")]
RECALL = ("SELECT dna.recall('claims', 'which postgres is prod', k => 5, now => '2030-01-01T00:00:00Z', "
          "reconsolidate => false) -> 'hits'")


def _seed_claims(conn):
    for name, summary, obj, now in CLAIMS:
        conn.execute("SELECT dna.remember('claims', %s, name => %s, now => %s)",
                     (Jsonb({"summary": summary, "claims": [{"subject": "User/me", "predicate": "prod_db", "object": obj}]}),
                      name, now))


def test_upgrade_from_0019_answers_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0019_where_users_run")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        _seed_claims(conn)
        before = _answers(conn)
        hits = conn.execute(RECALL).fetchone()[0]
        assert not any("contradicted_by" in h for h in hits)
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        after = {h["name"]: h for h in conn.execute(RECALL).fetchone()[0]}
        assert [r["name"] for r in after["prod16"]["contradicted_by"]] == ["prod17"]
        assert "contradicted_by" not in after["prod17"]
        assert [h["name"] for h in conn.execute(RECALL).fetchone()[0]] == [h["name"] for h in hits]
    migrate.downgrade(empty_dsn, "0019_where_users_run")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert conn.execute(RECALL).fetchone()[0] == hits
        assert conn.execute("SELECT to_regproc('dna.flag_contradicted')").fetchone()[0] is None
