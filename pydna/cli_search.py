"""``dna recall`` (alias ``dna search``): hybrid search in one scope; ``dna scopes``: what is there.

    dna recall QUERY --scope S        # hybrid search (alias: dna search)
    dna scopes                        # scopes with their documents, memories and model_ids

The readable output fits 80 columns: per hit its name (and title), then its snippet, wrapped; the
scores only with ``--scores`` (or ``--json``, which prints everything).
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import asdict
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pydna.cli_common import (EmbedderName, EmbedderOpt, announce_embedder, echo_json, open_client, parse_time,
                              stdout)

#: Lines of snippet per hit in the readable output.
SNIPPET_LINES = 3
_MARK = re.compile(r"«(.+?)»")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


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
    passages: Annotated[bool, typer.Option(
        "--passages", help="One hit per passage (default: one per document, its best passage).")] = False,
    scores: Annotated[bool, typer.Option(
        "--scores", help="Show each hit's scores: fused (convex by default), cosine similarity, lexical (BM25), lane ranks.")] = False,
    embedder: EmbedderOpt = EmbedderName.auto,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print {query, scope, model_id, embedder, degraded, notices, hits} as JSON only.")] = False,
) -> None:
    """Hybrid search in one scope (dense + lexical, fused: convex combination by default, or RRF).

    Without a query embedding the answer is lexical only and says so (degraded). Memories not in
    force at --valid-time (default now: forgotten ones) are left out unless --include-retired.
    What the server notices (a scope with no documents and the nearest scopes, a kind with none, a
    model_id with none) is printed in yellow. --embedder auto uses the scope's model when the scope
    was indexed with another one than auto's default.
    """
    at = parse_time(valid_time, "--valid-time")
    client, choice = open_client(ctx, embedder, scope=scope)
    note = announce_embedder(choice, as_json)
    try:
        result = client.search(scope, query, kind=kind or None, k=k, tenant=tenant, name_prefix=name_prefix,
                               personal=personal, valid_time=at, include_retired=include_retired,
                               passages=passages)
    finally:
        client.close()
    if result.degraded:
        why = f" ({result.error})" if result.error else ""
        note.print(Text(f"degraded: lexical only{why}", style="yellow"), soft_wrap=False)
    for notice in result.notices:
        note.print(Text(notice, style="yellow"))
    if as_json:
        hits = [{"rank": i, **asdict(h)} for i, h in enumerate(result.hits, start=1)]
        echo_json({"query": query, "scope": scope, "model_id": result.model_id, "embedder": choice.detail,
                   "degraded": result.degraded, "notices": result.notices, "hits": hits})
        return
    out = stdout()
    count = len(result.hits)
    out.print(Text(f"{count} hit{'s' if count != 1 else ''} for {query!r} in scope {scope}"))
    width = max(40, min(out.width, 120))
    for i, h in enumerate(result.hits, start=1):
        out.print(_hit_head(i, h, width))
        body = _hit_text(h)
        if body:
            lines = textwrap.wrap(body, width=width - 4) or [""]
            if len(lines) > SNIPPET_LINES:
                lines = lines[:SNIPPET_LINES]
                lines[-1] = lines[-1][: width - 5].rstrip() + "…"
            for line in lines:
                out.print(_marked("    " + line))
        if scores:
            out.print(Text("    " + _scores(h), style="dim"))


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _hit_head(rank: int, h, width: int) -> Text:
    """``' 1. name · title · heading [tenant]'``, cut to ``width``: name first, it identifies the hit."""
    parts = [h.name]
    if h.title and h.title not in (h.name, h.name.rsplit("/", 1)[-1].rsplit(".", 1)[0]):
        parts.append(h.title)
    heading = getattr(h, "heading", None)
    if heading and h.title and heading.startswith(h.title + " > "):
        heading = heading[len(h.title) + 3:]              # a Markdown file's H1 is its title, shown already
    if heading and heading != h.title:
        parts.append(heading)
    line = f"{rank:>2}. " + " · ".join(" ".join(p.split()) for p in parts)
    if h.kind not in ("Doc",):
        line += f" [{h.kind}]"
    if h.tenant:
        line += f" [tenant {h.tenant}]"
    if len(line) > width:
        line = line[: width - 1] + "…"
    text = Text(line)
    text.stylize("bold", 4, 4 + len(h.name))
    return text


def _hit_text(h) -> str:
    """The passage that answers (its highlight, words of the query marked), else the snippet."""
    text = getattr(h, "highlight", None) or h.snippet or ""
    lines = text.splitlines()
    shown = {" ".join(x.split()) for x in (h.title, *(getattr(h, "heading", None) or "").split(" > ")) if x}
    while len(lines) > 1 and (_HEADING.match(lines[0]) or " ".join(_MARK.sub(r"\1", lines[0]).split()) in shown):
        lines.pop(0)                                      # the head line names the title and heading already
    return " ".join(" ".join(lines).split())


def _marked(line: str) -> Text:
    """A line of snippet with the ``«marked»`` words of a highlight in bold (the marks dropped)."""
    text = Text(style="dim")
    pos = 0
    for m in _MARK.finditer(line):
        text.append(line[pos:m.start()])
        text.append(m.group(1), style="bold")
        pos = m.end()
    text.append(line[pos:])
    return text


def _scores(h) -> str:
    ranks = f"ranks dense {h.rank_dense or '–'}, lexical {h.rank_lexical or '–'}"
    return (f"score {_fmt(h.score, 4)} · cosine {_fmt(h.similarity, 3)} · lexical {_fmt(h.lexical_score, 3)}"
            f" · {ranks}")


def scopes(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print dna.scopes() as a JSON list only.")] = False,
) -> None:
    """List the scopes (dna.scopes): documents, memories and model_ids of each.

    What you can see: row-level security decides (your role's tenants). Documents count each
    (kind, name, tenant) once; memories count the records of a memory Kind, forgotten ones included.
    """
    client, _ = open_client(ctx, embedder=None)
    try:
        rows = client.conn.execute("SELECT scope, documents, memories, model_ids FROM dna.scopes()").fetchall()
    finally:
        client.close()
    if as_json:
        echo_json([{"scope": s, "documents": d, "memories": m, "model_ids": list(ids)} for s, d, m, ids in rows])
        return
    out = stdout()
    if not rows:
        out.print("no scopes yet: index documents with `dna index PATH --scope NAME` "
                  "or remember with `dna memory remember TEXT --scope NAME`", soft_wrap=False)
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("scope", overflow="fold")
    table.add_column("documents", justify="right")
    table.add_column("memories", justify="right")
    table.add_column("model_ids", overflow="fold")
    for s, d, m, ids in rows:
        table.add_row(escape(s), str(d), str(m), escape(", ".join(ids) or "–"))
    out.print(table)
