"""Memory plane: the write path's history, the bitemporal guard, refused deletes, the memory verbs, consolidate.

Revision ID: 0002_memory
Revises: 0001_foundation
Create Date: 2026-11-30

Runs ``sql/memory.sql`` (pure scoring functions, dna.remember / recall / forget / revive /
list_memories and the trigger functions) and ``sql/consolidate.sql`` (dna.consolidate: the decay
pass, merge candidates, contradictions between claims), then creates the triggers of the memory plane:

- ``dna_instances_before_write`` (BEFORE INSERT OR UPDATE): the bitemporal guard and the
  ``valid_at`` mirror of ``spec.valid_from``/``valid_to`` for memory Kinds;
- ``dna_instances_after_write`` (AFTER INSERT OR UPDATE): appends every write's full envelope to
  ``dna_versions`` (``created_at`` = transaction time) and prunes past the Kind's retention;
- ``dna_instances_refuse_delete`` (BEFORE DELETE): a row of an invalidate-only Kind (Engram) is
  never deleted; the error names ``dna.forget``;
- ``dna_instances_sync_search_valid_at`` (AFTER INSERT OR UPDATE): a memory's changed ``valid_at``
  is copied to its search documents;
- ``dna_search_docs_refuse_delete`` (BEFORE DELETE) on every width table present: the search
  document of a stored Engram cannot be deleted either;
- ``dna_search_docs_valid_at`` (BEFORE INSERT OR UPDATE) on every width table present: a memory's
  search document takes the ``valid_at`` of its record (``dna.search`` filters validity in each lane).

Downgrade removes exactly these triggers and the functions that the two plane files define.
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import drop_plane_functions, read_sql  # noqa: E402

revision = "0002_memory"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None

PLANE_FILES = ("memory.sql", "consolidate.sql")

INSTANCE_TRIGGERS = """
CREATE TRIGGER dna_instances_before_write BEFORE INSERT OR UPDATE ON dna.dna_instances
    FOR EACH ROW EXECUTE FUNCTION dna.instances_before_write();
CREATE TRIGGER dna_instances_after_write AFTER INSERT OR UPDATE ON dna.dna_instances
    FOR EACH ROW EXECUTE FUNCTION dna.instances_after_write();
CREATE TRIGGER dna_instances_refuse_delete BEFORE DELETE ON dna.dna_instances
    FOR EACH ROW EXECUTE FUNCTION dna.instances_refuse_delete();
CREATE TRIGGER dna_instances_sync_search_valid_at AFTER INSERT OR UPDATE ON dna.dna_instances
    FOR EACH ROW EXECUTE FUNCTION dna.instances_sync_search_valid_at();
COMMENT ON TRIGGER dna_instances_before_write ON dna.dna_instances IS
    'Bitemporal guard (invalidate-only Kinds keep a stored valid_to unless spec.revivals quotes it) and valid_at mirror of the spec for memory Kinds.';
COMMENT ON TRIGGER dna_instances_after_write ON dna.dna_instances IS
    'Appends the full envelope of every write to dna.dna_versions (created_at = transaction time) and prunes beyond dna_kinds.version_retention.';
COMMENT ON TRIGGER dna_instances_refuse_delete ON dna.dna_instances IS
    'Refuses DELETE of invalidate-only Kinds (Engram): retire with dna.forget.';
COMMENT ON TRIGGER dna_instances_sync_search_valid_at ON dna.dna_instances IS
    'Copies a memory''s changed valid_at to its search documents (dna.search filters validity in each lane).';
"""

# The width tables present at upgrade time (a later width revision adds its own trigger).
SEARCH_TRIGGERS = """
DO $$
DECLARE
    w integer;
BEGIN
    FOR w IN SELECT dna.search_widths() LOOP
        EXECUTE format('CREATE TRIGGER dna_search_docs_refuse_delete BEFORE DELETE ON dna.%I '
                       'FOR EACH ROW EXECUTE FUNCTION dna.search_docs_refuse_delete()', 'dna_search_docs_' || w);
        EXECUTE format('CREATE TRIGGER dna_search_docs_valid_at BEFORE INSERT OR UPDATE ON dna.%I '
                       'FOR EACH ROW EXECUTE FUNCTION dna.search_docs_valid_at()', 'dna_search_docs_' || w);
    END LOOP;
END
$$;
"""

DROP_SEARCH_TRIGGERS = """
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT g.tgname, c.relname FROM pg_trigger AS g JOIN pg_class AS c ON c.oid = g.tgrelid
             WHERE c.relnamespace = 'dna'::regnamespace
               AND g.tgname IN ('dna_search_docs_refuse_delete', 'dna_search_docs_valid_at') LOOP
        EXECUTE format('DROP TRIGGER %I ON dna.%I', t.tgname, t.relname);
    END LOOP;
END
$$;
"""


# The plane files as released with this revision (0012_first_day replaced memory.sql,
# 0015_governed_history consolidate.sql).
FROZEN = {"memory.sql": revision, "consolidate.sql": revision}


def upgrade() -> None:
    for name in PLANE_FILES:
        op.execute(read_sql(name, frozen_in=FROZEN.get(name)))
    op.execute(INSTANCE_TRIGGERS)
    op.execute(SEARCH_TRIGGERS)


def downgrade() -> None:
    op.execute(DROP_SEARCH_TRIGGERS)
    # One statement per op.execute (Citus refuses a multi-command string: citus-probe B9); the same
    # four statements, in the same order, in the same transaction as before.
    for trigger in ("dna_instances_sync_search_valid_at", "dna_instances_refuse_delete",
                    "dna_instances_after_write", "dna_instances_before_write"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON dna.dna_instances")
    op.execute(drop_plane_functions(["memory.sql"], frozen_in=revision))
    op.execute(drop_plane_functions(["consolidate.sql"], frozen_in=revision))
