"""Identifiers (issue 27 item 4) on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): the
distributed search rows' generated tsvector takes dna.text_tsvector's identifier lexemes on the shards,
the lexical lane ranks the identifier's page first and highlights mark it whole, as on one node. The tests
are tests/test_identifiers.py's SQL ones, run on the module's distributed database (its CLI test is not:
`dna index` on Citus stops at dna_document_sources' upsert, 42P18, before any identifier is involved)."""
from __future__ import annotations

from test_identifiers import (corpus, test_camel_case_as_written_ranks_its_page_first,  # noqa: F401
                              test_dotted_name_as_written_ranks_its_page_first,
                              test_highlight_marks_the_identifier_whole, test_identifier_lexemes_are_whole_and_parts,
                              test_identifiers_are_found_by_their_parts,
                              test_snake_case_as_written_ranks_its_page_first)
