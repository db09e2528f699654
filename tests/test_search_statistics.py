"""The search tables' statistics are kept true by the write path (revision 0024, topic write_statistics;
issue 26 item 3): dna.index_documents probes each element's row by its unique key, and a width table
analyzed while empty (a fresh install's ANALYZE, before a bulk load) had that probe planned on the
(scope, model_id, valid_from) index, a scan of the scope per element: a bulk load of 5,000-document
statements took 1.5 s for the first and 25, 58, 92 s for the next three. Now the statement trigger
ANALYZEs the search table it fires on when its changes pass 200 + a quarter of its analyzed rows
(dna.bm25_keep_statistics), as it does the BM25 tables. Plain SQL."""
from __future__ import annotations

import pytest

from test_write_statistics import analyzed, flush_stats, reltuples, rows

MODEL = "lexical-only-384"
TABLE = "dna_search_docs_384"
PROBE = ("EXPLAIN (FORMAT JSON) SELECT t.text_hash FROM dna.dna_search_docs_384 AS t WHERE t.scope = 'st' "
         "AND t.kind = 'Doc' AND t.name = 'd1-7' AND t.tenant = '' AND t.model_id = %s AND t.passage = 0")


def index_batch(sql, b: int, n: int) -> None:
    sql.execute("SELECT count(*) FROM dna.index_documents('st', array_fill('Doc'::text, ARRAY[%s]), %s, %s, NULL, %s)",
                (n, [f"d{b}-{i}" for i in range(n)],
                 [f"words {i % 97} of document {b} {i} about things {i % 13}" for i in range(n)], MODEL))


def probe_index(sql) -> str:
    plan = sql.execute(PROBE, (MODEL,)).fetchone()[0][0]["Plan"]
    while "Index Name" not in plan and plan.get("Plans"):
        plan = plan["Plans"][0]
    return plan.get("Index Name", plan["Node Type"])


@pytest.fixture
def empty_analyzed(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    sql.execute(f"ALTER TABLE dna.{TABLE} SET (autovacuum_enabled = off)")   # only the write path analyzes
    sql.execute(f"ANALYZE dna.{TABLE}")
    assert reltuples(sql, TABLE) == 0


def test_bulk_statements_keep_the_search_table_analyzed(sql, empty_analyzed):
    for b in range(3):
        index_batch(sql, b, 1500)
        flush_stats(sql)
        n = rows(sql, TABLE)
        assert n == 1500 * (b + 1)
        assert analyzed(sql, TABLE)
        assert 0.8 * n <= reltuples(sql, TABLE) <= n, (b, reltuples(sql, TABLE), n)
        assert probe_index(sql) == "dna_search_docs_384_key"


def test_small_writes_do_not_analyze_every_statement(sql, empty_analyzed):
    index_batch(sql, 0, 1000)
    flush_stats(sql)
    first = sql.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE relid = %s::regclass",
                        (f"dna.{TABLE}",)).fetchone()[0]
    for i in range(20):                                       # 20 rows: under 200 + a quarter of 1,000
        sql.execute("SELECT dna.index_document('st', 'Doc', %s, 'one more body', NULL, %s)", (f"x{i}", MODEL))
    flush_stats(sql)
    assert sql.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE relid = %s::regclass",
                       (f"dna.{TABLE}",)).fetchone()[0] <= first + 1
    # (at most one: the batch's own rows count as changes since the ANALYZE its statement ran, once committed)
