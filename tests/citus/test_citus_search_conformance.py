"""tests/test_search_conformance.py on a Citus coordinator (tests/citus/conftest.py)."""
from test_search_conformance import *  # noqa: F401,F403
