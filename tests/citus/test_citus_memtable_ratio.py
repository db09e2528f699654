"""tests/test_memtable_ratio.py on a Citus coordinator (tests/citus/conftest.py): the seal and the merges in
pairs run in the BM25 trigger on the shard (dna.bm25_bound_memtable, next to the index), and the lane's plain
exact path with a memtable answers as after dna.bm25_compact."""
from test_memtable_ratio import (  # noqa: F401
    model, test_a_memtable_beside_segments_answers_as_compacted_on_the_plain_exact_path,
    test_a_scope_written_one_document_at_a_time_keeps_one_segment_per_size_class,
    test_removed_documents_leave_the_pairs_exact)
