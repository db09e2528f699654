"""``dna db``: start the embedded server, migrate, show status, stop, compact, vector indexes.

    dna db up                         # start the embedded server (or use --dsn), migrate, print the DSN
    dna db status [--json]            # server, versions, revision applied vs head, rows per table/model
    dna db upgrade [--sql]            # migrate to head, or print the SQL for a DBA (no server needed)
    dna db stop                       # stop the embedded server
    dna db compact [--scope S]        # operator: compact the BM25 index (dna.bm25_compact)
    dna db vector-index drop|build    # operator: drop / build a width's HNSW index (bulk loads)
"""
from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Annotated, Any, Optional

import typer
from alembic.util import CommandError
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pydna.cli_common import CliError, cli_state, database_dsn, echo_json, mask_dsn, stderr, stdout

db_app = typer.Typer(
    help="Run the database: start the embedded server, migrate, show status.",
    no_args_is_help=True,
)


# ---------------------------------------------------------------------------------------------
# dna db ...
# ---------------------------------------------------------------------------------------------


@db_app.command("up")
def db_up(ctx: typer.Context) -> None:
    """Start the embedded server, migrate it to head, print the DSN to use.

    The migrations run as the server's superuser; the DSN printed is the application role's (an
    ordinary login role mapped to your identity: row-level security and --personal apply), which
    `dna` and `pydna.connect()` use by default. With --dsn / DNA_DATABASE_URL that database is
    migrated and nothing is started. Only the DSN goes to stdout:
    `export DNA_DATABASE_URL=$(dna db up)`. A server still going away (a crash, a stop) is waited
    for, at most 30 s.
    """
    from pydna import migrate, server

    err = stderr()
    state = cli_state(ctx)
    embedded = False
    if state.dsn:
        dsn = server.admin_dsn_for(state.dsn)
        embedded = dsn != state.dsn
        if not embedded:
            err.print(f"external server: {escape(mask_dsn(dsn))} (the embedded server is not started)", soft_wrap=True)
    else:
        home = server.data_home()
        err.print(f"embedded PostgreSQL under {escape(str(home))}", soft_wrap=True)
        try:
            dsn = server.start(home)
        except RuntimeError as exc:
            raise CliError(str(exc)) from exc
        embedded = True
    before = _applied_revision(dsn)
    _migrate(dsn)
    head = migrate.head()
    if before == head:
        err.print(f"schema dna at revision {head} (up to date)", soft_wrap=True)
    else:
        err.print(f"schema dna migrated: {before or 'empty'} → {head}", soft_wrap=True)
    if embedded:
        dsn = server.ensure_app_role(dsn)
        err.print(f"clients connect as role {server.app_role()}, identity {server.local_identity()} "
                  f"(the superuser {server.ADMIN_USER} runs migrations only)", soft_wrap=True)
    typer.echo(mask_dsn(dsn))


@db_app.command("upgrade")
def db_upgrade(
    ctx: typer.Context,
    sql: Annotated[bool, typer.Option(
        "--sql", help="Print the SQL for a DBA to review instead of running it (needs no server).")] = False,
    revision: Annotated[str, typer.Option("--revision", help="Target alembic revision.")] = "head",
    server_version: Annotated[Optional[str], typer.Option(
        "--server-version", help="With --sql: the PostgreSQL the script is for (15, 16.4 or 160004); "
                                 "a revision that branches on the version renders that branch. "
                                 "Default: the database's server, else the newest servers.", show_default=False)] = None,
    from_revision: Annotated[Optional[str], typer.Option(
        "--from", help="With --sql: the revision the database is at ('empty': a new database). Default: the "
                       "database's revision when its server answers (--dsn, or the running embedded one), "
                       "else empty.", show_default=False)] = None,
) -> None:
    """Migrate the database to head, or print the SQL (--sql).

    The alembic revisions are the only source of DDL; --sql needs no server. Before any revision
    runs, the server is checked: PostgreSQL 15 to 18 with pgvector 0.8.0 or newer (below that it
    is refused with the versions found, nothing changed). On the embedded server the migrations
    run as its superuser, then the application role gets the new tables.
    """
    from pydna import migrate, server

    if sql:
        # Alembic renders the SQL for the PostgreSQL dialect; nothing is run and nothing starts. The
        # database (when it answers) only tells where to start from and which server to render for.
        start, version_num = _sql_start(ctx, from_revision)
        if server_version is not None:
            version_num = _version_num(server_version)
        try:
            text = migrate.upgrade(cli_state(ctx).dsn or "", revision=revision, sql=True,
                                   server_version_num=version_num, from_revision=start) or ""
        except (ValueError, CommandError) as exc:
            raise CliError(f"{exc}: see `dna db status` for the database's revision") from exc
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    dsn = server.admin_dsn_for(database_dsn(ctx))
    before = _applied_revision(dsn)
    _migrate(dsn, revision=revision)
    after = _applied_revision(dsn)
    if server.is_embedded_dsn(dsn):
        server.ensure_app_role(dsn)
    if before == after:
        stdout().print(f"schema dna already at revision {after} ({escape(mask_dsn(dsn))})", soft_wrap=True)
    else:
        stdout().print(f"schema dna migrated: {before or 'empty'} → {after} ({escape(mask_dsn(dsn))})", soft_wrap=True)


def _sql_start(ctx: typer.Context, from_revision: str | None) -> tuple[str | None, int | None]:
    """Where ``dna db upgrade --sql`` starts: (revision or None for empty, server_version_num or None).
    ``--from`` wins; else the database's revision and version when its server answers within 5 s
    (--dsn, or the running embedded server; one read, nothing written), else empty (said on stderr)."""
    import psycopg

    from pydna import migrate, server

    if from_revision is not None:
        return (None if from_revision == "empty" else from_revision), None
    dsn = cli_state(ctx).dsn
    if dsn is None and server.is_running(server.data_home()):
        dsn = server.client_dsn(server.data_home())
    if dsn is None:
        stderr().print("-- no database named (--dsn) and no embedded server running: the SQL creates the schema "
                       "from empty (--from REV renders a delta)", soft_wrap=True)
        return None, None
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            applied = migrate.current(conn)
            version_num = int(conn.execute("SHOW server_version_num").fetchone()[0])
    except psycopg.Error as exc:
        stderr().print(f"-- {escape(mask_dsn(dsn))} does not answer ({escape(' '.join(str(exc).split()))}): the SQL "
                       "creates the schema from empty (--from REV renders a delta)", soft_wrap=True)
        return None, None
    stderr().print(f"-- the database is at revision {applied or 'empty'} (PostgreSQL {version_num}): the SQL "
                   f"upgrades from there", soft_wrap=True)
    return applied, version_num


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

    from pydna import server

    # Operator maintenance: on the embedded server as its superuser (every partition).
    with psycopg.connect(server.admin_dsn_for(database_dsn(ctx)), autocommit=True) as conn:
        check_migrated(conn)
        report = maintenance.compact(conn, scope, full_merge=full)
    if as_json:
        echo_json(report)
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

    from pydna import server

    # DDL an operator runs: on the embedded server as its superuser (the table owner).
    with psycopg.connect(server.admin_dsn_for(database_dsn(ctx)), autocommit=True) as conn:
        check_migrated(conn)
        try:
            result = action(conn, **kw)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    if as_json:
        echo_json(asdict(result))
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


def _version_num(text: str | None) -> int | None:
    """``15`` → 150000, ``16.4`` → 160004, ``170002`` as it is; None stays None."""
    if text is None:
        return None
    parts = text.strip().split(".")
    if not all(p.isdigit() for p in parts) or len(parts) > 2:
        raise typer.BadParameter(f"{text!r}: a PostgreSQL version such as 15, 16.4 or 160004",
                                 param_hint="--server-version")
    if len(parts) == 1 and int(parts[0]) >= 10000:
        return int(parts[0])
    return int(parts[0]) * 10000 + (int(parts[1]) if len(parts) == 2 else 0)


def _migrate(dsn: str, revision: str = "head") -> None:
    """``migrate.upgrade`` with the revisions' notices on stderr; an unsupported server or a failed
    revision is one red line (which revision, file, statement, server, hint)."""
    from pydna import migrate
    from pydna.supported import UnsupportedServer

    err = stderr()
    try:
        migrate.upgrade(dsn, revision=revision,
                        on_notice=lambda text: err.print(Text(f"note: {text}", style="yellow"), soft_wrap=True))
    except (UnsupportedServer, migrate.MigrationFailed) as exc:
        raise CliError(str(exc)) from exc


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
    home = server.data_home()
    if state.dsn:
        embedded = server.is_embedded_dsn(state.dsn, home)
        srv: dict[str, Any] = {"kind": "embedded" if embedded else "external",
                               "data_dir": str(home) if embedded else None, "running": None,
                               "dsn": mask_dsn(state.dsn)}
        dsn = state.dsn
    else:
        running = server.is_running(home)
        srv = {"kind": "embedded", "data_dir": str(home), "running": running, "dsn": None}
        if not running:
            _stopped(srv, as_json, f"the embedded PostgreSQL under {home} is stopped: start it with `dna db up`")
        dsn = server.client_dsn(home)  # already running: only reads its address (and the role's)
        srv["dsn"] = mask_dsn(dsn)
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        # Nothing answers at the DSN (the README's `export DNA_DATABASE_URL=$(dna db up)`, then a stop).
        srv["running"] = False
        reason = " ".join(str(exc).split())
        if srv["kind"] == "embedded":
            _stopped(srv, as_json, f"the embedded PostgreSQL under {home} is stopped: start it with `dna db up` "
                                   f"({reason})")
        _stopped(srv, as_json, f"nothing answers at {mask_dsn(dsn)}: the server is stopped or unreachable ({reason})")
    with conn:
        srv["running"] = True
        info = {"server": srv, **collect_status(conn)}
    if as_json:
        echo_json(info)
        return
    _print_status(info)


def _stopped(srv: dict[str, Any], as_json: bool, why: str) -> None:
    """``dna db status`` of a server that does not answer: "server: stopped", exit 1 (--json: the
    server object, ``running`` false, then exit 1)."""
    if as_json:
        echo_json({"server": {**srv, "running": False}})
    raise CliError(f"server: stopped — {why}")


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

