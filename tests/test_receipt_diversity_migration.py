"""Revision 0023_still_open, topic receipt_diversity, with data: receipts taken at 0021_holds_in_use (no
diversity then) over documents and memories with copies, and at 0022_first_week (collapse by default, not
recorded). At 0022 the 0021 receipts replay with collapse on and no longer match (the released behaviour
this topic fixes); upgraded to head, every receipt replays to a match (0021's with 'off', 0022's with its
answer's collapse) and a new receipt records its diversity in args. The downgrade to 0022 keeps every
receipt, drops dna.receipt_diversity, and the receipts taken at head (diversity pinned) still match there."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

MODEL = "dna-fake-hash-v1"
PARA = "The per-view cache stores the output of an entire view. Use the cache_page decorator to cache a view."
QUERY = "cache an entire view"
RECALL = "when do deploys happen"


def _seed(conn):
    for name, body in (("topics/cache.md", PARA), ("releases/4.0.md", PARA),
                       ("topics/low.md", "The low-level cache API caches any object with cache.set.")):
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    for name in ("deploy-a", "deploy-b"):
        conn.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                     (Jsonb({"summary": "Deploys happen on Thursdays"}), name, "Deploys happen on Thursdays", MODEL))


def _take(conn) -> list[tuple[str, list[str]]]:
    """(receipt id, answered names) of a search and a recall receipt taken now."""
    out = []
    for verb, scope, query in (("search", "docs", QUERY), ("recall", "team", RECALL)):
        r = conn.execute("SELECT dna.take_receipt(%s, %s::jsonb || jsonb_build_object('query_embedding', "
                         "dna.fake_embed(%s)::text), keep_query => true)",
                         (verb, Jsonb({"scope": scope, "query": query, "model_id": MODEL}), query)).fetchone()[0]
        out.append((r["receipt_id"], [h["name"] for h in r["hits"]]))
    return out


def _replays(conn, receipts) -> list[bool]:
    return [conn.execute("SELECT dna.replay(%s::uuid) ->> 'match'", (rid,)).fetchone()[0] == "true" for rid, _ in receipts]


def _stored(conn):
    return conn.execute("SELECT count(*), md5(string_agg(receipt_id::text || args::text || results::text, ',' "
                        "ORDER BY receipt_id)) FROM dna.dna_search_receipts").fetchone()


def test_receipts_of_0021_and_0022_replay_as_taken_after_the_upgrade_and_downgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0021_holds_in_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        at_0021 = _take(conn)
    assert {"topics/cache.md", "releases/4.0.md"} <= set(at_0021[0][1])            # both copies answered
    assert {"deploy-a", "deploy-b"} <= set(at_0021[1][1])
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _replays(conn, at_0021) == [False, False]                           # 0022 replays them collapsed
        at_0022 = _take(conn)
    assert len({"topics/cache.md", "releases/4.0.md"} & set(at_0022[0][1])) == 1
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _replays(conn, at_0021) == [True, True]                             # 'off', as 0021 answered
        assert _replays(conn, at_0022) == [True, True]                             # collapse, as 0022 answered
        at_head = _take(conn)
        assert [r[1] for r in at_head] == [r[1] for r in at_0022]
        pinned = [conn.execute("SELECT args ->> 'diversity' FROM dna.dna_search_receipts WHERE receipt_id = %s",
                               (rid,)).fetchone()[0] for rid, _ in at_0021 + at_0022 + at_head]
        assert pinned == [None] * 4 + ["collapse", "collapse"]                     # stored receipts are not rewritten
        stored = _stored(conn)
    assert stored[0] == 6
    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _stored(conn) == stored
        assert conn.execute("SELECT to_regproc('dna.receipt_diversity')").fetchone()[0] is None
        assert _replays(conn, at_0022 + at_head) == [True] * 4
