"""Revision 0025_dense_graph, topic dense_graph: every width table's HNSW index is built WITH (m = 16,
ef_construction = 128) (fresh install, upgrade from 0024 with documents in it, `dna db vector-index build`),
dna.search's ef_search grows with the width table's rows (dna.hnsw_ef_search(k, depth, graph_rows), shown
by explain), and the downgrade restores 0024's index and rule with the same answers."""
from __future__ import annotations

import psycopg
import pytest

from pydna import maintenance, migrate

FAKE = "dna-fake-hash-v1"
HNSW = "SELECT c.relname, c.reloptions FROM pg_class AS c WHERE c.relnamespace = 'dna'::regnamespace " \
       "AND c.relname LIKE 'dna\\_search\\_docs\\_%\\_embedding\\_hnsw' ORDER BY c.relname"
# the dense lane alone (RRF, lexical weight 0): 0025's other topic, fusion_scale, rescales the convex fusion
SEARCH = ("SELECT name, similarity FROM dna.search('g', 'river stones', dna.fake_embed('river stones'), %s, k => 10, "
          "exact => false, weights => '{1,0}')")
SIZED = "to_regprocedure('dna.hnsw_ef_search(integer, integer, double precision)')"


def _indexes(conn) -> dict[str, list[str] | None]:
    return {name: opts for name, opts in conn.execute(HNSW)}


def _seed(conn, n=300) -> None:
    conn.execute("SELECT count(*) FROM dna.index_documents('g', array_fill('Doc'::text, ARRAY[%s]), %s, %s, "
                 "(SELECT array_agg(dna.fake_embed(b) ORDER BY o) FROM unnest(%s::text[]) WITH ORDINALITY AS u(b, o)), %s)",
                 (n, [f"d{i}" for i in range(n)], [f"river stones {i} of {i % 7}" for i in range(n)],
                  [f"river stones {i} of {i % 7}" for i in range(n)], FAKE))


def test_every_width_index_is_built_with_ef_construction_128(sql):
    indexes = _indexes(sql)
    widths = [w for (w,) in sql.execute("SELECT dna.search_widths()")]
    assert sorted(indexes) == sorted(maintenance.vector_index_name(w) for w in widths)
    assert all(sorted(o) == ["ef_construction=128", "m=16"] for o in indexes.values()), indexes


def test_vector_index_build_gives_the_heads_definition(sql):
    before = sql.execute("SELECT pg_get_indexdef('dna.dna_search_docs_384_embedding_hnsw'::regclass)").fetchone()[0]
    assert maintenance.drop_vector_index(sql, 384).changed
    assert maintenance.build_vector_index(sql, 384).changed
    after = sql.execute("SELECT pg_get_indexdef('dna.dna_search_docs_384_embedding_hnsw'::regclass)").fetchone()[0]
    assert after == before and "ef_construction='128'" in after


@pytest.mark.parametrize(("k", "depth", "rows", "ef"), [
    (10, 100, None, 400), (10, 100, -1, 400), (10, 100, 0, 400), (10, 100, 5183, 400), (10, 100, 100000, 400),
    (10, 100, 316000, 500), (10, 100, 1000000, 600), (10, 100, 10000000, 800), (10, 100, 1e9, 1000),
    (1, 10, 1000000, 60), (100, 400, 1000000, 1000), (None, None, 1000000, 60)])
def test_ef_search_grows_with_the_graphs_rows(sql, k, depth, rows, ef):
    assert sql.execute("SELECT dna.hnsw_ef_search(%s::integer, %s::integer, %s::float8)", (k, depth, rows)).fetchone()[0] == ef
    # the two-argument rule (0021) is the size-blind one, unchanged
    assert sql.execute("SELECT dna.hnsw_ef_search(%s::integer, %s::integer)", (k, depth)).fetchone()[0] == \
        sql.execute("SELECT dna.hnsw_ef_search(%s::integer, %s::integer, NULL)", (k, depth)).fetchone()[0]


def test_search_runs_the_graph_at_the_ef_search_of_the_tables_rows(sql):
    _seed(sql)
    sql.execute("ANALYZE dna.dna_search_docs_384")

    def dense():
        row = sql.execute("SELECT explain -> 'answer' FROM dna.search('g', 'river stones', dna.fake_embed('river stones'), %s, "
                          "k => 10, exact => false, explain => true) LIMIT 1", (FAKE,)).fetchone()
        return row[0]["dense"]

    small = dense()
    if small["path"] != "hnsw":
        pytest.fail(f"the graph did not answer exact => false over 300 rows: {small}")
    assert small["ef_search"] == 400 and small["graph_rows"] == 300
    assert "log10(graph_rows)" in small["ef_search_rule"]
    # the planner's row count is what the rule reads: a table recorded at a million rows runs at 600
    sql.execute("UPDATE pg_class SET reltuples = 1000000 WHERE oid = 'dna.dna_search_docs_384'::regclass")
    large = dense()
    assert large["path"] == "hnsw" and large["ef_search"] == 600 and large["graph_rows"] == 1000000


def test_upgrade_from_0024_rebuilds_the_graph_and_keeps_the_answers(empty_dsn):
    migrate.upgrade(empty_dsn, "0024_at_scale")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        conn.execute("ANALYZE dna.dna_search_docs_384")
        before = conn.execute(SEARCH, (FAKE,)).fetchall()
        assert all(o is None for o in _indexes(conn).values())
        assert conn.execute(f"SELECT {SIZED}").fetchone()[0] is None
    assert len(before) == 10
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert all(sorted(o) == ["ef_construction=128", "m=16"] for o in _indexes(conn).values())
        assert conn.execute("SELECT count(*) FROM pg_index WHERE indexrelid = "
                            "'dna.dna_search_docs_384_embedding_hnsw'::regclass AND indisvalid").fetchone()[0] == 1
        assert conn.execute(SEARCH, (FAKE,)).fetchall() == before
        assert conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = 'g'").fetchone()[0] == 300
        # rows written after the rebuild go into the new graph: its tuples count them (VACUUM sets the index's
        # reltuples). Not by an HNSW search for the new row: the hash embedder's vectors have 3-6 nonzero
        # dimensions of 384, most pairs are orthogonal (cosine distance exactly 1), and a greedy walk over those
        # plateaus misses a given row in some graphs (pgvector draws each node's level at random).
        conn.execute("SELECT dna.index_document('g', 'Doc', 'late', 'river stones late', dna.fake_embed('river stones late'), "
                     "%s)", (FAKE,))
        conn.execute("VACUUM dna.dna_search_docs_384")
        assert conn.execute("SELECT reltuples FROM pg_class "
                            "WHERE oid = 'dna.dna_search_docs_384_embedding_hnsw'::regclass").fetchone()[0] == 301
        late = conn.execute("SELECT name, similarity FROM dna.search('g', 'late', dna.fake_embed('river stones late'), %s, "
                            "k => 1, exact => true, weights => '{1,0}')", (FAKE,)).fetchall()
        assert late == [("late", 1.0)]
        conn.execute("SELECT dna.delete_document('g', 'Doc', 'late')")
    migrate.downgrade(empty_dsn, "0024_at_scale")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert all(o is None for o in _indexes(conn).values())
        assert conn.execute(f"SELECT {SIZED}").fetchone()[0] is None
        assert conn.execute(SEARCH, (FAKE,)).fetchall() == before
        dense = conn.execute("SELECT explain -> 'answer' -> 'dense' FROM dna.search('g', 'river', dna.fake_embed('river'), %s, "
                             "k => 10, explain => true) LIMIT 1", (FAKE,)).fetchone()[0]
        assert "graph_rows" not in dense


def test_an_index_dropped_for_a_bulk_load_stays_dropped_through_the_upgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0024_at_scale")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        maintenance.drop_vector_index(conn, 384)
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert maintenance.vector_index_state(conn, 384) is None
        assert maintenance.build_vector_index(conn, 384).changed
        assert sorted(_indexes(conn)[maintenance.vector_index_name(384)]) == ["ef_construction=128", "m=16"]
