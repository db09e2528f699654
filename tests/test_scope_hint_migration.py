"""Revision 0023_still_open, topic scope_hint, with data: a memory remembered at 0022_first_week; a
get_memory of it under a misspelt scope hints "Nearest Engram names here: none" at 0022, names the
nearest scope after the upgrade, and 0022's hint again after the downgrade (the memory kept)."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate


def _hint(conn) -> str:
    try:
        conn.execute("SELECT dna.get_memory('trialmme', 'deploys')")
    except psycopg.errors.NoDataFound as exc:
        return exc.diag.message_hint
    raise AssertionError("get_memory of a misspelt scope answered")


def test_get_memory_hint_before_and_after_the_upgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.remember('trialmem', %s, name => 'deploys')",
                     (Jsonb({"summary": "Deploys happen on Thursdays"}),))
        before = _hint(conn)
    assert "Nearest Engram names here: none" in before, before
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert "nearest scopes: 'trialmem'" in _hint(conn)
    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _hint(conn) == before
        assert conn.execute("SELECT dna.get_memory('trialmem', 'deploys') ->> 'name'").fetchone()[0] == "deploys"
