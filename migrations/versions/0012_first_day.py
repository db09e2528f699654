"""First day: names checked, scopes listed, affects and successors checked.

Revision ID: 0012_first_day
Revises: 0011_lane_speed
Create Date: 2026-12-01

Runs ``sql/catalog.sql`` (new): ``dna.scopes()`` (scopes with their documents, memories and
model_ids), ``dna.nearest_scopes(scope, n)`` and ``dna.nearest_scopes_text`` (the "did you mean" of
an empty or unknown scope), ``dna.scope_names()``, ``dna.scope_exists(scope)``,
``dna.edit_distance(a, b)``, and the name rule of scopes and Kinds: ``dna.name_follows_rule``,
``dna.check_scope(scope)``, ``dna.check_kind(kind)`` (SQLSTATE 22023 outside the rule; a scope that
already has rows and a Kind registered in ``dna_kinds`` stay accepted, so data stored before this
revision stays reachable).

Runs ``sql/memory.sql`` again: the memory verbs check their scope with ``dna.check_scope`` and their
Kind with ``dna.check_kind`` (through ``dna.check_memory_kind``); ``spec.affect`` must be one of
``dna.memory_affects()`` (new; 22023 otherwise); ``dna.forget``'s ``superseded_by`` must name a
memory of the scope (23503 otherwise, 22023 for the memory itself). Creates no table and changes no
stored row: a database at 0011 answers every read as before.

Creates ``dna_document_sources (scope, kind, name, tenant, source, recorded_at)``: where each
document was indexed from (``dna index`` records the file's path; ``dna.record_document_sources``,
``dna.source_conflicts`` in catalog.sql), so that indexing another folder's ``README.md`` into the
same scope warns before it replaces the first. Row-level security covers it like every table with a
tenant (``sql/tenancy.sql``, run again: ``dna.protected_tables()`` lists it), and every role that
``dna.grant_app_role`` had granted gets it.

Downgrade runs the text of ``memory.sql`` as 0002_memory released it
(``versions/0002_memory/memory.sql``) and of ``tenancy.sql`` as 0010_scale released it, drops the
functions this revision added and the table. It also replaces the comment on schema dna, whose
released text held a placeholder URL.
"""
import re
import sys
from pathlib import Path

from alembic import op
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import drop_plane_functions, plane_file, read_sql  # noqa: E402

revision = "0012_first_day"
down_revision = "0011_lane_speed"
branch_labels = None
depends_on = None

# This revision's text of memory.sql, frozen in versions/0012_first_day/ when 0015_governed_history
# split the memory plane into sql/memory_*.sql.
MEMORY_FROZEN_IN = revision
_DEFINED = re.compile(r"CREATE OR REPLACE FUNCTION dna\.(\w+)\s*\(")


def _added_memory_functions() -> list[str]:
    """Functions this revision's memory.sql defines that the one of 0002_memory did not."""
    now = set(_DEFINED.findall(plane_file("memory.sql", MEMORY_FROZEN_IN).read_text(encoding="utf-8")))
    before = set(_DEFINED.findall(plane_file("memory.sql", "0002_memory").read_text(encoding="utf-8")))
    return sorted(now - before)


TENANCY_FROZEN_IN = revision  # as MEMORY_FROZEN_IN, for tenancy.sql (frozen when 0016 changed it)

SOURCES = """
CREATE TABLE dna.dna_document_sources (
    scope       text NOT NULL,
    kind        text NOT NULL,
    name        text NOT NULL,
    tenant      text NOT NULL DEFAULT '',
    source      text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dna_document_sources_pkey PRIMARY KEY (scope, kind, name, tenant)
);
COMMENT ON TABLE dna.dna_document_sources IS 'Where each document was indexed from (dna index: the file''s absolute path, or the JSONL file''s), written by dna.record_document_sources after a write, read by dna.source_conflicts to warn before a document of another source is replaced. Advisory: no answer reads it.';
"""

PROTECT_AND_REGRANT = r"""
DO $$
DECLARE
    r text;
BEGIN
    PERFORM dna.protect_table('dna.dna_document_sources'::regclass);
    -- Roles dna.grant_app_role granted before this revision get the new table as well.
    FOR r IN SELECT DISTINCT a.grantee::regrole::text
             FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS a
             WHERE c.oid = 'dna.dna_search_docs_384'::regclass AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner AND a.grantee <> 0
             ORDER BY 1 LOOP
        PERFORM dna.grant_app_role(r);
    END LOOP;
END
$$;
"""


SCHEMA_COMMENT = ("pydna: hybrid search and agent memory inside PostgreSQL (the SQL package; "
                  "its README and docs/ travel with the pydna Python package)")


def upgrade() -> None:
    # 0001_foundation released a placeholder URL here; databases migrated before get this text too.
    op.execute(f"COMMENT ON SCHEMA dna IS '{SCHEMA_COMMENT}'")
    op.execute(read_sql("catalog.sql", frozen_in=revision))  # before memory.sql: its verbs call dna.check_scope / check_kind
    op.execute(read_sql("memory.sql", frozen_in=MEMORY_FROZEN_IN))
    op.execute(SOURCES)
    op.execute(read_sql("tenancy.sql", frozen_in=TENANCY_FROZEN_IN))
    op.execute(text(PROTECT_AND_REGRANT.replace(":", "\\:")))


def downgrade() -> None:
    op.execute("DROP TABLE dna.dna_document_sources")
    op.execute(read_sql("tenancy.sql", frozen_in="0010_scale"))
    op.execute(read_sql("memory.sql", frozen_in="0002_memory"))
    added = _added_memory_functions()
    if added:
        op.execute(" ".join(f"DROP FUNCTION IF EXISTS dna.{name};" for name in added))
    op.execute(drop_plane_functions(["catalog.sql"], frozen_in=revision))
