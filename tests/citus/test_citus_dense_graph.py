"""Revision 0025's topic dense_graph on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): a
distributed 0024 database with documents upgrades with every width table's HNSW index rebuilt WITH (m = 16,
ef_construction = 128) on the coordinator and on each shard (every node), the same answers, and the
downgrade gives pgvector's defaults back everywhere."""
from __future__ import annotations

import psycopg

from pydna import migrate

from .citus_env import SHARD_COUNT

MODEL = "dna-fake-hash-v1"
QUERY = ("SELECT name, score FROM dna.search('dg', 'alpha gamma', dna.fake_embed('alpha gamma'), %s, k => 10, "
         "exact => false)")
BUILT = ["ef_construction=128", "m=16"]


def _options(conn) -> list[str] | None:
    opts = conn.execute("SELECT reloptions FROM pg_class WHERE oid = 'dna.dna_search_docs_384_embedding_hnsw'::regclass"
                        ).fetchone()[0]
    return sorted(opts) if opts else None


def _shard_options(conn) -> set[str]:
    """The reloptions of the 384 table's HNSW index on each of its shards, as every node sees them."""
    rows = conn.execute(
        "SELECT result FROM run_command_on_shards('dna.dna_search_docs_384', "
        "$$SELECT array_to_string(array(SELECT unnest(c.reloptions) ORDER BY 1), ',') "
        "FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid JOIN pg_am AS a ON a.oid = c.relam "
        "WHERE i.indrelid = '%s'::regclass AND a.amname = 'hnsw'$$)").fetchall()
    return {r[0] for r in rows}


def _seed(conn, scope="dg") -> None:
    for i in range(8):
        conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (scope, f"d{i}", f"alpha gamma document {i}", f"d{i}", MODEL))


def test_a_distributed_0024_database_rebuilds_its_shards_graphs(cluster):
    name = "dna_citus_dense_graph"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn, "0024_at_scale")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            _seed(conn)
            before = conn.execute(QUERY, (MODEL,)).fetchall()
            assert _options(conn) is None and _shard_options(conn) == {""}
        assert len(before) == 8
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _options(conn) == BUILT and _shard_options(conn) == {",".join(BUILT)}
            assert conn.execute(QUERY, (MODEL,)).fetchall() == before
            _seed(conn, "dg-after")
            assert len(conn.execute("SELECT * FROM dna.search('dg-after', 'alpha', k => 10)").fetchall()) == 8
        migrate.downgrade(dsn, "0024_at_scale")
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _options(conn) is None and _shard_options(conn) == {""}
            assert conn.execute(QUERY, (MODEL,)).fetchall() == before
    finally:
        cluster.drop_database(name)


def test_a_database_distributed_at_head_has_the_graph_on_its_shards(cluster):
    name = "dna_citus_dense_graph_head"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            assert _options(conn) == BUILT and _shard_options(conn) == {",".join(BUILT)}
    finally:
        cluster.drop_database(name)
