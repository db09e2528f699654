"""Installed by a database owner, as a managed service has it (issue 23, P1/P2).

The provider's admin (here the test server's superuser) creates the database for an owner that is
neither superuser nor BYPASSRLS and runs only ``CREATE EXTENSION vector`` in it; the owner migrates.
``dna_redactor`` is the cluster's: the owner creates and comments it with CREATEROLE, uses one made by
someone else with one NOTICE, and without CREATEROLE and without the role the install stops naming
what an administrator runs. The cases that need the role absent run in one transaction that drops it
and is rolled back, so the cluster's ``dna_redactor`` (other databases' installs use it) never goes.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import os
import secrets

import psycopg
import pytest
from alembic import command
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from sqlalchemy import create_engine, pool, text
from typer.testing import CliRunner

from pydna import migrate
from pydna.cli import app

_n = itertools.count()
COMMENT = "pydna: members may erase memories with dna.redact (GRANT dna_redactor TO <role>)."


def _as(dsn: str, user: str, password: str | None) -> str:
    params = conninfo_to_dict(dsn)
    params.update(user=user, password=password)
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


@pytest.fixture
def managed(pg_server):
    """``managed(createrole)`` → (owner's DSN, superuser's DSN, owner role) of a new database owned
    by a new NOSUPERUSER NOBYPASSRLS login role, pgvector created in it by the superuser."""
    with contextlib.ExitStack() as stack:
        roles = []

        def make(createrole: bool):
            tag = f"{os.getpid()}_{next(_n)}"
            role, password, db = f"dna_own_{tag}", secrets.token_hex(12), f"dna_owned_{tag}"
            with psycopg.connect(pg_server.dsn(pg_server.maintenance_db), autocommit=True) as conn:
                conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS "
                             f"{'CREATEROLE' if createrole else 'NOCREATEROLE'} PASSWORD '{password}'")
            roles.append(role)
            stack.enter_context(pg_server.janitor(db))
            with psycopg.connect(pg_server.dsn(db), autocommit=True) as conn:
                conn.execute(f"ALTER DATABASE {db} OWNER TO {role}")
                conn.execute("CREATE EXTENSION vector")  # the provider's admin: the one superuser step
            return _as(pg_server.dsn(db), role, password), pg_server.dsn(db), role

        stack.callback(lambda: _drop_roles(pg_server, roles))  # after the databases (LIFO)
        yield make


def _drop_roles(pg_server, roles):
    with psycopg.connect(pg_server.dsn(pg_server.maintenance_db), autocommit=True) as conn:
        for role in roles:
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def _ensure_redactor(superuser_dsn: str) -> str | None:
    """dna_redactor made by the superuser when missing (another install's, as far as the owner
    knows); returns its comment."""
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        conn.execute("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dna_redactor') THEN "
                     "CREATE ROLE dna_redactor NOLOGIN; END IF; END $$")
        return conn.execute("SELECT shobj_description(oid, 'pg_authid') FROM pg_roles "
                            "WHERE rolname = 'dna_redactor'").fetchone()[0]


def _server_version_num(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SHOW server_version_num").fetchone()[0])


def _upgrade(runner, dsn):
    result = runner.invoke(app, ["--dsn", dsn, "db", "upgrade"])
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def test_owner_without_createrole_uses_a_premade_dna_redactor_and_says_so_once(managed, runner):
    owner_dsn, super_dsn, owner = managed(createrole=False)
    comment = _ensure_redactor(super_dsn)
    result = _upgrade(runner, owner_dsn)
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "role dna_redactor exists" in notes[0] and owner in notes[0], result.stderr
    assert "may not comment on it or grant it: it is used as it is" in notes[0]
    with psycopg.connect(super_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'dna'"
                            ).fetchone()[0] == owner
        assert conn.execute("SELECT shobj_description(oid, 'pg_authid') FROM pg_roles "
                            "WHERE rolname = 'dna_redactor'").fetchone()[0] == comment  # its maker's
        assert migrate.current(conn) == migrate.head()
        # The provider's admin makes the application role; the owner grants it the SQL package.
        app_role = f"{owner}_app"
        conn.execute(f"CREATE ROLE {app_role} LOGIN PASSWORD 'app'")
    try:
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            granted = conn.execute("SELECT dna.grant_app_role(%s)", (app_role,)).fetchone()[0]
            assert granted["role"] == app_role and granted["data_tables"]
            conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'managed-app')", (app_role,))
        with psycopg.connect(_as(owner_dsn, app_role, "app"), autocommit=True) as conn:
            conn.execute("SELECT dna.index_document('s', 'Doc', 'n', 'reciprocal rank fusion', NULL, "
                         "'dna-fake-hash-v1')")
            assert conn.execute("SELECT name FROM dna.search('s', 'fusion', NULL, 'dna-fake-hash-v1')"
                                ).fetchall() == [("n",)]
        with psycopg.connect(owner_dsn, autocommit=True) as conn:  # neither superuser nor BYPASSRLS
            assert conn.execute("SELECT dna.privileged()").fetchone()[0] is False
    finally:
        with psycopg.connect(super_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {app_role}")
            conn.execute(f"DROP ROLE {app_role}")


def test_owner_with_createrole_and_someone_elses_dna_redactor(managed, runner):
    owner_dsn, super_dsn, owner = managed(createrole=True)
    _ensure_redactor(super_dsn)  # made by the superuser: the owner holds no ADMIN OPTION on it
    result = _upgrade(runner, owner_dsn)
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    if _server_version_num(super_dsn) < 160000:
        assert notes == []  # PostgreSQL 15: CREATEROLE may comment any non-superuser role (as released)
        with psycopg.connect(super_dsn) as conn:
            assert conn.execute("SELECT shobj_description(oid, 'pg_authid') FROM pg_roles "
                                "WHERE rolname = 'dna_redactor'").fetchone()[0] == COMMENT
    else:
        assert len(notes) == 1 and "role dna_redactor exists" in notes[0], result.stderr  # 16+: ADMIN OPTION


@contextlib.contextmanager
def _migrate_in_transaction(super_dsn: str, role: str):
    """Migrate to head as ``role`` (SET ROLE) inside one transaction of the superuser that first
    drops dna_redactor; yields the SQLAlchemy connection, then rolls everything back."""
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(super_dsn),
                           poolclass=pool.NullPool)
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            conn.execute(text("DROP ROLE dna_redactor"))
            conn.execute(text(f"SET ROLE {role}"))
            cfg = migrate.alembic_config()
            cfg.attributes["connection"] = conn
            cfg.output_buffer = io.StringIO()
            yield conn, cfg
        finally:
            trans.rollback()


def test_owner_with_createrole_creates_and_comments_dna_redactor(managed):
    owner_dsn, super_dsn, owner = managed(createrole=True)
    _ensure_redactor(super_dsn)
    with _migrate_in_transaction(super_dsn, owner) as (conn, cfg):
        command.upgrade(cfg, "head")
        row = conn.execute(text(
            "SELECT shobj_description(oid, 'pg_authid'), "
            "(SELECT pg_has_role(current_user, 'dna_redactor', 'MEMBER WITH ADMIN OPTION')) "
            "FROM pg_roles WHERE rolname = 'dna_redactor'")).one()
        # 16+ gives the creator ADMIN OPTION on the role it made; 15 has no such grant (CREATEROLE is enough).
        assert row == (COMMENT, _server_version_num(super_dsn) >= 160000)
        assert conn.execute(text("SELECT version_num FROM public.dna_alembic_version")).scalar() == migrate.head()
    with psycopg.connect(super_dsn) as conn:  # rolled back: the cluster's role is there again
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'dna_redactor'").fetchone()[0] == 1


def test_owner_without_createrole_and_without_dna_redactor_is_refused_saying_what_to_run(managed):
    owner_dsn, super_dsn, owner = managed(createrole=False)
    _ensure_redactor(super_dsn)
    with _migrate_in_transaction(super_dsn, owner) as (conn, cfg):
        with pytest.raises(Exception) as err:
            command.upgrade(cfg, "head")
        failure = migrate.MigrationFailed.of(err.value)
        assert (failure.revision, failure.sqlstate) == ("0015_governed_history", "42501")
        assert failure.message == f"role dna_redactor does not exist, and role {owner} may not create it " \
                                  f"(it has no CREATEROLE)"
        assert failure.hint.startswith("An administrator runs: CREATE ROLE dna_redactor NOLOGIN;")
        assert failure.source == "migrations/versions/0015_governed_history.py"
