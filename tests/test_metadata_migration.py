"""Revision 0019 (topic metadata) upgrades a 0018_citus_ready database holding documents and memories:
every answer without a filter is the same, no version is appended, the memories stored before get their
metadata (tags, area, created_at, valid window) on their record and search rows, so a filter finds them;
the downgrade removes the columns and signatures and answers the same."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
NOW = "2026-06-01T12:00:00Z"
LATER = "2026-06-05T00:00:00Z"   # m1 is forgotten by then


def _seed(conn):
    for i in range(12):
        body = f"rank fusion note {i} about lexical and dense lanes"
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (f"d{i}", body, body, MODEL))
    for i, (text, tags) in enumerate([("the office is in lisbon", ["place"]), ("deploys happen on fridays", ["ops"]),
                                      ("the office moved to porto", ["place", "news"])]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                     (Jsonb({"summary": text, "tags": tags, "area": "ops/sites"}), f"m{i}", NOW, text))
    conn.execute("SELECT dna.forget('team', 'm1', now => '2026-06-02T00:00:00Z')")


def _answers(conn):
    return {
        "search": conn.execute("SELECT name, round(score::numeric, 9) FROM dna.search('docs', 'rank fusion', "
                               "dna.fake_embed('rank fusion'), %s)", (MODEL,)).fetchall(),
        "recall": [(h["name"], round(h["score"], 9)) for h in conn.execute(
            "SELECT dna.recall('team', 'office', dna.fake_embed('office'), now => %s, reconsolidate => false) -> 'hits'",
            (LATER,)).fetchone()[0]],
        "list": [m["name"] for m in conn.execute("SELECT dna.list_memories('team', include_invalid => true) -> 'memories'"
                                                 ).fetchone()[0]],
        "rows": conn.execute("SELECT (SELECT count(*) FROM dna.dna_instances), (SELECT count(*) FROM dna.dna_versions), "
                             "(SELECT count(*) FROM dna.dna_search_docs_384), (SELECT count(*) FROM dna.dna_bm25_docs)"
                             ).fetchone(),
    }


def _columns(conn):
    return conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'dna' "
                        "AND column_name = 'metadata'").fetchone()[0]


def test_upgrade_from_0018_with_data_derives_memory_metadata_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        assert before["search"] and len(before["recall"]) == 2 and _columns(conn) == 0
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        meta = dict(conn.execute("SELECT name, metadata FROM dna.dna_instances WHERE scope = 'team'").fetchall())
        assert meta["m2"] == {"tags": ["place", "news"], "area": "ops/sites", "memory_type": "semantic",
                              "created_at": "2026-06-01T12:00:00+00:00", "valid_from": "2026-06-01T12:00:00+00:00"}
        assert meta["m1"]["valid_to"] == "2026-06-02T00:00:00+00:00"
        rows = dict(conn.execute("SELECT name, metadata FROM dna.dna_search_docs_384 WHERE scope = 'team'").fetchall())
        assert rows == meta
        assert conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = 'docs' AND metadata = '{}'"
                            ).fetchone()[0] == 12
        hits = conn.execute("SELECT dna.recall('team', 'office', dna.fake_embed('office'), now => %s, "
                            "reconsolidate => false, filter => '{\"tags\": {\"contains\": \"news\"}}') -> 'hits'",
                            (LATER,)).fetchone()[0]
        assert [h["name"] for h in hits] == ["m2"]
        # 0019 indexes what filters read
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = 'dna' AND indexname LIKE '%metadata'"
                            ).fetchone()[0] == 1 + conn.execute("SELECT count(*) FROM dna.search_widths()").fetchone()[0]
    migrate.downgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _columns(conn) == 0
        assert _answers(conn) == before
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'dna'::regnamespace "
                            "AND proname IN ('filter_sql', 'memory_metadata', 'set_document_metadata')").fetchone()[0] == 0
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert conn.execute("SELECT metadata -> 'tags' FROM dna.dna_instances WHERE name = 'm0'").fetchone()[0] == ["place"]
