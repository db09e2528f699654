"""Speed at every scale: issue 26's items left open.

Revision ID: 0024_at_scale
Revises: 0023_still_open
Create Date: 2026-12-04

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 to 0023 do. Its schema changes are SQL fragments in ``versions/0024_at_scale/``,
one set per topic (``before_<topic>.sql`` before the plane files, ``after_<topic>.sql`` after them,
``undo_<topic>.sql`` first on downgrade).

What changed
------------
scope_model (search_support.sql, memory_verbs.sql; issue 26 items 4 and 7): a search or recall that names no
model_id picked the scope's model by counting every row of the scope the caller can see (dna.scope_model,
and dna.recall's own copy of it, over dna.scope_models), at every call: 2-3 ms at SciFact's 5,183 documents, a scan of the scope at 1M. A scope
whose rows carry one model_id (the common case) is now answered by two probes of each width table's
(scope, model_id, valid_from) index; with several, the documents are counted as before; dna.recall calls
dna.scope_model. Same answers, but one: 0023's dna.scope_model (LANGUAGE sql) compared m.dims with itself
(the column shadowed its parameter dims), so a search with a 768-dim query and no model_id of a scope
whose largest model is 384-dim got that model and was refused (22023); it now gets the scope's 768-dim
model (tests/test_scope_model.py, tests/test_at_scale_migration.py). No schema change.

write_statistics (bm25_write.sql; issue 26 item 3): the write path keeps the search tables' statistics true,
as 0021 made it keep the BM25 tables'. dna.index_documents probes each element's stored row by its unique
key; on a width table analyzed while empty (a fresh install, then a bulk load) the planner chose the
(scope, model_id, valid_from) index for that probe, a scan of the scope per element: 10,000-document
dna.index_staged batches took 11 s for the first two and minutes each after. dna.bm25_sync, the statement
trigger of every width table, now ends with dna.bm25_keep_statistics on the table it fired on (ANALYZE
when the changes since the last one reach 200 + a quarter of its analyzed rows; never waiting; only for a
role that may). No schema change (tests/test_search_statistics.py).

vector_inline (fragments after_/undo_vector_inline.sql; issue 26 items 5 and 7): every width table keeps its
vectors in the row (ALTER COLUMN embedding SET STORAGE MAIN) instead of pgvector's EXTERNAL, under which a
row of text, tsvector and a 384-dim vector passed the 2 kB TOAST threshold and the vector moved out of
line: the dense lane's exact scan (scopes of at most dna.exact_scan_rows() rows: dna.recall's memory
scopes) fetched each vector from TOAST (bench/exact_lane.py, the exact statement alone over 5,183 SciFact
rows: 15.5 ms CPU at 0023, 4.5 with this topic and exact_lane). Catalog only, no rewrite: rows keep their layout until
written again (VACUUM FULL rewrites a table; docs/operations.md). On Citus, which refuses SET STORAGE on a
distributed table, the coordinator's table is altered without DDL propagation and each shard by
run_command_on_shards (tests/test_vector_inline.py, tests/citus/test_citus_vector_inline.py).

exact_lane (search.sql; issue 26 items 5 and 7): dna.search's exact dense lane (a scope of at most
dna.exact_scan_rows() rows, exact => true, a filter that keeps few rows, an HNSW scan that ran dry) rounded
the cosine of every row of the partition (dna.score_round: numeric rounding, ~1 us a row) to order it; it now
orders the partition by the raw cosine and rounds only its first depth + 64 rows (ties included), and the
whole partition only when the last of those rounds as high as the depth-th (new dna.exact_dense_sql). Same
rows (rounding is monotone); dna.search's exact lane over 5,183 rows 25.4 -> 9.0 ms CPU with vector_inline
(bench/exact_lane.py).

ingest_cost (search_support.sql; issue 26 item 6): dna.identifier_tokens, the identifier part of
dna.text_tsvector (0022), split every text into its word tokens through the SQL executor before filtering
them: ~590 of the ~1,030 us of backend CPU a document cost in a 1M-document bulk load (to_tsvector itself
~185). Every identifier it keeps needs an underscore, a dot between name characters or a CamelCase run, so
one scan for those now decides and a text with none (9 SciFact abstracts in 10) is not split at all. The
same tokens, so the same tsvectors: stored rows stay valid (tests/test_ingest_cost.py compares with 0023's
function on the tests/data excerpt, edge cases and 2,000 random texts).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0024_at_scale"
down_revision = "0023_still_open"
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
# The texts 0023 re-ran (its CHANGED) are frozen in versions/0023_still_open/, those 0022 re-ran in
# versions/0022_first_week/, those 0021 re-ran in versions/0021_holds_in_use/; and so on back.
_BY_0023 = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25_lane.sql", "bm25_write.sql", "bm25_compact.sql",
            "search.sql", "memory_verbs.sql", "receipts.sql", "distribute.sql")
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
PREVIOUS = {name: ("0023_still_open" if name in _BY_0023 else
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
# this revision's text frozen in versions/0024_at_scale/ (this revision then reads it there).
CHANGED: tuple[str, ...] = ("search_support.sql", "bm25_write.sql", "search.sql", "memory_verbs.sql")


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
