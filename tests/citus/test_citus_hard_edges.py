"""tests/test_hard_edges.py's paging over tied documents on a Citus coordinator (tests/citus/conftest.py).
The graph variant is left out: it reads the lane's path from explain => true, which fails on Citus with
"cannot switch local execution status" (as before this topic)."""
from test_hard_edges import tied, test_pages_of_any_k_compose_over_tied_documents  # noqa: F401
