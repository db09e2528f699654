"""The stored lower bound of revision 0023's topic policy_bound on a real coordinator (DNA_TEST_CITUS_DSN;
deselected without it): a distributed 0022 database with memories (one valid only from a later time) and
documents upgrades — before_policy_bound.sql adds the generated column valid_from and its index on every
distributed width table, their shards with them — with valid_from = lower(valid_at) on every row, a row
written afterwards (another scope) kept so on its shard, and dna.search's validity probe answering as before; the
downgrade drops the column and answers the same."""
from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import NOW

from .citus_env import SHARD_COUNT

MODEL = "dna-fake-hash-v1"
LATER = NOW + timedelta(days=30)


def _seed(conn) -> None:
    for i in range(8):
        conn.execute("SELECT dna.remember('bound', %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                     (Jsonb({"summary": f"alpha gamma memory {i}"}), f"m{i}", NOW, f"alpha gamma memory {i}"))
        conn.execute("SELECT dna.index_document('bound', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (f"d{i}", f"gamma document {i} alpha", f"gamma document {i}", MODEL))
    conn.execute("SELECT dna.remember('bound', %s, name => 'later', now => %s, embedding => dna.fake_embed('alpha later'))",
                 (Jsonb({"summary": "alpha gamma later", "valid_from": LATER.isoformat()}), NOW))
    conn.execute("SELECT dna.forget('bound', 'm3', now => %s)", (NOW + timedelta(hours=1),))


def _answers(conn) -> dict:
    # RRF: its scores are the same at 0022 and at head (0025 rescaled only the convex fusion), so the run
    # goes to head and back across 0024, whose shards are altered by connections of their own
    out = {}
    for vt in (NOW + timedelta(days=1), LATER + timedelta(days=1)):
        for emb in ("NULL", "dna.fake_embed('alpha gamma')"):
            out[f"{vt} {emb}"] = conn.execute(
                f"SELECT kind, name, score FROM dna.search('bound', 'alpha gamma', {emb}, valid_time => %s, k => 30, "
                "fusion => 'rrf')",
                (vt,)).fetchall()
    return out


def _mismatched(conn) -> int:
    return conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 "
                        "WHERE valid_from IS DISTINCT FROM lower(valid_at)").fetchone()[0]


def test_upgrade_of_a_distributed_0022_database_adds_valid_from_on_the_shards(cluster):
    name = "dna_citus_policy_bound"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn, "0022_first_week")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            _seed(conn)
            before = _answers(conn)
        names = {n for _k, n, _s in before[f"{LATER + timedelta(days=1)} NULL"]}
        assert "later" in names and "m3" not in names
        assert "later" not in {n for _k, n, _s in before[f"{NOW + timedelta(days=1)} NULL"]}
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _mismatched(conn) == 0
            assert conn.execute("SELECT valid_from FROM dna.dna_search_docs_384 WHERE scope = 'bound' "
                                "AND name = 'later'").fetchone()[0] == LATER
            assert _answers(conn) == before
            conn.execute("SELECT dna.remember('bound-after', %s, name => 'after', now => %s, "
                         "embedding => dna.fake_embed('after'))",
                         (Jsonb({"summary": "written after", "valid_from": LATER.isoformat()}), NOW))
            assert conn.execute("SELECT valid_from FROM dna.dna_search_docs_384 WHERE scope = 'bound-after' "
                                "AND name = 'after'").fetchone()[0] == LATER
            assert _mismatched(conn) == 0
            assert _answers(conn) == before
        migrate.downgrade(dsn, "0022_first_week")
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = 'dna.dna_search_docs_384'::regclass "
                                "AND attname = 'valid_from' AND NOT attisdropped").fetchone()[0] == 0
            assert _answers(conn) == before
    finally:
        cluster.drop_database(name)
