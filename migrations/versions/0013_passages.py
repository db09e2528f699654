"""Passages: long documents indexed as passages tied to their parent.

Revision ID: 0013_passages
Revises: 0012_first_day
Create Date: 2026-12-01

(Being written this session: empty until its work lands; removed from the chain if it does not.)
"""
from alembic import op  # noqa: F401

revision = "0013_passages"
down_revision = "0012_first_day"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
