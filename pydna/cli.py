"""The ``dna`` command line: run the migrations, index files, search.

    dna db up                         # start the embedded server (or use --dsn), migrate, print the DSN
    dna db status [--json]            # server, versions, revision applied vs head, rows per table/model
    dna db upgrade [--sql]            # migrate to head, or print the SQL for a DBA (no server needed)
    dna db stop                       # stop the embedded server
    dna db compact [--scope S]        # operator: compact the BM25 index (dna.bm25_compact)
    dna db vector-index drop|build    # operator: drop / build a width's HNSW index (bulk loads)
    dna index PATH... --scope S       # markdown/text files, directories, JSONL
    dna recall QUERY --scope S        # hybrid search (alias: dna search)

The database is ``--dsn``, else ``DNA_DATABASE_URL``, else the embedded default server. Errors from
PostgreSQL, an unmigrated database and embedding failures print one red line (with the server's
hint) and exit 1, never a traceback.

For sub-applications (``pydna.cli_memory``): the global ``--dsn`` is in ``ctx.obj`` (a
:class:`CliState`); :func:`cli_state`, :func:`database_dsn`, :func:`open_client`, :func:`choose_embedder` and
:class:`CliError` are meant to be reused, and every error listed above is already turned into a
one-line message by the top-level group.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Optional

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

if TYPE_CHECKING:  # imported lazily: `dna --help` and `dna db upgrade --sql` stay light
    from rich.progress import Progress

    from pydna.client import Client, Record

ENV_DSN = "DNA_DATABASE_URL"
#: Suffixes picked up when walking a directory.
TEXT_SUFFIXES = (".md", ".markdown", ".txt")
MARKDOWN_SUFFIXES = (".md", ".markdown")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
#: The server's per-document limit (dna.index_document); checked up front so bad input writes nothing.
MAX_DOCUMENT_BYTES = 1_000_000


# ---------------------------------------------------------------------------------------------
# Errors: one red line, exit 1
# ---------------------------------------------------------------------------------------------


class CliError(Exception):
    """A user-facing error: printed as one red line, exit code ``code``."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def stdout() -> Console:
    """Console for results (stdout). Created per use so test runners' stream swaps are honoured."""
    return Console(highlight=False, soft_wrap=False)


def stderr() -> Console:
    """Console for progress, notes and errors (stderr)."""
    return Console(stderr=True, highlight=False)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _find_pg_error(exc: BaseException):
    """The psycopg error behind ``exc``: itself, SQLAlchemy's ``.orig``, or a cause/context."""
    import psycopg

    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, psycopg.Error):
            return e
        todo.extend([getattr(e, "orig", None), e.__cause__, e.__context__])
    return None


def describe_error(exc: BaseException) -> str | None:
    """One line for the errors the CLI reports without a traceback; None for anything else."""
    from pydna.client import NotMigratedError
    from pydna.embeddings.base import EmbeddingError

    if isinstance(exc, CliError):
        return _one_line(str(exc))
    if isinstance(exc, NotMigratedError):
        return _one_line(str(exc))
    if isinstance(exc, EmbeddingError):
        return "embedding failed: " + _one_line(str(exc))
    pg = _find_pg_error(exc)
    if pg is None:
        return None
    diag = getattr(pg, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    message = _one_line(primary or str(pg) or type(pg).__name__)
    sqlstate = getattr(pg, "sqlstate", None)
    if sqlstate:
        message += f" (SQLSTATE {sqlstate})"
    detail = getattr(diag, "message_detail", None) if diag is not None else None
    if detail:
        message += f"; detail: {_one_line(detail)}"
    hint = getattr(diag, "message_hint", None) if diag is not None else None
    if hint:
        message += f"; hint: {_one_line(hint)}"
    else:
        import psycopg

        if isinstance(pg, psycopg.OperationalError) and not sqlstate:
            message += f"; hint: check --dsn / {ENV_DSN}, or start the embedded server with `dna db up`"
    return message


def print_error(message: str) -> None:
    stderr().print(Text(f"error: {message}", style="bold red"), soft_wrap=True)


class DnaGroup(TyperGroup):
    """The top-level group: turns known errors of any sub-command into one red line and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            message = describe_error(exc)
            if message is None:
                raise
            print_error(message)
            raise typer.Exit(exc.code if isinstance(exc, CliError) else 1) from None


# ---------------------------------------------------------------------------------------------
# Applications and shared state
# ---------------------------------------------------------------------------------------------

app = typer.Typer(
    cls=DnaGroup,
    name="dna",
    help="pydna: hybrid search and agent memory inside PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals hold DSNs (passwords)
)
db_app = typer.Typer(
    help="Run the database: start the embedded server, migrate, show status.",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")


@dataclass
class CliState:
    """What the top-level options set; ``ctx.obj`` of every sub-command."""

    dsn: str | None = None  # --dsn or DNA_DATABASE_URL; None → the embedded default server


@app.callback()
def _main(
    ctx: typer.Context,
    dsn: Annotated[Optional[str], typer.Option(
        "--dsn", envvar=ENV_DSN, show_envvar=True,
        help="libpq connection string or URL of the database; default: the embedded server "
             "under $DNA_HOME (or the user data directory).")] = None,
) -> None:
    """pydna: hybrid search and agent memory inside PostgreSQL."""
    ctx.obj = CliState(dsn=dsn or None)


def cli_state(ctx: click.Context | None = None) -> CliState:
    ctx = ctx or click.get_current_context()
    obj = ctx.find_object(CliState)
    return obj if obj is not None else CliState()


def database_dsn(ctx: click.Context | None = None) -> str:
    """The DSN to use: --dsn / DNA_DATABASE_URL, else the embedded server (started if needed)."""
    state = cli_state(ctx)
    if state.dsn:
        return state.dsn
    from pydna.client import resolve_dsn

    try:
        return resolve_dsn(None)
    except RuntimeError as exc:  # pydna.server.start: the message names the server log
        raise CliError(str(exc)) from exc


def mask_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (for display)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
    except Exception:
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", dsn)
    if not params.get("password"):
        return dsn
    params["password"] = "***"
    return make_conninfo(**params)


class EmbedderName(str, Enum):
    auto = "auto"
    onnx = "onnx"
    fake = "fake"


EmbedderOpt = Annotated[EmbedderName, typer.Option(
    "--embedder", case_sensitive=False,
    help="auto: the ONNX all-MiniLM-L6-v2 model when installed, else the deterministic fake. "
         "ONNX multiplies integers (model_id …-onnx-int8-w8a8); DNA_ONNX_COMPUTE=float32 runs it in "
         "float32 (…-onnx-int8), another model_id: search a scope with the one that indexed it.")]


@dataclass
class EmbedderChoice:
    provider: Any
    description: str  # one line: which provider, model_id, where the model comes from


def choose_embedder(name: str | EmbedderName = "auto") -> EmbedderChoice:
    """Build the embedding provider ``name`` (auto|onnx|fake) and say which one it is."""
    name = name.value if isinstance(name, EmbedderName) else str(name)
    from pydna.embeddings import select as _select

    if name not in ("auto", "onnx", "fake"):
        raise CliError(f"unknown embedder {name!r}: use auto, onnx or fake")
    try:
        provider = _select.get_provider(name)
    except ValueError as exc:  # a bad DNA_ONNX_COMPUTE / DNA_ONNX_THREADS: configuration, one line
        raise CliError(str(exc)) from exc
    last = getattr(_select, "last_choice", lambda: None)()
    if last is not None and last.provider is provider:
        return EmbedderChoice(provider, last.describe())
    return EmbedderChoice(provider, f"{type(provider).__name__} {provider.model_id}")


def open_client(ctx: click.Context | None = None, embedder: str | EmbedderName | None = "auto",
                ) -> tuple["Client", EmbedderChoice | None]:
    """A migrated ``Client`` on the CLI's database, with the named embedder (None: lexical only).
    Raises ``NotMigratedError`` (reported as one line naming `dna db upgrade`)."""
    from pydna.client import connect

    choice = choose_embedder(embedder) if embedder is not None else None
    client = connect(database_dsn(ctx), embedder=choice.provider if choice else None)
    return client, choice


def announce_embedder(choice: EmbedderChoice, as_json: bool) -> Console:
    """Print which embedder a command uses, on stdout (stderr under ``--json``, so that stdout stays
    JSON); returns that console for the command's other notes."""
    note = stderr() if as_json else stdout()
    note.print(f"embedder: {escape(choice.description)}", soft_wrap=True)
    return note


def _echo_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# dna db ...
# ---------------------------------------------------------------------------------------------


@db_app.command("up")
def db_up(ctx: typer.Context) -> None:
    """Start the embedded server, migrate it to head, print its DSN.

    With --dsn / DNA_DATABASE_URL that database is migrated and nothing is started. Only the DSN
    goes to stdout: `export DNA_DATABASE_URL=$(dna db up)`.
    """
    from pydna import migrate, server

    err = stderr()
    state = cli_state(ctx)
    if state.dsn:
        dsn = state.dsn
        err.print(f"external server: {escape(mask_dsn(dsn))} (the embedded server is not started)", soft_wrap=True)
    else:
        home = server.data_home()
        err.print(f"embedded PostgreSQL under {escape(str(home))}", soft_wrap=True)
        try:
            dsn = server.start(home)
        except RuntimeError as exc:
            raise CliError(str(exc)) from exc
    before = _applied_revision(dsn)
    migrate.upgrade(dsn)
    head = migrate.head()
    if before == head:
        err.print(f"schema dna at revision {head} (up to date)", soft_wrap=True)
    else:
        err.print(f"schema dna migrated: {before or 'empty'} → {head}", soft_wrap=True)
    typer.echo(mask_dsn(dsn))


@db_app.command("upgrade")
def db_upgrade(
    ctx: typer.Context,
    sql: Annotated[bool, typer.Option(
        "--sql", help="Print the SQL for a DBA to review instead of running it (needs no server).")] = False,
    revision: Annotated[str, typer.Option("--revision", help="Target alembic revision.")] = "head",
) -> None:
    """Migrate the database to head, or print the SQL (--sql).

    The alembic revisions are the only source of DDL; --sql needs no server.
    """
    from pydna import migrate

    if sql:
        # Offline: alembic renders the SQL for the PostgreSQL dialect; nothing connects or starts.
        text = migrate.upgrade(cli_state(ctx).dsn or "", revision=revision, sql=True) or ""
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    dsn = database_dsn(ctx)
    before = _applied_revision(dsn)
    migrate.upgrade(dsn, revision=revision)
    after = _applied_revision(dsn)
    if before == after:
        stdout().print(f"schema dna already at revision {after} ({escape(mask_dsn(dsn))})", soft_wrap=True)
    else:
        stdout().print(f"schema dna migrated: {before or 'empty'} → {after} ({escape(mask_dsn(dsn))})", soft_wrap=True)


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded server (a server named by --dsn is never stopped)."""
    from pydna import server

    home = server.data_home()
    if server.stop(home):
        stdout().print(f"stopped the embedded PostgreSQL under {escape(str(home))}", soft_wrap=True)
    else:
        stdout().print(f"the embedded PostgreSQL under {escape(str(home))} is not running", soft_wrap=True)


@db_app.command("compact")
def db_compact(
    ctx: typer.Context,
    scope: Annotated[Optional[str], typer.Option(
        "--scope", "-s", help="Only this scope (default: every scope).", show_default=False)] = None,
    full: Annotated[bool, typer.Option(
        "--full", help="Merge each partition into one segment (fastest queries; after a bulk load).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print dna.bm25_compact's report as JSON only.")] = False,
) -> None:
    """Compact the BM25 index (dna.bm25_compact): seal the memtable into segments and merge them.

    Maintenance an operator runs on purpose (`dna index` runs it for its scope): it changes no
    answer, it keeps the lexical lane fast after many writes. Idempotent, safe beside reads and
    writes, one transaction.
    """
    import psycopg

    from pydna import maintenance
    from pydna.client import check_migrated

    with psycopg.connect(database_dsn(ctx), autocommit=True) as conn:
        check_migrated(conn)
        report = maintenance.compact(conn, scope, full_merge=full)
    if as_json:
        _echo_json(report)
        return
    out = stdout()
    for line in maintenance.compaction_lines(report):
        out.print(f"BM25 compacted: {escape(line)}", soft_wrap=True)


vector_index_app = typer.Typer(
    help="Drop or build the HNSW index of one width table (bulk loads: drop, load, build; see docs/bulk-load.md).",
    no_args_is_help=True,
)
db_app.add_typer(vector_index_app, name="vector-index")

WidthOpt = Annotated[int, typer.Option(
    "--width", min=1, help="Embedding width of the search table (dna.dna_search_docs_<width>).")]


def _vector_index_command(ctx: typer.Context, action, as_json: bool, **kw) -> Any:
    """Run ``action(conn, **kw)`` of pydna.maintenance on the CLI's database; a width without a
    table is a one-line error. Returns the VectorIndexResult (printed as JSON under ``--json``)."""
    import psycopg

    from pydna.client import check_migrated

    with psycopg.connect(database_dsn(ctx), autocommit=True) as conn:
        check_migrated(conn)
        try:
            result = action(conn, **kw)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    if as_json:
        _echo_json(asdict(result))
    return result


@vector_index_app.command("drop")
def vector_index_drop(
    ctx: typer.Context,
    width: WidthOpt = 384,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON only.")] = False,
) -> None:
    """Drop dna.dna_search_docs_<width>_embedding_hnsw (IF EXISTS).

    The dense lane of that width then does exact scans (every row's distance: exact answers, slower
    on large tables) until `dna db vector-index build`. Load first, build after: pgvector builds
    the graph much faster over loaded rows than it maintains it row by row.
    """
    from pydna import maintenance

    result = _vector_index_command(ctx, maintenance.drop_vector_index, as_json, width=width)
    if as_json:
        return
    what = f"dropped {result.index}" if result.changed else f"{result.index} does not exist (nothing to drop)"
    stdout().print(f"{escape(what)}: the dense lane of dna.dna_search_docs_{width} does exact scans until "
                   f"`dna db vector-index build --width {width}`", soft_wrap=True)


@vector_index_app.command("build")
def vector_index_build(
    ctx: typer.Context,
    width: WidthOpt = 384,
    maintenance_work_mem: Annotated[str, typer.Option(
        "--maintenance-work-mem", help="maintenance_work_mem for the build (a PostgreSQL memory value); "
                                       "the build is fastest when the graph fits in it.")] = "1GB",
    workers: Annotated[int, typer.Option(
        "--workers", min=0, help="max_parallel_maintenance_workers for the build (processes besides the "
                                 "leader; capped by max_parallel_workers and max_worker_processes).")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON only.")] = False,
) -> None:
    """Build dna.dna_search_docs_<width>_embedding_hnsw as revision 0001 defines it (IF NOT EXISTS).

    HNSW vector_cosine_ops for widths up to 2000, (embedding::halfvec(W)) halfvec_cosine_ops above.
    The settings hold for this transaction only. Reads go on during the build; writes to that width
    wait for it.
    """
    from pydna import maintenance

    result = _vector_index_command(ctx, maintenance.build_vector_index, as_json, width=width,
                                   maintenance_work_mem=maintenance_work_mem, workers=workers)
    if as_json:
        return
    out = stdout()
    if not result.changed:
        out.print(f"{escape(result.index)} already exists (nothing built)", soft_wrap=True)
    else:
        out.print(f"built {escape(result.index)} ({result.state['bytes'] // 1024} KiB) with "
                  + escape(", ".join(f"{k} = {v}" for k, v in result.settings.items())), soft_wrap=True)
    if result.state and not result.state["valid"]:
        stderr().print(Text(f"{result.index} is INVALID (a failed concurrent build): drop it and build it again",
                            style="yellow"), soft_wrap=True)
    for notice in result.notices:
        if "already exists" not in notice:
            stderr().print(Text(notice, style="yellow"), soft_wrap=True)


def _applied_revision(dsn: str) -> str | None:
    import psycopg

    from pydna import migrate

    with psycopg.connect(dsn, autocommit=True) as conn:
        return migrate.current(conn)


def _search_tables(conn) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'dna' AND c.relkind IN ('r', 'p') AND c.relname ~ '^dna_search_docs_[0-9]+$'"
    ).fetchall()
    return sorted((int(r[0].rsplit("_", 1)[1]), r[0]) for r in rows)


def collect_status(conn) -> dict[str, Any]:
    """Versions, revision and row counts of the database behind ``conn`` (read-only)."""
    from psycopg import sql as pgsql

    from pydna import migrate

    info: dict[str, Any] = {}
    info["database"], info["user"] = conn.execute("SELECT current_database(), current_user").fetchone()
    info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    avail = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    info["pgvector"] = {"installed": row[0] if row else None, "available": avail[0] if avail else None}
    applied, head = migrate.current(conn), migrate.head()
    info["revision"] = {"applied": applied, "head": head, "up_to_date": applied == head}
    tables = []
    for dims, relname in _search_tables(conn):
        counts = conn.execute(pgsql.SQL(
            "SELECT model_id, count(*), count(embedding) FROM dna.{} GROUP BY model_id ORDER BY model_id"
        ).format(pgsql.Identifier(relname))).fetchall()
        tables.append({
            "table": f"dna.{relname}", "dims": dims, "rows": sum(c[1] for c in counts),
            "models": [{"model_id": m, "rows": n, "embedded": e} for m, n, e in counts],
        })
    info["search_tables"] = tables
    models = []
    if conn.execute("SELECT to_regclass('dna.dna_models')").fetchone()[0] is not None:
        models = [{"model_id": m, "dims": d} for m, d in
                  conn.execute("SELECT model_id, dims FROM dna.dna_models ORDER BY model_id").fetchall()]
    info["models"] = models
    return info


@db_app.command("status")
def db_status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Show the server, versions, revision and rows per search table.

    Server (embedded/external), PostgreSQL and pgvector versions, alembic revision applied vs
    head, rows per search table and model_id. Never starts the embedded server: exit 1 when it
    is down.
    """
    import psycopg

    from pydna import server

    state = cli_state(ctx)
    if state.dsn:
        srv: dict[str, Any] = {"kind": "external", "data_dir": None, "running": None,
                               "dsn": mask_dsn(state.dsn)}
        dsn = state.dsn
    else:
        home = server.data_home()
        running = server.is_running(home)
        srv = {"kind": "embedded", "data_dir": str(home), "running": running, "dsn": None}
        if not running:
            if as_json:
                _echo_json({"server": srv})
            raise CliError(f"the embedded server under {home} is not running: start it with `dna db up`")
        dsn = server.start(home)  # already running: only reads its address
        srv["dsn"] = mask_dsn(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        info = {"server": srv, **collect_status(conn)}
    if as_json:
        _echo_json(info)
        return
    _print_status(info)


def _print_status(info: dict[str, Any]) -> None:
    out = stdout()
    srv = info["server"]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    where = f"embedded, data dir {srv['data_dir']}" if srv["kind"] == "embedded" else "external"
    grid.add_row("server", escape(where))
    grid.add_row("dsn", escape(srv.get("dsn") or ""))
    grid.add_row("database", escape(f"{info['database']} (user {info['user']})"))
    grid.add_row("PostgreSQL", escape(info["postgresql"]))
    vec = info["pgvector"]
    grid.add_row("pgvector", escape(vec["installed"]) if vec["installed"] else
                 f"[yellow]not installed[/] (available: {escape(str(vec['available']))})")
    rev = info["revision"]
    if rev["applied"] is None:
        state = f"[yellow]not migrated[/] (head {escape(rev['head'])}): run `dna db upgrade`"
    elif rev["up_to_date"]:
        state = f"{escape(rev['applied'])} (head, up to date)"
    else:
        state = f"[yellow]{escape(rev['applied'])}[/] (head {escape(rev['head'])}): run `dna db upgrade`"
    grid.add_row("revision", state)
    out.print(grid)
    if not info["search_tables"]:
        return
    table = Table(title="search tables", title_justify="left")
    table.add_column("table", no_wrap=True, min_width=len("dna.dna_search_docs_3072"))
    longest = max((len(m["model_id"]) for t in info["search_tables"] for m in t["models"]), default=8)
    table.add_column("model_id", no_wrap=True, min_width=longest)  # never cut: ids differ at the end
    table.add_column("rows", justify="right")
    table.add_column("with vector", justify="right")
    for t in info["search_tables"]:
        table.add_row(escape(t["table"]), "[dim](all)[/]", str(t["rows"]),
                      str(sum(m["embedded"] for m in t["models"])))
        for m in t["models"]:
            table.add_row("", escape(m["model_id"]), str(m["rows"]), str(m["embedded"]))
    out.print(table)


# ---------------------------------------------------------------------------------------------
# dna index
# ---------------------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```+|~~~+)")


def _front_matter_end(lines: list[str]) -> int:
    """Index of the first line after YAML front matter (0 when there is none)."""
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return i + 1
    return 0


def _find_heading(lines: list[str], start: int) -> tuple[str, int, int] | None:
    """(title, first line, last line) of the first heading from ``start``, outside fenced code."""
    fence: str | None = None
    previous_blank = True
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)[0]
            fence = None if fence == marker else (fence or marker)
            previous_blank = False
            continue
        if fence:
            continue
        m = _ATX.match(line)
        if m and m.group(1).strip():
            return m.group(1).strip(), i, i
        if (line.strip() and previous_blank and i + 1 < len(lines) and _SETEXT.match(lines[i + 1])
                and not line.lstrip().startswith(("-", "*", "+", ">", "|"))):
            return line.strip(), i, i + 1
        previous_blank = not line.strip()
    return None


def markdown_title(text: str) -> str | None:
    """The first heading of a markdown text (ATX ``# x`` or setext ``x\\n===``), outside front
    matter and fenced code; None when there is none."""
    lines = text.splitlines()
    found = _find_heading(lines, _front_matter_end(lines))
    return found[0] if found else None


def markdown_snippet(text: str, length: int = 240) -> str | None:
    """A display snippet of a markdown text: without front matter and the title heading, spaces
    collapsed, at most ``length`` characters; None when nothing is left."""
    lines = text.splitlines()
    start = _front_matter_end(lines)
    found = _find_heading(lines, start)
    if found:
        lines = lines[:found[1]] + lines[found[2] + 1:]
    rest = " ".join(" ".join(lines[start:]).split())
    return rest[:length] or None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _file_record(path: Path, name: str, kind: str, tenant: str, skip_empty: bool = False) -> "Record | None":
    """The record of one text file; an empty file is an error when named, None (skipped) when
    found by walking a directory (``skip_empty``)."""
    from pydna.client import Record

    text = _read_text(path)
    if not text.strip():
        if skip_empty:
            return None
        raise CliError(f"{path}: empty document (no text to index)")
    title = snippet = None
    if path.suffix.lower() in MARKDOWN_SUFFIXES:
        title, snippet = markdown_title(text), markdown_snippet(text)
    return Record(kind=kind, name=name, body=text, title=title or path.stem, tenant=tenant, snippet=snippet)


def _jsonl_records(path: Path, kind: str, tenant: str) -> Iterator[tuple["Record", str]]:
    from pydna.client import Record

    text = _read_text(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        where = f"{path}, line {lineno}"
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(item, dict):
            raise CliError(f"{where}: must be a JSON object, got {type(item).__name__}")
        name = item.get("name", item.get("_id"))
        if isinstance(name, bool) or not isinstance(name, (str, int)) or not str(name).strip():
            raise CliError(f"{where}: no `name` (or `_id`) string")
        fields: dict[str, str | None] = {}
        for key in ("kind", "title", "tenant", "snippet"):
            value = item.get(key)
            if value is not None and not isinstance(value, str):
                raise CliError(f"{where}: `{key}` must be a string, got {type(value).__name__}")
            fields[key] = value
        body = item.get("body", item.get("text"))
        if body is not None and not isinstance(body, str):
            raise CliError(f"{where}: `body` (or `text`) must be a string, got {type(body).__name__}")
        if not (body or "").strip() and not (fields["title"] or "").strip():
            raise CliError(f"{where}: empty document (no `body`/`text` and no `title`)")
        yield Record(kind=fields["kind"] or kind, name=str(name), body=body or "", title=fields["title"],
                     tenant=fields["tenant"] if fields["tenant"] is not None else tenant,
                     snippet=fields["snippet"]), where


def _walk(directory: Path) -> list[Path]:
    """Text files under ``directory``, recursively, sorted; hidden files and folders are skipped."""
    found = []
    for p in directory.rglob("*"):
        rel = p.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES:
            found.append(p)
    return sorted(found, key=lambda p: p.relative_to(directory).as_posix())


@dataclass
class IndexInputs:
    """The checked inputs of one ``dna index``: ``count`` documents from ``sources`` (a text file:
    ``(path, name)``; a JSONL file: ``(path, None)``). Only their keys were kept by the check;
    :meth:`records` reads them again, so a large load streams through ``Client.index`` one batch at
    a time instead of holding every text in memory."""

    kind: str
    tenant: str
    sources: list[tuple[Path, str | None]] = field(default_factory=list)
    count: int = 0
    stats: dict[str, Any] = field(default_factory=lambda: {
        "files": 0, "jsonl_files": 0, "jsonl_records": 0, "skipped_empty": []})

    def records(self) -> Iterator["Record"]:
        """The records, in input order (a file emptied since the check is skipped)."""
        for path, name in self.sources:
            if name is None:
                yield from (record for record, _ in _jsonl_records(path, self.kind, self.tenant))
            else:
                record = _file_record(path, name, self.kind, self.tenant, skip_empty=True)
                if record is not None:
                    yield record


def collect_records(paths: list[Path], kind: str, tenant: str) -> IndexInputs:
    """Read and check every input before anything is written; returns the ``IndexInputs`` to
    stream (``.records()``, ``.count``, ``.stats``). Raises ``CliError`` for a missing path, an
    unreadable or invalid JSONL line (with its line number), an empty document, a document above the
    server's size limit, or two inputs with the same (kind, name, tenant)."""
    inputs = IndexInputs(kind, tenant)
    stats = inputs.stats
    seen: dict[tuple[str, str, str], str] = {}

    def check(record: "Record", where: str) -> None:
        size = len(record.body.encode("utf-8")) + len((record.title or "").encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES:
            raise CliError(f"{where}: document {record.name!r} is {size} bytes; the limit is "
                           f"{MAX_DOCUMENT_BYTES} bytes per document: split it")
        key = (record.kind, record.name, record.tenant)
        if key in seen:
            raise CliError(f"{where}: duplicate document {record.kind}/{record.name}"
                           f"{' tenant ' + record.tenant if record.tenant else ''} (also from {seen[key]})")
        seen[key] = where
        inputs.count += 1

    for path in paths:
        if not path.exists():
            raise CliError(f"{path}: no such file or directory")
        if path.is_dir():
            files = _walk(path)
            if not files:
                raise CliError(f"{path}: no {', '.join('*' + s for s in TEXT_SUFFIXES)} files in this directory")
            found = 0
            for f in files:
                name = f.relative_to(path).as_posix()
                record = _file_record(f, name, kind, tenant, skip_empty=True)
                if record is None:
                    stats["skipped_empty"].append(str(f))
                    continue
                check(record, str(f))
                inputs.sources.append((f, name))
                found += 1
            if not found:
                raise CliError(f"{path}: every file in this directory is empty (nothing to index)")
            stats["files"] += found
        elif path.suffix.lower() in JSONL_SUFFIXES:
            before = inputs.count
            for record, where in _jsonl_records(path, kind, tenant):
                check(record, where)
            if inputs.count == before:
                raise CliError(f"{path}: no records (the JSONL file is empty)")
            inputs.sources.append((path, None))
            stats["jsonl_files"] += 1
            stats["jsonl_records"] += inputs.count - before
        elif path.is_file():
            check(_file_record(path, path.name, kind, tenant), str(path))
            inputs.sources.append((path, path.name))
            stats["files"] += 1
        else:
            raise CliError(f"{path}: not a regular file or directory")
    return inputs


def _progress_bar() -> "Progress":
    """A transient progress bar on stderr (documents done / total, elapsed): stdout stays the
    command's output (JSON under ``--json``); without a terminal rich draws nothing."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=stderr(), transient=True)


@app.command("index")
def index(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(
        help="Markdown/text files, directories (recursive over *.md, *.markdown, *.txt) and JSONL "
             "files (one record per line: kind, name or _id, title, body or text, tenant).",
        show_default=False)],
    scope: Annotated[str, typer.Option("--scope", "-s", help="Scope to index into.")],
    kind: Annotated[str, typer.Option(
        "--kind", help="Kind of file documents, and of JSONL records without one.")] = "Doc",
    tenant: Annotated[str, typer.Option(
        "--tenant", help="Tenant ('' = the shared base); JSONL records may set their own.")] = "",
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="Documents per batch (one COPY + dna.index_staged transaction).")] = 2000,
    compact: Annotated[bool, typer.Option(
        "--compact/--no-compact", help="Afterwards, compact the scope's BM25 index (dna.bm25_compact, "
                                       "its own transaction; it changes no answer).")] = True,
    embedder: EmbedderOpt = EmbedderName.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON only.")] = False,
) -> None:
    """Index markdown/text files, directories and JSONL files into a scope.

    Unchanged text is never re-embedded. Every input is read and checked before anything is
    written; then the documents stream through in batches, each written atomically (retried on a
    deadlock or serialization failure), with a progress bar on stderr. Then the scope's BM25 index
    is compacted (dna.bm25_compact) unless --no-compact.
    """
    from pydna import maintenance

    inputs = collect_records(paths, kind, tenant)
    stats = inputs.stats
    client, choice = open_client(ctx, embedder)
    announce_embedder(choice, as_json)
    try:
        with _progress_bar() as bar:
            task = bar.add_task("indexing", total=inputs.count)
            report = client.index(scope, inputs.records(), batch_size=batch_size,
                                  progress=lambda done, _total: bar.update(task, completed=done))
        compaction = compaction_error = None
        if compact:
            try:
                compaction = maintenance.compact(client.conn, scope)
            except Exception as exc:  # the documents are written: say so, then fail
                compaction_error = describe_error(exc)
                if compaction_error is None:
                    raise
    finally:
        client.close()
    summary = {
        "scope": scope, "model_id": choice.provider.model_id, "embedder": choice.description,
        "records": inputs.count, "files": stats["files"], "jsonl_records": stats["jsonl_records"],
        "inserted": report.inserted, "updated": report.updated, "embedded": report.embedded,
        "unchanged": report.unchanged, "embedded_texts": report.embedded_texts,
        "tables": sorted(report.tables), "skipped_empty": stats["skipped_empty"],
        "compaction": compaction,
    }
    for skipped in stats["skipped_empty"]:
        stderr().print(Text(f"skipped {skipped}: empty file", style="yellow"), soft_wrap=True)
    if as_json:
        _echo_json(summary)
    else:
        out = stdout()
        sources = []
        if stats["files"]:
            sources.append(f"{stats['files']} file{'s' if stats['files'] != 1 else ''}")
        if stats["jsonl_records"]:
            sources.append(f"{stats['jsonl_records']} JSONL record{'s' if stats['jsonl_records'] != 1 else ''}")
        out.print(f"indexed {inputs.count} documents ({', '.join(sources)}) into scope "
                  f"[bold]{escape(scope)}[/] ({escape(', '.join(sorted(report.tables)))})", soft_wrap=True)
        out.print(f"  inserted {report.inserted} · updated {report.updated} · "
                  f"vector added to unchanged text {report.embedded} · unchanged {report.unchanged}", soft_wrap=True)
        out.print(f"  texts sent to the model: {report.embedded_texts} · model_id: {escape(choice.provider.model_id)}",
                  soft_wrap=True)
        if compaction is not None:
            for line in maintenance.compaction_lines(compaction):
                out.print(f"  BM25 compacted: {escape(line)}", soft_wrap=True)
    if compaction_error is not None:
        raise CliError(f"the documents are indexed, but compacting the BM25 index failed: {compaction_error}; "
                       f"run `dna db compact --scope {scope}`")


# ---------------------------------------------------------------------------------------------
# dna recall / dna search
# ---------------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for (natural language).", show_default=False)],
    scope: Annotated[str, typer.Option("--scope", "-s", help="Scope to search.")],
    kind: Annotated[Optional[list[str]], typer.Option(
        "--kind", help="Only these kinds (repeatable).", show_default=False)] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=0, max=1000, help="Number of hits.")] = 10,
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant overlay ('' = the shared base only).")] = "",
    personal: Annotated[bool, typer.Option(
        "--personal", help="Your personal partition over the shared base (resolved by the server from the "
                           "connected role).")] = False,
    name_prefix: Annotated[Optional[str], typer.Option(
        "--name-prefix", help="Only documents whose name starts with this.", show_default=False)] = None,
    valid_time: Annotated[Optional[str], typer.Option(
        "--valid-time", help="World time at which memories must be in force (ISO-8601; default now).",
        show_default=False)] = None,
    include_retired: Annotated[bool, typer.Option(
        "--include-retired", help="Also return forgotten memories (no validity filter).")] = False,
    embedder: EmbedderOpt = EmbedderName.auto,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print {query, scope, model_id, degraded, notices, hits} as JSON only.")] = False,
) -> None:
    """Hybrid search in one scope (dense + lexical, fused by RRF).

    Without a query embedding the answer is lexical only and says so (degraded). Memories not in
    force at --valid-time (default now: forgotten ones) are left out unless --include-retired.
    """
    from pydna.cli_memory import parse_time

    at = parse_time(valid_time, "--valid-time")
    client, choice = open_client(ctx, embedder)
    note = announce_embedder(choice, as_json)
    try:
        result = client.search(scope, query, kind=kind or None, k=k, tenant=tenant, name_prefix=name_prefix,
                               personal=personal, valid_time=at, include_retired=include_retired)
    finally:
        client.close()
    if result.degraded:
        why = f" ({result.error})" if result.error else ""
        note.print(Text(f"degraded: lexical only{why}", style="yellow"), soft_wrap=True)
    for notice in result.notices:
        note.print(Text(notice, style="yellow"), soft_wrap=True)
    if as_json:
        hits = [{"rank": i, **asdict(h)} for i, h in enumerate(result.hits, start=1)]
        _echo_json({"query": query, "scope": scope, "model_id": result.model_id,
                    "degraded": result.degraded, "notices": result.notices, "hits": hits})
        return
    out = stdout()
    out.print(f"model_id: {escape(result.model_id)} · {len(result.hits)} hit{'s' if len(result.hits) != 1 else ''}"
              f" for {escape(repr(query))} in scope {escape(scope)}", soft_wrap=True)
    if not result.hits:
        return
    show_tenant = any(h.tenant for h in result.hits)
    table = Table(show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("kind")
    table.add_column("name", no_wrap=True)
    if show_tenant:
        table.add_column("tenant")
    table.add_column("score", justify="right")
    table.add_column("similarity", justify="right")
    table.add_column("lexical", justify="right")
    table.add_column("title / snippet", ratio=1)
    # Narrow terminals and pipes (80 columns) leave the last column ~12 characters: show the title
    # alone there (a 160-character snippet would stand a dozen lines tall), the snippet when wider.
    narrow = out.width < 110
    for i, h in enumerate(result.hits, start=1):
        text = Text()
        if h.title:
            text.append(h.title, style="bold")
        if h.snippet and not (narrow and h.title):
            budget = 40 if narrow else 160
            snippet = h.snippet if len(h.snippet) <= budget else h.snippet[:budget - 1] + "…"
            if h.title:
                text.append("\n")
            text.append(snippet, style="dim")
        row = [str(i), escape(h.kind), escape(h.name)]
        if show_tenant:
            row.append(escape(h.tenant))
        row += [_fmt(h.score, 4), _fmt(h.similarity, 3), _fmt(h.lexical_score, 3), text]
        table.add_row(*row)
    out.print(table)


app.command("recall")(recall)
app.command("search", help="Alias of `dna recall`: hybrid search in one scope.")(recall)


# ---------------------------------------------------------------------------------------------
# dna memory ... (pydna/cli_memory.py, when present)
# ---------------------------------------------------------------------------------------------


def _mount_memory() -> None:
    try:
        from pydna.cli_memory import memory_app
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "pydna.cli_memory":
            return  # not written yet: the rest of the CLI works without it
        reason = f"{type(exc).__name__}: {exc}"

        @app.command("memory", hidden=True, add_help_option=False,
                     context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
        def memory_unavailable() -> None:
            raise CliError(f"`dna memory` is unavailable: pydna.cli_memory failed to import ({reason})")

        return
    app.add_typer(memory_app, name="memory")


_mount_memory()


def main() -> None:  # pragma: no cover - `python -m pydna.cli`
    app()


if __name__ == "__main__":  # pragma: no cover
    # Run the canonical module, not this __main__ copy: pydna.cli_memory imports pydna.cli, and
    # both must share one CliError class.
    from pydna.cli import main as _main

    _main()
