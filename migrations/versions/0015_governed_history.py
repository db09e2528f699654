"""Governed history: the memory plane in one file per concern.

Revision ID: 0015_governed_history
Revises: 0014_doors
Create Date: 2026-12-01

Runs the memory plane, split out of ``sql/memory.sql`` into one file per concern, in dependency
order (``MEMORY_FILES``): ``memory_time.sql`` (time helpers), ``memory_scoring.sql`` (pure scoring),
``memory_kinds.sql`` (memory Kinds, specs and claims), ``memory_write.sql`` (the write path's
trigger functions) and ``memory_verbs.sql`` (the verbs).

An append-only history, enforced by the database: the trigger ``dna_versions_append_only`` (BEFORE
INSERT OR UPDATE OR DELETE on ``dna_versions``, for every caller; no function is SECURITY DEFINER)
refuses (42501) every UPDATE, an INSERT that is not the record's next version copying its current row
stamped in this transaction, and a DELETE of a version the Kind's retention keeps (pruning by
``dna.instances_after_write`` is the one path that removes versions); the history guard of
``dna.instances_before_write`` keeps revivals and cues_history growing, surface_count from going
back, a stored valid_to from being lifted or moved except by a revival (55000), a memory's key from
changing (42501); DELETE of every memory Kind is refused (23001), not only of Engram.

``as_of`` reads the past's text: ``dna.recall(…, as_of)`` ranks a memory whose text believed at
``as_of`` differs from today's by that text (index ``dna_versions_scope_created`` finds them) and
names them in ``as_of_past_text``.

Re-runs ``consolidate.sql``: ``dna.merge_candidates`` refuses (22023) two members of one name
instead of failing with 21000.

Integrity: ``memory_integrity.sql`` (``dna.verify_integrity(scope, mode)``, ``dna.reconcile(scope,
action, model_id)``): drift between a scope's records and their search rows, BM25 state, validity
mirrors, vectors and history, reported; lexical state and validity mirrors rebuilt; what a model_id
lacks listed for re-embedding.

Erasure: ``memory_erasure.sql`` (``dna.redact``, ``dna.may_redact``, ``dna.is_redacted``) turns a
memory into a tombstone and removes its text from every version, search row and the lexical index;
members of the role ``dna_redactor`` (created here if missing, NOLOGIN; a DBA grants it) may redact,
and the owner of a personal memory may redact their own.

Downgrade drops the trigger, runs the text of ``memory.sql`` as 0012_first_day released it
(``versions/0012_first_day/memory.sql``) and drops the functions this revision added.
"""
import re
import sys
from pathlib import Path

from alembic import op
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import plane_file, read_sql  # noqa: E402

revision = "0015_governed_history"
down_revision = "0014_doors"
branch_labels = None
depends_on = None

MEMORY_FILES = ("memory_time.sql", "memory_scoring.sql", "memory_kinds.sql", "memory_write.sql", "memory_verbs.sql",
                "memory_erasure.sql", "memory_integrity.sql", "consolidate.sql")
# The texts this revision replaces, as the revision before it runs them.
PREVIOUS = {"memory.sql": "0012_first_day", "consolidate.sql": "0002_memory"}
_DEFINED = re.compile(r"CREATE OR REPLACE FUNCTION dna\.(\w+)\s*\(")


def _added_functions() -> list[str]:
    """Functions the files this revision runs define that the texts it replaces did not."""
    now: set[str] = set()
    for name in MEMORY_FILES:
        now |= set(_DEFINED.findall(plane_file(name, revision).read_text(encoding="utf-8")))
    before: set[str] = set()
    for name, frozen_in in PREVIOUS.items():
        before |= set(_DEFINED.findall(plane_file(name, frozen_in).read_text(encoding="utf-8")))
    return sorted(now - before)


APPEND_ONLY = """
CREATE INDEX dna_versions_scope_created ON dna.dna_versions (scope, created_at);
COMMENT ON INDEX dna.dna_versions_scope_created IS 'The versions of a scope recorded after an instant (an as_of recall ranks those memories by their past text).';
CREATE TRIGGER dna_versions_append_only BEFORE INSERT OR UPDATE OR DELETE ON dna.dna_versions
    FOR EACH ROW EXECUTE FUNCTION dna.versions_append_only();
COMMENT ON TRIGGER dna_versions_append_only ON dna.dna_versions IS
    'Append-only history: no UPDATE; INSERT only of the next version copying the record now; DELETE only past the Kind''s retention or of a redacted record (42501 otherwise).';
"""

# Who may redact (dna.redact): members of this role, a DBA grant. Roles are the cluster's: a
# downgrade leaves it (another database may use it).
REDACTOR = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'dna_redactor') THEN
        CREATE ROLE dna_redactor NOLOGIN;
    END IF;
END
$$;
COMMENT ON ROLE dna_redactor IS 'pydna: members may erase memories with dna.redact (GRANT dna_redactor TO <role>).';
"""


def upgrade() -> None:
    for name in MEMORY_FILES:
        op.execute(read_sql(name, frozen_in=revision))  # as released (0016 replaced them)
    op.execute(text(APPEND_ONLY.replace(":", "\\:")))
    op.execute(text(REDACTOR.replace(":", "\\:")))


def downgrade() -> None:
    op.execute("DROP TRIGGER dna_versions_append_only ON dna.dna_versions")
    op.execute("DROP INDEX dna.dna_versions_scope_created")
    added = _added_functions()
    if added:
        op.execute(" ".join(f"DROP FUNCTION IF EXISTS dna.{name};" for name in added))
    for name, frozen_in in PREVIOUS.items():
        op.execute(read_sql(name, frozen_in=frozen_in))
