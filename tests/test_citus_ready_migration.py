"""Revision 0018 (topic distribute) upgrades a 0017_recall_past_ingest database holding documents and
memories: nothing stored changes and every answer is the same; sql/distribute.sql's functions arrive
(dna.distribution reports a single node, dna.clear_width works on it, dna.distribute refuses
without Citus). The downgrade removes exactly them, one statement per op.execute, answering the same."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
NOW = "2026-06-01T12:00:00Z"
DISTRIBUTE = ("citus_version", "require_citus", "distribution_plan", "delegated_verbs", "map_table_ddl",
              "sync_tenancy_maps", "citus_placement", "distribute", "distribution", "clear_width")


def _seed(conn):
    for i in range(12):
        body = f"rank fusion note {i} about lexical and dense lanes"
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (f"d{i}", body, body, MODEL))
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays"]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                     (Jsonb({"summary": text}), f"m{i}", NOW, text))


def _answers(conn):
    return {
        "search": conn.execute("SELECT name, round(score::numeric, 9) FROM dna.search('docs', 'rank fusion', "
                               "dna.fake_embed('rank fusion'), %s)", (MODEL,)).fetchall(),
        "recall": [(h["name"], round(h["score"], 9)) for h in conn.execute(
            "SELECT dna.recall('team', 'office lisbon', now => %s, reconsolidate => false) -> 'hits'",
            (NOW,)).fetchone()[0]],
        "rows": conn.execute("SELECT (SELECT count(*) FROM dna.dna_instances), (SELECT count(*) FROM dna.dna_versions), "
                             "(SELECT count(*) FROM dna.dna_search_docs_384), (SELECT count(*) FROM dna.dna_bm25_docs)"
                             ).fetchone(),
    }


def _functions(conn):
    return {n for (n,) in conn.execute("SELECT proname FROM pg_proc WHERE pronamespace = 'dna'::regnamespace "
                                       "AND proname = ANY (%s)", (list(DISTRIBUTE),))}


def test_upgrade_from_0017_with_data_and_downgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0017_recall_past_ingest")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        assert before["search"] and before["recall"]
        assert _functions(conn) == set()
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _functions(conn) == set(DISTRIBUTE)
        state = conn.execute("SELECT dna.distribution()").fetchone()[0]
        assert state["citus_version"] is None and state["distributed"] is False
        assert conn.execute("SELECT placement FROM dna.distribution_plan() WHERE tbl = 'dna.dna_instances'::regclass"
                            ).fetchone() == ("distributed",)
        try:
            conn.execute("SELECT dna.distribute()")
            raise AssertionError("dna.distribute ran without Citus")
        except psycopg.errors.FeatureNotSupported as err:
            assert "Citus is not installed" in str(err)
        assert _answers(conn) == before
    migrate.downgrade(empty_dsn, "0017_recall_past_ingest")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _functions(conn) == set()
        assert _answers(conn) == before
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _functions(conn) == set(DISTRIBUTE)
        # dna.clear_width on the upgraded data: the width holds memories, so it refuses, changing nothing
        report = None
        try:
            conn.execute("SELECT dna.clear_width(384)")
        except psycopg.errors.RestrictViolation as err:
            report = str(err)
        assert report and "memories" in report
        assert _answers(conn) == before
