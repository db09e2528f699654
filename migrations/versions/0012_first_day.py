"""First day: names checked, scopes listed, the embedded default inside the privacy model.

Revision ID: 0012_first_day
Revises: 0011_lane_speed
Create Date: 2026-12-01

(Being written this session: empty until its work lands; removed from the chain if it does not.)
"""
from alembic import op  # noqa: F401

revision = "0012_first_day"
down_revision = "0011_lane_speed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
