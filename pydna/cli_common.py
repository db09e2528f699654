"""What every ``dna`` command shares: errors, consoles, the database, the embedder.

The modules of the command line (``pydna.cli_db``, ``pydna.cli_index``, ``pydna.cli_search``,
``pydna.cli_memory``, and ``pydna.cli`` which mounts them) import from here and never from each
other, so there is no import circle. ``ctx.obj`` of every command is a :class:`CliState` (the global
``--dsn``); :func:`cli_state`, :func:`database_dsn`, :func:`open_client`, :func:`choose_embedder` and
:class:`CliError` are meant to be reused; the top-level group turns every error that
:func:`describe_error` knows into one red line and exit 1.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

if TYPE_CHECKING:  # imported lazily: `dna --help` and `dna db upgrade --sql` stay light
    from pydna.client import Client

ENV_DSN = "DNA_DATABASE_URL"


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
    if any(c.__name__ == "ClickException" for c in type(exc).__mro__) and hasattr(exc, "format_message"):
        # A ClickException of another copy of click than typer's (typer >= 0.26 runs its own):
        # typer would not catch it, so it is reported here.
        return _one_line(exc.format_message())
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


@dataclass
class CliState:
    """What the top-level options set; ``ctx.obj`` of every sub-command."""

    dsn: str | None = None  # --dsn or DNA_DATABASE_URL; None → the embedded default server



def cli_state(ctx: typer.Context | None = None) -> CliState:
    """The top-level options of the command running in ``ctx`` (defaults when there is none)."""
    obj = ctx.find_object(CliState) if ctx is not None else None
    return obj if obj is not None else CliState()


def database_dsn(ctx: typer.Context | None = None) -> str:
    """The DSN to use: --dsn / DNA_DATABASE_URL, else the embedded server (started if needed)."""
    state = cli_state(ctx)
    if state.dsn:
        return state.dsn
    from pydna.connection import resolve_dsn

    try:
        return resolve_dsn(None)
    except RuntimeError as exc:  # pydna.server.start: the message names the server log
        raise CliError(str(exc)) from exc


def require_scope(conn, scope: str) -> None:
    """Refuse (CliError, exit 1) a scope under which no row the caller can see stands
    (``dna.scope_exists``): most often a typo, so the error names the nearest scopes that exist.
    Called by the reading commands when their answer is empty, so a scope with rows costs nothing."""
    exists, nearest = conn.execute("SELECT dna.scope_exists(%s), dna.nearest_scopes_text(%s, 3)",
                                   (scope, scope)).fetchone()
    if not exists:
        raise CliError(f"scope {scope!r} has no documents or memories you can see; nearest scopes: {nearest}")


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
    description: str  # one short line: which provider and model_id (and why, when not the default)
    detail: str = ""  # the long form: where the model comes from, why auto chose it (--json)


def _choice(record) -> EmbedderChoice:
    """An EmbedderChoice of a ``pydna.embeddings.select.ProviderChoice``."""
    short = f"{record.name} {record.model_id}"
    if record.reason == "the scope's model":
        short += " (the scope's model)"
    elif record.requested == "auto" and record.name == "fake":
        short += " (ONNX not available; --json says why)"
    return EmbedderChoice(record.provider, short, record.describe())


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
        return _choice(last)
    text = f"{type(provider).__name__} {provider.model_id}"
    return EmbedderChoice(provider, text, text)


def scope_embedder(conn, scope: str, default: EmbedderChoice) -> EmbedderChoice:
    """``--embedder auto`` on a scope that already has documents: ``default`` when the scope holds
    vectors of its model_id, else the embedder of the scope's model with the most rows
    (``dna.scope_models``) that this package can build; ``default`` when it can build none (the
    server's NOTICE then names the scope's model_ids)."""
    from pydna.embeddings.select import provider_for_model

    rows = conn.execute("SELECT model_id, documents FROM dna.scope_models(%s)", (scope,)).fetchall()
    if not rows or default.provider.model_id in {m for m, _ in rows}:
        return default
    for model_id, _ in sorted(rows, key=lambda r: (-r[1], r[0])):
        record = provider_for_model(model_id)
        if record is not None:
            return _choice(record)
    return default


def open_client(ctx: typer.Context | None = None, embedder: str | EmbedderName | None = "auto",
                scope: str | None = None) -> tuple["Client", EmbedderChoice | None]:
    """A migrated ``Client`` on the CLI's database, with the named embedder (None: lexical only).
    With ``scope``, ``auto`` picks the scope's model when the scope has documents of another model
    than auto's default (:func:`scope_embedder`). Raises ``NotMigratedError`` (reported as one line
    naming `dna db upgrade`)."""
    from pydna.connection import connect

    choice = choose_embedder(embedder) if embedder is not None else None
    client = connect(database_dsn(ctx), embedder=choice.provider if choice else None)
    name = embedder.value if isinstance(embedder, EmbedderName) else embedder
    if choice is not None and name == "auto" and scope:
        try:
            choice = scope_embedder(client.conn, scope, choice)
        except Exception:
            client.close()
            raise
        client.embedder = choice.provider
    return client, choice


def announce_embedder(choice: EmbedderChoice, as_json: bool) -> Console:
    """Print which embedder a command uses (one short line), on stdout (stderr under ``--json``,
    so that stdout stays JSON); returns that console for the command's other notes."""
    note = stderr() if as_json else stdout()
    note.print(f"embedder: {escape(choice.description)}", soft_wrap=True)
    return note


def echo_json(payload: Any) -> None:
    """``payload`` as indented JSON on stdout (what every ``--json`` prints)."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()



def parse_time(value: str | None, what: str) -> datetime | None:
    """An ISO-8601 timestamp (naive = UTC); ``CliError`` naming the option ``what`` otherwise."""
    if value is None:
        return None
    text = value.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"{what}: {value!r} is not an ISO-8601 timestamp (e.g. 2026-07-09T15:00:00+00:00)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


# ---------------------------------------------------------------------------------------------
# Metadata and filters (docs/memory.md, "Filters")
# ---------------------------------------------------------------------------------------------

FILTER_HELP = ("A metadata filter as JSON (docs/memory.md, \"Filters\"), e.g. '{\"user\": \"u1\", \"tags\": "
               "{\"contains\": \"ops\"}, \"created_at\": {\"gte\": \"2026-05-01\"}}'; applied inside both lanes.")
WHERE_HELP = ("KEY=VALUE: only rows whose metadata field KEY (a.b for a nested one) equals VALUE (JSON if it "
              "reads as a number, true, false or null, else text); repeatable, all required, and with --filter.")


def _scalar(text: str) -> Any:
    """A --where or --meta value: a JSON number, true, false or null as such, anything else as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if value is None or isinstance(value, (bool, int, float)) else text


def parse_pairs(pairs: list[str] | None, what: str) -> dict[str, Any]:
    """``KEY=VALUE`` options as a dict (values by :func:`_scalar`); ``CliError`` naming ``what`` otherwise."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what}: {pair!r} is not KEY=VALUE (e.g. {what} user=u1)")
        out[key.strip()] = _scalar(value)
    return out


def parse_json_object(text: str | None, what: str) -> dict[str, Any] | None:
    """A JSON object option (None when not given); ``CliError`` naming ``what`` otherwise."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{what}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CliError(f"{what}: must be a JSON object, got {type(value).__name__}")
    return value


def parse_filter(filter_json: str | None, where: list[str] | None) -> dict[str, Any] | None:
    """The filter of ``--filter JSON`` and ``--where KEY=VALUE`` (all required together); None: none.
    The server checks the language (22023 with a hint)."""
    given = parse_json_object(filter_json, "--filter")
    equal = parse_pairs(where, "--where")
    if given is None and not equal:
        return None
    if given is None:
        return equal
    return {"and": [given, equal]} if equal else given
