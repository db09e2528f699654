"""Answers and bounds: text limits that hold, recall that adds to search, search edges, lexical upkeep.

Revision ID: 0016_answers_and_bounds
Revises: 0015_governed_history
Create Date: 2026-12-01

Re-runs the plane files whose text differs from the text the revision before it ran (``CHANGED``;
``PREVIOUS``: file → the revision whose frozen copy in ``versions/<revision>/`` holds that text), in
the order a fresh install runs them (``ORDER``). Its schema changes are SQL fragments in
``versions/0016_answers_and_bounds/``, one pair per concern:

- ``before_<topic>.sql`` run before the plane files (new tables and types; drops of functions whose
  signature changes, so that ``CREATE OR REPLACE`` does not leave the old overload beside the new);
- ``after_<topic>.sql`` run after them (grants, comments, backfills that call the new functions);
- ``undo_<topic>.sql`` run first on downgrade (drops what ``before_``/``after_`` created, and the
  new-signature functions), before the previous texts are re-run.

The topics and what each changes are listed under "What changed" below.

What changed
------------
(each topic appends its paragraph here)

bounds (issue 13): ``dna_versions`` gains ``text_digest`` (md5 of the version's memory text),
``text_tsv`` (its tsvector) and ``ts_config`` (the scope's configuration then), set by
``dna.versions_append_only`` from the row itself and backfilled for the versions already written
(``after_bounds.sql``, the append-only trigger lifted for that one UPDATE of the derived columns);
``dna_instances_redacted`` (partial index of the tombstones); an ``as_of`` recall reads those instead
of recomputing every restated memory's text, and its past-text lane hands on its first ``depth``
candidates after re-scoring (same first k). ``dna.text_tsvector`` (catalog.sql) is the one place a
text becomes a tsvector, bounded under PostgreSQL's 1 MB tsvector limit (a prefix that fits): the
search rows' generated ``tsv`` of every width table takes it (``after_bounds.sql``, ``ALTER COLUMN tsv
SET EXPRESSION``, a table rewrite with the same values for every stored row; ``undo_bounds.sql`` puts
``to_tsvector`` back), so every text within the 1,000,000-byte limit is indexed, and
``dna.lexical_query`` / ``dna.bm25_terms`` never raise on a long query. A vector with a component
beyond the halfvec range (±65504) is stored at unit length by the document door
(``dna.storable_vector``, catalog.sql; cosine unchanged), so 3072-d takes what 384-d takes.

*lexical*: ``sql/bm25.sql`` split in two along its sections: the lane ``dna.bm25_lane`` (the
score-at-a-time algorithm, its budget and certificate) moves to the new ``sql/bm25_lane.sql``;
configuration, statistics and the entry points (``dna.bm25``, ``dna.bm25_explain``) stay.
``sql/search.sql`` likewise: validation, width routing, the model registry and the text helpers move
to the new ``sql/search_support.sql``; ``dna.search`` and its scope helpers stay.

recall (issue 15 items 1-2): ``dna.recall`` gains ``decay`` (surfaced | written | off) and ``explain``
(``before_recall.sql`` drops the 0015 signature, ``undo_recall.sql`` the new one and the
``dna.memory_retention(jsonb, timestamptz, text)`` overload); it ranks ``dna.search``'s own ranking (lanes
as deep as at k) times ``dna.memory_factors`` (memory_scoring.sql, new, with ``dna.memory_explain``) instead
of fusing a second, cosine-led ecphory ranking by RRF; no table changes, no data rewritten.

search (issue 15 items 3-5, issue 13 item 2): ``dna.search`` gains ``offset``, ``min_similarity``,
``min_lexical_score``, ``exact``, ``fusion`` and ``dense_weight`` (``before_search.sql`` drops the 0013
signature, ``undo_search.sql`` the new one); ``dna.search_hit`` gains ``dense_exact``,
``floor_removed_dense`` and ``floor_removed_lexical``; scores are rounded to 12 significant digits
(``dna.score_round``, fusion.sql) so equal scores order by key; a zero query vector is degraded; weights
must be finite and >= 0 (``dna.check_weights``); model_id NULL is the scope's model (``dna.scope_model``).
The default fusion becomes the convex combination of min-max normalised lane scores (dense weight 0.4,
``dna.convex_fusion``); ``fusion => 'rrf'`` (or weights/rrf_k without a fusion) is RRF as before.
``dna_search_config`` gains ``fusion`` and ``dense_weight`` (``dna.set_search_config`` /
``dna.search_config``, bm25.sql); ``dna_models`` gains ``query_prefix`` and ``document_prefix``
(``dna.register_model`` checks them, ``dna.model_prefixes``), default ``''`` for every model already
registered. ``dna.fake_embed`` lowers as Python does (``İ``, KELVIN SIGN), independent of the collation.

receipts (issue 15 item 2, receipts): new table ``dna_search_receipts`` (``before_receipts.sql``: the
table under the tenant policy, ``dna.protect_table``; ``after_receipts.sql``: the BEFORE UPDATE trigger
that keeps receipts immutable and the grant to roles granted before; ``undo_receipts.sql`` drops both
and the new functions) and the new plane file ``sql/receipts.sql`` (``dna.take_receipt``, ``dna.replay``
and their helpers). ``sql/tenancy.sql`` changes (``dna.protected_tables`` lists the new table, so
``dna.grant_app_role`` grants it): it is re-run here, from the text 0012_first_day ran (frozen now in
``versions/0012_first_day/tenancy.sql``, which 0012 reads); no existing row is rewritten.

asof (issue 13 item 4): ``dna.search`` gains ``past_texts`` (jsonb, default NULL; ``before_asof.sql``
drops the search topic's signature, ``undo_asof.sql`` the new one): the listed records leave both lanes
and their given tsvector is BM25-scored in the lexical lane and fused like every candidate, so
``dna.recall(as_of)`` ranks the texts believed at T on dna.search's scale (no longer 1/(60 + rank) in a
lane of its own); the dense lane keeps HNSW when the exact rule says so (enable_seqscan off for that
statement), and the kinds NOTICE probe runs only for an empty answer. No table changes, no data rewritten.

writepath: ``dna_instances`` trades the GiST exclusion constraint ``dna_instances_no_overlap`` (scope,
id, valid_at) for ``UNIQUE (scope, id)`` (btree): a reconsolidation UPDATE scanning that GiST index
while its own new row versions split the index's root page left live entries marked dead (PostgreSQL
18.6), so later index scans missed memories (``before_writepath.sql``, which first refuses, 23505, two
records of a scope sharing an id; ``undo_writepath.sql`` restores the exclusion).

Servers this revision was not released for (issue 23, M1): ``ALTER COLUMN … SET EXPRESSION`` exists
from PostgreSQL 17 on. On 15 and 16 the fragments named in ``BELOW_17`` run from
``versions/0016_answers_and_bounds/below_17/`` instead, which drop the generated ``tsv`` and add it
again with the same expression (the same values; ``tsv`` becomes the table's last column). On 17+ the
revision runs exactly the statements it was released with (tests/test_server_versions.py pins them).
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import below, defined_functions, read_sql  # noqa: E402

revision = "0016_answers_and_bounds"
down_revision = "0015_governed_history"
branch_labels = None
depends_on = None

# The plane files in the order a fresh install runs them.
ORDER = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql", "documents.sql", "search.sql",
         "memory_time.sql", "memory_scoring.sql", "memory_kinds.sql", "memory_write.sql", "memory_verbs.sql",
         "memory_erasure.sql", "memory_integrity.sql", "consolidate.sql", "receipts.sql", "tenancy.sql")
# The texts this revision replaces, as the revision before it runs them.
PREVIOUS = {"catalog.sql": "0012_first_day", "embedding.sql": "0001_foundation", "fusion.sql": "0001_foundation",
            "bm25.sql": "0013_passages", "documents.sql": "0013_passages", "search.sql": "0013_passages",
            **{name: "0015_governed_history" for name in ORDER[8:]}, "tenancy.sql": "0012_first_day"}
# Plane files this revision creates (split out of a file above; no earlier text).
NEW = ("bm25_lane.sql", "receipts.sql", "search_support.sql")
_FRAGMENTS = Path(__file__).resolve().parent / revision
# The plane files this revision re-runs: those whose text differed from the text the revision before
# ran (and NEW). Their texts as released are frozen in versions/0016_answers_and_bounds/ (0017 and
# later revisions re-run sql/).
CHANGED = ("catalog.sql", "embedding.sql", "fusion.sql", "search_support.sql", "bm25.sql", "bm25_lane.sql", "documents.sql",
           "search.sql",
           "memory_scoring.sql", "memory_write.sql", "memory_verbs.sql", "receipts.sql", "tenancy.sql")


# The fragments whose released text needs PostgreSQL 17 (ALTER COLUMN … SET EXPRESSION); on 15 and 16
# their below_17/ text runs instead.
BELOW_17 = ("after_bounds.sql", "undo_bounds.sql")


def _fragment_dir(fragment: str) -> str:
    """Where the text of ``fragment`` for this server is: below_17/ on PostgreSQL 15 and 16."""
    return f"{revision}/below_17" if fragment in BELOW_17 and below(170000) else revision


def changed_files() -> list[str]:
    """The plane files this revision re-runs, in ORDER."""
    return [name for name in ORDER if name in CHANGED]


def _fragments(prefix: str) -> list[str]:
    return sorted(p.name for p in _FRAGMENTS.glob(f"{prefix}_*.sql"))


def _added_functions() -> list[str]:
    """Functions the changed files define that the texts they replace did not."""
    now: set[str] = set()
    before: set[str] = set()
    for name in changed_files():
        now |= defined_functions(name, revision)
        if name not in NEW:
            before |= defined_functions(name, PREVIOUS[name])
    return sorted(now - before)


def upgrade() -> None:
    for fragment in _fragments("before"):
        op.execute(read_sql(fragment, frozen_in=_fragment_dir(fragment)))
    for name in changed_files():
        op.execute(read_sql(name, frozen_in=revision))  # as released (0017 replaced some)
    for fragment in _fragments("after"):
        op.execute(read_sql(fragment, frozen_in=_fragment_dir(fragment)))


def downgrade() -> None:
    for fragment in _fragments("undo"):
        op.execute(read_sql(fragment, frozen_in=_fragment_dir(fragment)))
    added = _added_functions()
    if added:
        op.execute(" ".join(f"DROP FUNCTION IF EXISTS dna.{name};" for name in added))
    for name in ORDER:
        if name in changed_files() and name not in NEW:
            op.execute(read_sql(name, frozen_in=PREVIOUS[name]))
