"""The scope hint of dna.get_memory, dna.memory_history and dna.forget (revision 0023_still_open, topic
scope_hint) on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it): a misspelt scope names the
nearest scopes, a scope with rows the nearest names. The single-node tests' own assertions."""
from __future__ import annotations

from test_scope_hint import test_sql_a_scope_with_rows_keeps_the_nearest_names, test_sql_names_the_nearest_scopes  # noqa: F401
