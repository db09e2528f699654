"""Revision 0019's Citus topics (distribute, receipts_key, downgrade, scope_names, receipt_call,
revoke_app_role) on a database at 0018_citus_ready that holds rows: receipts taken in two scopes
(one keeping its query), documents and memories. The upgrade keeps every receipt row as it was under
the new key (scope, receipt_id), every receipt replays to the same ids, the "nearest scopes" hint
names the same scopes; the downgrade gives 0018 its key and functions back with the rows intact (one
node: no Citus, so the downgrade's guard lets it through)."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
KEY = ("SELECT pg_get_constraintdef(c.oid) FROM pg_constraint AS c "
       "WHERE c.conrelid = 'dna.dna_search_receipts'::regclass AND c.contype = 'p'")
ROWS = "SELECT receipt_id, scope, tenant, verb, args, results, inputs_digest, query_digest FROM dna.dna_search_receipts ORDER BY 1"


def _seed(conn) -> list[str]:
    for scope in ("team", "docs"):
        for i in range(6):
            text = f"reciprocal rank fusion note {i} in {scope}"
            conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                         (scope, f"d{i}", text, text, MODEL))
    conn.execute("SELECT dna.remember('team', %s, name => 'm1')", (Jsonb({"summary": "fusion memory"}),))
    ids = []
    for scope, keep in (("team", True), ("docs", False), ("docs", True)):
        r = conn.execute("SELECT dna.take_receipt('search', %s, keep_query => %s)",
                         (Jsonb({"scope": scope, "query": "rank fusion", "k": 5,
                                 "valid_time": "2026-06-01T00:00:00Z"}), keep)).fetchone()[0]
        ids.append(r["receipt_id"])
    return ids


def _replays(conn, ids) -> list:
    out = []
    for rid in ids:
        r = conn.execute("SELECT dna.replay(%s, query => 'rank fusion')", (rid,)).fetchone()[0]
        out.append((r["match"], r["ids_then"], r["ids_now"]))
    return out


def test_upgrade_from_0018_keeps_the_receipts_under_the_new_key_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        ids = _seed(conn)
        rows = conn.execute(ROWS).fetchall()
        replays = _replays(conn, ids)
        assert all(m for m, _, _ in replays)
        assert conn.execute(KEY).fetchone()[0] == "PRIMARY KEY (receipt_id)"
        hint = conn.execute("SELECT dna.nearest_scopes_text('tema')").fetchone()[0]
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute(KEY).fetchone()[0] == "PRIMARY KEY (scope, receipt_id)"
        assert conn.execute("SELECT to_regclass('dna.dna_search_receipts_receipt_id') IS NOT NULL").fetchone()[0]
        assert conn.execute(ROWS).fetchall() == rows
        assert _replays(conn, ids) == replays
        assert conn.execute("SELECT dna.nearest_scopes_text('tema')").fetchone()[0] == hint == "'team', 'docs'"
        assert conn.execute("SELECT dna.citus_placement_name('h', 's')").fetchone()[0] == "distributed"
        new = conn.execute("SELECT dna.take_receipt('search', %s)",
                           (Jsonb({"scope": "docs", "query": "rank fusion", "valid_time": "2026-06-01T00:00:00Z"}),)
                           ).fetchone()[0]
        assert conn.execute("SELECT dna.replay(%s, query => 'rank fusion') -> 'match'", (new["receipt_id"],)).fetchone()[0]
    migrate.downgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute(KEY).fetchone()[0] == "PRIMARY KEY (receipt_id)"
        assert conn.execute("SELECT to_regclass('dna.dna_search_receipts_receipt_id') IS NULL").fetchone()[0]
        assert [r for r in conn.execute(ROWS).fetchall() if r[0] in {x[0] for x in rows}] == rows
        assert _replays(conn, ids) == replays
        gone = conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'dna'::regnamespace AND proname IN "
                            "('citus_placement_name', 'undistribute', 'revoke_app_role')").fetchone()[0]
        assert gone == 0
    migrate.upgrade(empty_dsn, HELD_TO)
