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

citus (issue 16, the runtime blockers of ``../shared/research/citus-probe.md``, fixed in the plane files;
the rules are the comment block "Citus rules" of ``sql/tenancy.sql``). No schema change for these; the
answers are those of 0017 (``tests/test_citus_migration.py``), the shapes are checked on the plans of
every statement the verbs run (``tests/test_citus_ready.py``). B3: the upserts of ``dna.index_document``,
``dna.index_documents`` (``updated_at``) and ``dna.record_document_sources`` (``recorded_at``) set
``excluded.<column>``, the proposed row's default ``now()`` (the same value), instead of calling ``now()``
in ``DO UPDATE SET``. B4: ``dna.search_config``, ``dna.model_prefixes``, ``dna.source_conflicts`` and
``dna.receipt_settings`` are PL/pgSQL (the same rows). B5: no function that reads ``dna_*`` tables is
called inside a statement that reads them: ``dna.search`` and ``dna.bm25`` run ``dna.bm25_lane`` by its
own statement into arrays that the next statement joins to the documents; ``dna.recall`` runs
``dna.search`` into a ``dna.search_hit[]`` and unnests it; ``dna.index_document`` reads the scope's
``ts_config`` before its INSERT; ``dna.take_receipt`` its settings before its INSERT;
``dna.as_of_past_texts`` and ``dna.recall`` call the new pure ``dna.memory_text_of(fields, spec)`` with the
Kind's ``embed_fields`` (which ``dna.memory_text`` now calls) instead of ``dna.memory_text`` per row;
``dna.source_conflicts`` asks ``dna.document_exists`` per row by its own statement; ``dna.forget``,
``dna.integrity_findings``, ``dna.memory_search_rows`` and ``dna.reconcile`` read the memory Kinds (and
the search rows, vectors they compare with) first, and an orphaned BM25 document is found by one
``NOT EXISTS`` per width table instead of ``dna.search_row_exists`` per row. B6: ``dna.register_model`` and ``dna.set_search_config`` never upsert the
(reference) tables ``dna_models`` / ``dna_search_config``: SELECT first, a plain INSERT only when absent,
a concurrent writer's ``unique_violation`` caught (a known model needs no write right at all). B7: the
reconsolidation UPDATE of ``dna.recall`` names ``i.scope = scope``; the passage DELETE of
``dna.index_documents`` names ``t.scope = $1``. S3: the tenant overlay of ``dna.search`` and
``dna.list_memories`` compares the sublink's scope with the scope argument instead of the outer row's.

op (issue 16, S2): the verb label recorded in ``dna_versions.op`` rides in the row instead of the
transaction-local setting ``dna.op`` (which never reaches a Citus worker): ``before_op.sql`` adds
``dna_instances.op`` (text, NULL) and drops ``dna.set_op``; the verbs write ``op`` with the row
(remember: ``INSERT … (…, op) … DO UPDATE SET …, op = excluded.op``; forget, revive, redact and the
reconsolidation UPDATE: ``SET …, op = '<verb>'``) and ``dna.instances_after_write`` records ``NEW.op``.
An UPDATE that does not name ``op`` is recorded as ``update``: ``after_op.sql`` creates the trigger
``dna_instances_before_op`` (BEFORE UPDATE OF op, new function ``dna.instances_op_named``), which marks
a label the statement wrote, and ``dna.instances_before_write`` keeps a marked label and clears any
other (the one the row kept from its previous write). The labels are those 0017 recorded.
``undo_op.sql`` drops the trigger and the column; the downgrade re-runs 0016's ``memory_write.sql``,
which brings ``dna.set_op`` back.

policy (issue 16, B1): ``dna.protect_table`` creates the policy ``dna_tenant_isolation`` from the new
``dna.tenant_policy(citus)``: a base row passes on its tenant alone (``tenant = '' OR …``), any other row
by ``dna.tenant_visible(tenant, dna.visible_tenants())``. Where the citus extension is installed
(``citus`` NULL: detected) the call is made per row, with no sublink, as Citus requires of a policy; on
one node it stays the InitPlan ``(SELECT dna.visible_tenants())`` (once per statement): measured as an
application role on 10,000 personal memories read by their owner, a lexical search takes 349 ms with
the InitPlan and 2,031 ms with the per-row call (a per-row probe of the maps by index, 1,302 ms, is no
cheaper form), while the base short-cut takes base rows from 122 ms to 33 ms in both forms
(``bench/RESULTS.md``). A server that gains Citus re-runs ``dna.protect_table`` on every protected table
(``dna.distribute()``). ``after_policy.sql`` re-creates the policy on every protected table;
``undo_policy.sql`` restores 0009's form. Both forms admit the same rows to every role
(``tests/test_tenancy.py`` passes with either).
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
CHANGED: tuple[str, ...] = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25.sql", "documents.sql",
                            "search.sql", "memory_scoring.sql", "memory_write.sql", "memory_as_of.sql",
                            "memory_verbs.sql", "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql",
                            "receipts.sql", "tenancy.sql", "distribute.sql")


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
