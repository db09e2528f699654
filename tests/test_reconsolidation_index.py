"""Reconsolidation keeps every memory findable through the indexes (the flaky
tests/test_memory_bounds.py property test, made deterministic). The bug: dna_instances carried the GiST
exclusion constraint dna_instances_no_overlap (scope, id, valid_at); on a table without statistics the
planner picks that GiST index for `scope = ...` lookups, and a recall's reconsolidation UPDATE, scanning
it while its own new row versions split the index's root page, left live entries marked dead
(PostgreSQL 18.6). Later plain index scans then miss those memories: dna.recall reported 55P03 "row
locked by another writer" with no other writer, the history trigger refused the next version (42501,
it could not find the current row) and dna.list_memories left memories out."""
from __future__ import annotations

S = "reindex-flake"
NOW = "2026-06-01T12:00:00Z"


def _names(conn, scans: str) -> set[str]:
    conn.execute(scans)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM dna.dna_instances WHERE scope = %s", (S,))}
    finally:
        conn.execute("RESET enable_seqscan; RESET enable_indexscan; RESET enable_bitmapscan")


def test_repeated_reconsolidation_keeps_every_memory_reachable(sql):
    names = ["healthy"] + [f"p{i}" for i in range(7)]
    for name in names:
        sql.execute("SELECT dna.remember(%s, %s::jsonb, name => %s, now => %s)",
                    (S, '{"summary": "memory %s about porto offices", "tags": ["porto"]}' % name, name, NOW))
    for step in range(40):
        recall = sql.execute("SELECT dna.recall(%s, 'porto offices', k => 50, now => %s)", (S, NOW)).fetchone()[0]
        assert "reconsolidation_errors" not in recall, (step, recall.get("reconsolidation_errors"))
        assert sorted(recall["reconsolidated"]) == sorted(names), step
        by_index = _names(sql, "SET enable_seqscan = off; SET enable_bitmapscan = off")
        by_heap = _names(sql, "SET enable_indexscan = off; SET enable_bitmapscan = off")
        assert by_index == by_heap == set(names), (step, set(names) - by_index)
        listed = sql.execute("SELECT dna.list_memories(%s, include_invalid => true, max_rows => 10000, now => %s)",
                             (S, NOW)).fetchone()[0]
        assert {m["name"] for m in listed["memories"]} == set(names), step


def _constraints(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'dna.dna_instances'::regclass")}


def test_upgrade_from_0015_swaps_the_constraint_and_keeps_the_memories(empty_dsn):
    import psycopg
    from psycopg.types.json import Jsonb

    from pydna import migrate

    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for i in range(5):
            conn.execute("SELECT dna.remember(%s, %s, name => %s, now => %s)",
                         (S, Jsonb({"summary": f"memory number {i} about the office"}), f"m{i}", NOW))
        before = conn.execute("SELECT name, id, spec, valid_at::text FROM dna.dna_instances WHERE scope = %s ORDER BY name",
                              (S,)).fetchall()
        assert "dna_instances_no_overlap" in _constraints(conn)
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert "dna_instances_no_overlap" not in _constraints(conn) and "dna_instances_scope_id_key" in _constraints(conn)
        assert conn.execute("SELECT name, id, spec, valid_at::text FROM dna.dna_instances WHERE scope = %s ORDER BY name",
                            (S,)).fetchall() == before
        hits = conn.execute("SELECT dna.recall(%s, 'office', reconsolidate => false, now => %s)", (S, NOW)).fetchone()[0]["hits"]
        assert {h["name"] for h in hits} == {f"m{i}" for i in range(5)}
    migrate.downgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert "dna_instances_no_overlap" in _constraints(conn) and "dna_instances_scope_id_key" not in _constraints(conn)
        assert conn.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = %s", (S,)).fetchone()[0] == 5


def test_upgrade_refuses_clearly_when_two_records_of_a_scope_share_an_id(empty_dsn):
    import psycopg
    import pytest
    from psycopg.types.json import Jsonb

    from pydna import migrate

    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for name in ("a", "b"):
            conn.execute("SELECT dna.remember(%s, %s, name => %s, now => %s)", (S, Jsonb({"summary": name}), name, NOW))
        # a record written past the verbs, reusing another's id (the 0001 exclusion allowed it for
        # disjoint validity): the upgrade must say so, not fail on an anonymous duplicate key
        conn.execute("SET session_replication_role = replica")   # the history triggers stay out of it
        conn.execute("UPDATE dna.dna_instances SET id = (SELECT id FROM dna.dna_instances WHERE scope = %s AND name = 'a'), "
                     "valid_at = tstzrange('2000-01-01', '2000-01-02') WHERE scope = %s AND name = 'b'", (S, S))
    with pytest.raises(Exception, match="share an id"):
        migrate.upgrade(empty_dsn, "head")
