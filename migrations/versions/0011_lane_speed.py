"""BM25 lane: lower cost per posting.

Revision ID: 0011_lane_speed
Revises: 0010_scale
Create Date: 2026-12-01

(Being written this session: empty until its work lands; removed from the chain if it does not.)
"""
from alembic import op  # noqa: F401

revision = "0011_lane_speed"
down_revision = "0010_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
