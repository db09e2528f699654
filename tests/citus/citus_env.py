"""Where the opt-in Citus suite runs (tests/citus/conftest.py): ``DNA_TEST_CITUS_DSN`` and the reset
each test starts from."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import psycopg

from pydna import migrate

CITUS_DSN = os.environ.get("DNA_TEST_CITUS_DSN")


def server():
    """tests/conftest.py's Server for the coordinator (loaded by path: both files are named conftest)."""
    spec = importlib.util.spec_from_file_location("dna_tests_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Server(CITUS_DSN)


def reset_and_distribute(dsn: str) -> dict:
    """Schema dna dropped (Citus propagates the drop to the workers), migrated to head, distributed;
    dna.distribute's report."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
        assert version, "DNA_TEST_CITUS_DSN names a database without the citus extension"
        conn.execute("DROP SCHEMA IF EXISTS dna CASCADE")
        conn.execute("DROP TABLE IF EXISTS public.dna_alembic_version")
    migrate.upgrade(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = conn.execute("SELECT dna.distribute()").fetchone()[0]
        state = conn.execute("SELECT dna.distribution()").fetchone()[0]
    assert state["distributed"], state
    return report
