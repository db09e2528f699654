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

score_round (issue 11, the SciFact lane's fixed cost): ``dna.score_round`` is PL/pgSQL (the same
expression, STRICT, IMMUTABLE): as a STRICT SQL function it was never inlined and the SQL function
executor's per-call setup was half its cost (100,000 calls: 1.14 s against 0.60 s; dna.search rounds
~200 scores a query). Same values for every input (compared on 100,000 of them). No schema change.

distribute (issue 16 items 2 and 3, helper citus-guard): the new plane file ``sql/distribute.sql`` (in
``ORDER`` after ``tenancy.sql``, ``NEW``). ``dna.distribute(shard_count)`` puts an installed pydna on a Citus
cluster, run once by a DBA on the coordinator: the placement of every table comes from the catalog
(``dna.distribution_plan``: ``dna_kinds``, ``dna_models``, ``dna_search_config`` reference tables; the
tenancy maps per-node plain tables copied to every worker, ``dna.sync_tenancy_maps``, since a policy
must not read a Citus table, citus-probe B5c; ``dna_index_staging`` and ``dna_api_keys`` on the
coordinator; every other table with a scope column, ``dna_instances`` first, distributed by ``scope``
and colocated with it; a table it cannot place is refused); with ``citus.enable_unsafe_triggers`` (B2)
and ``citus.multi_shard_modify_mode = sequential`` set locally it drops the AFTER TRUNCATE triggers of
the distributed tables (B8), distributes, and delegates the scope-routed verbs with
``create_distributed_function(…, 'scope', colocate_with := 'dna.dna_instances')`` (``dna.search`` and
``dna.bm25`` forced, S1). Idempotent; without Citus it refuses (0A000, hint docs/scale-out.md) and changes
nothing. ``dna.distribution()`` reports the state; ``dna.clear_width(dims)`` replaces TRUNCATE of a width
table scope by scope (on one server too). Every call to Citus goes through EXECUTE, so the file installs
anywhere. No table changes, so no fragments. From this revision on every plane file and fragment runs
one statement per ``op.execute`` (``sql_files.read_statements``, cut by PostgreSQL's parser, pglast: B9),
as does the downgrade's drop of the added functions; 0002's downgrade drops its four triggers in one
``op.execute`` each (the same statements, in the same order and transaction).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0018_citus_ready"
down_revision = "0017_recall_past_ingest"
branch_labels = None
depends_on = None

# The plane files in the order a fresh install runs them.
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
         "bm25_write.sql", "documents.sql", "search.sql", "memory_time.sql", "memory_scoring.sql",
         "memory_ranking.sql", "memory_kinds.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
         "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql", "memory_contradictions.sql",
         "consolidate.sql", "receipts.sql", "tenancy.sql", "distribute.sql")
_BY_0017 = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25_write.sql", "documents.sql", "search.sql",
            "memory_scoring.sql", "memory_ranking.sql", "memory_as_of.sql", "memory_verbs.sql",
            "memory_lifecycle.sql", "memory_integrity.sql", "memory_contradictions.sql", "consolidate.sql",
            "receipts.sql")
_BY_0016 = ("embedding.sql", "bm25.sql", "bm25_lane.sql", "memory_write.sql", "tenancy.sql")
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ("distribute.sql",)
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0017_recall_past_ingest" if name in _BY_0017 else
                   "0016_answers_and_bounds" if name in _BY_0016 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A later revision freezes the texts
# this one released into versions/0018_citus_ready/ and this revision reads them there.
CHANGED: tuple[str, ...] = ("fusion.sql", "distribute.sql")


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


def _run(name: str, frozen_in: str | None) -> None:
    """One ``op.execute`` per statement of a plane file or fragment (B9: Citus forwards an
    ``op.execute`` string to the workers as one prepared statement, which holds one command)."""
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
