"""``dna recall`` (alias ``dna search``): hybrid search in one scope; ``dna scopes``: what is there;
``dna replay``: re-run a receipt's question.

    dna recall QUERY --scope S        # hybrid search (alias: dna search)
    dna recall QUERY --scope S --fusion rrf --offset 10 --min-similarity 0.3 --explain --receipt
    dna replay RECEIPT_ID [--query TEXT]   # is the answer still the same? (dna.replay)
    dna scopes                        # scopes with their documents, memories and model_ids

The readable output fits 80 columns: per hit its name (and title), then its snippet, wrapped; the
scores only with ``--scores`` (or ``--json``, which prints everything); ``--explain`` adds each
hit's lanes (rank, raw score, normalised score, fusion term) and how the answer was made (fusion,
each lane's path and depth, floors, degradation). Every option goes to ``dna.search`` as it is: a
bad value is refused by the server (one red line with its SQLSTATE and hint, exit 1).
"""
from __future__ import annotations

import re
import textwrap
import uuid
from dataclasses import asdict
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pydna.cli_common import (FILTER_HELP, WHERE_HELP, CliError, EmbedderName, EmbedderOpt, announce_embedder,
                              echo_json, open_client, parse_filter, parse_time, require_scope, stdout)

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
    k: Annotated[int, typer.Option("-k", "--top-k", help="Number of hits (0-1000).")] = 10,
    offset: Annotated[int, typer.Option(
        "--offset", help="Skip this many ranks (0-9000): --offset 10 -k 10 is ranks 11-20 of one ranking.")] = 0,
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
    filter_json: Annotated[Optional[str], typer.Option("--filter", help=FILTER_HELP, show_default=False)] = None,
    where: Annotated[Optional[list[str]], typer.Option("--where", help=WHERE_HELP, show_default=False)] = None,
    passages: Annotated[bool, typer.Option(
        "--passages", help="One hit per passage (default: one per document, its best passage).")] = False,
    fusion: Annotated[Optional[str], typer.Option(
        "--fusion", help="convex (dense weight x normalised cosine + the rest x normalised BM25) or rrf "
                         "(Reciprocal Rank Fusion); default: the scope's setting, else convex.",
        show_default=False)] = None,
    dense_weight: Annotated[Optional[float], typer.Option(
        "--dense-weight", help="The dense lane's share of the convex fusion, 0-1 (default: the scope's, else 0.5).",
        show_default=False)] = None,
    min_similarity: Annotated[Optional[float], typer.Option(
        "--min-similarity", help="Dense floor: drop dense candidates below this cosine (-1 to 1).",
        show_default=False)] = None,
    min_lexical_score: Annotated[Optional[float], typer.Option(
        "--min-lexical-score", help="Lexical floor: drop lexical candidates below this BM25 score (>= 0).",
        show_default=False)] = None,
    exact: Annotated[Optional[bool], typer.Option(
        "--exact/--no-exact", help="--exact scans the dense lane exactly; --no-exact lets the planner use HNSW (--explain says which ran); "
                                   "default: exact when the scope holds at most 2000 rows of the model.",
        show_default=False)] = None,
    diversity: Annotated[Optional[str], typer.Option(
        "--diversity", help="collapse (default: a hit whose passage is a near-duplicate of a higher-ranked one is "
                            "left out), mmr (collapse, then Maximal Marginal Relevance orders the rest) or off.",
        show_default=False)] = None,
    duplicate_similarity: Annotated[Optional[float], typer.Option(
        "--duplicate-similarity", help="Cosine (0-1] at or above which two passages are duplicates (default 1: the text alone decides).",
        show_default=False)] = None,
    mmr_lambda: Annotated[Optional[float], typer.Option(
        "--mmr-lambda", help="MMR's relevance weight, 0-1 (default 0.7; alone it selects --diversity mmr).",
        show_default=False)] = None,
    scores: Annotated[bool, typer.Option(
        "--scores", help="Show each hit's scores: fused (convex by default), cosine similarity, lexical (BM25), lane ranks.")] = False,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Show per hit each lane's rank, raw score and fusion term, and how the answer was made "
                          "(fusion, lane paths, depths, floors, degradation); --json: the server's explain as is.")] = False,
    receipt: Annotated[bool, typer.Option(
        "--receipt", help="Keep a receipt of the answer (dna.take_receipt) and print its id; `dna replay ID` "
                          "re-runs it.")] = False,
    keep_query: Annotated[bool, typer.Option(
        "--keep-query", help="With --receipt: store the query text and embedding in the receipt (default: only "
                             "their digests; the replay then needs --query).")] = False,
    embedder: EmbedderOpt = EmbedderName.auto,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print {query, scope, model_id, embedder, degraded, notices, hits} (and receipt_id with "
                       "--receipt) as JSON only.")] = False,
) -> None:
    """Hybrid search in one scope (dense + lexical, fused: convex combination by default, or RRF).

    Without a query embedding the answer is lexical only and says so (degraded). Memories not in
    force at --valid-time (default now: forgotten ones) are left out unless --include-retired.
    What the server notices (a scope with no documents and the nearest scopes, a kind with none, a
    model_id with none) is printed in yellow. --embedder auto uses the scope's model when the scope
    was indexed with another one than auto's default.
    """
    at = parse_time(valid_time, "--valid-time")
    narrow = parse_filter(filter_json, where)
    if keep_query and not receipt:
        raise CliError("--keep-query keeps the query in a receipt: add --receipt")
    client, choice = open_client(ctx, embedder, scope=scope)
    note = announce_embedder(choice, as_json)
    try:
        result = client.search(scope, query, kind=kind or None, k=k, tenant=tenant, name_prefix=name_prefix,
                               personal=personal, valid_time=at, include_retired=include_retired,
                               passages=passages, offset=offset, min_similarity=min_similarity,
                               min_lexical_score=min_lexical_score, exact=exact, fusion=fusion,
                               dense_weight=dense_weight, explain=explain, receipt=receipt,
                               keep_query=keep_query, filter=narrow, diversity=diversity,
                               duplicate_similarity=duplicate_similarity, mmr_lambda=mmr_lambda)
        if not result.hits:
            require_scope(client.conn, scope)  # a typo'd scope exits 1, naming the nearest ones
    finally:
        client.close()
    if result.degraded:
        why = f" ({result.error})" if result.error else ""
        note.print(Text(f"degraded: lexical only{why}", style="yellow"), soft_wrap=False)
    for notice in result.notices:
        note.print(Text(notice, style="yellow"))
    if as_json:
        hits = [{"rank": i, **asdict(h)} for i, h in enumerate(result.hits, start=offset + 1)]
        answer = {"query": query, "scope": scope, "model_id": result.model_id, "embedder": choice.detail,
                  "degraded": result.degraded, "notices": result.notices, "hits": hits}
        if receipt:
            answer["receipt_id"] = result.receipt_id
        echo_json(answer)
        return
    out = stdout()
    count = len(result.hits)
    where = f" (ranks {offset + 1}-{offset + count})" if offset and count else ""
    out.print(Text(f"{count} hit{'s' if count != 1 else ''} for {query!r} in scope {scope}{where}"))
    if explain and result.hits and result.hits[0].explain:
        for line in explain_answer(result.hits[0].explain.get("answer") or {}):
            out.print(Text(line, style="dim"), soft_wrap=True)
    width = max(40, min(out.width, 120))
    for i, h in enumerate(result.hits, start=offset + 1):
        out.print(_hit_head(i, h, max(40, min(out.width, 200))))    # the whole terminal: a path is long
        body = _hit_text(h)
        if body:
            for line in snippet_lines(body, query, width - 4):
                out.print(_marked("    " + line))
        if scores:
            out.print(Text("    " + _scores(h), style="dim"))
        if explain and h.explain:
            for line in explain_hit(h.explain):
                out.print(Text("    " + line, style="dim"), soft_wrap=True)
    if receipt:
        out.print(Text(f"receipt: {result.receipt_id}"), soft_wrap=True)
        replay = f"dna replay {result.receipt_id}" + ("" if keep_query else f" --query {_shell_quote(query)}")
        out.print(Text(f"replay with: {replay}", style="dim"), soft_wrap=True)


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _hit_head(rank: int, h, width: int) -> Text:
    """``' 1. name · title · heading [tenant]'``, at most ``width``: name first, it identifies the hit;
    the heading path (as prose, without a first section that repeats the title) keeps its tail, the
    section the hit is in: leading sections give way to ``… >`` (:func:`fit_heading`)."""
    from pydna.passages import plain_markup

    def prose(x: str) -> str:                            # RST escapes too: ``QuerySet``\\s → QuerySets
        return " ".join(re.sub(r"\\(.)", lambda m: "" if m.group(1) == " " else m.group(1), plain_markup(x)).split())

    head = f"{rank:>2}. " + " ".join(h.name.split())
    title = prose(h.title) if h.title else ""
    if title and h.title not in (h.name, h.name.rsplit("/", 1)[-1].rsplit(".", 1)[0]):
        head += " · " + title
    tail = (f" [{h.kind}]" if h.kind not in ("Doc",) else "") + (f" [tenant {h.tenant}]" if h.tenant else "")
    sections = [prose(x) for x in (getattr(h, "heading", None) or "").split(" > ") if prose(x)]
    if sections and title and sections[0] == title:
        sections = sections[1:]                           # the document's first title is its title, shown already
    line = head
    if sections:
        room = width - len(head) - len(tail) - 3
        if " · " in head and (room < 16 or len(sections[-1]) > room):   # the section before the title; the name stays
            head = head[: head.index(" · ")]
            room = width - len(head) - len(tail) - 3
        line = head + " · " + fit_heading(sections, room)
    line += tail
    if len(line) > width:
        line = line[: width - 1] + "…"
    text = Text(line)
    text.stylize("bold", 4, 4 + len(h.name))
    return text


def fit_heading(sections: list[str], width: int) -> str:
    """``sections`` joined by ``" > "`` in at most ``width`` characters, keeping the tail: leading
    sections dropped for ``"… > "``, the last one cut (``…``) when even ``"… > last"`` is too long."""
    path = " > ".join(sections)
    if len(path) <= width:
        return path
    for i in range(1, len(sections)):
        tail = "… > " + " > ".join(sections[i:])
        if len(tail) <= width:
            return tail
    last = "… > " + sections[-1]
    if len(sections) > 1 and len(last) <= width:
        return last
    return sections[-1][: max(width - 1, 1)] + "…"


def _hit_text(h) -> str:
    """The passage that answers (its highlight, words of the query marked), else the snippet."""
    text = getattr(h, "highlight", None) or h.snippet or ""
    lines = text.splitlines()
    shown = {" ".join(x.split()) for x in (h.title, *(getattr(h, "heading", None) or "").split(" > ")) if x}
    while len(lines) > 1 and (_HEADING.match(lines[0]) or " ".join(_MARK.sub(r"\1", lines[0]).split()) in shown):
        lines.pop(0)                                      # the head line names the title and heading already
    from pydna.passages import plain_markup

    return " ".join(plain_markup(" ".join(lines)).split())   # RST roles, adornments, directives as prose


#: An identifier of a query: snake_case, dotted.names, CamelCase (as dna.text_tsvector reads them).
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:[._]\w+)+|_\w+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*")


def query_identifiers(query: str) -> list[str]:
    """The identifiers a query names (``on_commit``, ``transaction.on_commit``, ``QuerySet``), lower-cased."""
    return [m.group(0).strip("._").lower() for m in _IDENTIFIER.finditer(query) if m.group(0).strip("._")]


def snippet_lines(body: str, query: str, width: int) -> list[str]:
    """At most :data:`SNIPPET_LINES` lines of ``body`` wrapped to ``width``: its first lines, unless the
    query names an identifier that they do not hold and a later line does (a mark ``«…»`` holding the
    whole identifier, else the identifier in the text): then the window opens on the line before that
    one, marked ``…`` (a highlight that marks the parts first — «commits» for ``on_commit`` — would
    otherwise show only the parts). A cut end is marked ``…`` too."""
    lines = textwrap.wrap(body, width=width) or [""]
    if len(lines) <= SNIPPET_LINES:
        return lines
    start = 0
    idents = query_identifiers(query)
    if idents:
        def marked(line: str) -> bool:
            return any(i in m.lower() for m in _MARK.findall(line) for i in idents)

        def written(line: str) -> bool:
            return any(i in line.lower() for i in idents)

        for holds in (marked, written):
            first = next((n for n, line in enumerate(lines) if holds(line)), None)
            if first is not None:
                if first >= SNIPPET_LINES:
                    start = min(first - 1, len(lines) - SNIPPET_LINES)
                break
    shown = lines[start:start + SNIPPET_LINES]
    if start:
        shown[0] = "…" + shown[0]
    if start + SNIPPET_LINES < len(lines):
        shown[-1] = shown[-1][: width - 1].rstrip() + "…"
    return shown


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


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def explain_hit(explain: dict) -> list[str]:
    """The lines ``--explain`` prints under a hit: per lane its rank, raw score (cosine / BM25),
    min-max normalised score (convex) and term (its part of the score), from dna.search's explain."""
    lines = []
    for lane, raw in (("dense", "similarity"), ("lexical", "bm25")):
        part = explain.get(lane)
        if not part:
            lines.append(f"{lane}: not a candidate")
            continue
        label = "cosine" if raw == "similarity" else "bm25"
        text = f"{lane}: rank {_num(part.get('rank'))} · {label} {_num(part.get(raw), 4)}"
        if part.get("normalised") is not None:
            text += f" · normalised {_num(part.get('normalised'))}"
        text += f" · term {_num(part.get('term'), 4)}"
        lines.append(text)
    lines.append(f"score {_num(explain.get('score'), 4)} = the sum of the terms")
    diverse = explain.get("diversity") or {}
    if diverse.get("redundancy") is not None:
        lines.append(f"mmr: fused rank {_num(diverse.get('fused_rank'))} · relevance {_num(diverse.get('relevance'))}"
                     f" · redundancy {_num(diverse.get('redundancy'))}")
    for c in diverse.get("collapsed") or []:
        why = {"same text": "the same text", "contained": "its text inside this one's"}.get(
            c.get("reason"), f"cosine {_num(c.get('similarity'))}")
        lines.append(f"collapsed into this hit: {c.get('name')} (fused rank {_num(c.get('fused_rank'))}, {why})")
    return lines


def explain_answer(answer: dict) -> list[str]:
    """The lines ``--explain`` prints once per answer: the fusion, each lane's path and depth, the
    floors and what they removed, the degradation (dna.search's explain -> answer)."""
    fusion = answer.get("fusion") or {}
    method = fusion.get("method")
    if method == "convex":
        how = f"fusion convex (dense_weight {_num(fusion.get('dense_weight'), 2)}, {fusion.get('normalisation', 'min-max')})"
    elif method == "rrf":
        how = f"fusion rrf (weights {fusion.get('weights')}, rrf_k {_num(fusion.get('rrf_k'), 0)})"
    else:
        how = f"fusion {method}"
    lines = [f"{how} · {answer.get('fused_candidates', '–')} fused candidates · k {answer.get('k')}, "
             f"offset {answer.get('offset')}"]
    dense = answer.get("dense") or {}
    text = f"dense lane: {dense.get('path', '–')}"
    if dense.get("ef_search") is not None:
        text += f" (ef_search {dense['ef_search']}, iterative scan {dense.get('iterative_scan')})"
    text += f" · depth {_num(dense.get('depth'))} · {_num(dense.get('candidates'))} candidates"
    if dense.get("min_similarity") is not None:
        text += f" · min_similarity {_num(dense['min_similarity'])} removed {_num(dense.get('removed_by_floor'))}"
    if dense.get("exact_rule"):
        text += f" · rule: {dense['exact_rule']}"
    lines.append(text)
    lexical = answer.get("lexical") or {}
    text = (f"lexical lane: {lexical.get('scoring', 'BM25')} k1 {_num(lexical.get('k1'), 2)} b {_num(lexical.get('b'), 2)}"
            f" ({lexical.get('ts_config', '–')}) · depth {_num(lexical.get('depth'))} · "
            f"{_num(lexical.get('candidates'))} candidates")
    if lexical.get("terms") is not None:
        text += f" · terms {', '.join(lexical['terms']) or '–'}"
    if lexical.get("min_lexical_score") is not None:
        text += (f" · min_lexical_score {_num(lexical['min_lexical_score'])} removed "
                 f"{_num(lexical.get('removed_by_floor'))}")
    lines.append(text)
    diverse = answer.get("diversity") or {}
    if diverse.get("method") and diverse["method"] != "off":
        text = f"diversity: {diverse['method']} (duplicate cosine >= {_num(diverse.get('duplicate_similarity'), 2)}"
        if diverse.get("mmr_lambda") is not None:
            text += f", mmr_lambda {_num(diverse['mmr_lambda'], 2)}"
        lines.append(text + f") · {_num(diverse.get('collapsed'))} collapsed")
    elif diverse.get("method"):
        lines.append("diversity: off (duplicates kept)")
    lines.append(f"degraded: {answer.get('degradation') or 'lexical only'}" if answer.get("degraded")
                 else "degraded: no (both lanes)")
    return lines


def replay(
    ctx: typer.Context,
    receipt_id: Annotated[uuid.UUID, typer.Argument(help="The receipt's id (dna recall --receipt printed it).",
                                                    metavar="RECEIPT_ID", show_default=False)],
    query: Annotated[Optional[str], typer.Option(
        "--query", "-q", help="The query, when the receipt did not keep it (taken without --keep-query).",
        show_default=False)] = None,
    now: Annotated[Optional[str], typer.Option(
        "--now", help="Replay at this world time (ISO-8601) instead of the receipt's.", show_default=False)] = None,
    embedder: EmbedderOpt = EmbedderName.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print dna.replay's jsonb as is.")] = False,
) -> None:
    """Re-run a receipt's question (dna.replay) and say whether the answer is the same.

    The ids (kind, name, tenant, passage) are compared rank by rank: "match" when they are equal,
    else the first rank where they differ; the settings that changed since are named. --embedder
    auto embeds --query with the receipt's model. Nothing is stored; exit 0 either way (--json:
    ``match``).
    """
    at = parse_time(now, "--now")
    client, choice = open_client(ctx, embedder)
    try:
        if query is not None and embedder == EmbedderName.auto:
            _receipt_embedder(client, receipt_id)
        result = client.replay(receipt_id, query, now=at)
    finally:
        client.close()
    if as_json:
        echo_json(result)
        return
    out = stdout()
    then, now_ids = result.get("ids_then") or [], result.get("ids_now") or []
    head = f"receipt {result['receipt_id']} ({result['verb']} in scope {result['scope']}, taken {result['taken_at']})"
    out.print(Text(head), soft_wrap=True)
    if result.get("match"):
        same = "scores equal" if result.get("scores_match") else "scores differ"
        out.print(Text(f"match: the same {len(now_ids)} id{'s' if len(now_ids) != 1 else ''} in the same order "
                       f"({same})", style="green"), soft_wrap=True)
    else:
        diff = result.get("first_difference") or {}
        out.print(Text(f"no match: {len(then)} ids then, {len(now_ids)} now; first difference at rank "
                       f"{diff.get('rank')}: then {_id(diff.get('then'))}, now {_id(diff.get('now'))}",
                       style="yellow"), soft_wrap=True)
    for change in result.get("settings_changed") or []:
        out.print(Text(f"  setting {change['setting']}: {change['then']} -> {change['now']}", style="dim"),
                  soft_wrap=True)


def _id(entry: dict | None) -> str:
    if not entry:
        return "–"
    name = f"{entry.get('kind')}/{entry.get('name')}"
    if entry.get("tenant"):
        name += f" [tenant {entry['tenant']}]"
    if entry.get("passage"):
        name += f" #{entry['passage']}"
    return name


def _receipt_embedder(client, receipt_id: uuid.UUID) -> None:
    """``--embedder auto`` for a replay: the embedder of the receipt's model, when it is another one
    than auto's default and this package can build it (as a search of its scope would pick it)."""
    from pydna.embeddings.select import provider_for_model

    row = client.conn.execute("SELECT args ->> 'model_id' FROM dna.dna_search_receipts WHERE receipt_id = %s",
                              (str(receipt_id),)).fetchone()
    model = row[0] if row else None
    if model and (client.embedder is None or client.embedder.model_id != model):
        record = provider_for_model(model)
        if record is not None:
            client.embedder = record.provider


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
