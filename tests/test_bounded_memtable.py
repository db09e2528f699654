"""The write path bounds the BM25 memtable (issue 26, revision 0021 topic bounded_memtable).

A statement that leaves more than ``dna.bm25_memtable_limit()`` documents in a partition's memtable seals
them into a segment, as ``dna.bm25_compact`` would: a scope written only through the SQL verbs
(``dna.index_document``, ``dna.remember``) never holds more than the limit in its memtable, and answers
exactly as after ``dna.bm25_compact``. A writer never waits for the partition's lock to seal.
"""
from __future__ import annotations

import psycopg
import pytest

MODEL = "lexical-only-384"
LIMIT = 1000
WORDS = ["protein", "cell", "gene", "expression", "patient", "study", "cancer", "mutation", "risk", "dose"]
QUERIES = ["protein expression in cancer cells", "gene mutation risk", "patient study", "rare0042 cell",
           "rare0007 rare0100 rare0999", "dose"]

# One dna.index_document call per row: a statement (and statement trigger) per document, as a client
# writing one document at a time issues. Bodies are deterministic: a few common words, rare ones.
WRITE_ONE_BY_ONE = """
SELECT count(*) FROM (
    SELECT dna.index_document(%(scope)s, 'Doc', %(prefix)s || i, body, NULL, %(model)s)
    FROM generate_series(%(lo)s::integer, %(hi)s::integer) AS i,
         LATERAL (SELECT string_agg(w, ' ') AS body FROM (
             SELECT (%(words)s::text[])[1 + (i * 7 + j * 3) %% 10] AS w FROM generate_series(1, 3 + i %% 9) AS j
             UNION ALL SELECT 'rare' || lpad(((i * 31 + j) %% 1000)::text, 4, '0') FROM generate_series(1, i %% 4) AS j) AS x
         ) AS b
    ORDER BY i) AS y
"""


def write(sql, scope: str, lo: int, hi: int, prefix: str = "d") -> None:
    sql.execute(WRITE_ONE_BY_ONE, {"scope": scope, "prefix": prefix, "lo": lo, "hi": hi, "model": MODEL,
                                   "words": WORDS})


def memtable(sql, scope: str) -> int:
    return sql.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = %s AND seg_id IS NULL",
                       (scope,)).fetchone()[0]


def segments(sql, scope: str) -> int:
    return sql.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = %s", (scope,)).fetchone()[0]


def answers(sql, scope: str) -> list:
    out = []
    for q in QUERIES:
        for exact in (False, True):
            out.append([(name, round(score, 9)) for name, score in sql.execute(
                "SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10, exact => %s)", (scope, q, MODEL, exact)).fetchall()])
    stats = sql.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s)", (scope, MODEL)).fetchone()
    return [stats, out]


@pytest.fixture
def model(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))


def test_the_limit_is_1000_documents(sql):
    assert sql.execute("SELECT dna.bm25_memtable_limit()").fetchone()[0] == LIMIT
    comment = sql.execute("SELECT obj_description('dna.bm25_memtable_limit()'::regprocedure)").fetchone()[0]
    assert "1000" in comment and "seals" in comment
    assert sql.execute("SELECT dna.bm25_write_merge_cap()").fetchone()[0] == 16 * LIMIT


def test_the_memtable_holds_the_limit_and_seals_past_it(sql, model):
    write(sql, "s", 1, LIMIT)                             # exactly the limit: nothing sealed
    assert memtable(sql, "s") == LIMIT and segments(sql, "s") == 0
    write(sql, "s", LIMIT + 1, LIMIT + 1)                 # one more: the statement seals all of them
    assert memtable(sql, "s") == 0 and segments(sql, "s") == 1
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = 's'").fetchone()[0] == 0
    assert sql.execute("SELECT n_docs FROM dna.dna_bm25_segments WHERE scope = 's'").fetchone()[0] == LIMIT + 1


def test_a_scope_written_one_document_at_a_time_answers_as_compacted(sql, model):
    n = 2 * LIMIT + 300
    write(sql, "live", 1, n)
    write(sql, "live", 1, 50, prefix="d")                 # unchanged texts: nothing written
    sql.execute("SELECT dna.index_document('live', 'Doc', 'd7', 'protein protein revised', NULL, %s)", (MODEL,))
    sql.execute("SELECT dna.delete_document('live', 'Doc', 'd8', model_id => %s)", (MODEL,))
    assert memtable(sql, "live") <= LIMIT
    assert segments(sql, "live") == 1                       # two seals, merged as a pair
    before = answers(sql, "live")
    assert before[0][0] == n - 1
    report = sql.execute("SELECT dna.bm25_compact('live', full_merge => true)").fetchone()[0]
    assert report["partitions"][0]["status"] == "ok"
    assert memtable(sql, "live") == 0 and segments(sql, "live") == 1
    assert answers(sql, "live") == before


def test_one_statement_of_many_documents_under_the_bulk_threshold_seals_too(sql, model):
    write(sql, "s", 1, 1500)
    sql.execute("SELECT count(*) FROM dna.index_documents('s', %s, %s, %s, NULL, %s)",
                (["Doc"] * 900, [f"m{i}" for i in range(900)], [f"cell gene m{i}" for i in range(900)], MODEL))
    assert memtable(sql, "s") == 0
    assert sql.execute("SELECT sum(n_docs) FROM dna.dna_bm25_segments WHERE scope = 's'").fetchone()[0] == 2400


def test_a_writer_never_waits_to_seal_and_the_next_statement_seals(sql, model, dna_dsn):
    write(sql, "s", 1, LIMIT)
    key = sql.execute("SELECT dna.bm25_lock_key('s', %s, '')", (MODEL,)).fetchone()[0]
    with psycopg.connect(dna_dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock_shared(%s)", (key,))   # a remover (or a compaction) holds it
        sql.execute("SET lock_timeout = '1s'")
        write(sql, "s", LIMIT + 1, LIMIT + 1)            # no wait, no error: left in the memtable
        assert memtable(sql, "s") == LIMIT + 1
        other.execute("SELECT pg_advisory_unlock_shared(%s)", (key,))
    write(sql, "s", LIMIT + 2, LIMIT + 2)
    assert memtable(sql, "s") == 0 and segments(sql, "s") == 1
    # The seal's lock is not kept: a compaction gets it at once.
    assert sql.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()[0]


def test_memories_written_one_at_a_time_stay_bounded(sql):
    rows = sql.execute(
        "SELECT count(*) FROM (SELECT dna.remember('mem', jsonb_build_object('summary', 'fact ' || i || ' about cell gene'), "
        "name => 'f' || i) FROM generate_series(1, %s) AS i) AS x", (LIMIT + 5,)).fetchone()[0]
    assert rows == LIMIT + 5
    assert memtable(sql, "mem") <= LIMIT
    assert segments(sql, "mem") >= 1


def test_sealed_segments_are_merged_in_pairs_by_the_write_that_seals(sql, model):
    # A binary counter of seals: 1 segment, 2 merged into 1, 2 (2k + 1k), 4 merged into 1 (1k + 1k, then 2k + 2k).
    for r, (count, sizes) in enumerate([(1, [1]), (1, [2]), (2, [1, 2]), (1, [4]), (2, [1, 4])]):
        write(sql, "s", r * (LIMIT + 1) + 1, (r + 1) * (LIMIT + 1))   # each last document seals
        assert memtable(sql, "s") == 0
        assert segments(sql, "s") == count
        got = [n for (n,) in sql.execute("SELECT n_docs FROM dna.dna_bm25_segments WHERE scope = 's' ORDER BY n_docs")]
        assert got == [k * (LIMIT + 1) for k in sizes]
    before = answers(sql, "s")
    sql.execute("SELECT dna.bm25_compact('s', full_merge => true)")
    assert answers(sql, "s") == before


def test_the_write_path_leaves_segments_past_the_cap_to_compaction(sql, model):
    cap = sql.execute("SELECT dna.bm25_write_merge_cap()").fetchone()[0]
    for name in ("b1", "b2"):                                    # two bulk statements: two segments past the cap
        sql.execute("SELECT count(*) FROM dna.index_documents('s', %s, %s, %s, NULL, %s)",
                    (["Doc"] * cap, [f"{name}-{i}" for i in range(cap)], [f"cell gene {name} w{i % 37}" for i in range(cap)],
                     MODEL))
    write(sql, "s", 1, LIMIT + 1)                                # a seal: nothing of its class to merge with
    write(sql, "s", LIMIT + 2, 2 * (LIMIT + 1))                  # a second: the pair merges, the big two stay
    got = [n for (n,) in sql.execute("SELECT n_docs FROM dna.dna_bm25_segments WHERE scope = 's' ORDER BY n_docs")]
    assert got == [2 * (LIMIT + 1), cap, cap]
    before = answers(sql, "s")
    sql.execute("SELECT dna.bm25_compact('s', full_merge => true)")
    assert segments(sql, "s") == 1 and answers(sql, "s") == before


def test_a_compaction_leaves_out_segments_another_transaction_is_merging(sql, model, dna_dsn):
    for r in range(3):                                        # three seals: 2k + 1k (the first two merged)
        write(sql, "s", r * (LIMIT + 1) + 1, (r + 1) * (LIMIT + 1))
    segs = [r[0] for r in sql.execute("SELECT seg_id FROM dna.dna_bm25_segments WHERE scope = 's' ORDER BY 1")]
    with psycopg.connect(dna_dsn) as other:                   # a merge in progress holds the segment rows
        other.execute("SELECT 1 FROM dna.dna_bm25_segments WHERE scope = 's' FOR UPDATE")
        assert sql.execute("SELECT dna.bm25_merge('s', %s, '', %s)", (MODEL, segs)).fetchone()[0] == -1
        report = sql.execute("SELECT dna.bm25_compact('s', full_merge => true, wait_ms => 0)").fetchone()[0]
        assert report["partitions"][0]["status"] == "ok"
        assert segments(sql, "s") == 2                        # left to the one merging them
    sql.execute("SELECT dna.bm25_compact('s', full_merge => true)")
    assert segments(sql, "s") == 1
