"""The opt-in Citus suite: the conformance, memory-verb, memory-golden and tenancy tests of tests/,
the answer-equality test and the distribution tests, run against a real Citus coordinator named by
``DNA_TEST_CITUS_DSN`` (a libpq DSN of a database on the coordinator, as a superuser, whose metadata
lists the workers). Each test module gets a database of its own on every node, migrated to head and
distributed (``DNA_TEST_CITUS_SHARDS`` shards per table, 4 by default); each test starts from it
emptied (tests/citus/citus_env.py). The reused modules' assertions are the single-node tests' own
(the modules here import them). Without the variable every test of this folder is deselected (not
run, not counted). How to run it: docs/scale-out.md, "Testing on Citus"."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # tests/: the modules reused here

from .citus_env import CITUS_DSN, Cluster, DistributedDatabase, server  # noqa: E402

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    if CITUS_DSN:
        return
    mine = [item for item in items if HERE in Path(str(item.fspath)).resolve().parents]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]


@pytest.fixture(scope="session")
def cluster():
    return Cluster(CITUS_DSN)


@pytest.fixture(scope="session")
def pg_server():
    """The coordinator (roles created through it reach the workers)."""
    yield server()


@pytest.fixture(scope="module")
def citus_database(cluster, request):
    """This module's distributed database (dropped on every node at the module's end)."""
    db = DistributedDatabase(cluster, label=request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_citus_")[:20])
    yield db
    db.drop()


@pytest.fixture
def dna_dsn(citus_database):
    """The module's distributed database, emptied for this test."""
    citus_database.reset()
    yield citus_database.dsn


@pytest.fixture
def empty_dsn():
    pytest.fail("migration tests do not run on Citus: this suite reuses the conformance, memory and tenancy tests")
