"""Run the alembic revisions of the SQL package (the only place DDL comes from).

``upgrade(dsn)`` migrates a database to head; ``upgrade(dsn, sql=True)`` returns the SQL instead
of running it, for a DBA to review; ``current(dsn)`` reads the applied revision.
"""
from __future__ import annotations

import io
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

VERSION_TABLE = "dna_alembic_version"
_ROOT = Path(__file__).resolve().parent


def migrations_dir() -> Path:
    for candidate in (_ROOT.parent / "migrations", _ROOT / "_migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("pydna migrations not found (neither a source checkout nor an installed wheel)")


def alembic_config(dsn: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("version_table", VERSION_TABLE)
    if dsn:
        cfg.set_main_option("sqlalchemy.url", dsn.replace("%", "%%"))
    return cfg


def head() -> str:
    """The newest revision id this package ships."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def upgrade(dsn: str, revision: str = "head", sql: bool = False) -> str | None:
    """Migrate ``dsn`` up to ``revision``; with ``sql=True`` return the SQL and run nothing."""
    cfg = alembic_config(dsn)
    if sql:
        buf = io.StringIO()
        cfg.output_buffer = buf
        command.upgrade(cfg, revision, sql=True)
        return buf.getvalue()
    command.upgrade(cfg, revision)
    return None


def downgrade(dsn: str, revision: str) -> None:
    """Migrate ``dsn`` down to ``revision`` (``"base"`` drops schema dna)."""
    command.downgrade(alembic_config(dsn), revision)


def current(conn) -> str | None:
    """The applied revision of the database behind a psycopg connection, or None if unmigrated.
    Other errors (permission denied, ...) propagate: they are not "unmigrated"."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{VERSION_TABLE}",)).fetchone()[0]
    if not exists:
        return None
    row = conn.execute(f"SELECT version_num FROM public.{VERSION_TABLE}").fetchone()
    return row[0] if row else None
