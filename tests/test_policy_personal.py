"""Revision 0025, topic policy_personal (issue 26 item 4): over a personal partition the application role's
plans are the superuser's.

dna.list_memories' tenant overlay (a base row is listed unless the caller's partition holds the same memory)
is a NOT EXISTS the planner answers either by one probe of the key index per base row or by hashing the
partition's keys once, whichever its estimate of the scan's rows makes cheaper. Under row-level security a
role may not use the statistics of a column through an operator that is not leakproof (valid_at @> now): with
the validity test in the scan its estimate fell to a few rows where the superuser's was the scope, and the role
probed per base row (3,000 index searches for 3,000 personal memories, bench/policy_cost.py) where the
superuser hashed. The validity test now applies above the scan, so both estimate it from the same leakproof
conditions and both hash.

A real LOGIN role (dna.grant_app_role, row-level security FORCEd) mapped to the superuser's identity; plans
read with auto_explain (nested statements) as the role. Plain SQL through psycopg."""
from __future__ import annotations

import os
import re
from datetime import datetime, timezone

import psycopg
import pytest

from citus_plans import Plans, _walk
from login_role import mapped_login_role

S = "policy-personal"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
ROLE = f"dna_pp_app_{os.getpid()}"
PASSWORD = "dna-policy-personal-test"
N = 150                                                  # base memories, and as many personal ones
REMEMBER = ("SELECT count(dna.remember(%s, jsonb_build_object('summary', 'alpha river note ' || g), "
            "name => %s || g, personal => %s, embedding => dna.fake_embed('alpha river note ' || g), now => %s)) "
            "FROM generate_series(1, %s) AS g")


@pytest.fixture
def app(pg_server, dna_dsn, sql):
    """A LOGIN role with the application grants, mapped (like the superuser) to identity 'pp-oid'."""
    with mapped_login_role(pg_server, dna_dsn, sql, ROLE, PASSWORD, "pp-oid") as conn:
        yield conn


def seed(sql, app):
    """N base memories (the superuser's), N personal ones (the role's; one shadows base memory b1), analyzed."""
    sql.execute(REMEMBER, (S, "b", False, NOW, N))
    app.execute(REMEMBER, (S, "p", True, NOW, N))
    app.execute("SELECT dna.remember(%s, '{\"summary\": \"my own b1\"}', name => 'b1', personal => true, now => %s)",
                (S, NOW))
    sql.execute("ANALYZE dna.dna_instances")


def overlay_scans(sql, statement, params, role):
    """The listing statement's scans of dna_instances AS i (the overlay's filter is theirs), as ``role`` (None:
    the superuser)."""
    plans = Plans(sql)
    with plans.capture():
        if role:
            sql.execute(f"SET ROLE {role}")
        try:
            sql.execute(statement, params).fetchall()
        finally:
            sql.execute("RESET ROLE")
    found = [p for p in plans.statements() if "WITH m AS" in p["Query Text"]]
    assert found, "no listing statement"
    return [n for p in found for n in _walk(p["Plan"])
            if n.get("Relation Name") == "dna_instances" and n.get("Alias") == "i"]


def test_the_roles_listing_hashes_the_overlay_as_the_superusers_does(sql, app):
    seed(sql, app)
    assert app.execute("SELECT dna.privileged()").fetchone()[0] is False     # row-level security applies to it
    listing = "SELECT dna.list_memories(%s, personal => true, now => %s, max_rows => 10000)"
    for role in (None, ROLE):
        scans = overlay_scans(sql, listing, (S, NOW), role)
        assert scans, f"no overlay scan ({role or 'superuser'})"
        for node in scans:
            where = str(node["Filter"])
            assert re.search(r"hashed SubPlan", where) and "NOT EXISTS" not in where, (role, where)
    su, mine = (c.execute(listing, (S, NOW)).fetchone()[0] for c in (sql, app))
    assert su == mine and su["total"] == 2 * N
    listed = {(m["name"], m["tenant"]) for m in su["memories"]}
    assert ("b1", "personal:pp-oid") in listed and ("b1", "") not in listed and ("b2", "") in listed
