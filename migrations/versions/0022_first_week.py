"""A first week without surprises, and speed that holds: issue 26's remaining items, issue 27's.

Revision ID: 0022_first_week
Revises: 0021_holds_in_use
Create Date: 2026-12-03

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 to 0021 do. Its schema changes are SQL fragments in ``versions/0022_first_week/``,
one set per topic (``before_<topic>.sql`` before the plane files, ``after_<topic>.sql`` after them,
``undo_<topic>.sql`` first on downgrade).

What changed
------------
one_upkeep (documents.sql; issue 26 item 2): ``dna.index_document`` (and ``dna.remember``, which indexes
through it) writes with one statement, an UPDATE of the stored row or an INSERT of a new one as its probe
found, instead of INSERT … ON CONFLICT DO UPDATE, which fired both the INSERT and the UPDATE statement
triggers: one BM25 upkeep (``dna.bm25_sync``) per call instead of two. Under a race (the row came or went
since the probe) the statement that wrote nothing is followed by the upsert. No schema change; the
triggers, ``dna.index_documents`` and plain SQL writers are as they were. bench/live_ingest.py shows the
cost per document by step and the upkeeps per statement.

passage_headings (documents.sql; after_/undo_passage_headings.sql; issue 27 item 3): a search row's tsv also
holds its passage's heading context (new ``dna.heading_context(title, heading)``: the heading path without a
first title equal to the document's), so a passage is found lexically by the section it sits in; pydna embeds
the same text for a passage (title, heading context, body). The after fragment drops and adds every width
table's generated tsv with the new expression (one rewrite; rows without a heading keep their tsvector) and
derives the BM25 state of the rows with a heading again (``dna.reconcile(scope, 'rebuild_lexical')``); the
undo fragment does the same with 0021's expression. Stored vectors are not re-embedded. The rewrite
rebuilds each width table's indexes, its HNSW index included: on a large table plan the upgrade as a
re-index (Django's 16,058 passages: 2 min 15 s at load ~10 on 2 cores).

pagination (``memory_verbs.sql``, ``memory_lifecycle.sql``; fragments ``before_pagination.sql``,
``after_pagination.sql``, ``undo_pagination.sql``; issue 27 item 6): ``dna.recall`` and ``dna.list_memories``
take ``"offset"`` (integer, default 0), as ``dna.search`` has since 0016. A recall page is ranks offset+1 ..
offset+k of the recall at ``k => offset + k`` (its pool and lane depths; offset + k at most 1000); a listing
page skips ``offset`` memories of its one total order (created desc, then name, kind, tenant bytewise; offset
0..1000000). Both answers say ``offset`` and ``next_offset`` (where the next page starts, NULL on the last);
a negative or too large offset is 22023 with a hint. The 0021 signatures are dropped before the plane files
run; on a database Citus already distributes, the new ones are delegated by scope after them (as
``dna.distribute`` does); the downgrade drops them and re-runs the released texts.

diversity (fusion.sql, search.sql, memory_verbs.sql; fragments before_diversity.sql, undo_diversity.sql; issue 27
item 2): near-duplicates no longer crowd an answer. ``dna.search`` gains ``diversity`` ('collapse', the default;
'mmr'; 'off', the answer before), ``duplicate_similarity`` and ``mmr_lambda``; ``dna.recall`` gains ``diversity``
('collapse' or 'off') and ``duplicate_similarity``, passed to dna.search. A hit whose passage has the same
``dna.text_key`` (letters and digits, lower-cased) as one ranked above it, or a cosine between the stored passage
vectors >= ``duplicate_similarity`` (default ``dna.default_duplicate_similarity()`` = 1: the text alone), is collapsed into it; 'mmr' then orders the rest by
Maximal Marginal Relevance (``dna.default_mmr_lambda()`` 0.7). ``dna.diversify`` (fusion.sql) walks the ranking;
explain names what was collapsed into each hit. The 0021 signatures of dna.search and dna.recall are dropped
before the plane files run and come back on downgrade. Defaults chosen by bench/diversity.py (SciFact train, the
duplicate set; docs/hybrid-search.md). Collapse reads the vectors and texts of the first 2 x (offset + k) + 8
candidates, and of the whole ranking only when those hold fewer than offset + k distinct hits (the same
answer: the walk is in rank order). With topic pagination, dna.recall's signature ends ``"offset"``,
``diversity``, ``duplicate_similarity``; after_pagination.sql delegates the new dna.search on Citus too.

identifiers (catalog.sql, search_support.sql, bm25.sql, bm25_lane.sql, search.sql; issue 27 item 4):
identifiers (``snake_case``, ``dotted.names``, ``CamelCase``) are found as written and by their parts.
``dna.text_tsvector`` adds to ``to_tsvector`` the lexemes of a text's identifiers
(``dna.identifier_tsvector`` over ``dna.identifier_tokens`` / ``dna.identifier_lexemes``, new in
search_support.sql): the whole identifier in lower case (``on_commit``, ``django.db.transaction``), a dotted
name's runs of segments (``db.transaction``) and identifier segments, its words (``commit``, ``transact``,
``queri``, ``set``), less what the parser already gave. Documents, memories, their history and queries all
take it. ``dna.bm25_terms`` lists an identifier's whole lexeme ``dna.identifier_weight()`` = 2 times and
``dna.bm25_lane`` weighs a term by its count (idf x count), so the page that holds ``on_commit`` ranks above
pages that repeat "commit". Highlights (``dna.identifier_headline``) mark an identifier whole
(«transaction.on_commit»). ``after_identifiers.sql`` tokenizes again the search rows and version texts
stored before (only rows whose tsvector changes; the BM25 trigger moves their postings and statistics);
``undo_identifiers.sql`` puts 0021's ``dna.text_tsvector`` back and tokenizes them again the old way.
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0022_first_week"
down_revision = "0021_holds_in_use"
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
# The texts 0021 re-ran (its CHANGED) are frozen in versions/0021_holds_in_use/, those 0020 re-ran in
# versions/0020_real_use/, those 0019 re-ran in versions/0019_where_users_run/; and so on back.
_BY_0021 = ("catalog.sql", "bm25_write.sql", "bm25_compact.sql", "search.sql", "memory_write.sql",
            "memory_verbs.sql", "memory_read.sql", "memory_integrity.sql", "tenancy.sql")
_BY_0020 = ("memory_contradictions.sql", "consolidate.sql")
_BY_0019 = ("embedding.sql", "search_support.sql", "metadata.sql", "bm25.sql", "bm25_lane.sql",
            "documents.sql", "memory_kinds.sql", "memory_as_of.sql", "memory_batch.sql", "conversations.sql",
            "memory_lifecycle.sql", "memory_erasure.sql", "receipts.sql", "distribute.sql")
_BY_0018 = ("fusion.sql", "memory_scoring.sql")
_BY_0017 = ("memory_ranking.sql",)
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ()
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0021_holds_in_use" if name in _BY_0021 else
                   "0020_real_use" if name in _BY_0020 else
                   "0019_where_users_run" if name in _BY_0019 else
                   "0018_citus_ready" if name in _BY_0018 else
                   "0017_recall_past_ingest" if name in _BY_0017 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A file changed by a later revision has
# this revision's text frozen in versions/0022_first_week/ (this revision then reads it there).
CHANGED: tuple[str, ...] = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
                            "documents.sql", "search.sql", "memory_verbs.sql", "memory_lifecycle.sql")


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
