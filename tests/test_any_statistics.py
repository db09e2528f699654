"""Revision 0026, topic any_statistics: the BM25 lane reads the same rows whatever the planner's statistics
of its tables say, none included (a restore, a server upgrade, tables never analyzed).

Planned without statistics every partition is estimated at one row, and two indexes won over the ones the
lane is written for: the merges' (scope, model_id, tenant, seg_id) index of the chunks, through which the
lane's reads by lexeme filtered every chunk of the partition, and the primary key of dna_bm25_docs for the
memtable's count, read as the whole partition (dna.bm25 x3.6 / x24 p50 / p95 on a 30,000-document scope,
bench/RESULTS.md). Here the statistics of every BM25 table are removed as a restore leaves them
(``pg_statistic`` rows deleted, ``reltuples`` -1), and the index entries and heap rows each call reads from
the chunks and the documents are counted (``pg_stat_get_xact_tuples_returned`` / ``_fetched`` of the table
and of each of its indexes, before and after, in one transaction): bounded by the chunks of the query's
terms and the memtable, not by the partition; the answers equal those planned on fresh statistics.
"""
from __future__ import annotations

import pytest

MODEL = "lexical-only-384"
COMMON = ["protein", "cell", "gene", "expression", "patient", "study", "cancer", "mutation", "risk", "dose"]
BM25_TABLES = ("dna_bm25_postings", "dna_bm25_chunks", "dna_bm25_segments", "dna_bm25_docs", "dna_bm25_forward",
               "dna_bm25_tombstones", "dna_bm25_tombstone_terms")
# Documents of a few common words and rare ones; 3 x 1,000 by one statement each (each its own segment),
# then 300 written one call each (the memtable) and 5 sealed ones removed (tombstones).
BODY = """(SELECT string_agg(w, ' ') FROM (
             SELECT (%(common)s::text[])[1 + (i * 7 + j * 3) %% 10] AS w FROM generate_series(1, 3 + i %% 9) AS j
             UNION ALL SELECT 'rare' || lpad(((i * 31 + j) %% 1500)::text, 4, '0') FROM generate_series(1, 1 + i %% 4) AS j) AS x)"""
CALLS = [
    ("SELECT name, score FROM dna.bm25('st', %(q)s, %(m)s, k => 10)", "the exact path"),
    ("SELECT name, score FROM dna.bm25('st', %(q)s, %(m)s, k => 10, budget => 300)", "the budgeted path"),
    ("SELECT name, score FROM dna.search('st', %(q)s, NULL, %(m)s, k => 10)", "dna.search's lexical lane"),
]
QUERIES = ["protein expression in cancer cells", "gene mutation risk rare0042", "rare0007 rare0100 dose study"]


def _read(sql, table: str) -> int:
    """Rows and index entries read from ``table`` by this transaction so far (heap and every index)."""
    return sql.execute(
        "SELECT pg_stat_get_xact_tuples_returned(%(t)s::regclass) + pg_stat_get_xact_tuples_fetched(%(t)s::regclass) "
        "       + coalesce((SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid)) FROM pg_index AS i "
        "                   WHERE i.indrelid = %(t)s::regclass), 0)", {"t": f"dna.{table}"}).fetchone()[0]


def _call(sql, call: str, q: str) -> tuple[list, dict]:
    with sql.transaction():
        before = {t: _read(sql, t) for t in ("dna_bm25_chunks", "dna_bm25_docs")}
        hits = [(n, round(s, 9)) for n, s in sql.execute(call, {"q": q, "m": MODEL}).fetchall()]
        return hits, {t: _read(sql, t) - before[t] for t in before}


@pytest.fixture
def scope(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    for part in range(3):
        sql.execute("SELECT count(*) FROM dna.index_documents('st', array_fill('Doc'::text, ARRAY[1000]), "
                    "ARRAY(SELECT 'b' || i FROM generate_series(%(lo)s, %(lo)s + 999) AS i), "
                    f"ARRAY(SELECT {BODY} FROM generate_series(%(lo)s, %(lo)s + 999) AS i), NULL, %(m)s)",
                    {"lo": 1000 * part + 1, "common": COMMON, "m": MODEL})
    sql.execute(f"SELECT count(dna.index_document('st', 'Doc', 'l' || i, {BODY}, NULL, %(m)s)) "
                "FROM generate_series(5001, 5300) AS i", {"common": COMMON, "m": MODEL})
    sql.execute("SELECT count(dna.delete_document('st', 'Doc', 'b' || i, model_id => %s)) FROM generate_series(1, 5) AS i",
                (MODEL,))
    counts = sql.execute("SELECT (SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = 'st'), "
                         "(SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = 'st' AND seg_id IS NULL), "
                         "(SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 'st'), "
                         "(SELECT count(*) FROM dna.dna_bm25_chunks WHERE scope = 'st')").fetchone()
    assert counts[0] >= 1 and counts[1] == 300 and counts[2] == 5 and counts[3] > 3000, counts
    sql.execute("VACUUM ANALYZE")
    return sql


def _remove_statistics(sql) -> None:
    """As a restore leaves the tables: no pg_statistic rows, reltuples -1 (never analyzed)."""
    for t in BM25_TABLES:
        sql.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", (f"dna.{t}",))
        sql.execute("UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = %s::regclass", (f"dna.{t}",))


def _bounds(sql, q: str) -> tuple[int, int]:
    terms = sql.execute("SELECT dna.bm25_terms(%s)", (q,)).fetchone()[0]
    chunks = sql.execute("SELECT count(*) FROM dna.dna_bm25_chunks WHERE scope = 'st' AND lexeme = ANY (%s)",
                         (terms,)).fetchone()[0]
    return chunks, 300


@pytest.mark.parametrize("call,what", CALLS, ids=[w for _, w in CALLS])
def test_the_lane_reads_the_same_rows_without_statistics(scope, call, what):
    fresh = {q: _call(scope, call, q) for q in QUERIES}
    _remove_statistics(scope)
    assert scope.execute("SELECT reltuples FROM pg_class WHERE oid = 'dna.dna_bm25_chunks'::regclass").fetchone()[0] == -1
    partition = scope.execute("SELECT count(*) FROM dna.dna_bm25_chunks WHERE scope = 'st'").fetchone()[0]
    for q in QUERIES:
        hits, read = _call(scope, call, q)
        assert hits == fresh[q][0], (what, q)
        chunks, memtable = _bounds(scope, q)
        # each chunk of the query's terms read at most twice (df or the budget's choice, then its postings),
        # an index entry and a heap row each; the memtable's documents twice (N and its size); never the
        # partition's chunks or documents
        assert read["dna_bm25_chunks"] <= 4 * chunks + 10 < partition, (what, q, read, chunks, partition)
        assert read["dna_bm25_docs"] <= 2 * memtable + 10, (what, q, read)


def test_merges_read_the_chunks_of_their_segments_through_the_partial_index(scope):
    idx = scope.execute("SELECT pg_get_indexdef('dna.dna_bm25_chunks_merge'::regclass)").fetchone()[0]
    assert idx.endswith("(scope, model_id, tenant, seg_id) WHERE (n > 0)"), idx
    assert scope.execute("SELECT to_regclass('dna.dna_bm25_chunks_seg')").fetchone()[0] is None
    # every chunk holds a posting: the partial index holds every chunk
    assert scope.execute("SELECT count(*) FROM dna.dna_bm25_chunks WHERE n <= 0").fetchone()[0] == 0
    segs = [s for (s,) in scope.execute("SELECT seg_id FROM dna.dna_bm25_segments WHERE scope = 'st' ORDER BY seg_id")]
    assert len(segs) == 3
    before = scope.execute("SELECT name, score FROM dna.bm25('st', 'gene rare0042', %s, k => 5)", (MODEL,)).fetchall()
    with scope.transaction():
        scope.execute("SELECT pg_advisory_xact_lock(dna.bm25_lock_key('st', %s, ''))", (MODEL,))
        used = scope.execute("SELECT pg_stat_get_xact_numscans('dna.dna_bm25_chunks_merge'::regclass)").fetchone()[0]
        # one segment of three (a merge of most of a partition reads it whole, by a sequential scan)
        assert scope.execute("SELECT dna.bm25_merge('st', %s, '', %s)", (MODEL, segs[:1])).fetchone()[0] > 0
        used = scope.execute("SELECT pg_stat_get_xact_numscans('dna.dna_bm25_chunks_merge'::regclass)").fetchone()[0] - used
    assert used >= 2                      # the segment's chunks read, then deleted, through it
    assert scope.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = 'st'").fetchone()[0] == 3
    assert scope.execute("SELECT name, score FROM dna.bm25('st', 'gene rare0042', %s, k => 5)", (MODEL,)).fetchall() == before
