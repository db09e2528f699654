"""``dna memory``: remember, recall, forget, revive, list, consolidate.

Mounted by ``pydna.cli`` as ``dna memory`` (helpers from ``pydna.cli_common``, never from ``pydna.cli``); the global ``--dsn`` / ``DNA_DATABASE_URL`` chooses the
database. Every command calls one SQL verb through ``Client.memory`` and prints either a short
readable report or, with ``--json``, the verb's jsonb unchanged.

    dna memory remember "always deep-copy before mutating" --area Feature/kernel --affect regret
    dna memory recall "mutating documents" -k 3
    dna memory forget rem-1a2b3c --superseded-by rem-4d5e6f
    dna memory revive rem-1a2b3c
    dna memory list --all
    dna memory consolidate --dry-run
"""
from __future__ import annotations

from typing import Annotated, Any, Callable, List, Optional

import typer

from pydna.cli_common import (FILTER_HELP, WHERE_HELP, CliError, announce_embedder, echo_json, open_client,
                              parse_filter, parse_json_object, parse_pairs, parse_time, require_scope)

memory_app = typer.Typer(
    help="Agent memory: remember, recall, forget, revive, list, consolidate (SQL verbs dna.*).",
    no_args_is_help=True,
)

ScopeOpt = Annotated[str, typer.Option("--scope", "-s", envvar="DNA_SCOPE", show_envvar=True,
                                       help="Scope (workspace) of the memories.")]
TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant overlay ('' = the shared base).")]
PersonalOpt = Annotated[bool, typer.Option(
    "--personal", help="Your personal memory (tenant personal:<oid>, resolved by the server from the connected "
                       "role; fails when the role has no identity).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the SQL verb's jsonb as is.")]
EmbedderOpt = Annotated[str, typer.Option(
    "--embedder", help="auto (ONNX all-MiniLM-L6-v2 when installed, else the fake), onnx, fake, or none "
                       "(lexical only: the query is not embedded; recall reads the rows of the scope's "
                       "model with the most documents). DNA_ONNX_COMPUTE=float32: ONNX in float32, "
                       "another model_id.")]
DEFAULT_SCOPE = "default"


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _error(message: str) -> Exception:
    return CliError(message)


def _client(ctx: typer.Context, embedder: str = "auto", as_json: bool = False, scope: str | None = None):
    """A client with the named embedder (``none``: no embedder; ``auto``: the scope's model when the
    scope has one); says which one, as ``dna recall`` does (on stderr under ``--json``)."""
    if embedder not in ("auto", "onnx", "fake", "none"):
        raise _error(f"unknown embedder {embedder!r}: use auto, onnx, fake or none")
    client, choice = open_client(ctx, embedder=None if embedder == "none" else embedder, scope=scope)
    if choice is not None:
        announce_embedder(choice, as_json)
    return client


def _run(ctx: typer.Context, embedder: str, as_json: bool, verb: Callable[[Any], dict],
         scope: str | None = None, empty: Callable[[dict], bool] | None = None) -> dict | None:
    """Call one memory verb, ``verb(client.memory)``, on a client opened with ``embedder`` (for
    ``scope``). With ``--json`` the verb's jsonb is printed as is and None is returned; otherwise the
    result, for the command's readable report. ``empty(result)`` true: the scope must exist
    (:func:`require_scope`: a typo'd scope exits 1 naming the nearest ones)."""
    with _client(ctx, embedder, as_json, scope) as client:
        result = verb(client.memory)
        if empty is not None and scope is not None and empty(result):
            require_scope(client.conn, scope)
    if as_json:
        echo_json(result)
        return None
    return result


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def parse_claim(text: str) -> dict[str, Any]:
    """``--claim [SUBJECT::]PREDICATE=[!]OBJECT`` → a claim (``pydna.claims.parse_claim``); a bad one exits 1."""
    from pydna.claims import parse_claim as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise _error(f"--{exc}") from None


def _short(text: Any, width: int = 70) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


@memory_app.command("remember")
def remember_cmd(
    ctx: typer.Context,
    summary: Annotated[str, typer.Argument(help="What to remember (an Engram's summary, at most 280 characters).")],
    area: Annotated[Optional[str], typer.Option("--area", help="Area, e.g. Feature/kernel.")] = None,
    affect: Annotated[Optional[str], typer.Option(
        "--affect", help="Affect: triumph, regret, surprise, wistful, ominous, neutral (default).")] = None,
    tag: Annotated[Optional[List[str]], typer.Option("--tag", help="A tag (repeatable; the first 5 become co_topics).")] = None,
    source_ref: Annotated[Optional[List[str]], typer.Option("--source-ref", help="A source reference, e.g. Kind/name (repeatable).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Name; default: a stable hash of the text.")] = None,
    kind: Annotated[str, typer.Option("--kind", help="Memory Kind: Engram, Research or Evidence.")] = "Engram",
    claim: Annotated[Optional[List[str]], typer.Option(
        "--claim", help="A claim [SUBJECT::]PREDICATE=[!]OBJECT (repeatable). Declare one only when a LATER value "
                        "of the same predicate would make this one false (a plan, a location, a status); "
                        "'!' denies; an empty object is an existence claim.")] = None,
    body: Annotated[Optional[str], typer.Option("--body", help="Longer text.")] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="Title.")] = None,
    metadata: Annotated[Optional[str], typer.Option(
        "--metadata", help="Metadata as a JSON object (spec.metadata: user, project, source...; filters read it).",
        show_default=False)] = None,
    meta: Annotated[Optional[List[str]], typer.Option(
        "--meta", help="KEY=VALUE of metadata (repeatable; JSON numbers, true, false, null as such), over --metadata.",
        show_default=False)] = None,
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    now: Annotated[Optional[str], typer.Option("--now", help="World time of the memory (ISO-8601; default now).")] = None,
    embedder: EmbedderOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Remember something (dna.remember): validated, stamped with its encoding context, indexed."""
    claims = [parse_claim(c) for c in claim] if claim else None
    given = {**(parse_json_object(metadata, "--metadata") or {}), **parse_pairs(meta, "--meta")}
    result = _run(ctx, embedder, as_json, lambda memory: memory.remember(
        scope, summary, kind=kind, name=name, tenant=tenant, personal=personal, now=parse_time(now, "--now"), area=area,
        affect=affect, tags=tag or None, source_refs=source_ref or None, claims=claims, title=title, body=body,
        metadata=given or None), scope=scope)
    if result is None:
        return
    spec = result["spec"]
    out = _console()
    out.print(f"{result['action']} {result['kind']}/{result['name']} in scope {scope}"
              f" · {spec.get('memory_type', '')} · indexed ({result['index'].get('action')}, "
              f"{'embedded' if result['index'].get('embedded') else 'lexical only'})")
    if result.get("embedding_error"):
        out.print(f"[yellow]embedding failed, indexed lexically: {result['embedding_error']}[/yellow]")


@memory_app.command("recall")
def recall_cmd(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The cue.")],
    k: Annotated[int, typer.Option("-k", "--k", help="How many memories.")] = 5,
    kind: Annotated[Optional[List[str]], typer.Option("--kind", help="Memory Kind (repeatable; default all).")] = None,
    no_reconsolidate: Annotated[bool, typer.Option(
        "--no-reconsolidate", help="Do not reinforce the surfaced memories (a pure read).")] = False,
    now: Annotated[Optional[str], typer.Option("--now", help="World time to read at (ISO-8601).")] = None,
    as_of: Annotated[Optional[str], typer.Option(
        "--as-of", help="Transaction time: what the system believed then (ISO-8601). Never writes.")] = None,
    actor: Annotated[Optional[str], typer.Option("--actor", help="Who asks (recorded in cues_history).")] = None,
    decay: Annotated[Optional[str], typer.Option(
        "--decay", help="surfaced (default: retention counts from when a memory last surfaced), written (from "
                        "when it was written, for one never surfaced) or off (no decay).", show_default=False)] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Show each memory's factors (retention, affect, ecphory, ...) and the answer's pool, "
                          "filters and degradations; --json: the server's explain as is.")] = False,
    receipt: Annotated[bool, typer.Option(
        "--receipt", help="Keep a receipt of the answer (dna.take_receipt; read-only: nothing is reinforced) and "
                          "print its id; `dna replay ID` re-runs it.")] = False,
    keep_query: Annotated[bool, typer.Option(
        "--keep-query", help="With --receipt: store the query text and embedding in the receipt.")] = False,
    min_similarity: Annotated[Optional[float], typer.Option(
        "--min-similarity", help="Dense floor: drop candidates whose cosine is below this (-1..1).",
        show_default=False)] = None,
    min_lexical_score: Annotated[Optional[float], typer.Option(
        "--min-lexical-score", help="Lexical floor: drop candidates whose BM25 score is below this (>= 0).",
        show_default=False)] = None,
    filter_json: Annotated[Optional[str], typer.Option("--filter", help=FILTER_HELP, show_default=False)] = None,
    where: Annotated[Optional[List[str]], typer.Option("--where", help=WHERE_HELP, show_default=False)] = None,
    context: Annotated[int, typer.Option(
        "--context", help="With each conversation turn, also show the N turns before and after it (0-20).")] = 0,
    offset: Annotated[int, typer.Option(
        "--offset", help="Skip this many ranks (offset + k at most 1000): --offset 5 -k 5 is ranks 6-10 of "
                         "the recall with -k 10.")] = 0,
    diversity: Annotated[Optional[str], typer.Option(
        "--diversity", help="collapse (default: a memory whose text is a near-duplicate of a higher-ranked one is "
                            "left out) or off.", show_default=False)] = None,
    duplicate_similarity: Annotated[Optional[float], typer.Option(
        "--duplicate-similarity", help="Cosine (0-1] at or above which two memories are duplicates (default 1: the text alone decides).",
        show_default=False)] = None,
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    embedder: EmbedderOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Recall memories (dna.recall): hybrid search, valid at --now, ranked by retention and affect.

    --decay and every other value go to dna.recall as they are: a bad one is refused by the server
    (one red line with its SQLSTATE and hint, exit 1)."""
    if keep_query and not receipt:
        raise _error("--keep-query keeps the query in a receipt: add --receipt")
    narrow = parse_filter(filter_json, where)
    result = _run(ctx, embedder, as_json, lambda memory: memory.recall(
        scope, query, k=k, kinds=kind or None, tenant=tenant, personal=personal, reconsolidate=not no_reconsolidate,
        actor=actor, now=parse_time(now, "--now"), as_of=parse_time(as_of, "--as-of"), decay=decay,
        explain=explain, receipt=receipt, keep_query=keep_query, min_similarity=min_similarity,
        min_lexical_score=min_lexical_score, filter=narrow, context=context, offset=offset, diversity=diversity,
        duplicate_similarity=duplicate_similarity), scope=scope,
        empty=lambda r: not r.get("hits"))
    if result is None:
        return
    out = _console()
    flags = ["semantic" if result.get("semantic") else "lexical only (degraded)" if result.get("degraded") else "lexical"]
    if result.get("as_of"):
        flags.append(f"as of {result['as_of']}")
    if result.get("decay") and result["decay"] != "surfaced":
        flags.append(f"decay {result['decay']}")
    for lane, key in (("dense", "removed_dense"), ("lexical", "removed_lexical")):
        removed = (result.get("floors") or {}).get(key)
        if removed:
            flags.append(f"{lane} floor removed {removed}")
    count = len(result["hits"])
    where = f" (ranks {offset + 1}-{offset + count})" if offset and count else ""
    out.print(f"{count} memor{'y' if count == 1 else 'ies'}{where} for {query!r} in {scope} · {' · '.join(flags)}",
              markup=False)
    if result.get("embedding_error"):
        out.print(f"embedding failed: {result['embedding_error']}", style="yellow", markup=False)
    for notice in result.get("notices") or []:
        out.print(notice, style="yellow", markup=False)
    if explain and isinstance(result.get("explain"), dict):
        for line in _explain_answer(result["explain"]):
            out.print(line, style="dim", markup=False)
    for i, hit in enumerate(result["hits"], offset + 1):
        retention = f" R={hit['retention']:.2f}" if "retention" in hit else ""
        affect = f" {hit['affect']}" if hit.get("affect") and hit.get("affect") != "neutral" else ""
        mine = " [personal]" if hit.get("personal") else ""
        said = f"{hit['title']}: " if hit.get("kind") == "Turn" and hit.get("title") else ""
        out.print(f"{i:>2}. {hit['score']:.4f} {hit['kind']}/{hit['name']}{mine}{retention}{affect}"
                  f"  {said}{_short(hit.get('summary') or hit.get('title') or hit.get('snippet'))}", markup=False)
        for rival in hit.get("contradicted_by") or []:
            claim = rival.get("claim") or {}
            said = f"{claim.get('predicate')} {'≠' if claim.get('polarity') == 'denies' else '='} {claim.get('object', '')}"
            out.print(f"      ⚡ contradicted by {rival['kind']}/{rival['name']} ({said.strip()}), recorded "
                      f"{rival.get('recorded_at')}", style="yellow", markup=False, highlight=False)
            out.print(f"      accept with: {(rival.get('accept') or {}).get('cli')}", style="dim", markup=False)
        for turn in hit.get("context") or []:
            out.print(f"      {turn.get('turn')}. {turn.get('speaker') or ''}: {_short(turn.get('text'))}",
                      style="dim", markup=False)
        if explain and isinstance(hit.get("explain"), dict):
            search = (f"search score {hit.get('search_score', '–')} (rank {hit.get('rank_search', '–')}: dense "
                      f"{hit.get('rank_dense') or '–'}, lexical {hit.get('rank_lexical') or '–'})")
            out.print(f"      {search} x memory factor {hit.get('memory_factor', '–')}", style="dim", markup=False)
            for part, values in hit["explain"].items():
                out.print(f"      {part}: {_pairs(values)}", style="dim", markup=False)
    for name in result.get("as_of_truncated") or []:
        out.print(f"[yellow]blind spot: the history of {name} was pruned past --as-of[/yellow]")
    if result.get("next_offset") is not None:
        out.print(f"next page: --offset {result['next_offset']}", style="dim", markup=False)
    if receipt:
        out.print(f"receipt: {result.get('receipt_id')}", markup=False)
        if not keep_query:
            import shlex

            out.print(f"replay with: dna replay {result.get('receipt_id')} --query {shlex.quote(query)}",
                      style="dim", markup=False)


def _pairs(values: Any) -> str:
    """A dict of explain values as ``key value · key value`` (nested dicts and lists inline)."""
    if not isinstance(values, dict):
        return str(values)
    shown = []
    for key, value in values.items():
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif value == "":
            value = "''"
        elif isinstance(value, dict):
            value = "{" + _pairs(value) + "}" if value else "none"      # nested: rounded like the rest
        elif isinstance(value, list):
            value = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value) if value else "none"
        shown.append(f"{key} {value}")
    return " · ".join(shown)


def _explain_answer(explain: dict) -> list[str]:
    """The lines ``--explain`` prints once per recall: its ranking, pool, filters and degradations."""
    lines = []
    if explain.get("ranking"):
        lines.append(f"ranking: {explain['ranking']}")
    for key, value in explain.items():
        if key in ("ranking", "degradations"):
            continue
        lines.append(f"{key}: {_pairs(value)}")
    lines.append(f"degradations: {', '.join(map(str, explain.get('degradations') or [])) or 'none'}")
    return lines


@memory_app.command("forget")
def forget_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The memory's name.")],
    superseded_by: Annotated[Optional[str], typer.Option("--superseded-by", help="The memory that replaces it.")] = None,
    kind: Annotated[str, typer.Option("--kind", help="Memory Kind.")] = "Engram",
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget a memory (dna.forget): closes its world-time window; never deletes; idempotent."""
    result = _run(ctx, "none", as_json, lambda memory: memory.forget(
        scope, name, superseded_by=superseded_by, kind=kind, tenant=tenant, personal=personal))
    if result is None:
        return
    state = "already forgotten" if result["already_forgotten"] else "forgotten"
    sup = f", superseded by {result['superseded_by']}" if result.get("superseded_by") else ""
    _console().print(f"{kind}/{name} {state} (valid_to {result['valid_to']}{sup})", markup=False)


@memory_app.command("get")
def get_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The memory's name.")],
    kind: Annotated[str, typer.Option("--kind", help="Memory Kind.")] = "Engram",
    now: Annotated[Optional[str], typer.Option("--now", help="World time to say whether it is in force (ISO-8601).")] = None,
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """One memory by name as it stands (dna.get_memory): its text, validity, latest version and who wrote it."""
    m = _run(ctx, "none", as_json, lambda memory: memory.get(scope, name, kind=kind, tenant=tenant, personal=personal,
                                                             now=parse_time(now, "--now")))
    if m is None:
        return
    out = _console()
    state = "in force" if m["in_force"] else "not in force"
    out.print(f"{m['kind']}/{m['name']} · {state} · valid {m['valid_from']} → {m['valid_to'] or 'open'}", markup=False)
    out.print(f"  {m['spec'].get('summary') or m['spec'].get('title') or ''}", markup=False)
    out.print(f"  version {m['version']} ({m['last_op']}) at {m['last_recorded_at']} by {m['last_recorded_by'] or 'unknown'}",
              markup=False)


@memory_app.command("history")
def history_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The memory's name.")],
    kind: Annotated[str, typer.Option("--kind", help="Memory Kind.")] = "Engram",
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Every version kept of one memory, oldest first (dna.memory_history): what each write did, when, who."""
    h = _run(ctx, "none", as_json, lambda memory: memory.history(scope, name, kind=kind, tenant=tenant,
                                                                 personal=personal))
    if h is None:
        return
    out = _console()
    out.print(f"{h['kind']}/{h['name']}: {len(h['versions'])} version{'s' if len(h['versions']) != 1 else ''}",
              markup=False)
    for v in h["versions"]:
        out.print(f"  {v['version']:>3}. {v['op']:<8} {v['recorded_at']} by {v['recorded_by'] or 'unknown'} · "
                  f"valid {v['valid_from']} → {v['valid_to'] or 'open'} · {_short(v.get('summary'))}", markup=False)


@memory_app.command("revive")
def revive_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The memory's name.")],
    revived_by: Annotated[Optional[str], typer.Option("--revived-by", help="Who or what revives it.")] = None,
    kind: Annotated[str, typer.Option("--kind", help="Memory Kind.")] = "Engram",
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Revive a forgotten memory (dna.revive): reopens its window, records the closed one."""
    result = _run(ctx, "none", as_json, lambda memory: memory.revive(
        scope, name, revived_by=revived_by, kind=kind, tenant=tenant, personal=personal))
    if result is None:
        return
    if result["already_in_force"]:
        _console().print(f"{kind}/{name} is already in force (nothing written)", markup=False)
    else:
        _console().print(f"{kind}/{name} revived (was valid until {result['revival']['valid_to']}; "
                         f"{result['revivals']} revival(s))", markup=False)


@memory_app.command("list")
def list_cmd(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Include forgotten memories.")] = False,
    kind: Annotated[Optional[List[str]], typer.Option("--kind", help="Memory Kind (repeatable; default all).")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (0-10000).")] = 100,
    offset: Annotated[int, typer.Option(
        "--offset", help="Skip this many, newest first (0-1000000): --offset 100 --limit 100 is the second page.")] = 0,
    filter_json: Annotated[Optional[str], typer.Option("--filter", help=FILTER_HELP, show_default=False)] = None,
    where: Annotated[Optional[List[str]], typer.Option("--where", help=WHERE_HELP, show_default=False)] = None,
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List memories (dna.list_memories), newest first; --filter / --where: only those whose metadata passes."""
    narrow = parse_filter(filter_json, where)
    result = _run(ctx, "none", as_json, lambda memory: memory.list(
        scope, kinds=kind or None, tenant=tenant, include_invalid=all_, limit=limit, personal=personal,
        filter=narrow, offset=offset), scope=scope, empty=lambda r: not r.get("total"))
    if result is None:
        return
    out = _console()
    total = result["total"]
    out.print(f"{total} memor{'y' if total == 1 else 'ies'} in {scope}{' (forgotten included)' if all_ else ''}",
              markup=False)
    for m in result["memories"]:
        mark = "" if m["valid"] else " [forgotten]"
        retention = f" R={m['retention']:.2f}" if "retention" in m else ""
        out.print(f"- {m['kind']}/{m['name']}{mark}{retention} {m.get('created_at', '')}  "
                  f"{_short(m.get('summary') or m.get('title'))}", markup=False)
    if offset or result.get("next_offset") is not None:
        shown = len(result["memories"])
        window = f"shown {offset + 1}-{offset + shown} of {total}" if shown else f"none past {offset} of {total}"
        out.print(window + (f"; next page: --offset {result['next_offset']}"
                            if result.get("next_offset") is not None else ""), style="dim", markup=False)


@memory_app.command("consolidate")
def consolidate_cmd(
    ctx: typer.Context,
    floor: Annotated[float, typer.Option("--floor", help="Stale below this retention.")] = 0.15,
    apply: Annotated[bool, typer.Option("--apply", help="Forget the stale memories (never deletes).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Write nothing; report actions, merge candidates and contradictions.")] = False,
    merge_floor: Annotated[float, typer.Option("--merge-floor", help="Jaccard floor of merge candidates.")] = 0.5,
    kind: Annotated[str, typer.Option("--kind", help="Memory Kind.")] = "Engram",
    now: Annotated[Optional[str], typer.Option("--now", help="World time of the pass (ISO-8601).")] = None,
    scope: ScopeOpt = DEFAULT_SCOPE,
    tenant: TenantOpt = "",
    personal: PersonalOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Consolidate (dna.consolidate): the decay pass; --dry-run previews merges and contradictions."""
    report = _run(ctx, "none", as_json, lambda memory: memory.consolidate(
        scope, kind=kind, tenant=tenant, personal=personal, stale_retention_floor=floor, apply=apply, dry_run=dry_run,
        merge_overlap_floor=merge_floor, now=parse_time(now, "--now")))
    if report is not None:
        print_consolidation(report)


def print_consolidation(report: dict) -> None:
    """The readable consolidation report (⚡ marks a contradiction)."""
    out = _console()
    head = f"evaluated {report['evaluated']} · stale {len(report['stale'])} · archived {report['archived']}"
    if report.get("dry_run"):
        head += " · dry run (nothing written)"
    elif report.get("applied"):
        head += " · applied"
    out.print(head)
    for s in report["stale"]:
        out.print(f"  stale {s['name']}: retention {s['retention']:.4f} after {s['days_since']}d "
                  f"(stability {s['stability_days']}d)", markup=False)
    for a in report.get("actions") or []:
        out.print(f"  {a['action']:<15} {a['name']}: {a['reason']}", markup=False)
    for group in report.get("merge_candidates") or []:
        best = max(group["pairs"], key=lambda p: p["overlap"]) if group.get("pairs") else {"overlap": 0, "shared_terms": []}
        how = "synthesized by the scribe" if group.get("synthesized") else group.get("strategy", "supersede")
        out.print(f"  merge? keep {group['canonical']} ← {', '.join(group['superseded'])} ({how}; overlap "
                  f"{best['overlap']:.2f}; shared: {', '.join(best['shared_terms'][:6])})", markup=False)
    for c in report.get("contradictions") or []:
        prop = c["proposal"]
        out.print(f"  ⚡ {c['subject']} · {c['predicate']}: {', '.join(c['names'])} — keep {prop['suggested_keep']}? "
                  f"(basis {prop['basis']}; awaiting confirmation)", markup=False)
        for command in (prop.get("accept") or {}).get("cli") or []:
            out.print(f"      accept with: {command}", style="dim", markup=False)
    for u in report.get("undecided") or []:
        out.print(f"  ? {u['referent']}: {', '.join(u['names'])} — {u['reason']}", markup=False)
