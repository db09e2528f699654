"""Revision 0026_speed_in_use, topics any_statistics and analyze_cost: a 0025 database with segments, a memtable
and tombstones upgrades (the chunks' merge index becomes partial, WHERE n > 0; the memtable gets its own partial
index of dna_bm25_docs) with the same answers, merges and seals still work on the upgraded rows, the write
path's ANALYZE of a BM25 table samples 3,000 rows; the downgrade gives 0025's indexes and sample back, same
answers again."""
from __future__ import annotations

import psycopg

from pydna import migrate

MODEL = "lexical-only-384"
QUERIES = ["protein expression in cancer cells", "gene mutation risk w0042", "w0007 w0100 dose study"]
COMMON = ["protein", "cell", "gene", "expression", "patient", "study", "cancer", "mutation", "risk", "dose"]


def _body(i: int) -> str:
    words = [COMMON[(i * 7 + j * 3) % 10] for j in range(1, 4 + i % 9)]
    return " ".join(words + [f"w{(i * 31 + j) % 1500:04d}" for j in range(1, 2 + i % 4)])


def _answers(conn, budgeted: bool = True) -> list:
    """Top 10 of each query, exhaustive and (budgeted) by a budget of 300 postings, whose answer depends on
    the segments' layout (a compaction changes it), and N."""
    out = []
    for q in QUERIES:
        for extra in ("", ", exact => true") + ((", budget => 300",) if budgeted else ()):
            out.append([(n, round(s, 9)) for n, s in conn.execute(
                f"SELECT name, score FROM dna.bm25('mg', %s, %s, k => 10{extra})", (q, MODEL)).fetchall()])
    out.append(conn.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats('mg', %s)", (MODEL,)).fetchone())
    return out


def _indexes(conn) -> dict:
    return dict(conn.execute(
        "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
        "WHERE i.indrelid IN ('dna.dna_bm25_chunks'::regclass, 'dna.dna_bm25_docs'::regclass)").fetchall())


def _bulk_sample(conn, scope: str) -> int:
    """Histogram bounds + common values of dna_bm25_chunks.lexeme after a bulk statement's ANALYZE."""
    conn.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, NULL, %s)",
                 (scope, ["Doc"] * 1500, [f"s{i}" for i in range(1500)], [f"cell s{i} w{i % 97}" for i in range(1500)], MODEL))
    return conn.execute("SELECT coalesce(array_length(histogram_bounds, 1), 0) + coalesce(array_length(most_common_vals, 1), 0) "
                        "FROM pg_stats WHERE schemaname = 'dna' AND tablename = 'dna_bm25_chunks' AND attname = 'lexeme'").fetchone()[0]


def test_upgrade_from_0025_swaps_the_indexes_and_keeps_the_answers(empty_dsn):
    migrate.upgrade(empty_dsn, "0025_dense_graph")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        for part in range(2):
            ids = range(1000 * part + 1, 1000 * part + 1001)
            conn.execute("SELECT count(*) FROM dna.index_documents('mg', %s, %s, %s, NULL, %s)",
                         (["Doc"] * 1000, [f"b{i}" for i in ids], [_body(i) for i in ids], MODEL))
        for i in range(5001, 5201):
            conn.execute("SELECT dna.index_document('mg', 'Doc', %s, %s, NULL, %s)", (f"l{i}", _body(i), MODEL))
        conn.execute("SELECT dna.delete_document('mg', 'Doc', 'b3', model_id => %s)", (MODEL,))
        before = _answers(conn)
        old = _indexes(conn)
        assert "dna_bm25_chunks_seg" in old and "dna_bm25_docs_memtable" not in old
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        new = _indexes(conn)
        assert "dna_bm25_chunks_seg" not in new
        assert new["dna_bm25_chunks_merge"].endswith("(scope, model_id, tenant, seg_id) WHERE (n > 0)")
        assert new["dna_bm25_docs_memtable"].endswith("(scope, model_id, tenant) INCLUDE (doc_len) WHERE (seg_id IS NULL)")
        assert _answers(conn) == before
        # the memtable's 200 documents are in its index; a full compaction (seal and merges) on the upgraded rows
        assert conn.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = 'mg' AND seg_id IS NULL").fetchone()[0] == 200
        exhaustive = _answers(conn, budgeted=False)
        report = conn.execute("SELECT dna.bm25_compact('mg', full_merge => true)").fetchone()[0]
        assert report["partitions"][0]["status"] == "ok"
        assert _answers(conn, budgeted=False) == exhaustive
        assert conn.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = 'mg'").fetchone()[0] == 1
        assert _bulk_sample(conn, "up") <= 21                        # statistics target 10
    migrate.downgrade(empty_dsn, "0025_dense_graph")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _indexes(conn) == old
        assert _answers(conn, budgeted=False) == exhaustive
        conn.execute("SELECT dna.index_document('mg', 'Doc', 'after', 'protein w0042', NULL, %s)", (MODEL,))
        assert conn.execute("SELECT name FROM dna.bm25('mg', 'w0042 protein', %s, k => 1)", (MODEL,)).fetchone()[0] == "after"
        assert _bulk_sample(conn, "down") > 21                       # the server's target again
