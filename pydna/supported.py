"""Supported servers: PostgreSQL 15, 16, 17 and 18 with pgvector 0.8.0 or newer.

Every migration (``dna db upgrade``, ``dna db up``, ``pydna.migrate.upgrade``, ``alembic upgrade``)
reads what the server is before it runs anything (``migrations/env.py`` calls :func:`check` on the
migration's connection, inside its transaction) and refuses a server below the minimum with the
versions it found and the minimum: nothing is changed. pgvector 0.8.0 is the first with
``hnsw.iterative_scan`` (filtered dense search); PostgreSQL 15 is the oldest major the SQL package
runs on (newer syntax only inside a version branch, tests/test_pg15_guard.py). Newer majors than 18
are not refused: they are not tested yet.

The check is one catalog query (:data:`CHECK_SQL`); a database where pgvector is not created yet is
judged by the version the server offers, and refused when the installing role could not create it
(on a managed service the provider's admin runs ``CREATE EXTENSION vector`` first).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MIN_SERVER = 150000          # server_version_num of PostgreSQL 15.0
MIN_VECTOR = (0, 8, 0)       # pgvector
TESTED_MAJORS = (15, 16, 17, 18)

#: What the check reads, in one statement: the server, pgvector as created in this database and as
#: the server offers it (and whether a non-superuser may create it), the installing role.
CHECK_SQL = """
SELECT current_setting('server_version_num')::int AS server_version_num,
       current_setting('server_version') AS server_version,
       (SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = 'vector') AS vector_installed,
       (SELECT a.default_version FROM pg_catalog.pg_available_extensions AS a WHERE a.name = 'vector')
           AS vector_available,
       coalesce((SELECT v.trusted FROM pg_catalog.pg_available_extension_versions AS v
                 JOIN pg_catalog.pg_available_extensions AS a ON a.name = v.name AND a.default_version = v.version
                 WHERE v.name = 'vector'), false) AS vector_trusted,
       (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) AS superuser,
       current_user::text AS role,
       current_database()::text AS database
"""


class UnsupportedServer(RuntimeError):
    """The server or its pgvector is below the minimum, or pgvector cannot be created by this role.
    Raised before any revision runs (nothing changed)."""


@dataclass(frozen=True)
class ServerInfo:
    server_version_num: int
    server_version: str
    vector_installed: str | None
    vector_available: str | None
    vector_trusted: bool
    superuser: bool
    role: str
    database: str

    @property
    def vector(self) -> str | None:
        """The pgvector version the install will use: as created here, else as the server offers it."""
        return self.vector_installed or self.vector_available

    def describe(self) -> str:
        """``PostgreSQL 15.20, pgvector 0.8.6`` (or ``pgvector not installed``)."""
        return f"PostgreSQL {self.server_version.split()[0]}, " + (
            f"pgvector {self.vector}" if self.vector else "pgvector not installed")


def version_tuple(text: str) -> tuple[int, ...]:
    """``'0.8.6'`` → ``(0, 8, 6)``; a suffix (``0.8.0-dev``) is ignored."""
    return tuple(int(p) for p in re.findall(r"\d+", text.split("-")[0])[:3])


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def _server_name(version_num: int) -> str:
    return f"{version_num // 10000}.{version_num % 10000}"


def read(conn) -> ServerInfo:
    """What the server is, through ``CHECK_SQL`` on a psycopg or SQLAlchemy connection."""
    if hasattr(conn, "exec_driver_sql"):  # SQLAlchemy (the migration's connection)
        row = conn.exec_driver_sql(CHECK_SQL).mappings().one()
    else:  # psycopg
        cur = conn.execute(CHECK_SQL)
        row = dict(zip([c.name for c in cur.description], cur.fetchone()))
    return ServerInfo(**{k: row[k] for k in ServerInfo.__dataclass_fields__})


def problems(info: ServerInfo, min_server: int | None = None, min_vector: tuple[int, ...] | None = None) -> list[str]:
    """Why ``info`` is refused (empty: supported). Each names what was found and the minimum
    (default: ``MIN_SERVER`` and ``MIN_VECTOR``)."""
    min_server = min_server or MIN_SERVER
    min_vector = min_vector or MIN_VECTOR
    found = info.describe()
    supported = (f"pydna supports PostgreSQL {TESTED_MAJORS[0]} to {TESTED_MAJORS[-1]} "
                 f"with pgvector {_dotted(min_vector)} or newer")
    out = []
    if info.server_version_num < min_server:
        out.append(f"the server is PostgreSQL {info.server_version.split()[0]} "
                   f"(server_version_num {info.server_version_num}), below the minimum "
                   f"{_server_name(min_server)}: {supported}")
    if info.vector is None:
        out.append(f"pgvector is not installed on this server ({found}): {supported}; install the package "
                   f"(postgresql-<major>-pgvector) or ask the provider to allow the extension vector")
    elif version_tuple(info.vector) < min_vector:
        where = "created in this database" if info.vector_installed else "offered by the server"
        fix = ("ALTER EXTENSION vector UPDATE (run by the extension's owner, on a managed service its admin)"
               if info.vector_installed else "install a newer pgvector package")
        out.append(f"pgvector {info.vector} is {where}, below the minimum {_dotted(min_vector)} ({found}): "
                   f"{supported}; {fix}")
    elif info.vector_installed is None and not (info.superuser or info.vector_trusted):
        out.append(f"pgvector {info.vector} is offered but not created in database {info.database}, and role "
                   f"{info.role} is not a superuser (vector is not a trusted extension): an administrator "
                   f"(on a managed service, the provider's admin role) runs CREATE EXTENSION vector; in "
                   f"database {info.database}, then run dna db upgrade again as {info.role}")
    return out


def check(conn, min_server: int | None = None, min_vector: tuple[int, ...] | None = None) -> ServerInfo:
    """Read the server (:func:`read`) and raise :class:`UnsupportedServer` naming every problem;
    returns what it read."""
    info = read(conn)
    found = problems(info, min_server, min_vector)
    if found:
        raise UnsupportedServer("refused before any change: " + "; ".join(found))
    return info
