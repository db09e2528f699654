"""``dna mcp`` and ``dna serve``: the agent doors as commands.

Mounted on the top-level ``dna`` app by :func:`mount`. Importing this module imports typer and click
only: the MCP SDK, FastAPI, uvicorn and psycopg_pool load when a command runs, and a missing extra
is one line naming ``pip install 'pydna[mcp]'`` / ``'pydna[rest]'``.

The database is the global ``--dsn`` / ``DNA_DATABASE_URL`` (else the embedded server): for
``dna mcp`` its login role IS the identity of every tool call; for ``dna serve`` it is the door's
login role, which switches to each API key's role per request.
"""
from __future__ import annotations

import importlib.util
import sys
from typing import Annotated

import click
import typer

ScopeOpt = Annotated[str, typer.Option(
    "--scope", "-s", envvar="DNA_SCOPE", show_envvar=True,
    help="The default scope of calls that name none.")]
EmbedderOpt = Annotated[str, typer.Option(
    "--embedder", help="auto (ONNX all-MiniLM-L6-v2 offline when installed, else the fake), onnx, fake, or none "
                       "(lexical only). Use the embedder the scope was indexed with.")]


def _need(modules: tuple[str, ...], extra: str, command: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(f"`dna {command}` needs {', '.join(missing)}: pip install 'pydna[{extra}]'")


def _dsn(ctx: click.Context) -> str:
    """The global --dsn / DNA_DATABASE_URL (before or after the command), else the embedded server
    (started if needed)."""
    from pydna.cli_common import CliState

    state = ctx.find_object(CliState)
    dsn = state.dsn if state is not None else None
    from pydna.connection import resolve_dsn

    try:
        return resolve_dsn(dsn or None)
    except RuntimeError as exc:  # the embedded server did not start: the message names its log
        raise click.ClickException(str(exc)) from exc


def _embedder(name: str):
    if name == "none":
        return None
    if name not in ("auto", "onnx", "fake"):
        raise click.BadParameter(f"unknown embedder {name!r}: use auto, onnx, fake or none", param_hint="--embedder")
    from pydna.embeddings import get_provider

    try:
        return get_provider(name)
    except ValueError as exc:  # a bad DNA_ONNX_COMPUTE / DNA_ONNX_THREADS
        raise click.ClickException(str(exc)) from exc


def mcp_cmd(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio. "
                                                      "No authentication: every client acts as the server's role.")] = False,
    host: Annotated[str, typer.Option("--host", help="--http: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="--http: the port.")] = 8765,
    scope: ScopeOpt = "default",
    embedder: EmbedderOpt = "auto",
) -> None:
    """MCP server (stdio; --http for streamable HTTP): tools search, recall, remember, forget, revive,
    list_memories, consolidate, delete_memory (refused: names forget). The identity is the database role
    of --dsn."""
    _need(("mcp",), "mcp", "mcp")
    provider = _embedder(embedder)
    dsn = _dsn(ctx)
    from pydna.doors.mcp_server import run

    run(dsn, provider, scope=scope, http=http, host=host, port=port)


def serve_cmd(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port.")] = 8080,
    pool_size: Annotated[int, typer.Option("--pool-size", min=1, help="Database connections at most (psycopg_pool).")] = 8,
    scope: ScopeOpt = "default",
    embedder: EmbedderOpt = "auto",
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn's log level.")] = "info",
) -> None:
    """REST API (FastAPI + uvicorn; OpenAPI at /docs): the memory verbs under /v1, API keys mapped to
    database roles (SELECT dna.create_api_key('role', 'label')), each request run as its key's role."""
    _need(("fastapi", "uvicorn", "psycopg_pool"), "rest", "serve")
    provider = _embedder(embedder)
    dsn = _dsn(ctx)
    from pydna.doors.rest import serve

    print(f"dna serve: http://{host}:{port} (OpenAPI: /docs), scope {scope!r}, embedder "
          f"{provider.model_id if provider is not None else 'none (lexical only)'}", file=sys.stderr, flush=True)
    serve(dsn, provider, host=host, port=port, scope=scope, max_size=pool_size, log_level=log_level)


def mount(app: typer.Typer) -> None:
    """Add ``dna mcp`` and ``dna serve`` to the top-level app."""
    app.command("mcp", help=_paragraphs(mcp_cmd.__doc__),
                short_help="MCP server for agents (stdio, or --http): the memory verbs as tools.")(mcp_cmd)
    app.command("serve", help=_paragraphs(serve_cmd.__doc__),
                short_help="REST API (OpenAPI at /docs): the memory verbs, API keys mapped to database roles.")(serve_cmd)


def _paragraphs(doc: str | None) -> str:
    """A docstring as help text: its lines joined into paragraphs."""
    return "\n\n".join(" ".join(p.split()) for p in (doc or "").split("\n\n"))
