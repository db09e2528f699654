"""Revision 0021_holds_in_use, topic dense_depth: upgrading a 0020_real_use database holding data (the
seed of test_citus_migration, plus a scope of 2,500 random vectors the dense lane answers by HNSW) keeps
every answer of the seed, and the dense lane then searches the graph at ef_search dna.hnsw_ef_search(k,
depth) (400 for k = 10) instead of its depth (100), as explain says; the downgrade gives 0020 back: the
same answers, ef_search 100 again, no dna.hnsw_ef_search."""
from __future__ import annotations

import psycopg

from pydna import migrate
from test_citus_migration import _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"
VEC = "(SELECT l2_normalize(array_agg(sin(i))::vector) FROM generate_series(1, 384) AS i)"
EXPLAIN = ("SELECT explain -> 'answer' -> 'dense' FROM dna.search('dense', 'zzzz', " + VEC + ", %s, k => 10, "
           "explain => true) LIMIT 1")


def _seed_dense(conn):
    conn.execute("SELECT setseed(0.5)")
    conn.execute(f"""
        INSERT INTO dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body, embedding)
        SELECT 'dense', 'Doc', 'doc/' || g, '{MODEL}', md5(g::text), 'document number ' || g,
               (SELECT l2_normalize(array_agg(random() - 0.5)::vector) FROM generate_series(1, 384) WHERE g > 0)
        FROM generate_series(1, 2500) AS g""")
    conn.execute("ANALYZE dna.dna_search_docs_384")


def _dense(conn):
    """The dense lane's account by the graph (the sort taken away, so the planner cannot pick an exact
    scan) and its exact top 10."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_sort = off")
        lane = conn.execute(EXPLAIN, (MODEL,)).fetchone()[0]
    exact = [r[0] for r in conn.execute(
        f"SELECT name FROM dna.search('dense', 'zzzz', {VEC}, %s, k => 10, exact => true) ORDER BY rank_dense", (MODEL,))]
    return lane, exact


def test_upgrade_from_0020_widens_the_graph_search_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        _seed_dense(conn)
        before = _answers(conn)
        lane, exact = _dense(conn)
        assert lane["path"] == "hnsw" and lane["ef_search"] == 100 and "ef_search_rule" not in lane
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        lane_now, exact_now = _dense(conn)
        assert exact_now == exact
        assert lane_now["path"] == "hnsw" and lane_now["ef_search"] == 400
        assert lane_now["ef_search_rule"] == "least(1000, greatest(40, 4 x depth, 10 x k))"
        assert conn.execute("SELECT dna.hnsw_ef_search(10, 100)").fetchone()[0] == 400
    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        assert _dense(conn) == (lane, exact)
        assert conn.execute("SELECT to_regproc('dna.hnsw_ef_search')").fetchone()[0] is None
