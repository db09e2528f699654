"""Alembic environment for pydna.

The database comes from, in order: a connection handed in by pydna (``config.attributes
["connection"]``), ``-x dsn=...``, the ``sqlalchemy.url`` option, or ``DNA_DATABASE_URL``.
Every run takes a transaction-scoped advisory lock so two concurrent installs serialise, then checks
the server (``pydna.supported.check``: PostgreSQL and pgvector at least the minimum, or nothing runs).
What the check read is left in ``config.attributes["server"]``; a callable in
``config.attributes["on_notice"]`` receives every notice the server sends (psycopg's ``Diagnostic``).
"""
from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine, pool, text



config = context.config
VERSION_TABLE = config.get_main_option("version_table") or "dna_alembic_version"
# Serialises concurrent migrations of one database (any value works; it is only a lock key).
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('pydna.migrations'))"


def _dsn() -> str:
    dsn = context.get_x_argument(as_dictionary=True).get("dsn") or config.get_main_option("sqlalchemy.url") \
        or os.environ.get("DNA_DATABASE_URL")
    if not dsn:
        raise SystemExit("No database: set DNA_DATABASE_URL, pass -x dsn=postgresql://..., or use `dna db upgrade`.")
    return dsn


def _engine():
    dsn = _dsn()
    if "+" in dsn.split("://", 1)[0]:
        return create_engine(dsn, poolclass=pool.NullPool)  # already a SQLAlchemy URL
    # Any libpq connection string (URL or key=value, Unix sockets included) goes to psycopg as is.
    import psycopg

    def connect():
        conn = psycopg.connect(dsn)
        on_notice = config.attributes.get("on_notice")
        if on_notice is not None:
            conn.add_notice_handler(on_notice)
        return conn

    return create_engine("postgresql+psycopg://", creator=connect, poolclass=pool.NullPool)


def run_offline() -> None:
    # --sql: only the dialect matters; nothing connects.
    # paramstyle "named": the printed SQL keeps '%' as written (format('%I'), LIKE 'personal:%'), so
    # the script runs as printed; the revisions escape every ':' (sql_files.read_sql).
    context.configure(dialect_name="postgresql", literal_binds=True, version_table=VERSION_TABLE, version_table_schema="public",
                      transaction_per_migration=False, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.execute(LOCK_SQL)
        context.run_migrations()


def _run(connection) -> None:
    from pydna import supported  # online only: --sql stays light

    context.configure(connection=connection, version_table=VERSION_TABLE, version_table_schema="public", transaction_per_migration=False)
    with context.begin_transaction():
        connection.execute(text(LOCK_SQL))
        # Before any revision: a server below the minimum is refused with nothing changed.
        config.attributes["server"] = supported.check(connection)
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = _engine()
    with engine.connect() as connection:
        _run(connection)
        connection.commit()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
