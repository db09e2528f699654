"""A passage found by the section it sits in, on a real coordinator (DNA_TEST_CITUS_DSN; deselected without
it): the heading context in the distributed search rows' tsv (the generated column revision 0022 drops and
adds on every distributed width table when the cluster is migrated), BM25 exact after a heading-only change
(dna.verify_integrity on the shards)."""
from __future__ import annotations

from test_passage_headings import (test_a_heading_only_change_moves_the_passage_in_the_lexical_index,  # noqa: F401
                                   test_a_passage_is_found_by_its_heading_and_bm25_stays_exact, vsql)
