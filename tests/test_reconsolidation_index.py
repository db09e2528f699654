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
