"""Run the alembic revisions of the SQL package (the only place DDL comes from).

``upgrade(dsn)`` migrates a database to head; ``upgrade(dsn, sql=True)`` returns the SQL instead
of running it, for a DBA to review; ``current(dsn)`` reads the applied revision.

Before any revision runs, the server is checked (``pydna.supported``: PostgreSQL 15+ with pgvector
0.8.0+; ``UnsupportedServer`` otherwise, nothing changed). A revision that fails raises
:class:`MigrationFailed`, which names the revision, the file (or the revision's own text) and the
statement, the server's versions and a hint; the original error is its ``__cause__``, and the whole
upgrade has rolled back (one transaction). On Citus a run that crosses a revision of
``CITUS_OWN_TRANSACTION`` commits before and after it (its shards are reached by other connections);
a failure then says which revision the database is at.
"""
from __future__ import annotations

import dataclasses
import io
import re
import sys
from dataclasses import dataclass
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


def upgrade(dsn: str, revision: str = "head", sql: bool = False, on_notice=None,
            server_version_num: int | None = None, from_revision: str | None = None) -> str | None:
    """Migrate ``dsn`` up to ``revision``; with ``sql=True`` return the SQL and run nothing
    (rendered for ``server_version_num`` where a revision branches on it, else for the newest
    servers; from ``from_revision`` when given — the delta a database at that revision needs —
    else from an empty database). ``on_notice(text)`` receives each notice the revisions raise
    themselves (RAISE NOTICE; the server's own "…, skipping" notes are not passed on)."""
    cfg = alembic_config(dsn)
    if sql and from_revision is not None:
        script = ScriptDirectory.from_config(cfg)
        start, target = script.get_revision(from_revision), script.get_revision(revision)
        if start is None or target is None:
            raise ValueError(f"unknown revision {from_revision if start is None else revision!r}")
        if start.revision == target.revision:
            return f"-- schema dna is at revision {start.revision}: nothing to upgrade\n"
        revision = f"{start.revision}:{target.revision}"
    if sql:
        if server_version_num is not None:
            from argparse import Namespace

            cfg.cmd_opts = Namespace(x=[f"server_version_num={int(server_version_num)}"])
        buf = io.StringIO()
        cfg.output_buffer = buf
        command.upgrade(cfg, revision, sql=True)
        return buf.getvalue()
    if on_notice is not None:
        cfg.attributes["on_notice"] = lambda diag: on_notice(diag.message_primary) if _raised(diag) else None
    committed = None
    try:
        for step in _citus_steps(dsn, cfg, revision, down=False):
            command.upgrade(cfg, step)
            committed = step
    except Exception as exc:
        failure = MigrationFailed.of(exc, cfg.attributes.get("server"))
        if failure is None:
            raise
        raise dataclasses.replace(failure, committed=committed) from exc
    return None


# Revisions whose text reaches Citus shards through run_command_on_shards (0024's SET STORAGE, which Citus
# does not propagate). Its connections are not the migration's: they wait for the locks the migration's
# own transaction holds on the shards (DDL of a revision before it in the same run, e.g. 0023's valid_from;
# on the way down 0025's index rebuild) and the run would hang. On Citus such a revision therefore runs in a
# transaction of its own: the revisions before it commit first (tests/citus/test_citus_policy_bound.py).
CITUS_OWN_TRANSACTION = frozenset({"0024_at_scale"})


def _citus_steps(dsn: str, cfg: Config, target: str, down: bool) -> list[str]:
    """The revisions to migrate to in turn, each step one transaction: ``[target]``, except on a database
    with Citus whose path crosses a revision of CITUS_OWN_TRANSACTION with others beside it."""
    import psycopg

    try:
        with psycopg.connect(_libpq(dsn), autocommit=True) as conn:
            if not conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension "
                                "WHERE extname = 'citus')").fetchone()[0]:
                return [target]
            at = current(conn)
    except psycopg.Error:
        return [target]     # the migration itself reports the server it cannot reach or read
    script = ScriptDirectory.from_config(cfg)
    if down and at is None:
        return [target]
    upper, lower = (at, target) if down else (target, at or "base")
    lower = "base" if lower in (None, "base") else script.get_revision(lower).revision
    # the revisions the run applies (up) or undoes (down), newest first
    path = [r.revision for r in script.iterate_revisions(upper, lower) if r.revision != lower]
    steps: list[str] = []
    for rev in (path if down else reversed(path)):
        if rev not in CITUS_OWN_TRANSACTION:
            continue
        before = script.get_revision(rev).down_revision or "base"
        if down:    # undo what follows rev, then rev alone
            cuts = [c for c in (rev, before) if c not in (at, lower)]
        else:       # commit what precedes rev, then rev alone
            cuts = [c for c in (before, rev) if c not in (lower, upper)]
        steps += [c for c in cuts if c not in steps]
    return steps + [target]


def _libpq(dsn: str) -> str:
    """``dsn`` for psycopg: a SQLAlchemy URL (postgresql+psycopg://…), which alembic also takes, without its
    driver; any other libpq string as it is."""
    scheme, sep, rest = dsn.partition("://")
    return scheme.split("+")[0] + sep + rest if sep else dsn


def _raised(diag) -> bool:
    """A notice a revision's own PL/pgSQL raised (not the server's "already exists, skipping")."""
    return "at RAISE" in (diag.context or "")


@dataclass
class MigrationFailed(RuntimeError):
    """A revision failed; the upgrade rolled back. ``str()`` is one line for an operator."""

    revision: str | None
    source: str | None
    statement: str | None
    server: str | None
    message: str
    sqlstate: str | None
    hint: str | None
    committed: str | None = None     # on Citus, the revision an earlier step of the run committed

    def __post_init__(self):
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"revision {self.revision or '(unknown)'}"
        if self.source:
            where += f", {self.source}"
        parts = [f"{where} failed on {self.server or 'the server'}: {self.message}"
                 + (f" (SQLSTATE {self.sqlstate})" if self.sqlstate else "")]
        if self.statement:
            parts.append(f"statement: {self.statement}")
        parts.append(f"hint: {self.hint}")
        parts.append("nothing was changed (the upgrade is one transaction)" if self.committed is None else
                     f"the database is at revision {self.committed} (on Citus the run committed there before "
                     f"the revision that failed, which rolled back; pydna.migrate.CITUS_OWN_TRANSACTION)")
        return "; ".join(parts)

    @classmethod
    def of(cls, exc: BaseException, server=None) -> "MigrationFailed | None":
        """The report of a failed migration, or None for an error that is not a database error of a
        revision (a connection refused, an unsupported server: reported as they are)."""
        from pydna.supported import UnsupportedServer

        if isinstance(exc, UnsupportedServer):
            return None
        pg = _pg_error(exc)
        revision, module_file = _failing_revision(exc)
        if pg is None or revision is None:
            return None
        diag = pg.diag
        executed = getattr(exc, "statement", None)
        if executed:
            executed = executed.replace("%%", "%")  # as SQLAlchemy escaped it for the driver
        sqlstate = pg.sqlstate
        hint = diag.message_hint or _hint(sqlstate)
        return cls(revision=revision, source=_source(executed, revision, module_file),
                   statement=_statement(executed, diag), server=server.describe() if server else None,
                   message=" ".join((diag.message_primary or str(pg)).split()), sqlstate=sqlstate,
                   hint=" ".join(hint.split()).rstrip("."))


def _pg_error(exc: BaseException):
    import psycopg

    seen, todo = set(), [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, psycopg.Error):
            return e
        todo.extend([getattr(e, "orig", None), e.__cause__, e.__context__])
    return None


def _failing_revision(exc: BaseException) -> tuple[str | None, Path | None]:
    """The revision whose ``upgrade``/``downgrade`` was running: the innermost traceback frame in a
    revision file (``versions/*.py``)."""
    found: tuple[str | None, Path | None] = (None, None)
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        path = Path(frame.f_code.co_filename)
        if path.parent.name == "versions" and isinstance(frame.f_globals.get("revision"), str):
            found = (frame.f_globals["revision"], path)
        tb = tb.tb_next
    return found


def _unwrapped(statement: str) -> str:
    body = statement.removeprefix("SET LOCAL check_function_bodies = off;\n")
    return body.removesuffix("\nSET LOCAL check_function_bodies = on;\n")


def _source(executed: str | None, revision: str, module_file: Path | None) -> str | None:
    """The file the failing statement was read from (``versions/<rev>/<file>``, ``sql/<file>``), or
    the revision's own module when it is none of them."""
    if not executed:
        return None
    body = _unwrapped(executed).strip()
    versions = migrations_dir() / "versions"
    candidates = sorted((versions / revision).rglob("*.sql")) + sorted(_sql_dir().glob("*.sql")) + \
        sorted(versions.glob("*/*.sql"))
    for path in candidates:
        text = path.read_text(encoding="utf-8")
        if body and (body == text.strip() or body in text):
            return _shown(path)
    return _shown(module_file) if module_file else None


def _sql_dir() -> Path:
    sys.path.insert(0, str(migrations_dir()))
    try:
        from sql_files import sql_dir
    finally:
        sys.path.pop(0)
    return sql_dir()


def _shown(path: Path) -> str:
    root = migrations_dir().parent
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _statement(executed: str | None, diag) -> str | None:
    """The failing statement, shortened: the inner SQL of a PL/pgSQL error (its context), else the
    line at the error's position, else the statement's first line of code."""
    context = diag.context or ""
    inner = re.search(r'SQL statement "(.+?)"\s*(?:\n|$)', context, re.S)
    if inner:
        return _short(inner.group(1))
    if not executed:
        return None
    block = re.match(r"PL/pgSQL function inline_code_block line (\d+) at (.+)", context)
    body = executed.split("$$", 1)[1].splitlines() if block and "$$" in executed else []
    if block and int(block.group(1)) <= len(body):
        # A DO block's own statement (RAISE, …): line N of the block's body (line 1 follows "$$").
        return _short(f"DO block line {block.group(1)}: {body[int(block.group(1)) - 1]}")
    if context:
        return _short(context.splitlines()[0])  # inside a function the revision called
    text = executed
    position = getattr(diag, "statement_position", None)
    if position and str(position).isdigit() and 0 < int(position) <= len(text):
        start = text.rfind("\n", 0, int(position) - 1) + 1
        end = text.find("\n", int(position) - 1)
        return _short(text[start:end if end >= 0 else None])
    for line in _unwrapped(text).splitlines():
        if line.strip() and not line.strip().startswith("--"):
            return _short(line)
    return None


def _short(text: str, limit: int = 200) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _hint(sqlstate: str | None) -> str:
    if sqlstate == "42501":
        return ("the installing role needs to own the database (or have CREATE on it), CREATEROLE or a "
                "dna_redactor made by an administrator (CREATE ROLE dna_redactor NOLOGIN), and pgvector "
                "created by an administrator (CREATE EXTENSION vector); docs/operations.md, \"Installed by "
                "a database owner\"")
    return ("pydna supports PostgreSQL 15 to 18 with pgvector 0.8.0 or newer; `dna db upgrade --sql` prints "
            "the script for review; report the revision, the statement and the server version")


def downgrade(dsn: str, revision: str) -> None:
    """Migrate ``dsn`` down to ``revision`` (``"base"`` drops schema dna); one transaction, except on Citus
    across a revision of CITUS_OWN_TRANSACTION (run alone)."""
    cfg = alembic_config(dsn)
    steps = _citus_steps(dsn, cfg, revision, down=True)
    if len(steps) > 1:
        _citus_guards(dsn, cfg, steps[-1])
    for step in steps:
        command.downgrade(cfg, step)


# The downgrade guards of revisions that refuse where Citus holds the dna tables (0019: the revisions below
# it do not run on Citus). A split downgrade runs them before its first step commits, so a refusal still
# changes nothing (tests/citus/test_citus_distribute.py).
CITUS_DOWNGRADE_GUARDS = {"0019_where_users_run": "guard_downgrade.sql"}


def _citus_guards(dsn: str, cfg: Config, target: str) -> None:
    """Run the guard of every CITUS_DOWNGRADE_GUARDS revision a downgrade to ``target`` undoes; the
    guard's error (0A000) propagates."""
    import psycopg

    script = ScriptDirectory.from_config(cfg)
    below = {r.revision for r in script.iterate_revisions(target, "base")} if target != "base" else set()
    with psycopg.connect(_libpq(dsn), autocommit=True) as conn:
        for rev, name in CITUS_DOWNGRADE_GUARDS.items():
            if rev not in below:
                conn.execute((migrations_dir() / "versions" / rev / name).read_text(encoding="utf-8"))


def current(conn) -> str | None:
    """The applied revision of the database behind a psycopg connection, or None if unmigrated.
    Other errors (permission denied, ...) propagate: they are not "unmigrated"."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{VERSION_TABLE}",)).fetchone()[0]
    if not exists:
        return None
    row = conn.execute(f"SELECT version_num FROM public.{VERSION_TABLE}").fetchone()
    return row[0] if row else None
