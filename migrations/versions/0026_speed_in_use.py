"""Speed that holds in real use: issue 26's items left open after 0025.

Revision ID: 0026_speed_in_use
Revises: 0025_dense_graph
Create Date: 2026-12-07

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 to 0025 do. Schema changes, if a topic has any, are SQL fragments in
``versions/0026_speed_in_use/`` (``before_<topic>.sql``, ``after_<topic>.sql``, ``undo_<topic>.sql``).

What changed
------------
any_statistics (bm25_lane.sql, bm25_compact.sql; fragments after_/undo_any_statistics.sql; issue 26 item 3): the BM25
lane's plans no longer depend on the planner's statistics of its tables. With none (a restore, a server upgrade,
tables never analyzed: every partition estimated at one row) the lane read the chunks through the merges' index
(scope, model_id, tenant, seg_id), or as the outer side of a join, and filtered every chunk of the partition by
lexeme: dna.bm25 x3.6 / x24 p50 / p95 of its fresh-statistics figure on a 30,000-document scope
(bench/lane_states.py --stats, bench/RESULTS.md). Every read of the chunks in dna.bm25_lane is now a probe per
query term (LATERAL ... OFFSET 0, lexeme = q.lexeme) or per chosen chunk (its whole key); the merges' index is
rebuilt partial, dna_bm25_chunks_merge ... WHERE n > 0 (every chunk holds a posting, so it holds every chunk),
usable only by a statement that names n > 0, as dna.bm25_merge's two statements now do and no statement of the
lane does; and the memtable gets its own partial index, dna_bm25_docs_memtable (scope, model_id, tenant) INCLUDE
(doc_len) WHERE seg_id IS NULL, for N and the memtable's size (planned without statistics, that count read the
partition's documents by primary key). Same answers (tests/test_any_statistics.py counts the rows each call
reads with the statistics removed: 0025 read 8,370 chunk rows where head reads at most 4 per chunk of the
query's terms; tests/test_any_statistics_migration.py: 0025 -> head -> 0025 with segments, memtable and
tombstones). Cost: one build of each index.

analyze_cost (bm25_write.sql; issue 26 item 2): dna.bm25_keep_statistics, the write path's ANALYZE, samples the
BM25 tables with a statistics target of 10 (3,000 rows) instead of the server's default (100: 30,000 rows); the
search tables keep the server's. The memtable and the chunks turn over at every seal and merge, so a scope
written one document at a time analyzed them about every hundred documents: ~105 ms for 72,000 memtable
postings, 15 ms at target 10 (~90 ms and 13 ms for the chunks), up to ~0.4 ms of every document's write. What
the lanes need of these tables' statistics is the row counts (they read them by key whatever else the
statistics say: topic any_statistics), which the small sample gives as exactly. Autovacuum's ANALYZE and a
manual one keep the server's target (tests/test_write_statistics.py).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0026_speed_in_use"
down_revision = "0025_dense_graph"
branch_labels = None
depends_on = None

# The plane files in the order a fresh install runs them.
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "metadata.sql", "bm25.sql", "bm25_lane.sql",
         "bm25_write.sql", "bm25_compact.sql", "documents.sql", "search.sql", "memory_time.sql", "memory_scoring.sql",
         "memory_ranking.sql", "memory_kinds.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
         "memory_batch.sql", "conversations.sql", "memory_lifecycle.sql", "memory_read.sql", "memory_erasure.sql",
         "memory_integrity.sql",
         "memory_contradictions.sql",
         "consolidate.sql", "receipts.sql", "tenancy.sql", "distribute.sql")
# The texts 0025 re-ran (its CHANGED) are frozen in versions/0025_dense_graph/, those 0024 re-ran in
# versions/0024_at_scale/, those 0023 re-ran in
# versions/0023_still_open/, those 0022 re-ran in versions/0022_first_week/; and so on back.
_BY_0025 = ("bm25_lane.sql", "fusion.sql", "memory_lifecycle.sql", "search.sql", "tenancy.sql")
_BY_0024 = ("search_support.sql", "bm25_write.sql", "search.sql", "memory_verbs.sql")
_BY_0023 = ("catalog.sql", "fusion.sql", "bm25_lane.sql", "bm25_compact.sql", "receipts.sql", "distribute.sql")
_BY_0022 = ("bm25.sql", "documents.sql", "memory_lifecycle.sql")
_BY_0021 = ("memory_write.sql", "memory_read.sql", "memory_integrity.sql", "tenancy.sql")
_BY_0020 = ("memory_contradictions.sql", "consolidate.sql")
_BY_0019 = ("embedding.sql", "metadata.sql", "memory_kinds.sql", "memory_as_of.sql", "memory_batch.sql",
            "conversations.sql", "memory_erasure.sql")
_BY_0017 = ("memory_ranking.sql",)
_BY_0018 = ("memory_scoring.sql",)

# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ()
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0025_dense_graph" if name in _BY_0025 else
                   "0024_at_scale" if name in _BY_0024 else
                   "0023_still_open" if name in _BY_0023 else
                   "0022_first_week" if name in _BY_0022 else
                   "0021_holds_in_use" if name in _BY_0021 else
                   "0020_real_use" if name in _BY_0020 else
                   "0019_where_users_run" if name in _BY_0019 else
                   "0018_citus_ready" if name in _BY_0018 else
                   "0017_recall_past_ingest" if name in _BY_0017 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A file changed by a later revision has
# this revision's text frozen in versions/0026_speed_in_use/ (this revision then reads it there).
CHANGED: tuple[str, ...] = ("bm25_lane.sql", "bm25_write.sql", "bm25_compact.sql")


def changed_files() -> list[str]:
    """The plane files this revision re-runs, in ORDER."""
    return [name for name in ORDER if name in CHANGED]


def _released(name: str) -> str | None:
    """Where this revision's text of ``name`` is: frozen here once a later revision changed it."""
    return revision if (_FRAGMENTS / name).exists() else None


def _fragments(prefix: str) -> list[str]:
    return sorted(p.name for p in _FRAGMENTS.glob(f"{prefix}_*.sql")) if _FRAGMENTS.is_dir() else []


def _added_functions() -> list[str]:
    """Functions the changed files define that the texts they replace did not."""
    now: set[str] = set()
    before: set[str] = set()
    for name in changed_files():
        now |= defined_functions(name, _released(name))
        if name not in NEW:
            before |= defined_functions(name, PREVIOUS[name])
    return sorted(now - before)


def _run(name: str, frozen_in: str | None) -> None:
    """One ``op.execute`` per statement of a plane file or fragment (Citus: one command each)."""
    for statement in read_statements(name, frozen_in=frozen_in):
        op.execute(statement)


def upgrade() -> None:
    for fragment in _fragments("before"):
        _run(fragment, revision)
    for name in changed_files():
        _run(name, _released(name))
    for fragment in _fragments("after"):
        _run(fragment, revision)


def downgrade() -> None:
    for fragment in _fragments("undo"):
        _run(fragment, revision)
    for name in _added_functions():
        op.execute(f"DROP FUNCTION IF EXISTS dna.{name}")
    for name in ORDER:
        if name in changed_files() and name not in NEW:
            _run(name, PREVIOUS[name])
