"""Agent doors: API keys for the REST door.

Revision ID: 0014_doors
Revises: 0013_passages
Create Date: 2026-12-01

(Being written this session: empty until its work lands; removed from the chain if it does not.)
"""
from alembic import op  # noqa: F401

revision = "0014_doors"
down_revision = "0013_passages"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
