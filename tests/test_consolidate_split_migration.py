"""Revision 0017 (topic layout) splits sql/consolidate.sql: claims and contradictions move to
sql/memory_contradictions.sql. A 0016 database holding memories with contradicting claims
consolidates (dry run) to the same report after `upgrade head`, with the same functions, and again
after the downgrade back to 0016."""
from __future__ import annotations

import json

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

NOW = "2026-06-01T12:00:00Z"
FUNCTIONS = ("memory_claims", "claims_contradict", "elect_survivor", "contradiction_report", "merge_candidates",
             "consolidate")


def _seed(conn):
    memories = [("plan-a", "the launch plan is march", {"subject": "Workspace/acme", "predicate": "plan", "object": "march"}),
                ("plan-b", "the launch plan is april", {"subject": "Workspace/acme", "predicate": "plan", "object": "april"}),
                ("cat", "the office cat is called miso", None),
                ("cat-2", "the office cat is called miso too", None)]
    for name, text, claim in memories:
        spec = {"summary": text, **({"claims": [claim]} if claim else {})}
        conn.execute("SELECT dna.remember('team', %s, name => %s, now => %s)", (Jsonb(spec), name, NOW))


def _report(conn):
    r = conn.execute("SELECT dna.consolidate('team', 'Engram', '', 0.15, false, true, 0.5, %s)", (NOW,)).fetchone()[0]
    return json.loads(json.dumps(r))


def _without_accept(report):
    """The report as 0016 gave it: from 0020 (topic stale_claims) each contradiction's proposal also says how
    to accept it (proposal.accept), which this check leaves aside."""
    out = json.loads(json.dumps(report))
    for c in out["contradictions"]:
        assert c["proposal"].pop("accept")["sql"], c
    return out


def _functions(conn):
    return sorted(r[0] for r in conn.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace "
        "AND p.proname = ANY (%s)", (list(FUNCTIONS),)))


def test_split_consolidates_the_same_across_upgrade_and_downgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before, functions = _report(conn), _functions(conn)
        assert before["contradictions"] and before["merge_candidates"]   # the seed exercises both halves
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _without_accept(_report(conn)) == before
        assert _functions(conn) == functions
    migrate.downgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _report(conn) == before
        assert _functions(conn) == functions
