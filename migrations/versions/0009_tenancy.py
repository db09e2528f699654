"""Tenancy and privacy: identities, workspace membership, row-level security (INV-PERSONAL).

Revision ID: 0009_tenancy
Revises: 0002_memory
Create Date: 2026-11-30

Creates (schema ``dna``) the DBA-managed maps

- ``dna_identities (role_name, oid)``: a login role (``current_user``) → the identity whose personal
  memory is ``tenant = 'personal:<oid>'``;
- ``dna_workspace_members (workspace, role_name, member_role)``: who may read and write the rows of
  a workspace (``workspace = '*'``: every workspace, never a personal partition);

both small reference tables (no scope), readable by PUBLIC under a row-level-security policy that
shows each role its own rows. Runs ``sql/tenancy.sql`` (dna.current_identity, dna.visible_tenants,
dna.tenancy_resolve, dna.protect_table, dna.grant_app_role, ...), then ENABLEs and FORCEs row-level
security with the policy ``dna_tenant_isolation`` on every table holding row data
(``dna.protected_tables()``: dna_instances, dna_versions, dna_bm25_postings, dna_bm25_stats,
dna_search_docs_<N>).

Downgrade removes the policies, turns row-level security off again on those tables, and drops the
functions of ``sql/tenancy.sql`` and the two maps.
"""
import sys
from pathlib import Path

from alembic import op
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import drop_plane_functions, read_sql  # noqa: E402

revision = "0009_tenancy"
down_revision = "0002_memory"
branch_labels = None
depends_on = None

PLANE_FILES = ("tenancy.sql",)

MAPS = r"""
CREATE TABLE dna.dna_identities (
    role_name  text PRIMARY KEY,
    oid        text NOT NULL CHECK (oid ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE dna.dna_identities IS
    'DBA-managed: the identity (oid) of a role; the role''s personal memory is tenant ''personal:<oid>''. '
    'Several roles may share one oid (one person, several logins). Identity = current_user; never a function argument.';
CREATE INDEX dna_identities_oid ON dna.dna_identities (oid);

CREATE TABLE dna.dna_workspace_members (
    workspace   text NOT NULL CHECK (workspace = '*' OR workspace ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    role_name   text NOT NULL,
    member_role text NOT NULL DEFAULT 'member' CHECK (member_role IN ('member', 'owner', 'admin')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, role_name)
);
COMMENT ON TABLE dna.dna_workspace_members IS
    'DBA-managed: the roles that may read and write a workspace''s rows (tenant = workspace). workspace ''*'' = '
    'every workspace (a trusted service), never a personal partition. member_role is a label: no workspace role '
    'grants access to anyone''s personal memory.';
CREATE INDEX dna_workspace_members_role ON dna.dna_workspace_members (role_name);

-- Every role may read its own rows (the policies of the data tables read them as the caller);
-- only the owner or a superuser writes them.
GRANT SELECT ON dna.dna_identities, dna.dna_workspace_members TO PUBLIC;
ALTER TABLE dna.dna_identities ENABLE ROW LEVEL SECURITY;
ALTER TABLE dna.dna_workspace_members ENABLE ROW LEVEL SECURITY;
CREATE POLICY dna_own_rows ON dna.dna_identities FOR SELECT TO PUBLIC USING (role_name = current_user::text);
CREATE POLICY dna_own_rows ON dna.dna_workspace_members FOR SELECT TO PUBLIC USING (role_name = current_user::text);
"""

PROTECT = """
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT dna.protected_tables() LOOP
        PERFORM dna.protect_table(t);
    END LOOP;
END
$$;
"""

UNPROTECT = """
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class AS c
             WHERE c.relnamespace = 'dna'::regnamespace AND c.relkind IN ('r', 'p')
               AND c.relname NOT IN ('dna_identities', 'dna_workspace_members') LOOP
        EXECUTE format('DROP POLICY IF EXISTS dna_tenant_isolation ON %s', t);
        EXECUTE format('ALTER TABLE %s NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %s DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;
"""


def _text(sql: str):
    return text(sql.replace(":", "\\:"))  # no bind parameters: 'personal:<oid>', x::text


def upgrade() -> None:
    op.execute(_text(MAPS))
    for name in PLANE_FILES:
        op.execute(read_sql(name, frozen_in=revision))  # as released (0010_scale replaced tenancy.sql)
    op.execute(PROTECT)


def downgrade() -> None:
    op.execute(UNPROTECT)
    op.execute(drop_plane_functions(PLANE_FILES, frozen_in=revision))
    op.execute("DROP TABLE dna.dna_workspace_members; DROP TABLE dna.dna_identities;")
