"""Holds in use: speed as an application role and after a bulk load, beside tantivy; a first week of use.

Revision ID: 0021_holds_in_use
Revises: 0020_real_use
Create Date: 2026-12-02

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 to 0020 do. Its schema changes are SQL fragments in ``versions/0021_holds_in_use/``,
one set per topic (``before_<topic>.sql`` before the plane files, ``after_<topic>.sql`` after them,
``undo_<topic>.sql`` first on downgrade).

What changed
------------
reindex_documents (memory_integrity.sql): ``dna.reconcile(scope, 'reembed', model_id)`` also returns
``documents_to_embed``, the documents with no vector under model_id as another model_id holds them
(every passage with its text, heading and span, and the document's metadata; new
``dna.reembed_documents``), so that ``dna reindex --model`` covers documents as well as memories.

index_digests (catalog.sql; before_/undo_index_digests.sql): ``dna_document_sources`` gains ``digests``
(jsonb, ``{model_id: digest}``, ``{}`` for the rows already there); ``dna.record_source_digests``
records them after ``dna index`` writes, ``dna.unchanged_sources`` says which inputs are unchanged
before they are split into passages. The downgrade drops the column and both functions.

hard_edges (issue 27 item 8): dna.search's dense lane keeps the ties of its cut (``FETCH FIRST depth ROWS WITH
TIES``) and takes its depth by key, so equal cosines no longer depend on which of them the graph or a bounded sort
returned first: pages of any k compose (top k is a prefix of top 2k) over tied documents on every route
(search.sql).

dense_depth (issue 26 item 5): the dense lane searches the HNSW graph at ``hnsw.ef_search =
dna.hnsw_ef_search(k, depth)`` = least(1000, greatest(40, 4 × depth, 10 × k)) (400 for k = 10) instead of
its depth (100), set for its own transaction beside ``hnsw.iterative_scan = strict_order``; recall@10
against an exact scan on 5,000 random vectors goes from 0.76 to 1.00 (tests/test_dense_depth.py,
bench/dense_recall.py). When the exact rule gives the lane to HNSW the statement also runs with sorts
off (as with sequential scans off): the planner priced the wider graph search above a bitmap scan and sort
of up to ~20,000 rows. explain's dense part reports the ef_search in force and the rule (``ef_search_rule``).
``search.sql`` re-runs; no schema change; the downgrade drops the new function.

bounded_memtable (bm25_write.sql, bm25_compact.sql; issue 26 items 1 and 3): the BM25 write path bounds the memtable itself. A statement that leaves more than
``dna.bm25_memtable_limit()`` (2,000) documents in a partition's memtable seals them into a segment
(``dna.bm25_bound_memtable``, the seal of ``dna.bm25_compact``) and merges level 0 once it holds 4
segments, so a scope written only through the SQL verbs stays near its compacted speed; higher levels stay
``dna.bm25_compact``'s (``dna.bm25_merge`` skips segments another transaction is merging). The write paths and
compaction also ANALYZE the BM25 tables they changed once the rows changed since the last ANALYZE reach
200 + a quarter of it (``dna.bm25_keep_statistics``), so the lanes' plans never wait for autovacuum. Stored data
is not rebuilt: a memtable already past the limit is sealed by the next write to its partition.

policy_inline (issue 26 item 4): on one node the tenant policy writes ``dna.tenant_visible``'s
test out inline, ``tenant = '' OR tenant = ANY ((SELECT dna.visible_tenants())::text[]) OR (NOT
starts_with(tenant, 'personal:') AND '*' = ANY ((SELECT dna.visible_tenants())::text[]))`` (``dna.tenant_policy``,
tenancy.sql): PostgreSQL did not inline the call (its argument, a sub-select, is used twice in the body), so
every non-base row ran the SQL-function executor. Same rows admitted; ``after_policy_inline.sql`` re-creates
every protected table's policy (not where citus is installed: that form is unchanged),
``undo_policy_inline.sql`` gives 0020's policies back. search.sql: the HNSW lane's statement runs without
bitmap scans for every caller (before: only with past texts), so that a role under row-level security, whose
estimate the policy lowers, takes HNSW as the superuser does. ``bench/policy_cost.py`` measures both.

memory_reads (memory_read.sql, new; memory_write.sql; memory_verbs.sql; before_/undo_memory_reads.sql): ``dna_versions`` gains
``recorded_by`` (the role a version was written as, set by ``dna.versions_append_only`` whatever the INSERT
said; NULL for the versions already there); ``dna.get_memory`` reads one memory by name as it stands and
``dna.memory_history`` its versions oldest first, with who wrote each (who forgot a shared memory); a name
not there raises the write verbs' P0002, now one function (``dna.memory_not_found``, memory_verbs.sql,
which ``dna.lock_memory`` calls). The downgrade drops the column and the three functions.
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0021_holds_in_use"
down_revision = "0020_real_use"
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
# The texts 0020 re-ran (its CHANGED) are frozen in versions/0020_real_use/, those 0019 re-ran in
# versions/0019_where_users_run/; every other plane file's text is where 0019 found it.
_BY_0020 = ("memory_verbs.sql", "memory_contradictions.sql", "consolidate.sql")
_BY_0019 = ("catalog.sql", "embedding.sql", "search_support.sql", "metadata.sql", "bm25.sql", "bm25_lane.sql",
            "bm25_write.sql", "bm25_compact.sql", "documents.sql", "search.sql", "memory_kinds.sql",
            "memory_write.sql", "memory_as_of.sql", "memory_batch.sql", "conversations.sql",
            "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql", "receipts.sql",
            "tenancy.sql", "distribute.sql")
_BY_0018 = ("fusion.sql", "memory_scoring.sql")
_BY_0017 = ("memory_ranking.sql",)
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ("memory_read.sql",)
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0020_real_use" if name in _BY_0020 else
                   "0019_where_users_run" if name in _BY_0019 else
                   "0018_citus_ready" if name in _BY_0018 else
                   "0017_recall_past_ingest" if name in _BY_0017 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A file changed by a later revision has
# this revision's text frozen in versions/0021_holds_in_use/ (this revision then reads it there).
CHANGED: tuple[str, ...] = ("catalog.sql", "bm25_write.sql", "bm25_compact.sql", "search.sql",
                            "memory_write.sql", "memory_verbs.sql", "memory_read.sql", "memory_integrity.sql",
                            "tenancy.sql")


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
