"""dna reindex --model on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): the documents a
model lacks are listed by the delegated dna.reconcile (dna.reembed_documents on the scope's shard) and
written back as a fresh index with the model writes them."""
from __future__ import annotations

from test_reindex_documents import (test_a_document_written_through_sql_is_reembedded_with_its_metadata,  # noqa: F401
                                    test_reindex_writes_documents_as_a_fresh_index_with_the_model)
