"""dna.get_memory and dna.memory_history on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it):
the record and its versions read from the scope's shard, recorded_by set on the worker that appends the
version, P0002 with the nearest names."""
from __future__ import annotations

from test_memory_reads import test_get_memory_and_its_history, test_recorded_by_cannot_be_forged  # noqa: F401
