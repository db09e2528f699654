"""tests/test_memory_verbs.py on a Citus coordinator (tests/citus/conftest.py)."""
from test_memory_verbs import *  # noqa: F401,F403
