"""Revision 0015_governed_history upgrades a database holding memories, versions and documents at
0014_doors (the previous head): its answers and records are intact; its downgrade gives 0014's
functions back, with the data."""
from __future__ import annotations

import json

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

NOW = "2026-06-01T12:00:00Z"
LATER = "2026-06-02T12:00:00Z"


def _functions(conn):
    """{signature: (security definer, settings)} of every dna function."""
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT p.oid::regprocedure::text, p.prosecdef, p.proconfig FROM pg_proc AS p "
        "WHERE p.pronamespace = 'dna'::regnamespace")}


def _triggers(conn):
    return {r[0] for r in conn.execute(
        "SELECT c.relname || '.' || t.tgname FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace = 'dna'::regnamespace AND NOT t.tgisinternal")}


def _seed(conn):
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays", "the cat is called miso",
                              "coffee at nine in the kitchen"]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, now => %s)",
                     (Jsonb({"summary": text, "tags": ["t%d" % (i % 2)]}), f"m{i}", NOW))
    conn.execute("SELECT dna.remember('team', %s, name => 'm0', now => %s)",
                 (Jsonb({"summary": "the office moved to porto"}), LATER))
    conn.execute("SELECT dna.forget('team', 'm1', now => %s)", (LATER,))
    conn.execute("SELECT dna.remember('team', %s, kind => 'Research', name => 'r1', now => %s)",
                 (Jsonb({"title": "a study of porto offices", "body": "rents rose"}), NOW))
    conn.execute("SELECT dna.index_documents('docs', ARRAY['Doc','Doc'], ARRAY['a','b'], "
                 "ARRAY['alpha beta gamma', 'beta delta'], NULL, 'dna-fake-hash-v1')")


def _answers(conn, scores=True):
    out = {}
    for q in ("office", "porto", "fridays", "miso coffee"):
        r = conn.execute("SELECT dna.recall('team', %s, reconsolidate => false, now => %s)", (q, LATER)).fetchone()[0]
        out["recall " + q] = [(h["name"], round(h["score"], 9)) if scores else h["name"] for h in r["hits"]]
    listed = conn.execute("SELECT dna.list_memories('team', include_invalid => true, now => %s)", (LATER,)).fetchone()[0]
    out["list"] = [(m["name"], m["valid"], m["summary"] if "summary" in m else m.get("title")) for m in listed["memories"]]
    out["search"] = [tuple(r) for r in conn.execute(
        "SELECT name, rank_lexical FROM dna.search('docs', 'beta', NULL, 'dna-fake-hash-v1', k => 5, valid_time => NULL)")]
    out["versions"] = [tuple(r) for r in conn.execute(
        "SELECT kind, name, version, op, spec::text FROM dna.dna_versions ORDER BY kind, name, version")]
    out["instances"] = [tuple(r) for r in conn.execute(
        "SELECT kind, name, spec::text, valid_at::text FROM dna.dna_instances ORDER BY kind, name")]
    return json.loads(json.dumps(out))


def test_upgrade_from_0014_keeps_answers_and_records_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0014_doors")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        functions, triggers = _functions(conn), _triggers(conn)
    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert functions.keys() <= _functions(conn).keys()
    migrate.downgrade(empty_dsn, "0014_doors")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _functions(conn) == functions
        assert _triggers(conn) == triggers
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # 0016 re-scores recall (issue 15: the hybrid score times the memory factors): the same hits
        assert _answers(conn, scores=False) == {key: [h[0] for h in hits] if key.startswith("recall ") else hits
                                               for key, hits in before.items()}


POISON = ['{"summary": "poison one about porto", "confidence_score": 1e400}',
          '{"summary": "poison two about porto", "surface_count": 1e30}',
          '{"summary": "poison three about porto", "claims": [{"subject": "office", "predicate": "city", "object": 1e-400}]}']


def _reads(conn):
    conn.execute("SELECT dna.list_memories('team', include_invalid => true)").fetchone()
    conn.execute("SELECT dna.consolidate('team')").fetchone()
    return conn.execute("SELECT dna.recall('team', 'porto', k => 10)").fetchone()[0]


def test_values_stored_before_the_door_checked_them_no_longer_break_reads(empty_dsn):
    migrate.upgrade(empty_dsn, "0014_doors")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.remember('team', '{\"summary\": \"the healthy memory about porto\"}', name => 'healthy')")
        for i, spec in enumerate(POISON):
            conn.execute("SELECT dna.remember('team', %s::jsonb, name => %s)", (spec, f"p{i}"))   # accepted at 0014
        try:
            _reads(conn)
            broken = False
        except psycopg.Error as error:
            broken = error.sqlstate == "22003"
        assert broken                                      # the bug the issue measured
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        recall = _reads(conn)
        assert "healthy" in {h["name"] for h in recall["hits"]} and "reconsolidation_errors" not in recall
