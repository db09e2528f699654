"""Revision 0024's topic vector_inline on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): a
distributed 0023 database with documents upgrades with STORAGE MAIN on every width table and on each of
its shards (on every node), a database distributed at head gets its shards so, the answers stay the same,
and the downgrade restores pgvector's EXTERNAL everywhere."""
from __future__ import annotations

import psycopg

from pydna import migrate

from .citus_env import SHARD_COUNT

MODEL = "dna-fake-hash-v1"
QUERY = "SELECT name, score FROM dna.search('vi', 'alpha gamma', dna.fake_embed('alpha gamma'), %s, k => 10)"


def _shard_storage(conn) -> set[str]:
    """attstorage of embedding on the 384 table's shards, as every node sees them."""
    rows = conn.execute(
        "SELECT result FROM run_command_on_shards('dna.dna_search_docs_384', "
        "$$SELECT a.attstorage FROM pg_attribute AS a WHERE a.attrelid = '%s'::regclass AND a.attname = 'embedding'$$)"
    ).fetchall()
    return {r[0] for r in rows}


def _storage(conn) -> str:
    return conn.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = 'dna.dna_search_docs_384'::regclass "
                        "AND attname = 'embedding'").fetchone()[0]


def _seed(conn, scope="vi") -> None:
    for i in range(6):
        conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (scope, f"d{i}", f"alpha gamma document {i} " * 60, f"d{i}", MODEL))


def test_a_distributed_0023_database_upgrades_its_shards_to_inline_vectors(cluster):
    name = "dna_citus_vector_inline"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn, "0023_still_open")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            _seed(conn)
            before = conn.execute(QUERY, (MODEL,)).fetchall()
            assert _storage(conn) == "e" and _shard_storage(conn) == {"e"}
        assert len(before) == 6
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _storage(conn) == "m" and _shard_storage(conn) == {"m"}
            assert conn.execute(QUERY, (MODEL,)).fetchall() == before
            _seed(conn, "vi-after")
            assert len(conn.execute("SELECT * FROM dna.search('vi-after', 'alpha', k => 10)").fetchall()) == 6
        migrate.downgrade(dsn, "0023_still_open")
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _storage(conn) == "e" and _shard_storage(conn) == {"e"}
            assert conn.execute(QUERY, (MODEL,)).fetchall() == before
    finally:
        cluster.drop_database(name)


def test_a_database_distributed_at_head_has_inline_vectors_on_its_shards(cluster):
    name = "dna_citus_vector_inline_head"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            assert _storage(conn) == "m" and _shard_storage(conn) == {"m"}
    finally:
        cluster.drop_database(name)
