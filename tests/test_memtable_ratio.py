"""A scope written only through the SQL verbs stays near its compacted speed at every moment (issue 26 item 1,
revision 0023 topic memtable_ratio): the memtable holds at most 1,000 documents, the write that seals merges
the small segments in pairs of one size class (a binary counter), and the lane's exact path reads a memtable
beside the segments in its plain form (no anti-join) when nothing is tombstoned or shadowed — every answer
the same as after ``dna.bm25_compact``. Plain SQL through psycopg; the sizes are those of
tests/test_bounded_memtable.py's one-document-at-a-time writer."""
from __future__ import annotations

import pytest

from test_bounded_memtable import LIMIT, MODEL, answers, memtable, segments, write


@pytest.fixture
def model(sql):
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))


def sizes(sql, scope: str) -> list[int]:
    return [n for (n,) in sql.execute("SELECT n_docs FROM dna.dna_bm25_segments WHERE scope = %s ORDER BY n_docs",
                                      (scope,))]


def lane(sql, scope: str, query: str, exhaustive: bool) -> tuple[list, dict]:
    """dna.bm25_lane's rows and its report (one transaction: the report is a transaction-local setting)."""
    with sql.transaction():
        terms = sql.execute("SELECT dna.bm25_terms(%s, 'english')", (query,)).fetchone()[0]
        rows = sql.execute("SELECT doc_id, score, exact FROM dna.bm25_lane(%s, %s, '', %s, 1.2, 0.4, 10, NULL, NULL, %s, true) "
                           "ORDER BY score DESC, doc_id", (scope, MODEL, terms, exhaustive)).fetchall()
        report = sql.execute("SELECT current_setting('dna.bm25_explain')::jsonb").fetchone()[0]
    return rows, report


def test_a_memtable_beside_segments_answers_as_compacted_on_the_plain_exact_path(sql, model):
    write(sql, "s", 1, 3 * (LIMIT + 1) + 400)            # three seals (2k + 1k) and 400 in the memtable
    assert sizes(sql, "s") == [LIMIT + 1, 2 * (LIMIT + 1)] and memtable(sql, "s") == 400
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 's'").fetchone()[0] == 0
    live = {q: lane(sql, "s", q, True) for q in ("protein expression in cancer cells", "rare0042 cell", "dose")}
    for rows, report in live.values():
        assert report["path"] == "exact" and rows and all(r[2] for r in rows)
    before = answers(sql, "s")
    sql.execute("SELECT dna.bm25_compact('s', full_merge => true)")
    assert memtable(sql, "s") == 0 and segments(sql, "s") == 1
    assert answers(sql, "s") == before
    assert {q: lane(sql, "s", q, True)[0] for q in live} == {q: v[0] for q, v in live.items()}


def test_a_scope_written_one_document_at_a_time_keeps_one_segment_per_size_class(sql, model):
    write(sql, "s", 1, 7 * (LIMIT + 1))                  # seven seals: 4k + 2k + 1k, as 7 in binary
    assert sizes(sql, "s") == [LIMIT + 1, 2 * (LIMIT + 1), 4 * (LIMIT + 1)] and memtable(sql, "s") == 0
    write(sql, "s", 7 * (LIMIT + 1) + 1, 8 * (LIMIT + 1))   # the eighth: one cascade into 8k
    assert sizes(sql, "s") == [8 * (LIMIT + 1)]
    assert sql.execute("SELECT level FROM dna.dna_bm25_segments WHERE scope = 's'").fetchone()[0] == 1
    before = answers(sql, "s")
    sql.execute("SELECT dna.bm25_compact('s', full_merge => true)")
    assert answers(sql, "s") == before


def test_removed_documents_leave_the_pairs_exact(sql, model):
    write(sql, "s", 1, 2 * (LIMIT + 1) + 10)
    sql.execute("SELECT dna.delete_document('s', 'Doc', 'd5', model_id => %s)", (MODEL,))       # sealed: a tombstone
    sql.execute("SELECT dna.index_document('s', 'Doc', 'd9', 'dose dose revised', NULL, %s)", (MODEL,))
    write(sql, "s", 2 * (LIMIT + 1) + 11, 3 * (LIMIT + 1))  # the third seal: no pair (2k + 1k)
    write(sql, "s", 3 * (LIMIT + 1) + 1, 4 * (LIMIT + 1))   # the fourth: 1k + 1k, then 2k + 2k (tombstones dropped)
    assert segments(sql, "s") == 1
    assert sql.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = 's'").fetchone()[0] == 0
    before = answers(sql, "s")
    assert before[0][0] == 4 * (LIMIT + 1) - 1
    sql.execute("SELECT dna.bm25_compact('s', full_merge => true)")
    assert answers(sql, "s") == before
