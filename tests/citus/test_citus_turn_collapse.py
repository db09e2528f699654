"""A conversation's turns are not collapsed into one another on a real coordinator (DNA_TEST_CITUS_DSN;
deselected without it): dna.search and dna.recall delegated by scope run dna.collapses_by_text on the
worker that holds the scope (revision 0023, topic turn_collapse), and documents still collapse."""
from __future__ import annotations

from test_turn_collapse import (test_documents_with_the_same_paragraph_still_collapse,  # noqa: F401
                                test_search_and_recall_keep_each_turn_whose_text_a_later_turn_quotes)
