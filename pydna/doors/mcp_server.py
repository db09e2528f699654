"""The MCP door (``dna mcp``): the memory verbs as MCP tools, on the official ``mcp`` SDK.

Tools: ``search``, ``recall``, ``remember``, ``remember_many``, ``remember_conversation``, ``forget``, ``revive``, ``list_memories``,
``consolidate`` (a dry run unless ``apply``) — each calls one SQL verb through
:class:`pydna.doors.verbs.Verbs`, in one transaction — and ``delete_memory``, which is always refused
and names ``forget`` (memories are never deleted; the refusal points at a tool that exists).

Identity is the database role of the server's own connection (the DSN it was started with): a tool
never takes an identity, and ``personal: true`` is that role's personal memory, resolved by the
database. A database error comes back as a tool error (``is_error``) whose text starts with
``SQLSTATE <code>: <message>`` and whose structured content is ``{"error": {status, sqlstate,
message, detail?, hint?}}``. A read (search, recall, list_memories) of a scope under which no row the
role can see stands is a tool error naming the nearest scopes (status 404), unless it is the server's
default scope (``--scope``); a write (remember) creates its scope. An argument a tool does not take, or
a NUL byte in any string of an argument, is refused before the tool runs, by name (status 422, ``field``:
``unknown argument 'text' (did you mean 'summary'?); …``, ``argument 'query' holds a NUL byte …``). Embeddings are the client's: ONNX all-MiniLM-L6-v2 offline by default
(``--embedder`` as for the other commands).
"""
import logging
import sys
import threading
from typing import Annotated, Any, Callable, Optional

import psycopg
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pgvector.psycopg import register_vector
from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from pydna.doors import fields as f
from pydna.doors.verbs import (DoorError, Verbs, argument_refusal, delete_refused, door_client, door_error,
                               unknown_names_message)
from pydna.embeddings.base import EmbeddingPort

DEFAULT_SCOPE = "default"

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_RECALL = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class Door:
    """One database connection under the server's identity, shared by the tools (one call at a time)."""

    def __init__(self, dsn: str, embedder: EmbeddingPort | None):
        self.dsn = dsn
        self.embedder = embedder
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        conn = self.connection()
        self.template = door_client(conn, embedder)  # checks the revision
        self.role, self.identity, self.privileged = conn.execute(
            "SELECT current_user::text, dna.current_identity(), dna.privileged()").fetchone()

    def connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self.dsn, autocommit=True)
            register_vector(self._conn)
        return self._conn

    def call(self, verb: Callable[[Verbs], dict[str, Any]]) -> Any:
        """Run ``verb`` in one transaction; a database error becomes a tool error result."""
        with self._lock:
            conn = self.connection()
            try:
                with conn.transaction():
                    return verb(Verbs(self.template, conn))
            except psycopg.Error as exc:
                return tool_error(door_error(exc))
            except DoorError as err:          # a refusal of the door's own (a read of a scope that does not exist)
                return tool_error(err)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def tool_error(err: DoorError) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=err.one_line())],
                          structured_content={"error": err.to_dict()}, is_error=True)


def _instructions(door: Door, scope: str) -> str:
    who = f"database role {door.role}" + (f" (identity {door.identity})" if door.identity else " (no identity)")
    return (
        f"Long-term memory in PostgreSQL (pydna). You act as {who}; the database decides what you may read and "
        f"write. Memories live in scopes (default scope: {scope!r}). remember writes one; recall finds memories "
        "by meaning and words and strengthens what it surfaces; forget retires one (nothing is deleted; revive "
        "brings it back); list_memories lists; consolidate reviews decay, duplicates and contradictions (a dry "
        "run unless apply=true). personal=true uses your own private memory (only you can read it), "
        "otherwise the shared one (or a workspace you are a member of, via tenant). Two clocks: now = world "
        "time (what was true then), as_of = transaction time (what was believed then). A failed call returns "
        "'SQLSTATE <code>: <message>'; read the hint.")


def create_server(dsn: str, embedder: EmbeddingPort | None, *, scope: str = DEFAULT_SCOPE,
                  door: Door | None = None) -> tuple[MCPServer, Door]:
    """The MCP server and its :class:`Door` (the connection; ``dsn`` = the identity)."""
    door = door or Door(dsn, embedder)
    server = MCPServer("pydna", instructions=_instructions(door, scope), version=_version())

    def scope_of(value: str | None) -> str:
        return scope if value is None else value

    def named(value: str | None) -> bool:
        """Whether a read refuses ``value`` when nothing stands under it: any scope but the server's default."""
        return value is not None and value != scope

    OptScope = Annotated[Optional[str], Field(  # noqa: N806 - a type alias
        description=f"The scope (project namespace) of the memories, 1-200 characters; omitted = {scope!r}.")]

    @server.tool(annotations=_READ)
    def search(query: f.Query, scope: OptScope = None, k: f.SearchK = 10,
               kinds: f.DocKinds = None,
               tenant: f.Tenant = "", personal: f.Personal = False, valid_time: f.ValidTime = None,
               include_retired: f.IncludeRetired = False, filter: f.Filter = None,
               offset: f.SearchOffset = 0, diversity: f.Diversity = None,
               duplicate_similarity: f.DuplicateSimilarity = None, mmr_lambda: f.MmrLambda = None) -> dict[str, Any]:
        """Hybrid search (dna.search) over the documents and memories of a scope: ranked hits with score
        (RRF), similarity (cosine, -1..1), lexical_score (BM25), per-lane ranks and metadata; filter narrows
        by metadata; offset pages (next_offset: the next page's); near-duplicate hits are collapsed into the
        first (diversity). Does not write."""
        return door.call(lambda v: v.search(scope_of(scope), query, k=k, kinds=kinds, tenant=tenant,
                                            personal=personal, valid_time=valid_time,
                                            include_retired=include_retired, filter=filter, offset=offset,
                                            diversity=diversity, duplicate_similarity=duplicate_similarity,
                                            mmr_lambda=mmr_lambda, refuse_missing_scope=named(scope)))

    @server.tool(annotations=_RECALL)
    def recall(query: f.Query, scope: OptScope = None, k: f.RecallK = 5, kinds: f.Kinds = None,
               tenant: f.Tenant = "", personal: f.Personal = False, now: f.Now = None, as_of: f.AsOf = None,
               reconsolidate: f.Reconsolidate = True, filter: f.Filter = None,
               context: f.Context = 0, offset: f.RecallOffset = 0, diversity: f.RecallDiversity = None,
               duplicate_similarity: f.DuplicateSimilarity = None) -> dict[str, Any]:
        """Recall memories (dna.recall): the memories in force that best match the query, ranked by relevance,
        retention (forgetting curve) and affect; each hit has kind, name, score, summary, metadata and personal
        (true = from your personal memory); filter narrows by metadata (user, tags, dates, conversation, session,
        speaker...); context=n adds to each conversation turn the n turns around it; offset pages (next_offset:
        the next page's). Surfacing a memory strengthens it unless reconsolidate=false."""
        return door.call(lambda v: v.recall(scope_of(scope), query, k=k, kinds=kinds, tenant=tenant,
                                            personal=personal, now=now, as_of=as_of, reconsolidate=reconsolidate,
                                            filter=filter, context=context, offset=offset, diversity=diversity,
                                            duplicate_similarity=duplicate_similarity,
                                            refuse_missing_scope=named(scope)))

    @server.tool(annotations=_WRITE)
    def remember(summary: f.Summary = None, scope: OptScope = None, kind: f.NewKind = "Engram",
                 name: f.NewName = None, tenant: f.Tenant = "", personal: f.Personal = False, now: f.Now = None,
                 area: f.Area = None, affect: f.Affect = None, tags: f.Tags = None,
                 source_refs: f.SourceRefs = None, claims: f.Claims = None, title: f.Title = None,
                 body: f.Body = None, metadata: f.Metadata = None) -> dict[str, Any]:
        """Remember something (dna.remember): validated, stamped with its context, indexed for recall. Returns
        {kind, name, action: created|updated|unchanged, spec, ...}; keep the name to forget or revive it."""
        return door.call(lambda v: v.remember(
            scope_of(scope), summary=summary, kind=kind, name=name, tenant=tenant, personal=personal, now=now,
            area=area, affect=affect, tags=tags, source_refs=source_refs,
            claims=[c.as_spec() for c in claims] if claims else None, title=title, body=body, metadata=metadata))

    @server.tool(annotations=_WRITE)
    def remember_many(items: f.MemoryItems, scope: OptScope = None, tenant: f.Tenant = "",
                      personal: f.Personal = False, atomic: f.Atomic = True) -> dict[str, Any]:
        """Remember many memories in one call and one transaction (dna.remember_many): each item as remember
        takes it. Returns {count, created, updated, unchanged, failed, results: one per item in order, with
        its name or its error}. Use it instead of many remember calls."""
        return door.call(lambda v: v.remember_many(scope_of(scope), [i.as_item() for i in items], tenant=tenant,
                                                   personal=personal, atomic=atomic))

    @server.tool(annotations=_WRITE)
    def remember_conversation(conversation: f.Conversation, turns: f.Turns, scope: OptScope = None,
                              session: f.Session = None, sessions: f.Sessions = None, tenant: f.Tenant = "",
                              personal: f.Personal = False) -> dict[str, Any]:
        """Remember a conversation's turns in one call (dna.remember_conversation): send the messages as they
        were said; each turn becomes a memory that knows its conversation, session, speaker, time and the turns
        before it, and each session an episode. Re-sending the same turns changes nothing; a session's new
        turns are appended. Recall them with recall (filter {"conversation": ...}, context=n)."""
        return door.call(lambda v: v.remember_conversation(
            scope_of(scope), conversation, [t.as_turn() for t in turns], session=session, sessions=sessions,
            tenant=tenant, personal=personal))

    @server.tool(annotations=_WRITE)
    def forget(name: f.MemoryName, scope: OptScope = None, kind: f.Kind = "Engram", tenant: f.Tenant = "",
               personal: f.Personal = False, superseded_by: f.SupersededBy = None,
               now: f.Now = None) -> dict[str, Any]:
        """Forget a memory (dna.forget): closes its validity window at now, so recall and search no longer
        return it. Nothing is deleted (as_of reads still see it; revive reopens it). Idempotent."""
        return door.call(lambda v: v.forget(scope_of(scope), name, kind=kind, tenant=tenant, personal=personal,
                                            superseded_by=superseded_by, now=now))

    @server.tool(annotations=_WRITE)
    def revive(name: f.MemoryName, scope: OptScope = None, kind: f.Kind = "Engram", tenant: f.Tenant = "",
               personal: f.Personal = False, revived_by: f.RevivedBy = None, now: f.Now = None) -> dict[str, Any]:
        """Revive a forgotten memory (dna.revive): reopens its validity window and records the closed interval.
        A memory in force is left as it is (already_in_force: true)."""
        return door.call(lambda v: v.revive(scope_of(scope), name, kind=kind, tenant=tenant, personal=personal,
                                            revived_by=revived_by, now=now))

    @server.tool(annotations=_READ)
    def get_memory(name: f.MemoryName, scope: OptScope = None, kind: f.Kind = "Engram", tenant: f.Tenant = "",
                   personal: f.Personal = False, now: f.Now = None) -> dict[str, Any]:
        """One memory by name as it stands (dna.get_memory): {kind, name, spec, metadata, valid_from, valid_to,
        in_force, version, last_op, last_recorded_by, ...}. Does not write (nothing is reinforced)."""
        return door.call(lambda v: v.get_memory(scope_of(scope), name, kind=kind, tenant=tenant, personal=personal,
                                                now=now))

    @server.tool(annotations=_READ)
    def memory_history(name: f.MemoryName, scope: OptScope = None, kind: f.Kind = "Engram", tenant: f.Tenant = "",
                       personal: f.Personal = False) -> dict[str, Any]:
        """Every version kept of one memory, oldest first (dna.memory_history): {versions: [{version, op,
        recorded_at, recorded_by (who wrote it, e.g. who forgot it), valid_from, valid_to, summary, spec}]}."""
        return door.call(lambda v: v.memory_history(scope_of(scope), name, kind=kind, tenant=tenant,
                                                    personal=personal))

    @server.tool(annotations=_READ)
    def list_memories(scope: OptScope = None, kinds: f.Kinds = None, tenant: f.Tenant = "",
                      personal: f.Personal = False, include_forgotten: f.IncludeForgotten = False,
                      now: f.Now = None, limit: f.ListLimit = 100, filter: f.Filter = None,
                      offset: f.ListOffset = 0) -> dict[str, Any]:
        """List memories (dna.list_memories), newest first: {total, offset, next_offset, memories: [{kind, name,
        summary, valid, personal, created_at, metadata, ...}]}; filter narrows by metadata; offset pages (the
        next page starts at next_offset, null on the last). Does not write."""
        return door.call(lambda v: v.list_memories(scope_of(scope), kinds=kinds, tenant=tenant, personal=personal,
                                                   include_forgotten=include_forgotten, now=now, limit=limit,
                                                   filter=filter, offset=offset,
                                                   refuse_missing_scope=named(scope)))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False))
    def consolidate(scope: OptScope = None, kind: f.Kind = "Engram", tenant: f.Tenant = "",
                    personal: f.Personal = False, apply: f.Apply = False, stale_retention_floor: f.StaleFloor = 0.15,
                    merge_overlap_floor: f.MergeFloor = 0.5, now: f.Now = None) -> dict[str, Any]:
        """Consolidate (dna.consolidate): the decay pass. By default a dry run that writes nothing and reports
        stale memories, actions, merge candidates and contradictions between claims; apply=true forgets the
        stale ones (never deletes)."""
        return door.call(lambda v: v.consolidate(
            scope_of(scope), kind=kind, tenant=tenant, personal=personal, apply=apply,
            stale_retention_floor=stale_retention_floor, merge_overlap_floor=merge_overlap_floor, now=now))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False))
    def delete_memory(name: f.MemoryName, scope: OptScope = None) -> dict[str, Any]:
        """Always refused: memories are never deleted. Use forget instead (it retires the memory, and revive
        brings it back). Nothing runs in the database."""
        return tool_error(delete_refused(name, "the forget tool"))

    refuse_unknown_arguments(server)
    refuse_bad_arguments(server)
    return server, door


_log = logging.getLogger("pydna.doors.mcp")


def refuse_bad_arguments(server: MCPServer) -> None:
    """Every call is checked before its tool runs (:func:`pydna.doors.verbs.argument_refusal`): an unknown
    argument or a NUL byte in one is a tool error (status 422, ``field`` the argument) whose text is the
    refusal alone, as REST's; the log names the refused arguments, never their values. The strict argument
    models below stay as the schema's ``additionalProperties: false`` and a second guard."""
    known = {t.name: sorted(t.fn_metadata.arg_model.model_fields) for t in server._tool_manager.list_tools()}
    inner = server.call_tool

    async def call_tool(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name in known:
            refusal = argument_refusal(name, arguments or {}, known[name])
            if refusal is not None:
                _log.info("Tool %r rejected arguments: %r", name, sorted(k for k in (arguments or {})
                                                                       if k not in known[name]) or
                          [refusal.extra["field"]])
                return tool_error(refusal)
        return await inner(name, arguments, context)

    server.call_tool = call_tool  # what the SDK's tools/call handler awaits (self.call_tool)


def unknown_arguments_message(tool: str, unknown: list[str], known: list[str]) -> str:
    """``unknown argument 'text' (did you mean 'summary'?); remember takes: …`` — names each argument a
    call gave that the tool does not take, with the nearest known name (by spelling or by what other
    memory APIs call it: :func:`pydna.doors.verbs.nearest_name`)."""
    return f"{unknown_names_message('argument', unknown, known)}; {tool} takes: {', '.join(known)}. Nothing was done."


def refuse_unknown_arguments(server: MCPServer) -> None:
    """Every tool refuses arguments it does not take, by name, before anything runs (as the REST door's
    models do with ``extra="forbid"``): an ignored ``text`` would leave a memory without its summary, and a
    misspelt ``personal`` would write a private memory into the shared scope. The published input schema
    says ``additionalProperties: false``. The SDK builds each tool's argument model from its signature; the
    model is replaced by a subclass that forbids extra keys (``FuncMetadata.arg_model`` is read per call)."""
    for tool in server._tool_manager.list_tools():  # the SDK's registry of the @server.tool functions
        base = tool.fn_metadata.arg_model
        known = sorted(base.model_fields)

        def check(data: Any, _tool: str = tool.name, _known: list[str] = known) -> Any:
            if isinstance(data, dict):
                unknown = sorted(k for k in data if k not in _known)
                if unknown:
                    # One error located at each unknown argument (the SDK logs the locations: "rejected
                    # arguments: ['text']"), each carrying the whole refusal; the values are not shown.
                    message = unknown_arguments_message(_tool, unknown, _known)
                    raise ValidationError.from_exception_data(f"{_tool} arguments", [
                        InitErrorDetails(type=PydanticCustomError("unknown_argument", "{message}",
                                                                  {"message": message}),
                                         loc=(name,), input=None) for name in unknown], hide_input=True)
            return data

        strict = type(f"{base.__name__}Strict", (base,), {
            "model_config": ConfigDict(**base.model_config, extra="forbid"),
            "__module__": __name__,
            "_known_only": model_validator(mode="before")(classmethod(lambda cls, data, _c=check: _c(data))),
        })
        tool.fn_metadata.arg_model = strict
        tool.parameters["additionalProperties"] = False


def _version() -> str:
    from pydna import __version__

    return __version__


def run(dsn: str, embedder: EmbeddingPort | None, *, scope: str = DEFAULT_SCOPE, http: bool = False,
        host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve over stdio (default) or streamable HTTP at ``http://host:port/mcp`` until stopped."""
    server, door = create_server(dsn, embedder, scope=scope)
    note = (f"dna mcp: role {door.role}, identity {door.identity or '(none)'}, scope {scope!r}, "
            f"embedder {embedder.model_id if embedder is not None else 'none (lexical only)'}")
    print(note, file=sys.stderr, flush=True)
    if door.privileged:
        print("dna mcp: warning: this role is a superuser or has BYPASSRLS: row-level security does not apply "
              "to it (outside the privacy model); connect as an application role", file=sys.stderr, flush=True)
    try:
        if http:
            print(f"dna mcp: streamable HTTP on http://{host}:{port}/mcp (no authentication: every client acts as "
                  f"role {door.role})", file=sys.stderr, flush=True)
            server.run("streamable-http", host=host, port=port)
        else:
            server.run("stdio")
    finally:
        door.close()
