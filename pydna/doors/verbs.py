"""The verbs both doors call: one SQL verb function each, with the client's embeddings.

``Verbs(conn, embedder)`` wraps a connection that a door has already placed under the caller's
identity (MCP: the server's own connection; REST: a pooled connection inside the request's
transaction, after ``SET LOCAL ROLE``). Each method calls the same SQL function as the Python
client and the CLI (``dna.search``, ``dna.recall``, ``dna.remember``, ``dna.forget``,
``dna.revive``, ``dna.list_memories``, ``dna.consolidate``) through :class:`pydna.client.Client`
and :class:`pydna.memory.Memory`, and returns JSON-ready data. Besides the verb, a call may run
what the client's embedding needs: ``dna.memory_text`` (the text ``remember`` embeds) and, once per
process and model, ``dna.register_model``.

Database errors become :class:`DoorError` (:func:`door_error`): the SQLSTATE, the server's message,
detail and hint, and the HTTP status the REST door answers with.
"""
from __future__ import annotations

import copy
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import psycopg

from pydna.client import Client
from pydna.embeddings.base import EmbeddingPort, embed_for
from pydna.memory import Memory, _vector
from pydna.sqlcalls import register_embedder

#: Memory Kinds (dna.recallable_kinds()).
MEMORY_KINDS = ("Engram", "Research", "Evidence", "Turn", "Episode")

#: HTTP status per SQLSTATE class or code (REST door). Unlisted: 500.
_STATUS_BY_CODE = {
    "42501": 403,  # insufficient_privilege: no rights, not a member, no identity, reserved tenant
    "P0002": 404,  # no_data_found: no such memory (dna.forget, dna.revive)
    "23001": 409,  # restrict_violation: a refused delete (names dna.forget)
    "23505": 409,  # unique_violation
    "40001": 503,  # serialization_failure: nothing was done, retry
    "40P01": 503,  # deadlock_detected: nothing was done, retry
    "57014": 503,  # query_canceled (statement timeout)
}
_STATUS_BY_CLASS = {"22": 422, "23": 422, "08": 503, "53": 503, "57": 503}


class DoorError(Exception):
    """A refusal or failure a door reports: HTTP ``status`` (REST), the ``sqlstate`` when it came
    from the database, the server's ``message`` and its ``detail`` and ``hint``."""

    def __init__(self, status: int, message: str, *, sqlstate: str | None = None, hint: str | None = None,
                 detail: str | None = None, extra: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.sqlstate = sqlstate
        self.hint = hint
        self.detail = detail
        self.extra = dict(extra or {})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "sqlstate": self.sqlstate, "message": self.message}
        if self.detail:
            out["detail"] = self.detail
        if self.hint:
            out["hint"] = self.hint
        out.update(self.extra)
        return out

    def one_line(self) -> str:
        """``SQLSTATE 42501: message (detail: …; hint: …)`` — what the MCP door shows the model."""
        head = f"SQLSTATE {self.sqlstate}: {self.message}" if self.sqlstate else self.message
        tail = "; ".join(f"{k}: {v}" for k, v in (("detail", self.detail), ("hint", self.hint)) if v)
        return f"{head} ({tail})" if tail else head


def status_for(sqlstate: str | None) -> int:
    """The HTTP status the REST door answers a database error ``sqlstate`` with."""
    if not sqlstate:
        return 500
    return _STATUS_BY_CODE.get(sqlstate) or _STATUS_BY_CLASS.get(sqlstate[:2], 500)


def door_error(exc: psycopg.Error) -> DoorError:
    """A psycopg error as a :class:`DoorError` carrying its SQLSTATE, message, detail and hint."""
    diag = exc.diag
    message = " ".join((diag.message_primary or str(exc) or type(exc).__name__).split())
    return DoorError(status_for(exc.sqlstate), message, sqlstate=exc.sqlstate, hint=diag.message_hint,
                     detail=diag.message_detail)


def delete_refused(name: str, forget: str) -> DoorError:
    """The answer to a delete of memory ``name`` at a door: memories are never deleted; ``forget``
    names that door's forget (the REST path or the MCP tool), which is open."""
    return DoorError(405, f"memories are never deleted: retire {name!r} with {forget} (it closes the memory's "
                          f"validity window, nothing is lost; revive reopens it)",
                     extra={"refused": "delete", "use": forget})


# Names other memory APIs give these arguments (mem0, Zep, Letta): a refusal's hint names ours.
SYNONYMS = {"text": "summary", "content": "summary", "memory": "summary", "message": "summary",
            "q": "query", "limit": "k", "top_k": "k", "id": "name", "memory_id": "name", "private": "personal",
            "skip": "offset", "start": "offset", "cursor": "offset", "page_offset": "offset",
            "memories": "items", "messages": "turns"}  # a batch's list (remember_many), a conversation's


def nearest_name(name: str, known: Sequence[str]) -> str | None:
    """The argument or field of ``known`` meant by ``name``: what other memory APIs call it
    (:data:`SYNONYMS`), else the closest spelling (difflib, cutoff 0.6); None when nothing is close."""
    import difflib

    if SYNONYMS.get(name) in known:
        return SYNONYMS[name]
    near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return near[0] if near else None


def nul_field(value: Any, path: str = "body") -> str | None:
    """The dotted path of the first string (or key) of a parsed JSON value holding U+0000, or None."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return p
        elif isinstance(v, dict):
            for k, x in v.items():
                if "\x00" in k:
                    return p
                stack.append((x, f"{p}.{k}"))
        elif isinstance(v, list):
            stack.extend((x, f"{p}[{i}]") for i, x in enumerate(v))
    return None


def argument_refusal(tool: str, arguments: Mapping[str, Any], known: Sequence[str]) -> DoorError | None:
    """What the MCP door refuses before a tool runs, as REST refuses a body (422, ``field`` names the
    argument): an argument the tool does not take (``unknown argument 'text' (did you mean 'summary'?);
    remember takes: …``), and a NUL byte in any string of an argument (``argument 'query' holds a NUL byte
    (U+0000), which text cannot contain``: PostgreSQL text cannot hold it). None when the call may run."""
    unknown = sorted(k for k in arguments if k not in known)
    if unknown:
        return DoorError(422, f"{unknown_names_message('argument', unknown, known)}; {tool} takes: "
                              f"{', '.join(known)}. Nothing was done.", extra={"field": unknown[0]})
    for name, value in arguments.items():
        where = nul_field(value, name)
        if where is not None:
            return DoorError(422, f"argument {where!r} holds a NUL byte (U+0000), which text cannot contain. "
                                  "Nothing was done.", extra={"field": where})
    return None


def unknown_names_message(what: str, unknown: Sequence[str], known: Sequence[str]) -> str:
    """``unknown field 'x' (did you mean 'y'?)`` for each of ``unknown`` (``what``: "field", "argument")."""
    parts = []
    for name in unknown:
        near = nearest_name(name, known)
        parts.append(f"{name!r}" + (f" (did you mean {near!r}?)" if near else ""))
    return f"unknown {what}{'s' if len(unknown) > 1 else ''} {', '.join(parts)}"


def missing_scope(conn: psycopg.Connection, scope: str) -> None:
    """A read of a scope under which no row the caller can see stands (``dna.scope_exists``) is refused:
    most often a typo. :class:`DoorError` 404 naming the nearest scopes (``dna.nearest_scopes_text``), as
    ``dna search`` exits 1 (:func:`pydna.cli_common.require_scope`). Called only when a read's answer is
    empty, so a scope with rows costs nothing; writes (remember into a new scope) never call it, nor a
    read of the door's default scope (``--scope``: empty on a fresh install, not a typo)."""
    exists, nearest = conn.execute("SELECT dna.scope_exists(%s), dna.nearest_scopes_text(%s, 3)",
                                   (scope, scope)).fetchone()
    if not exists:
        raise DoorError(404, f"scope {scope!r} has no documents or memories you can see; nearest scopes: {nearest}",
                        hint="a read names a scope that exists (`dna scopes` lists them); a write (remember) "
                             "creates one", extra={"field": "scope"})


def utc(value: datetime | None) -> datetime | None:
    """A timestamp with its zone; a naive one is UTC (as the CLI reads them)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=timezone.utc)


#: model_ids this process has registered (dna.register_model is idempotent; rows are never removed).
_registered: set[tuple[str, int]] = set()


def door_client(conn: psycopg.Connection, embedder: EmbeddingPort | None) -> Client:
    """The door's template :class:`Client`, built once at start on ``conn``: it checks the database's
    revision (``NotMigratedError``) and registers the vector type. :class:`Verbs` copies it onto each
    request's connection, so nothing is checked again per request."""
    return Client(conn, embedder)


class DoorMemory(Memory):
    """:class:`Memory` whose query embedding lets database errors through: a door's call runs inside
    one transaction, where a swallowed error (say, a role without rights failing dna.register_model)
    would leave the transaction aborted and hide the real SQLSTATE. An embedder failure still
    degrades the call to lexical, reported in ``embedding_error``."""

    def _embed(self, text: str, purpose: str) -> tuple[Any, str | None]:
        embedder = self.client.embedder
        if embedder is None or not text or not text.strip():
            return None, None
        model = (embedder.model_id, embedder.dims)
        if model not in _registered:
            register_embedder(self.conn, embedder)
            _registered.add(model)
        try:
            return _vector(embed_for(embedder, [text], purpose)[0]), None
        except Exception as exc:  # honest degradation: lexical only, the answer says why
            return None, f"{type(exc).__name__}: {exc}"


def _kinds(kinds: str | Sequence[str] | None) -> list[str] | None:
    if kinds is None or isinstance(kinds, str):
        return [kinds] if kinds else None
    return list(kinds) or None


class Verbs:
    """The memory verbs on ``conn`` (already under the caller's identity, with the vector type
    registered), with the embedder and settings of the door's template client (:func:`door_client`)."""

    def __init__(self, template: Client, conn: psycopg.Connection):
        self.client = copy.copy(template)
        self.client.conn = conn
        self.memory = DoorMemory(self.client)

    def search(self, scope: str, query: str, *, k: int = 10, kinds: Sequence[str] | None = None, tenant: str = "",
               personal: bool = False, name_prefix: str | None = None, valid_time: datetime | None = None,
               include_retired: bool = False, filter: Mapping[str, Any] | None = None,
               offset: int = 0, diversity: str | None = None, duplicate_similarity: float | None = None,
               mmr_lambda: float | None = None, refuse_missing_scope: bool = True) -> dict[str, Any]:
        """``dna.search``: hybrid search of documents and memories in a scope; ``offset``: ranks offset+1 ..
        offset+k of one ranking; an empty answer in a scope that does not exist is refused (404,
        :func:`missing_scope`) unless ``refuse_missing_scope`` is false (the door's default scope).
        ``next_offset``: offset + k when the page is full (the next page may be
        empty), else None."""
        from pydna.memory import DEFAULT_MODEL_ID

        model = self.client.embedder.model_id if self.client.embedder is not None else DEFAULT_MODEL_ID
        result = self.client.search(scope, query, kind=_kinds(kinds), k=k, tenant=tenant, personal=personal,
                                    name_prefix=name_prefix, valid_time=utc(valid_time),
                                    include_retired=include_retired, model_id=model, filter=filter, offset=offset,
                                    diversity=diversity, duplicate_similarity=duplicate_similarity,
                                    mmr_lambda=mmr_lambda)
        if not result.hits and refuse_missing_scope:
            missing_scope(self.client.conn, scope)
        out: dict[str, Any] = {"hits": [asdict(h) for h in result.hits], "degraded": result.degraded,
                               "model_id": result.model_id, "offset": offset,
                               "next_offset": offset + k if k and len(result.hits) == k and offset + k <= 9000
                               else None}
        if result.error:
            out["embedding_error"] = result.error
        if result.notices:
            out["notices"] = list(dict.fromkeys(result.notices))
        return out

    def recall(self, scope: str, query: str, *, k: int = 5, kinds: Sequence[str] | None = None, tenant: str = "",
               personal: bool = False, now: datetime | None = None, as_of: datetime | None = None,
               reconsolidate: bool = True, actor: str | None = None,
               filter: Mapping[str, Any] | None = None, context: int = 0, offset: int = 0,
               diversity: str | None = None, duplicate_similarity: float | None = None,
               refuse_missing_scope: bool = True) -> dict[str, Any]:
        """``dna.recall`` (``offset``: ranks offset+1 .. offset+k; the answer says ``next_offset``); an
        empty answer in a scope that does not exist is refused as :meth:`search`'s."""
        out = self.memory.recall(scope, query, k=k, kinds=_kinds(kinds), tenant=tenant, personal=personal,
                                  now=utc(now), as_of=utc(as_of), reconsolidate=reconsolidate, actor=actor,
                                  filter=filter, context=context, offset=offset, diversity=diversity,
                                  duplicate_similarity=duplicate_similarity)
        if not out.get("hits") and refuse_missing_scope:
            missing_scope(self.client.conn, scope)
        return out

    def remember(self, scope: str, *, summary: str | None = None, kind: str = "Engram", name: str | None = None,
                 tenant: str = "", personal: bool = False, now: datetime | None = None, area: str | None = None,
                 affect: str | None = None, tags: Sequence[str] | None = None,
                 source_refs: Sequence[str] | None = None, claims: Sequence[Mapping[str, Any]] | None = None,
                 title: str | None = None, body: str | None = None,
                 spec: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``dna.remember`` (after ``dna.memory_text``, the text it embeds)."""
        return self.memory.remember(scope, summary, spec=spec, kind=kind, name=name, tenant=tenant, now=utc(now),
                                    area=area, affect=affect, tags=tags, source_refs=source_refs, claims=claims,
                                    title=title, body=body, personal=personal, metadata=metadata)

    def remember_many(self, scope: str, items: Sequence[Mapping[str, Any]], *, tenant: str = "",
                      personal: bool = False, atomic: bool = True) -> dict[str, Any]:
        """``dna.remember_many`` (after ``dna.memory_text`` of every item, the texts it embeds in one call)."""
        return self.memory.remember_many(scope, [{k: utc(v) if isinstance(v, datetime) else v for k, v in item.items()}
                                                 for item in items],
                                         tenant=tenant, personal=personal, atomic=atomic)

    def remember_conversation(self, scope: str, conversation: str, turns: Sequence[Mapping[str, Any]], *,
                              session: str | None = None, sessions: Mapping[str, Any] | None = None,
                              tenant: str = "", personal: bool = False) -> dict[str, Any]:
        """``dna.remember_conversation`` (after ``dna.conversation_plan``, the texts it embeds in one call)."""
        return self.memory.remember_conversation(
            scope, conversation, [{k: utc(v) if isinstance(v, datetime) else v for k, v in t.items()} for t in turns],
            session=session, sessions={k: utc(v) if isinstance(v, datetime) else v for k, v in (sessions or {}).items()}
            if sessions is not None else None, tenant=tenant, personal=personal)

    def forget(self, scope: str, name: str, *, kind: str = "Engram", tenant: str = "", personal: bool = False,
               superseded_by: str | None = None, now: datetime | None = None) -> dict[str, Any]:
        """``dna.forget``."""
        return self.memory.forget(scope, name, superseded_by=superseded_by, kind=kind, tenant=tenant,
                                  now=utc(now), personal=personal)

    def revive(self, scope: str, name: str, *, kind: str = "Engram", tenant: str = "", personal: bool = False,
               revived_by: str | None = None, now: datetime | None = None) -> dict[str, Any]:
        """``dna.revive``."""
        return self.memory.revive(scope, name, revived_by=revived_by, kind=kind, tenant=tenant, now=utc(now),
                                  personal=personal)

    def get_memory(self, scope: str, name: str, *, kind: str = "Engram", tenant: str = "", personal: bool = False,
                   now: datetime | None = None) -> dict[str, Any]:
        return self.memory.get(scope, name, kind=kind, tenant=tenant, personal=personal, now=utc(now))

    def memory_history(self, scope: str, name: str, *, kind: str = "Engram", tenant: str = "",
                       personal: bool = False) -> dict[str, Any]:
        return self.memory.history(scope, name, kind=kind, tenant=tenant, personal=personal)

    def list_memories(self, scope: str, *, kinds: Sequence[str] | None = None, tenant: str = "",
                      personal: bool = False, include_forgotten: bool = False, now: datetime | None = None,
                      limit: int = 100, filter: Mapping[str, Any] | None = None, offset: int = 0,
                      refuse_missing_scope: bool = True) -> dict[str, Any]:
        """``dna.list_memories`` (``offset``: skip that many; the answer says ``next_offset``); an empty
        answer in a scope that does not exist is refused as :meth:`search`'s."""
        out = self.memory.list(scope, kinds=_kinds(kinds), tenant=tenant, include_invalid=include_forgotten,
                               now=utc(now), limit=limit, personal=personal, filter=filter, offset=offset)
        if not out.get("memories") and refuse_missing_scope:
            missing_scope(self.client.conn, scope)
        return out

    def consolidate(self, scope: str, *, kind: str = "Engram", tenant: str = "", personal: bool = False,
                    apply: bool = False, stale_retention_floor: float = 0.15, merge_overlap_floor: float = 0.5,
                    now: datetime | None = None) -> dict[str, Any]:
        """``dna.consolidate``: a dry run (writes nothing, reports actions, merge candidates and
        contradictions) unless ``apply``, which forgets the stale memories."""
        return self.memory.consolidate(scope, kind=kind, tenant=tenant, personal=personal, apply=apply,
                                       dry_run=not apply, stale_retention_floor=stale_retention_floor,
                                       merge_overlap_floor=merge_overlap_floor, now=utc(now))
