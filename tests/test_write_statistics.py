"""The BM25 write paths keep the planner's statistics true (issue 26 item 3, revision 0021 topic
bounded_memtable): a bulk statement, the memtable filling after a VACUUM ANALYZE saw it empty, a seal and a
compaction each leave the tables they changed analyzed (``pg_class.reltuples`` close to the rows there,
``pg_stat_user_tables.last_analyze`` set), without waiting and without a role that may not ANALYZE failing.
"""
from __future__ import annotations

import psycopg
import pytest

from test_bounded_memtable import MODEL, write
from test_bulk_ingest import app_role  # noqa: F401 - the fixture


def reltuples(sql, table: str) -> float:
    return sql.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (f"dna.{table}",)).fetchone()[0]


def rows(sql, table: str) -> int:
    return sql.execute(f"SELECT count(*) FROM dna.{table}").fetchone()[0]


def analyzed(sql, table: str) -> bool:
    return sql.execute("SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = %s::regclass",
                       (f"dna.{table}",)).fetchone()[0]


def flush_stats(sql) -> None:
    """This session's pending table statistics reach the shared ones (PostgreSQL 15+ flushes them at
    most once a second; pg_stat_force_next_flush is 15+)."""
    sql.execute("SELECT pg_stat_force_next_flush()")
    sql.execute("SELECT 1")


@pytest.fixture
def model(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))


def test_a_bulk_statement_leaves_its_tables_analyzed(sql, model):
    n = 1500                                          # >= dna.bm25_bulk_threshold(): a segment of its own
    sql.execute("SELECT count(*) FROM dna.index_documents('bulk', %s, %s, %s, NULL, %s)",
                (["Doc"] * n, [f"b{i}" for i in range(n)], [f"cell gene b{i} protein w{i % 37}" for i in range(n)], MODEL))
    for table in ("dna_bm25_chunks", "dna_bm25_docs", "dna_bm25_forward"):   # (segments: one row, under 200)
        assert analyzed(sql, table), table
    assert reltuples(sql, "dna_bm25_docs") == n
    assert reltuples(sql, "dna_bm25_chunks") == rows(sql, "dna_bm25_chunks")


def test_a_memtable_analyzed_empty_is_analyzed_again_as_it_fills(sql, model):
    write(sql, "s", 1, 10)
    sql.execute("SELECT dna.bm25_compact('s')")
    sql.execute("VACUUM ANALYZE dna.dna_bm25_postings")
    assert reltuples(sql, "dna_bm25_postings") == 0                      # what the planner sees: empty
    for a in range(11, 611, 50):                                         # one document per statement
        write(sql, "s", a, a + 49)
        flush_stats(sql)
    real = rows(sql, "dna_bm25_postings")
    assert real > 2000
    assert real / 1.6 <= reltuples(sql, "dna_bm25_postings") <= real


def test_a_compaction_leaves_what_it_changed_analyzed(sql, model):
    write(sql, "s", 1, 900)                  # below dna.bm25_memtable_limit() (1,000): nothing sealed yet
    flush_stats(sql)
    sql.execute("VACUUM ANALYZE dna.dna_bm25_postings")
    sql.execute("VACUUM ANALYZE dna.dna_bm25_chunks")
    assert reltuples(sql, "dna_bm25_chunks") == 0 and reltuples(sql, "dna_bm25_postings") > 0
    sql.execute("SELECT dna.bm25_compact('s')")
    assert reltuples(sql, "dna_bm25_postings") == 0                      # sealed: the memtable is empty
    assert reltuples(sql, "dna_bm25_chunks") == rows(sql, "dna_bm25_chunks") > 0


def test_statistics_are_kept_at_most_once_per_transaction_and_never_waited_for(sql, model, dna_dsn):
    with psycopg.connect(dna_dsn) as other:                              # a transaction holding the table
        other.execute("LOCK TABLE dna.dna_bm25_chunks IN SHARE UPDATE EXCLUSIVE MODE")
        sql.execute("SET lock_timeout = '2s'")
        sql.execute("SELECT count(*) FROM dna.index_documents('bulk', %s, %s, %s, NULL, %s)",
                    (["Doc"] * 1200, [f"b{i}" for i in range(1200)], [f"cell b{i}" for i in range(1200)], MODEL))
        other.rollback()
    assert not analyzed(sql, "dna_bm25_chunks")                          # left to the next writer
    assert analyzed(sql, "dna_bm25_docs")
    n = sql.execute("SELECT dna.bm25_keep_statistics('bulk', ARRAY['dna_bm25_chunks'])").fetchone()[0]
    assert n == 1 and analyzed(sql, "dna_bm25_chunks")
    with sql.transaction():
        sql.execute("SELECT count(*) FROM dna.index_documents('bulk2', %s, %s, %s, NULL, %s)",
                    (["Doc"] * 1200, [f"c{i}" for i in range(1200)], [f"gene c{i}" for i in range(1200)], MODEL))
        assert sql.execute("SELECT dna.bm25_keep_statistics('bulk2', ARRAY['dna_bm25_chunks', 'dna_bm25_docs'])"
                           ).fetchone()[0] == 0                          # analyzed by this transaction already


def test_a_role_that_may_not_analyze_writes_without_a_warning(app_role, sql, model):  # noqa: F811
    sql.execute("GRANT USAGE ON SCHEMA dna TO PUBLIC")
    with psycopg.connect(app_role, autocommit=True) as app:
        notices = []
        app.add_notice_handler(lambda d: notices.append(d.message_primary))
        app.execute("SELECT count(*) FROM dna.index_documents('app', %s, %s, %s, NULL, %s)",
                    (["Doc"] * 1200, [f"a{i}" for i in range(1200)], [f"cell a{i}" for i in range(1200)], MODEL))
        assert notices == []
    assert not analyzed(sql, "dna_bm25_docs")


def test_a_table_never_analyzed_is_analyzed_by_the_next_write(sql, model):
    write(sql, "s", 1, 100)
    sql.execute("UPDATE pg_class SET reltuples = -1 WHERE oid = 'dna.dna_bm25_postings'::regclass")
    write(sql, "s", 101, 101)
    assert reltuples(sql, "dna_bm25_postings") == rows(sql, "dna_bm25_postings")


def _histogram(sql, table: str, column: str) -> int:
    return sql.execute("SELECT coalesce(array_length(histogram_bounds, 1), 0) + coalesce(array_length(most_common_vals, 1), 0) "
                       "FROM pg_stats WHERE schemaname = 'dna' AND tablename = %s AND attname = %s",
                       (table, column)).fetchone()[0]


def test_the_write_path_samples_the_bm25_tables_small_and_the_search_table_whole(sql, model):
    """Revision 0026, topic analyze_cost: the write path's ANALYZE of a BM25 table takes a 3,000-row sample
    (statistics target 10: at most 11 histogram bounds and 10 common values a column); the search table's
    keeps the server's target (100)."""
    n = 1500
    sql.execute("SELECT count(*) FROM dna.index_documents('bulk', %s, %s, %s, NULL, %s)",
                (["Doc"] * n, [f"b{i}" for i in range(n)], [f"cell gene b{i} protein w{i % 37}" for i in range(n)], MODEL))
    assert analyzed(sql, "dna_bm25_chunks") and analyzed(sql, "dna_search_docs_384")
    assert reltuples(sql, "dna_bm25_chunks") == rows(sql, "dna_bm25_chunks")        # the counts stay exact
    assert 0 < _histogram(sql, "dna_bm25_chunks", "lexeme") <= 21
    assert 0 < _histogram(sql, "dna_bm25_docs", "doc_id") <= 21
    assert _histogram(sql, "dna_search_docs_384", "name") > 21                       # 101 bounds: the whole target
    # the setting is the write path's own: the session's target is unchanged, and a plain ANALYZE uses it
    assert sql.execute("SHOW default_statistics_target").fetchone()[0] == "100"
    sql.execute("ANALYZE dna.dna_bm25_chunks")
    assert _histogram(sql, "dna_bm25_chunks", "lexeme") > 21
