"""dna.search's exact dense lane, which rounds only the head of the partition (revision 0024_at_scale, topic
exact_lane), on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): the hits are those of
rounding every row, on distinct vectors and on a tie across the cut. The single-node tests' own assertions."""
from __future__ import annotations

from test_exact_lane import (  # noqa: F401
    test_a_scope_smaller_than_the_head_is_whole,
    test_a_tie_across_the_cut_ranks_as_rounding_every_row,
    test_distinct_vectors_rank_as_rounding_every_row,
)
