"""Recall above search, a fast as-of, bulk ingest near its floor.

Revision ID: 0017_recall_past_ingest
Revises: 0016_answers_and_bounds
Create Date: 2026-12-01

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``). Its schema
changes are SQL fragments in ``versions/0017_recall_past_ingest/``, one set per topic:

- ``before_<topic>.sql`` run before the plane files (new tables, indexes and types; drops of
  functions whose signature changes, so that ``CREATE OR REPLACE`` does not leave the old overload
  beside the new);
- ``after_<topic>.sql`` run after them (grants, comments, backfills that call the new functions);
- ``undo_<topic>.sql`` run first on downgrade (drops what ``before_``/``after_`` created, and the
  new-signature functions), before the previous texts are re-run.

What changed
------------
(each topic appends its paragraph here)

asof (issue 13 item 4, an ``as_of`` recall at p95 <= 100 ms at 10,000 memories): the as_of machinery
of ``dna.recall`` moves into the new plane file ``memory_as_of.sql``: ``dna.as_of_past_texts`` (the
memories whose text believed at as_of is not today's, with the past tsvector only when it matches
the query) and ``dna.as_of_report`` (as_of, as_of_truncated, as_of_past_text, as_of_redacted).
``dna.search`` gains ``past dna.past_text[]`` (the typed form of ``past_texts``, what ``dna.recall``
passes: no JSON built and parsed per read; new composite type ``dna.past_text``, so the old
signature is dropped first), scores only the past texts the lane can rank, cuts its lexical lane at
the depth plus at most as many more rows (a second run only when the records leaving it would starve
it), and keeps its dense lane on HNSW where the exact rule says so (bitmap scans off with past texts; its
receipt reads the plan under those settings). Same answers, but for the dense lane of an as_of recall
above ``dna.exact_scan_rows()`` rows (HNSW, where the planner had read the partition exactly) and
``as_of_past_text`` sorted bytewise (as ``as_of_truncated``). New index ``dna_versions_scope_id_version``
(scope, id, version): the version believed at as_of, one probe per memory restated since.
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_sql  # noqa: E402

revision = "0017_recall_past_ingest"
down_revision = "0016_answers_and_bounds"
branch_labels = None
depends_on = None

# The plane files in the order a fresh install runs them.
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql", "documents.sql",
         "search.sql", "memory_time.sql", "memory_scoring.sql", "memory_kinds.sql", "memory_write.sql",
         "memory_as_of.sql", "memory_verbs.sql", "memory_erasure.sql", "memory_integrity.sql", "consolidate.sql", "receipts.sql",
         "tenancy.sql")
_BY_0016 = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
            "documents.sql", "search.sql", "memory_scoring.sql", "memory_write.sql", "memory_verbs.sql",
            "receipts.sql", "tenancy.sql")
# Where the text released before this revision is frozen, for every plane file.
PREVIOUS = {name: "0016_answers_and_bounds" if name in _BY_0016 else "0015_governed_history" for name in ORDER}
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ("memory_as_of.sql",)
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A later revision freezes the texts
# this one released into versions/0017_recall_past_ingest/ and this revision reads them there.
CHANGED: tuple[str, ...] = ("search.sql", "memory_as_of.sql", "memory_verbs.sql")


def changed_files() -> list[str]:
    """The plane files this revision re-runs, in ORDER."""
    return [name for name in ORDER if name in CHANGED]


def _released(name: str) -> str | None:
    """Where this revision's text of ``name`` is: frozen here once a later revision changed it."""
    return revision if (_FRAGMENTS / name).exists() else None


def _fragments(prefix: str) -> list[str]:
    return sorted(p.name for p in _FRAGMENTS.glob(f"{prefix}_*.sql"))


def _added_functions() -> list[str]:
    """Functions the changed files define that the texts they replace did not."""
    now: set[str] = set()
    before: set[str] = set()
    for name in changed_files():
        now |= defined_functions(name, _released(name))
        if name not in NEW:
            before |= defined_functions(name, PREVIOUS[name])
    return sorted(now - before)


def upgrade() -> None:
    for fragment in _fragments("before"):
        op.execute(read_sql(fragment, frozen_in=revision))
    for name in changed_files():
        op.execute(read_sql(name, frozen_in=_released(name)))
    for fragment in _fragments("after"):
        op.execute(read_sql(fragment, frozen_in=revision))


def downgrade() -> None:
    for fragment in _fragments("undo"):
        op.execute(read_sql(fragment, frozen_in=revision))
    added = _added_functions()
    if added:
        op.execute(" ".join(f"DROP FUNCTION IF EXISTS dna.{name};" for name in added))
    for name in ORDER:
        if name in changed_files() and name not in NEW:
            op.execute(read_sql(name, frozen_in=PREVIOUS[name]))
