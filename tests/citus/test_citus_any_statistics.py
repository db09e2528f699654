"""Revision 0026's topic any_statistics on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): a
distributed 0025 database with sealed and memtable documents upgrades with the chunks' merge index partial
(WHERE n > 0) and the memtable's partial index of dna_bm25_docs on the coordinator and on every shard, the same
answers; writes, seals and merges go on on the shards; the downgrade gives 0025's indexes back everywhere."""
from __future__ import annotations

import psycopg

from pydna import migrate

from .citus_env import SHARD_COUNT

MODEL = "dna-fake-hash-v1"
QUERY = "SELECT name, score FROM dna.bm25('as', 'alpha gamma w7', %s, k => 10)"


def _indexes(conn, table: str) -> set[str]:
    """The definitions of ``table``'s indexes on the coordinator, and on every shard (shard names stripped)."""
    local = {r[0] for r in conn.execute(
        "SELECT regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', '') FROM pg_index "
        "WHERE indrelid = %s::regclass", (f"dna.{table}",))}
    shards = conn.execute(
        f"SELECT result FROM run_command_on_shards('dna.{table}', "
        "$$SELECT string_agg(regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', ''), ';' ORDER BY 1) "
        "FROM pg_index WHERE indrelid = '%s'::regclass$$)").fetchall()
    return local | {f"shard:{r[0]}" for r in shards}


def _seed(conn, lo: int, hi: int, scope: str = "as") -> None:
    conn.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, NULL, %s)",
                 (scope, ["Doc"] * (hi - lo), [f"d{i}" for i in range(lo, hi)],
                  [f"alpha gamma document {i} w{i % 13}" for i in range(lo, hi)], MODEL))


def test_a_distributed_0025_database_gets_the_partial_indexes_on_its_shards(cluster):
    name = "dna_citus_any_statistics"
    dsn = cluster.create_database(name)
    try:
        migrate.upgrade(dsn, "0025_dense_graph")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.distribute(%s)", (SHARD_COUNT,))
            conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
            _seed(conn, 0, 1200)                                   # a segment of its own
            for i in range(1200, 1250):                            # the memtable
                conn.execute("SELECT dna.index_document('as', 'Doc', %s, %s, NULL, %s)",
                             (f"d{i}", f"alpha document {i} w{i % 13}", MODEL))
            before = conn.execute(QUERY, (MODEL,)).fetchall()
            chunks_0025 = _indexes(conn, "dna_bm25_chunks")
            assert any("(scope, model_id, tenant, seg_id)" in d and "WHERE" not in d for d in chunks_0025)
        assert len(before) == 10
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            chunks = _indexes(conn, "dna_bm25_chunks")
            docs = _indexes(conn, "dna_bm25_docs")
            merge = "btree (scope, model_id, tenant, seg_id) WHERE (n > 0)"
            memtable = "btree (scope, model_id, tenant) INCLUDE (doc_len) WHERE (seg_id IS NULL)"
            assert merge in chunks and all(merge in d for d in chunks if d.startswith("shard:")), chunks
            assert not any("seg_id)" in d and "WHERE" not in d for d in chunks if "pkey" not in d), chunks
            assert memtable in docs and all(memtable in d for d in docs if d.startswith("shard:")), docs
            assert conn.execute(QUERY, (MODEL,)).fetchall() == before
            _seed(conn, 2000, 3200)                                # another segment, then a full merge
            report = conn.execute("SELECT dna.bm25_compact('as', full_merge => true)").fetchone()[0]
            assert all(p["status"] == "ok" for p in report["partitions"]), report
            assert len(conn.execute(QUERY, (MODEL,)).fetchall()) == 10
        migrate.downgrade(dsn, "0025_dense_graph")
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _indexes(conn, "dna_bm25_chunks") == chunks_0025
            assert not any("seg_id IS NULL" in d for d in _indexes(conn, "dna_bm25_docs"))
    finally:
        cluster.drop_database(name)
