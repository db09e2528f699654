"""``dna recall`` (alias ``dna search``): hybrid search in one scope.

    dna recall QUERY --scope S        # hybrid search (alias: dna search)
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pydna.cli_common import (EmbedderName, EmbedderOpt, announce_embedder, echo_json, open_client, parse_time,
                              stdout)

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
        echo_json({"query": query, "scope": scope, "model_id": result.model_id,
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
