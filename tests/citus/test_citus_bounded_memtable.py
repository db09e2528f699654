"""tests/test_bounded_memtable.py on a Citus coordinator (tests/citus/conftest.py): the seal and the level-0
merge run in the BM25 trigger on the shard; the write paths and compaction analyze the scope's shards on
their node. (The advisory-lock test is single-node: a lock taken on the coordinator is not the worker's.)"""
from test_bounded_memtable import (  # noqa: F401
    MODEL, model, test_a_scope_written_one_document_at_a_time_answers_as_compacted,
    test_sealed_segments_are_merged_in_pairs_by_the_write_that_seals, test_memories_written_one_at_a_time_stay_bounded,
    test_one_statement_of_many_documents_under_the_bulk_threshold_seals_too, test_the_limit_is_1000_documents,
    test_the_memtable_holds_the_limit_and_seals_past_it, write)


def shard_stats(sql, table: str) -> tuple[float, int]:
    """(Σ reltuples, Σ rows) over the table's shards, read on their nodes."""
    tuples = sql.execute("SELECT sum(result::real) FROM run_command_on_shards(%s, "
                         "$$SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = '%%s'::regclass$$)",
                         (f"dna.{table}",)).fetchone()[0]
    rows = sql.execute(f"SELECT count(*) FROM dna.{table}").fetchone()[0]
    return tuples, rows


def test_a_bulk_statement_and_a_compaction_analyze_the_scopes_shards(sql, model):  # noqa: F811
    n = 1500
    sql.execute("SELECT count(*) FROM dna.index_documents('bulk', %s, %s, %s, NULL, %s)",
                (["Doc"] * n, [f"b{i}" for i in range(n)], [f"cell gene b{i} protein w{i % 37}" for i in range(n)], MODEL))
    assert shard_stats(sql, "dna_bm25_docs") == (n, n)
    tuples, rows = shard_stats(sql, "dna_bm25_chunks")
    assert tuples == rows > 0
    for a in range(1, 601, 50):                     # memtable postings, analyzed as they grow
        write(sql, "live", a, a + 49)
    tuples, rows = shard_stats(sql, "dna_bm25_postings")
    assert rows > 2000 and rows / 3 <= tuples <= rows   # (the worker's counters reach the shared ones ~1 s late)
    sql.execute("SELECT dna.bm25_compact('live')")
    assert shard_stats(sql, "dna_bm25_postings") == (0, 0)
