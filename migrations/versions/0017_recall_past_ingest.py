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

layout: ``sql/consolidate.sql`` (620 lines) split along its sections: claims and contradictions
(``dna.memory_claims``, ``dna.claims_contradict``, ``dna.elect_survivor``, ``dna.contradiction_report``
and their helpers) move to the new ``sql/memory_contradictions.sql``; the merge candidates and the verb
stay. The same functions, the same texts; the downgrade re-runs 0015's consolidate.sql, which
re-creates them all. Likewise ``sql/memory_verbs.sql`` (699 lines): ``dna.forget``, ``dna.revive`` and
``dna.list_memories`` move to the new ``sql/memory_lifecycle.sql`` (run right after it), and
``sql/search.sql``'s scope-model helpers (``dna.scope_models``, ``dna.scope_models_text``,
``dna.scope_model``) move to ``sql/search_support.sql``; the downgrade re-runs 0016's texts of both.

recall (issue 15 item 1: recall ≥ search under the convex default). ``dna.recall``'s score is
``dna.search``'s hybrid score times the memory's standing only, ``dna.memory_factors``' factor =
max(0.05, retention) × affect; ecphory (the reference's cue match, which the lexical lane already
counts, and its adjustments relative to ``now``: + 0.10 written within 24 h, + 0.05 never cued,
saturation, fidelity) only breaks ties between equal scores (0016 multiplied by 1 + ecphory: LoCoMo
dev R@10 0.692 against search's 0.699 under the convex fusion). ``dna.memory_explain`` nests the
ecphory terms under ``tie_break``. The ranking functions (the decay rules, ``memory_factors``,
``memory_explain``, ``semantic_recall_fusion``) move from ``memory_scoring.sql`` (the reference's
scoring, goldens) to the new plane file ``memory_ranking.sql``; no signature changes, so no fragments.

hints (issue 15): the refusals of dna.search and dna.recall (k, offset, candidates, min_similarity,
min_lexical_score, fusion, dense_weight, weights, the 22001 length limits of the query and of keys
through dna.check_key), of dna.rrf and of the receipts (verb, args, reconsolidate, replay's P0002 and
digest mismatches) carry a HINT with the valid range or values; the message names the argument and the
value. dna.take_receipt refuses a value that does not cast to its argument's type by name
(dna.receipt_arg, new: the cast's own SQLSTATE — 22P02, 22003, 22007 — with ``args.<name>``, the
function, the type and the value) instead of a bare cast error. ``dna.search`` refuses (22023, with a
hint) a knob of the fusion not asked: ``dense_weight`` with ``fusion => 'rrf'``, ``weights``/``rrf_k``
with ``fusion => 'convex'`` (before, silently ignored). A write verb's P0002 for an unknown memory
(``dna.lock_memory``: forget, revive) hints the nearest names of the partition, ranked by the new
``dna.nearest_names`` / ``dna.nearest_names_text`` (catalog.sql), which ``dna.nearest_scopes`` and
``dna.nearest_scopes_text`` now call (the same ranking and text as before). No schema change; no
other answer changes. ``dna.verify_integrity`` / ``dna.reconcile`` (memory_integrity.sql):
their refusals carry hints (valid modes, actions, the registered model_ids), and a scope with no rows is
reported as such (``scope_exists: false`` and a NOTICE naming the nearest scopes) instead of a bare ok.

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
(scope, id, version): the version believed at as_of, one probe per memory restated since. A memory
created after as_of (``dna_instances.created_at``) is no longer named in ``as_of_truncated`` once
retention has pruned its first versions (recalls reconsolidate, each appending a version): it simply
did not exist then.

floors (issue 15 item 3, for recall): ``dna.recall`` gains ``min_similarity`` and ``min_lexical_score``
(handed to ``dna.search``, whose lanes apply them) and, with either, the answer's ``floors`` (what each
removed), so an agent can tell "nothing known" from "a weak match" through the verb it uses
(``before_floors.sql`` drops the 0016 signature, ``undo_floors.sql`` the new one). No table changes.

*ingest* (issue 11: bulk lexical ingest near its floor; ``bench/bulk_profile.py`` measures each phase).
``sql/bm25_write.sql`` joins ``ORDER`` (run by no revision since 0010_scale, whose frozen copy is its
``PREVIOUS``): a segment is built in one sort of its postings by (lexeme, kind) with each list sorted
by (impact DESC, doc_id) in its aggregate (``enable_presorted_aggregate`` off and ``work_mem`` raised to
``maintenance_work_mem`` for that statement), then cut into its chunks by array slices, instead of a
window function over a sort on four keys and a second grouping; a bulk statement's segment reads the
stored tsvectors (one key probe per document) instead of exploding the forward rows' jsonb; a merge
decodes postings in the select list and anti-joins the tombstones only when its segments have some.
Every chunk row is the one 0010-0016 built (``tests/test_bulk_segments.py`` compares them with that
statement). ``sql/documents.sql``: ``dna.index_documents`` finds a batch's stored rows by key probes
(``LATERAL … OFFSET 0``) instead of a hash join over a scan of the whole width table (which grew each
batch with the table), and the default snippet is ``dna.text_snippet`` (the same text as
``left(regexp_replace(body, '\\s+', ' ', 'g'), 240)``, replacing only the white-space runs that are not
one plain space: ~6x cheaper). ``before_ingest.sql`` gives the ``dna_search_docs_valid_at`` trigger of
every width table ``WHEN (dna.kind_has_trait(NEW.kind, 'memory.recallable'))``: the function changes
nothing for other Kinds, so they no longer pay its PL/pgSQL call; ``undo_ingest.sql`` restores 0002's
trigger. Nothing stored is rebuilt: segments, memtable and tombstones written at 0016 answer the same
(``tests/test_ingest_migration.py``).
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
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
         "bm25_write.sql", "documents.sql", "search.sql", "memory_time.sql", "memory_scoring.sql",
         "memory_ranking.sql", "memory_kinds.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
         "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql", "memory_contradictions.sql",
         "consolidate.sql", "receipts.sql", "tenancy.sql")
_BY_0016 = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql",
            "documents.sql", "search.sql", "memory_scoring.sql", "memory_write.sql", "memory_verbs.sql",
            "receipts.sql", "tenancy.sql")
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ("memory_ranking.sql", "memory_as_of.sql", "memory_lifecycle.sql",
                        "memory_contradictions.sql")
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: "0016_answers_and_bounds" if name in _BY_0016 else "0015_governed_history"
            for name in ORDER if name not in NEW}
PREVIOUS["bm25_write.sql"] = "0010_scale"     # run by no revision since 0010 (ingest: in ORDER from 0017)
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A later revision freezes the texts
# this one released into versions/0017_recall_past_ingest/ and this revision reads them there.
CHANGED: tuple[str, ...] = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25_write.sql", "documents.sql", "search.sql",
                            "memory_scoring.sql", "memory_ranking.sql", "memory_as_of.sql", "memory_verbs.sql",
                            "memory_lifecycle.sql", "memory_integrity.sql", "memory_contradictions.sql", "consolidate.sql",
                            "receipts.sql")


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
