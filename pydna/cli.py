"""The ``dna`` command line: run the migrations, index files, search, remember.

    dna db up                         # start the embedded server (or use --dsn), migrate, print the DSN
    dna db status [--json]            # server, versions, revision applied vs head, rows per table/model
    dna db upgrade [--sql]            # migrate to head, or print the SQL for a DBA (no server needed)
    dna db stop                       # stop the embedded server
    dna db compact [--scope S]        # operator: compact the BM25 index (dna.bm25_compact)
    dna db vector-index drop|build    # operator: drop / build a width's HNSW index (bulk loads)
    dna index PATH... --scope S       # markdown/text files, directories, JSONL
    dna recall QUERY --scope S        # hybrid search (alias: dna search); --receipt keeps a receipt
    dna replay RECEIPT_ID             # re-run a receipt's question: is the answer the same?
    dna memory ...                    # agent memory (pydna.cli_memory)

The database is ``--dsn``, else ``DNA_DATABASE_URL``, else the embedded default server; ``--dsn`` goes
before the command or after it (``dna --dsn URL db upgrade`` = ``dna db upgrade --dsn URL``; given in
both places, the one after the command wins). Errors from
PostgreSQL, an unmigrated database and embedding failures print one red line (with the server's
hint) and exit 1, never a traceback.

This module only builds the top-level group and mounts the commands; they live in ``pydna.cli_db``,
``pydna.cli_index`` (with ``pydna.cli_files`` and ``pydna.cli_sources``), ``pydna.cli_search``, ``pydna.cli_memory``,
``pydna.cli_keys`` and ``pydna.cli_reindex``, and what they share in
``pydna.cli_common`` (which none of them imports from here). To add a command group, define its
``typer.Typer`` in its own module and mount it below with ``app.add_typer``.
"""
from __future__ import annotations

import copy
import re
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from pydna.cli_common import ENV_DSN, CliError, CliState, cli_state, describe_error, print_error  # noqa: F401
from pydna.cli_db import db_app
from pydna.cli_keys import keys_app
from pydna.cli_files import markdown_snippet, markdown_title  # noqa: F401  (re-exported)
from pydna.cli_index import index
from pydna.cli_search import recall, replay, scopes
from pydna.cli_reindex import reindex


#: The ClickException of the click that typer runs (its own copy from typer 0.26 on, the click
#: package before): typer prints those itself.
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


#: The options of the top-level group that every sub-command and group accepts too, where a user
#: types them (``dna db upgrade --dsn …`` as well as ``dna --dsn … db upgrade``).
GLOBAL_OPTIONS = ("dsn",)


def _set_global(ctx: Any, param: Any, value: Any) -> Any:
    """A sub-command's copy of a global option: a value given there replaces the top-level one."""
    if value is not None:
        setattr(ctx.ensure_object(CliState), param.name, value)   # the top-level group's CliState
    return value


def _spread_global_options(group: Any) -> None:
    """Give every command and group under ``group`` its own copy of each global option of
    ``group``: the same flag and help, no environment variable (``DNA_DATABASE_URL`` is read once,
    by the top-level option), not passed to the command's function; it sets ``CliState``."""
    globals_ = [p for p in group.params if p.name in GLOBAL_OPTIONS]

    def walk(command: Any) -> None:
        for sub in getattr(command, "commands", {}).values():
            have = {p.name for p in sub.params}
            for option in globals_:
                if option.name not in have:
                    local = copy.copy(option)
                    local.envvar, local.show_envvar, local.default = None, False, None
                    if option.envvar:
                        local.help = f"{option.help} Also before the command; env var: {option.envvar}."
                    local.expose_value, local.callback = False, _set_global
                    sub.params.append(local)
            walk(sub)

    walk(group)


def _name_the_meant_option(exc: BaseException) -> None:
    """An unknown option's suggestion names the one option meant (``--scop`` → "Did you mean --scope?"),
    not click's up to three close matches (``--json, --scope, --scores``): the closest, first in
    difflib's order."""
    possibilities = getattr(exc, "possibilities", None)
    if exc.__class__.__name__ == "NoSuchOption" and possibilities and len(possibilities) > 1:
        exc.possibilities = possibilities[:1]


#: Commands other tools name otherwise: an unknown command among these suggests ours when the group has it
#: (``dna db down`` → "Did you mean 'stop'?", ``dna db start`` → 'up'), as typer's spelling suggestion does for ``dna db stat``.
COMMAND_SYNONYMS = {"down": "stop", "halt": "stop", "kill": "stop", "shutdown": "stop", "start": "up", "run": "up",
                    "boot": "up", "launch": "up", "state": "status", "info": "status",
                    "migrate": "upgrade", "ls": "list", "find": "search", "query": "search", "rm": "revoke",
                    "delete": "revoke", "new": "create", "add": "create"}
_NO_SUCH_COMMAND = re.compile(r"^(?P<head>No such command '(?P<name>[^']*)')\.(?: Did you mean .*)?$")


def _name_the_meant_command(exc: BaseException) -> None:
    """An unknown command that another tool's name for one of the group's (:data:`COMMAND_SYNONYMS`)
    gets click's message with the command meant: ``No such command 'down'. Did you mean 'stop'?`` (in place
    of typer's guess by spelling: ``start`` is nearer ``status`` than ``up``)."""
    message = getattr(exc, "message", None)
    m = _NO_SUCH_COMMAND.match(message) if isinstance(message, str) else None
    group = getattr(getattr(exc, "ctx", None), "command", None)
    if m is None or group is None:
        return
    meant = COMMAND_SYNONYMS.get(m.group("name").lower())
    if meant is not None and meant in getattr(group, "commands", {}):
        exc.message = f"{m.group('head')}. Did you mean {meant!r}?"   # in place of a spelling's guess


class DnaGroup(TyperGroup):
    """The top-level group: turns known errors of any sub-command into one red line and exit 1,
    and lets every sub-command take the global options (:data:`GLOBAL_OPTIONS`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _spread_global_options(self)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _CLICK_ERROR) as exc:  # typer's own handling: usage errors, exits
            _name_the_meant_option(exc)
            _name_the_meant_command(exc)
            raise
        except Exception as exc:
            message = describe_error(exc)
            if message is None:
                raise
            print_error(message)
            code = exc.code if isinstance(exc, CliError) else getattr(exc, "exit_code", 1)
            raise typer.Exit(code if isinstance(code, int) else 1) from None


# ---------------------------------------------------------------------------------------------
# The top-level group and its commands
# ---------------------------------------------------------------------------------------------

app = typer.Typer(
    cls=DnaGroup,
    name="dna",
    help="pydna: hybrid search and agent memory inside PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals hold DSNs (passwords)
)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")


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


app.command("index")(index)
app.command("recall")(recall)
app.command("search", help="Alias of `dna recall`: hybrid search in one scope.")(recall)
app.command("scopes")(scopes)
app.command("replay")(replay)
app.command("reindex")(reindex)


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
from pydna.doors.cli import mount as _mount_doors  # noqa: E402  (dna mcp, dna serve: SDKs load when run)
_mount_doors(app)


def main() -> None:  # pragma: no cover - `python -m pydna.cli`
    app()


if __name__ == "__main__":  # pragma: no cover
    # Run the canonical module, not this __main__ copy (one app, one set of mounted commands).
    from pydna.cli import main as _main

    _main()

