"""Citus-ready: one plane that distributes by scope (issue 16).

Revision ID: 0018_citus_ready
Revises: 0017_recall_past_ingest
Create Date: 2026-12-01

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``). Its schema
changes are SQL fragments in ``versions/0018_citus_ready/``, one set per topic (``before_<topic>.sql``
before the plane files, ``after_<topic>.sql`` after them, ``undo_<topic>.sql`` first on downgrade),
as in 0017.

What changed
------------
(each topic appends its paragraph here)
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_sql  # noqa: E402

revision = "0018_citus_ready"
down_revision = "0017_recall_past_ingest"
branch_labels = None
depends_on = None

# The plane files in the order a fresh install runs them.
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
         "bm25_write.sql", "documents.sql", "search.sql", "memory_time.sql", "memory_scoring.sql",
         "memory_ranking.sql", "memory_kinds.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
         "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql", "memory_contradictions.sql",
         "consolidate.sql", "receipts.sql", "tenancy.sql")
_BY_0017 = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25_write.sql", "documents.sql", "search.sql",
            "memory_scoring.sql", "memory_ranking.sql", "memory_as_of.sql", "memory_verbs.sql",
            "memory_lifecycle.sql", "memory_integrity.sql", "memory_contradictions.sql", "consolidate.sql",
            "receipts.sql")
_BY_0016 = ("embedding.sql", "bm25.sql", "bm25_lane.sql", "memory_write.sql", "tenancy.sql")
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ()
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0017_recall_past_ingest" if name in _BY_0017 else
                   "0016_answers_and_bounds" if name in _BY_0016 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A later revision freezes the texts
# this one released into versions/0018_citus_ready/ and this revision reads them there.
CHANGED: tuple[str, ...] = ("catalog.sql", "search_support.sql", "bm25.sql", "documents.sql", "search.sql",
                            "memory_scoring.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
                            "memory_lifecycle.sql", "memory_erasure.sql", "receipts.sql", "tenancy.sql")


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
