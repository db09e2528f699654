"""BM25 lane: lower cost per posting.

Revision ID: 0011_lane_speed
Revises: 0010_scale
Create Date: 2026-12-01

Re-runs ``sql/bm25.sql`` (as this revision released it: ``versions/0011_lane_speed/bm25.sql``) with
the faster statements of ``dna.bm25_lane``: a plain form of the exact and budgeted scoring
statements when the partition has no memtable posting of the query terms, no tombstone and no
shadowed row (the state after a compaction), postings decoded by ``unnest()`` in the select list,
the segment's base doc_id carried with the chosen chunks, a lower bound of the (C+1)-th partial sum
(from one chunk's own postings) that leaves most documents out before the top C + 1 cut, and the exact
rescoring limited to the candidates that can still reach the top k. No table, type or signature changes; every answer is
the one 0010_scale gives (tests/test_bm25_lane_speed.py compares the two texts on the same data).

Downgrade re-runs ``sql/bm25.sql`` as 0010_scale released it.
"""
import sys
from pathlib import Path

from alembic import op

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # migrations/ holds sql_files
from sql_files import read_sql  # noqa: E402

revision = "0011_lane_speed"
down_revision = "0010_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(read_sql("bm25.sql", frozen_in=revision))


def downgrade() -> None:
    op.execute(read_sql("bm25.sql", frozen_in="0010_scale"))
