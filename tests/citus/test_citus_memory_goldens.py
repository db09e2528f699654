"""tests/test_memory_goldens.py on a Citus coordinator (tests/citus/conftest.py)."""
from test_memory_goldens import *  # noqa: F401,F403
