"""Agent doors: API keys for the REST door.

Revision ID: 0014_doors
Revises: 0013_passages
Create Date: 2026-12-01

Creates ``dna.dna_api_keys (key_id, key_hash, role_name, label, created_at, created_by, revoked_at)``:
the API keys a DBA maps to database roles for ``dna serve`` (stored as sha256 hashes, never the key),
revoked from PUBLIC so that application roles cannot read it; and runs ``sql/doors.sql``
(dna.api_key_hash, dna.create_api_key, dna.revoke_api_key, dna.grant_door_role).

Downgrade drops the functions of ``sql/doors.sql`` and the table (with its keys and column grants).
"""
import sys
from pathlib import Path

from alembic import op
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import drop_plane_functions, read_sql  # noqa: E402

revision = "0014_doors"
down_revision = "0013_passages"
branch_labels = None
depends_on = None

PLANE_FILES = ("doors.sql",)

TABLE = r"""
CREATE TABLE dna.dna_api_keys (
    key_id     text PRIMARY KEY CHECK (key_id ~ '^dna_[0-9a-f]{12}$'),
    key_hash   bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
    role_name  text NOT NULL,
    label      text NOT NULL DEFAULT '' CHECK (length(label) <= 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL DEFAULT current_user,
    revoked_at timestamptz
);
COMMENT ON TABLE dna.dna_api_keys IS
    'DBA-managed (dna.create_api_key, dna.revoke_api_key): API keys of the REST door, each mapped to a database '
    'role the door SET LOCAL ROLEs to per request. key_hash = dna.api_key_hash(key) (sha256); the key itself is '
    'never stored. key_id = the key''s first 16 characters, for listings. Not readable by PUBLIC; the door''s '
    'login role reads key_id, key_hash, role_name, revoked_at (dna.grant_door_role).';
CREATE INDEX dna_api_keys_role ON dna.dna_api_keys (role_name);
REVOKE ALL ON dna.dna_api_keys FROM PUBLIC;
"""


def upgrade() -> None:
    op.execute(text(TABLE.replace(":", "\\:")))
    for name in PLANE_FILES:
        op.execute(read_sql(name))


def downgrade() -> None:
    op.execute(drop_plane_functions(PLANE_FILES))
    op.execute("DROP TABLE dna.dna_api_keys")
