"""The opt-in Citus suite: the conformance, memory-verb, memory-golden and tenancy tests of tests/,
run against a real Citus coordinator named by ``DNA_TEST_CITUS_DSN`` (a libpq DSN of a database on
the coordinator, as a superuser; the citus extension installed there and on every worker, the
workers added). Each test gets that database reset: schema ``dna`` dropped, ``dna db upgrade``
(alembic to head), then ``SELECT dna.distribute()``; the assertions are the single-node tests' own
(the modules here import them). Without the variable every test of this folder is deselected (not
run, not counted). How to run it: docs/scale-out.md, "Testing on Citus"."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # tests/: the modules reused here

from .citus_env import CITUS_DSN, reset_and_distribute, server  # noqa: E402

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    if CITUS_DSN:
        return
    mine = [item for item in items if HERE in Path(str(item.fspath)).resolve().parents]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]


@pytest.fixture(scope="session")
def pg_server():
    """The coordinator (roles created through it reach the workers)."""
    yield server()


@pytest.fixture
def dna_dsn(pg_server):
    """The coordinator's database, migrated to head and distributed afresh for this test."""
    reset_and_distribute(CITUS_DSN)
    yield CITUS_DSN


@pytest.fixture
def empty_dsn():
    pytest.fail("migration tests do not run on Citus: this suite reuses the conformance, memory and tenancy tests")
