"""Dense recall and fusion at scale: issue 26's items left open after 0024.

Revision ID: 0025_dense_graph
Revises: 0024_at_scale
Create Date: 2026-12-04

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 to 0024 do. Its schema changes are SQL fragments in ``versions/0025_dense_graph/``,
one set per topic (``before_<topic>.sql`` before the plane files, ``after_<topic>.sql`` after them,
``undo_<topic>.sql`` first on downgrade).

What changed
------------
dense_graph (search.sql; fragments after_/undo_dense_graph.sql; issue 26 item 5): every width table's HNSW
index is rebuilt WITH (m = 16, ef_construction = 128), pgvector's defaults until now (ef_construction 64):
on 1M SciFact-derived documents (bench/scale.py's corpus) that graph's recall@10 against an exact scan
stopped at 0.947 even at hnsw.ef_search 1000, pgvector's maximum; built with 128 it reaches 0.966 at 600
(bench/ef_sweep.py). The new graph is built beside the old one (SHARE lock: reads go on, writes to that width
wait), then swapped in under the same name; maintenance_work_mem is raised to 1GB for the transaction when
lower. Cost: one full HNSW build per non-empty width table (~8 minutes per million 384-dim rows on 2 cores).
An index an operator dropped for a bulk load stays dropped (`dna db vector-index build` builds the head's
definition, pydna.maintenance.vector_index_sql). dna.search's dense lane sets hnsw.ef_search by the new
dna.hnsw_ef_search(k, depth, graph_rows): 0021's rule x (1 + 0.5 x max(0, log10(rows) - 5)), rows the width
table's pg_class.reltuples (the graph holds every scope of the table): 400 at k = 10 up to 100,000 rows, 600
at 1M; explain's dense part shows graph_rows and the rule. The downgrade rebuilds 0001's index and drops the
three-argument rule (tests/test_dense_graph.py; on Citus tests/citus/test_citus_dense_graph.py).

fused_cost (search.sql; issue 26 item 7): dna.search's fused statement is parsed and planned at every call
(its table and filters are the call's), and it held every part any call could use: explain's jsonb expressions
and the floors' counts (folded away at planning, but parsed and analysed each time), and the collapse read
through a shared subquery materialised into a pool, then three ordered ARRAY subqueries per walk, plus an
empty walk under mmr. The statement now holds only the parts the call uses (explain's expressions only with
explain, the floors' counts only with a floor, the past-text test only with past texts, one walk under mmr),
and each walk reads its vectors, texts and scores as one aggregate over one keyed probe per candidate; the
out-of-force count and the exact rule's row count are one statement instead of two. On SciFact (one claim,
the captured statement under EXPLAIN EXECUTE) planning 1.36 -> 1.11 ms and parsing 0.91 -> 0.57 ms; a whole
hybrid call 0.26 ms less backend CPU on average (12.34 -> 12.08 ms, both functions interleaved per claim at load
3.3-3.5; bench/RESULTS.md). The same rows, scores and explain (tests/test_search_conformance.py; SciFact nDCG@10
unchanged). No schema change.

fusion_scale (fusion.sql, search.sql; issue 26 item 5): dna.search's default convex fusion normalises each lane's
scores by z-score over its candidates, shifted so the lowest is 0 (new dna.z_score: (x - min) / population standard
deviation; all equal: 1; absent: 0), at dense_weight 0.5; before, min-max (dna.min_max) at 0.4. Min-max spreads
a lane whose candidates score nearly alike over the whole [0, 1]: on 1M documents (bench/scale.py's corpus, ~190
near-copies of each SciFact abstract sharing its words) the flat BM25 scores outweighed the dense lane and the
hybrid's nDCG@10 fell below the dense lane's (SciFact train claims: 0.404 against 0.458). Rule (bench/RESULTS.md,
"Fusion at 1M"): among the normalisations and dense weights whose hybrid at 1M is not below its better lane on
the train claims and which keep LoCoMo dev's recall targets (R@10 >= 0.75, any@10 >= 0.80), the best SciFact
train nDCG@10: z-score at 0.5 (0.7355; min-max 0.4 gave 0.7340; at 1M 0.473). Scores of the convex fusion are
then >= 0 in standard deviations, no longer in [0, 1]; RRF and a scope's own dense_weight are unchanged. The
downgrade gives min-max at 0.4 back (tests/test_search_fusion.py, tests/test_fusion_scale_migration.py).

policy_personal (tenancy.sql, memory_lifecycle.sql; issue 26 item 4): the application role paid up to ×1.28 the
superuser's CPU for dna.search over a personal partition, and dna.list_memories ran another plan there
(bench/policy_cost.py, row set ``mix personal``). The one-node policy names (SELECT dna.visible_tenants())
twice per protected table of each statement, and the role's verbs plan their statements at every call;
dna.visible_tenants was LANGUAGE sql, which the planner tried to inline at each of those plannings (parsing
and analysing its body, then giving up on its sub-selects) before the SQL-function executor ran it: on a
statement of two protected tables ~70 us of the role's ~160 us beyond the superuser's. It is now PL/pgSQL
(never inlined; its statement's plan kept for the session, replanned when the role changes:
tests/test_tenancy.py), with the same lists. dna.list_memories tested validity (valid_at @> now) in its scan;
a role may not use a column's statistics through an operator that is not leakproof, so its estimate of the
scan fell to a few rows and the tenant overlay's NOT EXISTS was probed per base row (3,000 index searches
for 3,000 personal memories) where the superuser hashed the partition's keys once. The validity test now
applies above the scan (OFFSET 0): both estimate the same leakproof conditions and both hash
(tests/test_policy_personal.py); same answers. The policies are unchanged (RLS ENABLEd and FORCEd, the same
rows admitted). No schema change.

lane_lexemes (bm25_lane.sql; issue 26 items 1 and 3): every read of the chunks and of the memtable in
dna.bm25_lane also names ``lexeme = ANY (lex)``, so the index is searched by lexeme on either side of a join.
After a full compaction of 30,000 documents written live the statement trigger's ANALYZE recorded the
memtable's table as empty while its index still held the compacted postings as dead entries (until VACUUM);
planned on that, the memtable arm read the whole partition's entries: dna.bm25 19.2 ms CPU p50 against 8.1
with this text on the same database (bench/sql_path_states.py; tests/test_lane_lexemes.py). Same answers.
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0025_dense_graph"
down_revision = "0024_at_scale"
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
# The texts 0024 re-ran (its CHANGED) are frozen in versions/0024_at_scale/, those 0023 re-ran in
# versions/0023_still_open/, those 0022 re-ran in versions/0022_first_week/; and so on back.
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
PREVIOUS = {name: ("0024_at_scale" if name in _BY_0024 else
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
# this revision's text frozen in versions/0025_dense_graph/ (this revision then reads it there).
CHANGED: tuple[str, ...] = ("bm25_lane.sql", "fusion.sql", "memory_lifecycle.sql", "search.sql", "tenancy.sql")


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
