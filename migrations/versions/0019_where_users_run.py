"""Where users run it: PostgreSQL 15 to 18, a database-owner install, a live Citus cluster.

Revision ID: 0019_where_users_run
Revises: 0018_citus_ready
Create Date: 2026-12-02

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: every plane file → the revision whose frozen copy in ``versions/<revision>/`` holds the
text released before this one), in the order a fresh install runs them (``ORDER``), one statement per
``op.execute`` as 0018 does. Its schema changes are SQL fragments in ``versions/0019_where_users_run/``,
one set per topic (``before_<topic>.sql`` before the plane files, ``after_<topic>.sql`` after them,
``undo_<topic>.sql`` first on downgrade), as in 0017 and 0018.

What changed
------------
(each topic appends its paragraph here)

versions (issue 23, R1 of ``../shared/research/managed-postgres.md``): ``dna.bm25_build_segment``
reads ``enable_presorted_aggregate`` with ``missing_ok`` and sets it only where it exists
(PostgreSQL 16+): on 15 every seal, merge and compaction failed with 42704. PostgreSQL 15 has no
presorted aggregates, so each posting list's ``array_agg(… ORDER BY …)`` sorts alone there, the plan the
setting asks for on 16+. Same rows on 16+. No schema change.

distribute (issue 24, D1 and D2 of ``../shared/research/citus-probe-3.md``: ``SELECT dna.distribute()``
failed on every Citus cluster). D1: the CASE of ``dna.citus_placement`` is the new pure
``dna.citus_placement_name(partmethod, repmodel)`` (SQL, IMMUTABLE), whose last branch casts the
``"char"`` method to text (``'citus:' || method`` had no unique operator, 42725; one server never
reached the line, since the function returns before it where ``pg_dist_partition`` is absent).
D2: ``dna.distribute`` reads the plan as table names, all of them before its first step, and resolves
each name at its step: ``create_reference_table`` of ``dna_models`` turns the width tables into Citus
local tables, and Citus keeps a converted table's old OID for its shard, so the OIDs read before named
shards ("relation … is a shard relation"); the report lists names. Citus copies a table's existing rows
into its shards with COPY, which fires the shards' triggers (dna_instances' rows would record their
versions again, into a dna_versions not yet distributed; the documents would be indexed again), so
``dna.distribute`` pauses the dna triggers of the tables it still has to distribute (``ALTER TABLE …
DISABLE TRIGGER``, its transaction) and enables them again once all are distributed (the report's
``triggers_paused_for_copy``): a database used on one node first distributes with its rows, counts and
answers unchanged. The new ``dna.undistribute()`` is the way back: ``undistribute_table(…,
cascade_via_foreign_keys => true)`` for every dna table Citus holds, then the ``AFTER TRUNCATE``
triggers ``dna.distribute`` dropped. No schema change.

downgrade (issue 24, D6): below 0019 the revisions do not run on Citus (0018's ``dna.distribute`` fails,
its receipts key is refused, older downgrades drop triggers and re-create sublink policies on
distributed tables), so the downgrade of this revision first runs ``guard_downgrade.sql``: where Citus
holds a dna table it refuses (0A000, naming the tables; hint: ``SELECT dna.undistribute()`` first,
docs/scale-out.md) before anything changes. After ``dna.undistribute()`` the downgrade runs as on one node.

scope_names (issue 24, D9: ``dna.search``, ``dna.recall``, ``dna.verify_integrity`` and
``dna.take_receipt`` of a scope with no rows failed in their "nearest scopes" hint). ``dna.scope_names``
reads a table Citus distributes with ``SELECT DISTINCT scope`` (Citus refuses the loose index scan's
recursive CTE without a filter on the distribution column); inside a call Citus runs as a shard's task
(a transaction block, EXPLAIN ANALYZE, take_receipt's EXECUTE), where the other shards cannot be read,
it raises 55000, and ``dna.nearest_scopes_text`` (now PL/pgSQL) answers "not listed from here (SELECT
scope FROM dna.scopes() lists them)" so the message it belongs to is still raised. One node: the same
loose index scan. No schema change.

receipt_call (issue 24): ``dna.receipt_call`` writes each argument of a receipt as a literal of its
declared type instead of a cast of ``$3 ->> name``: Citus, delegating the call to the scope's node,
sent ``($3 ->> 'valid_time')::timestamptz`` as a cast from cstring, which the worker refused (every
``take_receipt`` / ``replay`` with a ``valid_time`` or a default one failed). Same calls, same answers.

revoke_app_role (issue 24, D10: roles granted by ``dna.grant_app_role`` could not be dropped while the
database lived; on Citus the grants stand on every shard): the new ``dna.revoke_app_role(role)``, the
inverse of ``dna.grant_app_role``, revokes every privilege the role holds on schema dna (REVOKEs reach
every shard), deletes its rows of the two maps (copied to the workers on Citus); ``DROP ROLE`` then
succeeds. No schema change.

receipts_key (issue 24, D3): ``dna_search_receipts``' primary key is ``(scope, receipt_id)`` (Citus
refuses a key without the distribution column; it was ``receipt_id`` alone), plus a plain index on
``receipt_id`` for ``dna.replay``, which finds a receipt by its id (one probe per shard on Citus).
``before_receipts_key.sql``; ``undo_receipts_key.sql`` restores 0016's key. Rows are kept as they are.

write_path (issue 24, D4, D5, D7 and D8 of ``../shared/research/citus-probe-3.md``: on Citus no write
path worked; issue 26 item 2: one BM25 upkeep per statement). The BM25 index is still kept by the
statement triggers of every width table (``dna.bm25_sync``), whoever writes the rows, a verb or plain
SQL; on Citus they fire on the shard and write the co-located index tables there. D8: they read the
transition tables only in statements that read no other table, into arrays per partition, and write
the index from those (``dna.bm25_index_docs``, ``dna.bm25_remove_docs``: every statement filters one
scope), by static SQL (plans kept) instead of a dynamic CTE planned at every firing; a firing without
rows does nothing. D7: a segment's id is its partition's next (``dna.bm25_next_seg``: the highest + 1,
claimed by a transaction-level advisory lock; increasing within a partition as the sequence's were), so
``dna_bm25_seg_id_seq`` goes (``after_write_path.sql``; ``dna.grant_app_role`` grants the staging table
without it). D5: the ``dna_search_docs_valid_at`` trigger's WHEN clause reads a setting, no table
(``current_setting('dna.valid_at_mirrored', true) IS DISTINCT FROM 'on'``); ``dna.index_document``,
``dna.index_documents``, the ``dna_instances`` valid_at mirror and ``dna.set_search_config`` give memory
rows their record's valid_at by statements of their own (``dna.record_valid_at``) and set the setting
for their statement (``dna.mirror_valid_at``), so the trigger runs for plain INSERTs and UPDATEs only.
D4: ``dna.index_documents`` deletes passages by ``doc_id`` (the unique ``(scope, doc_id)`` index), not
``ctid``. ``dna.index_document`` runs its passage DELETE only when the document has passages (one probe
reads passage 0 and whether passage 1 exists): two trigger firings per call, one of them with rows.
Compaction moves to the new plane file ``sql/bm25_compact.sql``; ``dna.bm25_compact`` calls
``dna.bm25_compact_scope`` once per scope, which ``dna.distribute`` delegates by scope (forced), as it
now delegates ``index_document``, ``index_documents``, ``delete_document``, ``redact`` and ``reconcile``.
On Citus each node draws doc_ids from its own range of the sequence (2^48 apart), and a packed posting
holds a 33-bit offset: a segment build (bulk statement, seal, merge) writes one segment per run of
doc_ids that fits (``dna.bm25_doc_ranges``; a merge across node ranges refused with 54000 before).
``undo_write_path.sql`` restores 0017's trigger and the sequence, set past every seg_id. Same rows, same
answers on one server.

edges (issue 27 item 8, a fuzz of every ``dna.*`` function an application role may call): no text reaches
dynamic SQL unquoted and no helper's work is unbounded. ``dna.receipt_arg`` reads its ``type`` with
``to_regtype`` (22023 when it names no type) and casts to that type, so ``'text, (SELECT 1/0)'`` is refused
instead of run; ``dna.scope_kinds_text`` and ``dna.protect_table`` take only tables of schema ``dna`` (a
search table; a table with a tenant column), named from the catalog through ``%I`` (22023 otherwise);
``dna.fake_embed_float8`` checks dims as ``dna.fake_embed`` does (1..16000, 22023: ``1628549775`` ran for
seconds, ``0`` divided by zero); ``dna.nearest_names`` (and so ``nearest_scopes``) compares the first 64
characters of each name (an 80,000-character text ran past 5 s); ``dna.take_receipt`` and
``dna.receipt_call`` refuse args without an argument that has no default (22023 naming ``args.scope``,
new ``dna.receipt_required_args``) instead of failing 42883 "function dna.search(…) does not exist".
Answers for valid input unchanged. No schema change.

jit (issue 23, found running the suite on Debian's PostgreSQL 15, whose server has LLVM JIT on, as
PostgreSQL's default and Amazon RDS's are; the embedded 18 has no JIT): the verbs' plans are many
short statements whose row estimates (unnest, set-returning functions) pass ``jit_above_cost``, and a
JIT compile is not cached across executions, so every call compiled them again: one
``dna.bm25_lane`` call took 2.9 s with JIT and 88 ms without on the same data. The entry points that
run statements over the tables (search, BM25 lane/explain/compaction and its statement trigger,
indexing, the memory verbs, integrity, receipts: 30 functions in 13 plane files) carry ``SET jit =
off``, which holds for every function they call. Same rows; no schema change.

metadata (issue 25 items 1 and 3 of its list: metadata filters inside the lanes, date ranges): documents and
memories carry ``metadata jsonb`` (``before_metadata.sql``: a column ``NOT NULL DEFAULT '{}'`` on
``dna_instances`` and every width table, a GIN ``jsonb_path_ops`` index on each, and the attribute
``metadata`` of ``dna.search_hit``). The new plane file ``sql/metadata.sql`` (in ``ORDER`` after
``search_support.sql``, ``NEW``) holds the filter language (``dna.filter_sql`` compiles it to a predicate:
equality, eq/ne, in/nin, gt/gte/lt/lte on numbers and ISO-8601 timestamps, exists, contains/contains_any,
and/or/not; refused with 22023 and a hint naming the place when malformed), ``dna.memory_metadata`` (a
memory's metadata: ``spec.metadata`` with its tags, area, affect, memory_type, created_at, valid_from /
valid_to and conversation fields) and ``dna.set_document_metadata``. ``dna.search``, ``dna.recall`` and
``dna.list_memories`` take ``filter jsonb`` (their 0018 signatures are dropped by ``before_metadata.sql``):
a condition of both lanes before their top k; the dense lane answers exactly when few rows pass (at most
max(``dna.exact_scan_rows()``, depth)) and falls back to an exact scan when a filtered HNSW scan runs dry,
``explain`` says which; the lexical lane is exhaustive under a filter (as under name_prefix). The write path
(``sql/memory_write.sql``) derives a memory's metadata on every write and copies it to its search rows with
its valid_at; ``dna.prepare_memory_spec`` (``sql/memory_kinds.sql``) checks ``spec.metadata``.
``after_metadata.sql`` derives the metadata of the memories already stored (one UPDATE through the write
path's triggers, with row-level security lifted for the owner during it: no version is appended, their
search rows get a copy); documents start with ``{}``. Without a filter every answer is 0018's.
``undo_metadata.sql`` drops the new signatures, the columns, indexes and the hit's attribute.

batch (issue 25 item 4 of its list: batch writes): the new plane file ``sql/memory_batch.sql`` (in ``ORDER``
after ``memory_verbs.sql``, ``NEW``): ``dna.remember_many(scope, items, …, embeddings, atomic)`` writes many
memories in one call and one transaction, set-based (one INSERT of the records, one ``dna.index_documents`` of
their texts), a result per item; all or nothing by default with a bad item named by its position, or the
good items written and the bad ones reported (``atomic => false``). ``dna.remember``'s restatement is the new
pure ``dna.restated_spec`` (``sql/memory_verbs.sql``), which both write; the same rows and answers. No schema
change.

conversations (issue 25 item 2 of its list): the new plane file ``sql/conversations.sql`` (in ``ORDER`` after
``memory_batch.sql``, ``NEW``): ``dna.remember_conversation(scope, conversation, turns, …)`` writes a
conversation's turns in one call and one transaction (through ``dna.remember_many``): each turn a memory of
the new Kind ``Turn`` that knows its conversation, session, place, speaker, role and time
(``spec.conversation``, its metadata), indexed with its speaker and the turns before it (its text with the
``dna.conversation_context_turns()`` = 2 before it, and as passages its views with fewer, down to none: a hit
answers by its best view; ``dna.remember_many``'s items take ``passages`` for that, and
``dna.search_docs_refuse_delete`` refuses the delete of a memory's passage 0 only, so a write can replace its
other passages); each session touched
an ``Episode`` with its time span; ``dna.conversation_plan`` gives the texts a client embeds (and their
digest, which the verb checks: 40001 when the conversation changed in between). ``dna.recall`` gains
``context integer`` (the turns around each Turn hit, ``dna.turn_neighbours``); ``dna.prepare_memory_spec``
checks ``spec.conversation``. ``after_conversations.sql`` registers the Kinds ``Turn`` (embed_fields title,
summary, context) and ``Episode`` (title, summary, body), both ``memory.recallable`` and
``record.invalidate-only``; ``undo_conversations.sql`` drops the recall signature with context and
unregisters them. Recall's default Kinds are every recallable Kind, so these two join them (no rows of
them exist before this revision: the answers are 0018's).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import defined_functions, read_statements  # noqa: E402

revision = "0019_where_users_run"
down_revision = "0018_citus_ready"
branch_labels = None
depends_on = None

# The plane files in the order a fresh install runs them.
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "metadata.sql", "bm25.sql", "bm25_lane.sql",
         "bm25_write.sql", "bm25_compact.sql", "documents.sql", "search.sql", "memory_time.sql", "memory_scoring.sql",
         "memory_ranking.sql", "memory_kinds.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
         "memory_batch.sql", "conversations.sql", "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql",
         "memory_contradictions.sql",
         "consolidate.sql", "receipts.sql", "tenancy.sql", "distribute.sql")
# The texts 0018 re-ran (its CHANGED) are frozen in versions/0018_citus_ready/ once this revision
# changes them; every other plane file's text is where 0018 found it.
_BY_0018 = ("catalog.sql", "fusion.sql", "search_support.sql", "bm25.sql", "documents.sql", "search.sql",
            "memory_scoring.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
            "memory_lifecycle.sql", "memory_erasure.sql", "memory_integrity.sql", "receipts.sql", "tenancy.sql",
            "distribute.sql")
_BY_0017 = ("bm25_write.sql", "memory_ranking.sql", "memory_contradictions.sql", "consolidate.sql")
_BY_0016 = ("embedding.sql", "bm25_lane.sql")
# Plane files this revision creates (no earlier text).
NEW: tuple[str, ...] = ("bm25_compact.sql", "metadata.sql", "memory_batch.sql", "conversations.sql")
# Where the text released before this revision is frozen, for every other plane file.
PREVIOUS = {name: ("0018_citus_ready" if name in _BY_0018 else
                   "0017_recall_past_ingest" if name in _BY_0017 else
                   "0016_answers_and_bounds" if name in _BY_0016 else "0015_governed_history")
            for name in ORDER if name not in NEW}
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differs from PREVIOUS's (and NEW). Static;
# tests/test_migrations.py checks it against the frozen copies. A file changed here has its 0018 text
# frozen in versions/0018_citus_ready/ (0018 then reads it there).
CHANGED: tuple[str, ...] = ("catalog.sql", "embedding.sql", "search_support.sql", "metadata.sql", "bm25.sql",
                            "bm25_lane.sql", "bm25_write.sql", "bm25_compact.sql", "documents.sql", "search.sql",
                            "memory_kinds.sql", "memory_write.sql", "memory_as_of.sql", "memory_verbs.sql",
                            "memory_batch.sql", "conversations.sql", "memory_lifecycle.sql", "memory_erasure.sql",
                            "memory_integrity.sql", "consolidate.sql", "receipts.sql", "tenancy.sql", "distribute.sql")


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
    _run("guard_downgrade.sql", revision)           # refuses where Citus holds dna tables (D6)
    for fragment in _fragments("undo"):
        _run(fragment, revision)
    for name in _added_functions():
        op.execute(f"DROP FUNCTION IF EXISTS dna.{name}")
    for name in ORDER:
        if name in changed_files() and name not in NEW:
            _run(name, PREVIOUS[name])
