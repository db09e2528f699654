"""Revision 0025, topic lane_lexemes: the BM25 lane reads the memtable and the chunks by the query's
lexemes whatever plan the statistics give it. After a full compaction of 30,000 documents written live,
the statement trigger's ANALYZE recorded the memtable's table as empty while its heap and index still held
the compacted postings as dead rows (until VACUUM); planned on that, the lane's memtable arm searched the
postings index by (scope, model_id, tenant) alone and read every entry of the partition: dna.bm25 19.2 ms
CPU p50 instead of 8.1 (bench/RESULTS.md, "The memtable after a full compaction"). Each read now also names
``lexeme = ANY (lex)``, an index condition on either side of a join. Here a join method that takes the table
whole (``enable_nestloop`` off: a hash join) stands in for those statistics, on live memtable postings,
and the index entries the call reads are counted (pg_stat_get_xact_tuples_returned, before and after)."""
from __future__ import annotations

import pytest

MODEL = "lexical-only-384"
WORDS = " ".join([f"common{i}" for i in range(20)] * 3)
ENTRIES = ("SELECT pg_stat_get_xact_tuples_returned('dna.dna_bm25_postings_pkey'::regclass) "
           "+ pg_stat_get_xact_tuples_returned('dna.dna_bm25_postings'::regclass)")


@pytest.fixture
def memtable(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    # 400 documents written live, one call each: their postings stay in the memtable (below its bound)
    sql.execute("SELECT count(dna.index_document('ll', 'Doc', 'd' || g, "
                "'needle' || CASE WHEN g = 7 THEN ' zebra' ELSE '' END || ' ' || %s, NULL, %s)) "
                "FROM generate_series(1, 400) AS g", (WORDS, MODEL))
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = 'll'").fetchone()[0] > 8000
    return sql


def _read(sql, call: str, args) -> tuple[list, int]:
    with sql.transaction():
        sql.execute("SET LOCAL enable_nestloop = off")
        before = sql.execute(ENTRIES).fetchone()[0]
        hits = sql.execute(call, args).fetchall()
        return hits, sql.execute(ENTRIES).fetchone()[0] - before


@pytest.mark.parametrize("call", [
    "SELECT name FROM dna.bm25('ll', 'zebra', %s, k => 10)",
    "SELECT name FROM dna.search('ll', 'zebra', NULL, %s, k => 10)",
    "SELECT name FROM dna.bm25('ll', 'zebra common3', %s, k => 1)",     # the budgeted path's memtable read too
])
def test_the_memtable_is_read_by_the_querys_lexemes(memtable, call):
    hits, entries = _read(memtable, call, (MODEL,))
    assert hits[0] == ("d7",)
    # 'zebra' has one posting ('common3' 400 more, read by the df count and the lane): not the 8,400
    # entries of the partition
    assert entries <= 2 * 401 + 5, entries
