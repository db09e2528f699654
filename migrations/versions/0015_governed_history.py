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

Installed by a database owner (issue 23, P1/P2): ``dna_redactor`` is the cluster's, so a database owner
on a managed service may find it made by someone else, or may lack CREATEROLE to make it. Where the
installer may create and comment it (a superuser; CREATEROLE with the role absent, or on PostgreSQL
15, or held WITH ADMIN OPTION on 16+: ``MAY_OWN_REDACTOR``) the revision runs ``REDACTOR`` as
released. Otherwise ``REDACTOR_GIVEN`` runs: a ``dna_redactor`` that exists is used as it is (one
NOTICE says so; its comment and grants are its maker's), and without the role it stops (42501) naming
the statement an administrator runs: ``CREATE ROLE dna_redactor NOLOGIN``.

Downgrade drops the trigger, runs the text of ``memory.sql`` as 0012_first_day released it
(``versions/0012_first_day/memory.sql``) and drops the functions this revision added.
"""
import re
import sys
from pathlib import Path

from alembic import context, op
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


# Whether the installer may run REDACTOR (create dna_redactor if missing, then COMMENT ON ROLE): a
# superuser; or CREATEROLE, where the role is absent (its creator holds it WITH ADMIN OPTION), or the
# server is 15 (CREATEROLE alone may comment any non-superuser role), or the installer holds it WITH
# ADMIN OPTION (16+). CASE: pg_has_role fails on a role that does not exist.
MAY_OWN_REDACTOR = """
SELECT r.rolsuper OR (r.rolcreaterole AND CASE
           WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'dna_redactor') THEN true
           WHEN current_setting('server_version_num')::int < 160000 THEN true
           ELSE pg_catalog.pg_has_role(current_user, 'dna_redactor', 'MEMBER WITH ADMIN OPTION') END)
FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user
"""

# Where the installer may not (a database owner without CREATEROLE, or a dna_redactor another role
# made and holds on 16+): the role is used as it is, or the install stops saying who makes it.
REDACTOR_GIVEN = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'dna_redactor') THEN
        RAISE EXCEPTION 'role dna_redactor does not exist, and role % may not create it (it has no CREATEROLE)',
            current_user
            USING ERRCODE = '42501',
                  HINT = 'An administrator runs: CREATE ROLE dna_redactor NOLOGIN; (or gives this role CREATEROLE), '
                         'then run dna db upgrade again. Its members may erase memories with dna.redact.';
    END IF;
    RAISE NOTICE 'role dna_redactor exists and role % may not comment on it or grant it: it is used as it is '
                 '(its members may erase memories with dna.redact; whoever holds it WITH ADMIN OPTION grants it: '
                 'GRANT dna_redactor TO <role>)', current_user;
END
$$;
"""


def _may_own_redactor() -> bool:
    if context.is_offline_mode():
        return True  # --sql renders the text as released (a DBA reviews it; a superuser runs it)
    return bool(op.get_bind().exec_driver_sql(MAY_OWN_REDACTOR).scalar())


def upgrade() -> None:
    for name in MEMORY_FILES:
        op.execute(read_sql(name, frozen_in=revision))  # as released (0016 replaced them)
    op.execute(text(APPEND_ONLY.replace(":", "\\:")))
    op.execute(text((REDACTOR if _may_own_redactor() else REDACTOR_GIVEN).replace(":", "\\:")))


def downgrade() -> None:
    op.execute("DROP TRIGGER dna_versions_append_only ON dna.dna_versions")
    op.execute("DROP INDEX dna.dna_versions_scope_created")
    added = _added_functions()
    if added:
        op.execute(" ".join(f"DROP FUNCTION IF EXISTS dna.{name};" for name in added))
    for name, frozen_in in PREVIOUS.items():
        op.execute(read_sql(name, frozen_in=frozen_in))
