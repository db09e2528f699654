"""What issues 25, 26 and 27 still ask: speed that holds, batch writes, a first week without surprises.

Revision ID: 0023_still_open
Revises: 0022_first_week
Create Date: 2026-12-03

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 to 0022 do. Its schema changes are SQL fragments in ``versions/0023_still_open/``,
one set per topic (``before_<topic>.sql`` before the plane files, ``after_<topic>.sql`` after them,
``undo_<topic>.sql`` first on downgrade).

What changed
------------
turn_collapse (fusion.sql, search.sql, memory_verbs.sql; issue 25 item 4, issue 27 item 2): duplicate collapse no longer compares
conversation turns by their text (new ``dna.collapses_by_text(kind)``: false for Turn), in dna.search and in dna.recall's own collapse. A turn is indexed with
the turns before it, so turn i+1's text holds turn i's whole and 0022's default collapse dropped the earlier turn
(LoCoMo dev recall R@10 0.759 with diversity 'off', 0.722 with 'collapse'). Documents and other memories
collapse as before. No schema change.

citus_explain (search.sql, distribute.sql): ``dna.search(..., explain => true)`` with a query embedding
failed on Citus (XX000 "cannot switch local execution status ...": the call is delegated to the node
holding the scope, which executes its shards locally, and EXPLAIN of a distributed table fetches the
shard's plan over a connection). The dense lane's plan is now read from the scope's shard on this node
(new ``dna.shard_explained``), and Citus's local execution, which any EXPLAIN turns off for the rest of
the transaction, is set back on after it; explain answers as on one node (tests/citus/test_citus_explain.py).

citus_index (catalog.sql): ``dna index <folder>`` against a Citus coordinator failed 42P18 in
``dna.record_source_digests``: Citus sent its upsert to the scope's node with ``model_id`` in the ON
CONFLICT's WHERE as a parameter of no type. The WHERE now compares the proposed ``{model_id: digest}``
by containment (``NOT s.digests @> excluded.digests``, the same rows), with no variable in it
(tests/citus/test_citus_index_digests.py).

receipt_diversity (receipts.sql): a receipt did not record the diversity its answer ran with (0022's
dna.search / dna.recall collapse near-duplicates by default), so a receipt taken at 0021 replayed with
collapse on and lost the duplicates it had answered. dna.take_receipt now pins diversity (and
duplicate_similarity / mmr_lambda where used) in the stored args from the answer's account (new
``dna.receipt_diversity``); dna.replay runs a receipt that recorded none with the one it ran with: its
answer's account (taken at 0022), else 'off' (taken before 0022_first_week). Stored receipts are not
rewritten (tests/test_receipt_diversity.py, tests/test_receipt_diversity_migration.py).

search_cost (fusion.sql, search.sql; issue 26 item 7): the near-duplicate collapse above dna.search's lanes
costs less for the same answers. dna.text_key replaces each run of characters other than letters and
digits by a pattern that leaves a lone space alone (one regex match per punctuation mark instead of one
per word: the matches were the cost, ~150 us per 1,400-character abstract, now ~65) and skips its three
heading patterns for a text without a line break (there they could only match the whole text, which falls
back to the same key); the keys are those 0022 gave (tests/test_search_cost.py compares them). dna.search's
collapse reads the passage vectors only where a cosine is used (MMR, duplicate_similarity below 1,
explain), not for the default text rules. No schema change, no signature change.

memtable_ratio (bm25_write.sql, bm25_compact.sql, bm25_lane.sql; issue 26 item 1): a scope written only
through the SQL verbs keeps within 1.5x of its compacted lexical figure at every moment. The memtable
limit is 1000 documents (``dna.bm25_memtable_limit()``, was 2000: a full memtable cost ~0.1x of the
compacted figure per 1,000 documents, on top of a fixed ~0.1x); after a seal the write path merges the
segments below ``dna.bm25_write_merge_cap()`` (new, 16 x the limit) in pairs of one size class
(floor(log2(n_docs / limit)), a binary counter) instead of level 0 at 4 segments, so at most one
segment per class stays beside the memtable (each segment spreads the lane's budget and costs a rescore
round). ``dna.bm25_lane``'s exact path has a plain form with the memtable (no anti-join per posting
when the partition has no tombstone or shadowed row). No schema change: a memtable of 1001-2000
documents left by 0022 is sealed by the partition's next write; the downgrade restores 0022's texts
(limit 2000, level-0 merge at 4) and drops ``dna.bm25_write_merge_cap``.

policy_bound (search.sql, memory_verbs.sql; fragments before_/after_/undo_policy_bound.sql; issue 26 item 4):
the application role's statements keep the superuser's index conditions under row-level security. Every
width table gets valid_from = lower(valid_at) (a generated, stored column) and its index
dna_search_docs_<w>_valid_from reads it instead of the expression; dna.search's validity probe compares
valid_from > valid_time (leakproof, so an index condition beneath the policy: before, the role filtered
every row of the table). dna.recall's collapse step reads each hit's kind, name and tenant out of its JSON
in a MATERIALIZED CTE and joins the search rows on those plain columns (an index probe per hit beneath
the policy; before, the role hashed the whole scope). Answers are unchanged.

snippet_words (search_support.sql; new-user trial, highlights): a search highlight dropped the words
between its two fragments when they touched ("Django has a couple … options" for "a couple of options",
"on_commit … allows" for "`on_commit` allows"): ts_headline starts a second fragment that grew back to
the first one past short words and punctuation. dna.identifier_headline now gives back the body's text
between two fragments when it holds only punctuation, stop words and words of 3 characters or fewer (at
most 120 characters); any other gap stays " … ". No schema change (tests/test_snippet_words.py,
tests/test_snippet_words_migration.py).

scope_hint (memory_verbs.sql; new-user trial, misspelt scope): dna.get_memory, dna.memory_history and
the write verbs (forget, revive, ...) of a memory in a scope under which no row the caller can see
stands answered P0002 with "Nearest Engram names here: none". dna.memory_not_found's hint now names the
nearest scopes then ("Scope 'trialmme' has no documents or memories you can see; nearest scopes:
'trialmem'"), as reads of a missing scope do; a scope with rows keeps the nearest names. No schema change
(tests/test_scope_hint.py, tests/test_scope_hint_migration.py).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0023_still_open"
down_revision = "0022_first_week"
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
# The texts 0022 re-ran (its CHANGED) are frozen in versions/0022_first_week/, those 0021 re-ran in
# versions/0021_holds_in_use/, those 0020 re-ran in versions/0020_real_use/; and so on back.
_BY_0022 = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
            "documents.sql", "search.sql", "memory_verbs.sql", "memory_lifecycle.sql")
_BY_0021 = ("bm25_write.sql", "bm25_compact.sql", "memory_write.sql", "memory_read.sql", "memory_integrity.sql",
            "tenancy.sql")
_BY_0020 = ("memory_contradictions.sql", "consolidate.sql")
_BY_0019 = ("embedding.sql", "metadata.sql", "memory_kinds.sql", "memory_as_of.sql", "memory_batch.sql",
            "conversations.sql", "memory_erasure.sql", "receipts.sql", "distribute.sql")
_BY_0017 = ("memory_ranking.sql",)
_BY_0018 = ("memory_scoring.sql",)
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ()
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0022_first_week" if name in _BY_0022 else
                   "0021_holds_in_use" if name in _BY_0021 else
                   "0020_real_use" if name in _BY_0020 else
                   "0019_where_users_run" if name in _BY_0019 else
                   "0018_citus_ready" if name in _BY_0018 else
                   "0017_recall_past_ingest" if name in _BY_0017 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A file changed by a later revision has
# this revision's text frozen in versions/0023_still_open/ (this revision then reads it there).
CHANGED: tuple[str, ...] = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25_lane.sql", "bm25_write.sql", "bm25_compact.sql", "search.sql", "memory_verbs.sql", "receipts.sql", "distribute.sql")


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
