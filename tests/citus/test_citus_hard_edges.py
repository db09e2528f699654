"""tests/test_hard_edges.py's paging over tied documents on a Citus coordinator (tests/citus/conftest.py),
the graph variant included: it reads the lane's path from explain => true, which failed on Citus with
"cannot switch local execution status" before 0023 (topic citus_explain)."""
from test_hard_edges import (tied, test_pages_compose_when_the_graph_answers,  # noqa: F401
                             test_pages_of_any_k_compose_over_tied_documents)
