"""The REST door (``dna serve``): the memory verbs over HTTP, under the caller's database role.

Every request but ``/healthz`` carries ``Authorization: Bearer <API key>``. The door, connected as
its own login role through a psycopg_pool pool, runs the request in ONE transaction: it looks the
key up and switches to the key's role (``SET LOCAL ROLE``, :func:`pydna.doors.keys.enter_role`), then
calls the verb (:class:`pydna.doors.verbs.Verbs`). Row-level security, workspace membership and
personal memory are therefore the role's own, exactly as from psql, and an error rolls everything
back: nothing is partially written.

Statuses: 401 missing/unknown/revoked key; 403 SQLSTATE 42501 (no rights, not a member, no identity,
a crafted ``personal:`` tenant); 404 P0002 (no such memory); 405 ``DELETE /v1/memories/{name}``
(memories are never deleted: the body names ``POST /v1/memories/{name}/forget``); 404 a read (search,
recall, list) of a scope under which no row the caller can see stands, naming the nearest scopes
(``field: "scope"``; a write creates the scope; the door's default scope answers empty); 409 23001/23505;
422 bad input (a data exception from the database, class 22/23, with its SQLSTATE and message, or a
request that fails the schema — an unknown body field is named with the field meant, ``unknown field
'text' (did you mean 'summary'?)``, as an unknown query parameter is —, a NUL byte in any field, JSON nested past 32 levels: ``rest_guard``); 413 a
body over 1 MiB; 404 an unknown route; 503 40001/40P01 (retry), pool exhausted; 500 anything else. Errors are
``{"error": {"status", "sqlstate", "message", "detail"?, "hint"?}}``.
"""
from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional

import anyio.to_thread
import psycopg
from fastapi import Body, Depends, FastAPI, Path, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import BaseModel, ConfigDict, Field

from pydna import __version__
from pydna.client import Client
from pydna.doors import fields as f
from pydna.doors.keys import enter_role
from pydna.doors.rest_guard import RequestGuard
from pydna.doors.verbs import DoorError, Verbs, delete_refused, door_client, door_error, unknown_names_message
from pydna.embeddings.base import EmbeddingPort

log = logging.getLogger("pydna.doors.rest")

DEFAULT_SCOPE = "default"
ScopeOpt = Annotated[Optional[str], Field(
    description="The scope (a project or application namespace, 1-200 characters) of the call; omitted = the "
                "server's default scope (dna serve --scope).")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a typo (or an identity field) is a 422, not ignored


class SearchRequest(_Body):
    query: f.Query
    scope: ScopeOpt = None
    k: f.SearchK = 10
    kinds: f.DocKinds = None
    tenant: f.Tenant = ""
    personal: f.Personal = False
    name_prefix: f.NamePrefix = None
    valid_time: f.ValidTime = None
    include_retired: f.IncludeRetired = False
    filter: f.Filter = None
    offset: f.SearchOffset = 0
    diversity: f.Diversity = None
    duplicate_similarity: f.DuplicateSimilarity = None
    mmr_lambda: f.MmrLambda = None


class RememberRequest(_Body):
    summary: f.Summary = None
    scope: ScopeOpt = None
    kind: f.NewKind = "Engram"
    name: f.NewName = None
    tenant: f.Tenant = ""
    personal: f.Personal = False
    now: f.Now = None
    area: f.Area = None
    affect: f.Affect = None
    tags: f.Tags = None
    source_refs: f.SourceRefs = None
    claims: f.Claims = None
    title: f.Title = None
    body: f.Body = None
    metadata: f.Metadata = None


class RememberManyRequest(_Body):
    items: f.MemoryItems
    scope: ScopeOpt = None
    tenant: f.Tenant = ""
    personal: f.Personal = False
    atomic: f.Atomic = True


class ConversationRequest(_Body):
    turns: f.Turns
    scope: ScopeOpt = None
    session: f.Session = None
    sessions: f.Sessions = None
    tenant: f.Tenant = ""
    personal: f.Personal = False


class ForgetRequest(_Body):
    scope: ScopeOpt = None
    kind: f.Kind = "Engram"
    tenant: f.Tenant = ""
    personal: f.Personal = False
    superseded_by: f.SupersededBy = None
    now: f.Now = None


class ReviveRequest(_Body):
    scope: ScopeOpt = None
    kind: f.Kind = "Engram"
    tenant: f.Tenant = ""
    personal: f.Personal = False
    revived_by: f.RevivedBy = None
    now: f.Now = None


class ConsolidateRequest(_Body):
    scope: ScopeOpt = None
    kind: f.Kind = "Engram"
    tenant: f.Tenant = ""
    personal: f.Personal = False
    apply: f.Apply = False
    stale_retention_floor: f.StaleFloor = 0.15
    merge_overlap_floor: f.MergeFloor = 0.5
    now: f.Now = None


@dataclass
class DoorState:
    dsn: str
    embedder: EmbeddingPort | None
    scope: str
    pool: ConnectionPool | None = None
    template: Client | None = None  # the client each request's Verbs copies (pydna.doors.verbs.door_client)
    pool_timeout: float = 10.0


def filter_param(text: str | None) -> dict[str, Any] | None:
    """The ``filter`` query parameter (JSON text) as an object; 422 when it is not a JSON object. The
    database checks the language itself (22023 with a hint)."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise DoorError(422, f"filter: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise DoorError(422, f"filter: must be a JSON object, got {type(value).__name__}")
    return value


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)


_bearer = HTTPBearer(auto_error=False, description="An API key from dna.create_api_key, as 'Bearer <key>'.")
Credentials = Annotated[Optional[HTTPAuthorizationCredentials], Depends(_bearer)]


def refuse_unknown_query(request: Request) -> None:
    """Every route: a query parameter it does not take is refused by name (422), as an unknown body field
    is, never ignored (``?kinds=`` for ``?kind=`` would otherwise list every Kind): the message names the
    closest parameter it takes."""
    import difflib

    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    names: set[str] = set()
    stack = [dependant]
    while stack:                                  # the route's own parameters and its dependencies'
        d = stack.pop()
        names |= {p.alias for p in d.query_params}
        stack += d.dependencies
    known = sorted(names)
    unknown = sorted(set(request.query_params) - set(known))
    if unknown:
        parts = []
        for name in unknown:
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            parts.append(f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
        takes = ", ".join(known) if known else "no query parameters"
        raise DoorError(422, f"unknown query parameter{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
                             f"{request.method} {route.path} takes: {takes}", extra={"field": "query"})


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field's annotation (``Optional[M]``, ``list[M]``, ``Annotated[…]``)."""
    import typing

    stack = [annotation]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
        stack += [x for x in typing.get_args(a) if x is not type(None)]
    return None


def unknown_body_fields(request: Request, errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The error body of a request whose JSON body holds fields its model does not take
    (pydantic's ``extra_forbidden``): ``unknown field 'x' (did you mean 'y'?); POST /v1/search takes:
    …`` — each nearest name by spelling or by what other memory APIs call it
    (:func:`pydna.doors.verbs.nearest_name`), ``field`` the first one's path (``body.x``). A field of a
    nested object (``items[0]``) is named with its path and the fields that object takes."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    bodies = [p for p in getattr(dependant, "body_params", [])]
    root = _model_of(bodies[0].field_info.annotation) if bodies else None
    groups: dict[tuple, list[str]] = {}
    for e in errors:
        loc = tuple(e["loc"])
        groups.setdefault(loc[1:-1], []).append(str(loc[-1]))
    groups = {k: sorted(v) for k, v in groups.items()}
    parts, takes = [], []
    for path, names in groups.items():
        model = root
        for step in path:                            # walk the nested objects to the one that refused
            if model is None:
                break
            if isinstance(step, str):
                field = model.model_fields.get(step)
                model = _model_of(field.annotation) if field is not None else None
        known = sorted(model.model_fields) if model is not None else []
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in path).lstrip(".")
        parts.append(unknown_names_message("field", names, known) + (f" in {where}" if where else ""))
        takes.append(f"{where or 'the body'} takes: {', '.join(known) if known else '(nothing)'}")
    first = tuple(errors[0]["loc"])
    field = "body" + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in first[1:])
    method_path = f"{request.method} {getattr(route, 'path', request.url.path)}"
    return {"status": 422, "sqlstate": None, "message": f"{'; '.join(parts)}; {method_path}: {'; '.join(takes)}",
            "field": field, "errors": errors}


def create_app(dsn: str, embedder: EmbeddingPort | None, *, scope: str = DEFAULT_SCOPE, min_size: int = 1,
               max_size: int = 8, pool_timeout: float = 10.0) -> FastAPI:
    """The ASGI app. ``dsn``: the door's login role (it must be a member of every role its keys map to:
    ``GRANT alice TO dna_door``, and be granted ``dna.grant_door_role('dna_door')``); ``embedder``: the
    query/memory embedder (None: lexical only); ``scope``: the default scope of requests that name none;
    ``min_size``/``max_size``: the psycopg_pool pool. The pool opens, and the database's revision is
    checked, when the app starts (its lifespan)."""
    state = DoorState(dsn, embedder, scope, pool_timeout=pool_timeout)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool = ConnectionPool(dsn, min_size=min_size, max_size=max_size, kwargs={"autocommit": True},
                              configure=_configure, open=False, name="dna-serve")

        def start() -> None:
            pool.open(wait=True, timeout=30)
            with pool.connection() as conn:
                state.template = door_client(conn, embedder)  # checks the revision

        try:
            await anyio.to_thread.run_sync(start)
        except BaseException:
            pool.close()
            raise
        state.pool = pool
        try:
            yield
        finally:
            state.pool = None
            await anyio.to_thread.run_sync(pool.close)

    app = FastAPI(
        title="pydna REST door", version=__version__, lifespan=lifespan,
        dependencies=[Depends(refuse_unknown_query)],
        description="The memory verbs of pydna over HTTP. Each request runs its SQL in one transaction as the "
                    "database role its API key maps to (SET LOCAL ROLE), so row-level security and personal "
                    "memory are the role's own. Errors: {error: {status, sqlstate, message, detail?, hint?}}.")
    app.state.door = state
    app.add_middleware(RequestGuard)  # size, nesting and NUL bytes: refused before FastAPI parses anything

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # an unknown route (404) or method (405) answers in the door's error shape too
        message = {404: f"no such endpoint: {request.method} {request.url.path} (GET /openapi.json lists them)",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, str(exc.detail))
        return JSONResponse({"error": {"status": exc.status_code, "sqlstate": None, "message": message}},
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(DoorError)
    async def _door_error(request: Request, exc: DoorError) -> JSONResponse:
        headers = {}
        if exc.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        if exc.status == 503:
            headers["Retry-After"] = "1"
        if exc.status == 405:
            headers["Allow"] = ""  # no method deletes a memory; POST …/forget retires it
        body = exc.to_dict()
        body.pop("www_authenticate", None)
        return JSONResponse({"error": body}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = jsonable_encoder(exc.errors(), exclude={"input", "url"})
        extra = [e for e in errors if e.get("type") == "extra_forbidden" and e.get("loc")]
        if extra:  # an unknown body field: named, with the field meant, as an unknown query parameter is
            return JSONResponse({"error": unknown_body_fields(request, extra)}, status_code=422)
        message = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors)
        return JSONResponse({"error": {"status": 422, "sqlstate": None, "message": message, "errors": errors}},
                            status_code=422)

    def run(credentials: HTTPAuthorizationCredentials | None, verb: Callable[[Verbs], Any]) -> Any:
        """One request: a pooled connection, one transaction, the key's role, the verb."""
        pool = state.pool
        if pool is None:
            raise DoorError(503, "the server is starting or stopping")
        key = credentials.credentials if credentials is not None else None
        try:
            with pool.connection(timeout=state.pool_timeout) as conn:
                try:
                    with conn.transaction():
                        enter_role(conn, key)
                        return verb(Verbs(state.template, conn))
                except psycopg.Error as exc:
                    raise door_error(exc) from None
        except PoolTimeout:
            raise DoorError(503, f"no database connection free within {state.pool_timeout:g} s") from None

    def scope_of(scope: str | None) -> str:
        return state.scope if scope is None else scope

    def named(scope: str | None) -> bool:
        """Whether a read refuses ``scope`` when nothing stands under it: any scope but the door's default."""
        return scope is not None and scope != state.scope

    # -- endpoints ----------------------------------------------------------------------------

    @app.get("/healthz", tags=["operations"], summary="Liveness and database reachability (no key needed)")
    def healthz() -> dict[str, Any]:
        pool = state.pool
        if pool is None:
            raise DoorError(503, "the server is starting or stopping")
        try:
            with pool.connection(timeout=state.pool_timeout) as conn:
                revision = conn.execute("SELECT version_num FROM public.dna_alembic_version").fetchone()[0]
        except (psycopg.Error, PoolTimeout) as exc:
            raise DoorError(503, f"database unreachable: {type(exc).__name__}: {exc}") from None
        return {"status": "ok", "revision": revision, "version": __version__,
                "embedder": state.embedder.model_id if state.embedder is not None else None}

    @app.post("/v1/search", tags=["search"], summary="Hybrid search of documents and memories (dna.search)")
    def search(req: SearchRequest, credentials: Credentials) -> dict[str, Any]:
        return run(credentials, lambda v: v.search(
            scope_of(req.scope), req.query, k=req.k, kinds=req.kinds, tenant=req.tenant, personal=req.personal,
            name_prefix=req.name_prefix, valid_time=req.valid_time, include_retired=req.include_retired,
            filter=req.filter, offset=req.offset, diversity=req.diversity,
            duplicate_similarity=req.duplicate_similarity, mmr_lambda=req.mmr_lambda,
            refuse_missing_scope=named(req.scope)))

    @app.post("/v1/memories", tags=["memory"], summary="Remember (dna.remember)")
    def remember(req: RememberRequest, credentials: Credentials) -> dict[str, Any]:
        return run(credentials, lambda v: v.remember(
            scope_of(req.scope), summary=req.summary, kind=req.kind, name=req.name, tenant=req.tenant,
            personal=req.personal, now=req.now, area=req.area, affect=req.affect, tags=req.tags,
            source_refs=req.source_refs, claims=[c.as_spec() for c in req.claims] if req.claims else None,
            title=req.title, body=req.body, metadata=req.metadata))

    @app.post("/v1/memories/batch", tags=["memory"],
              summary="Remember many memories in one transaction (dna.remember_many); a result per item")
    def remember_many(req: RememberManyRequest, credentials: Credentials) -> dict[str, Any]:
        return run(credentials, lambda v: v.remember_many(
            scope_of(req.scope), [i.as_item() for i in req.items], tenant=req.tenant, personal=req.personal,
            atomic=req.atomic))

    @app.post("/v1/conversations/{conversation}/turns", tags=["memory"],
              summary="Remember a conversation's turns in one transaction (dna.remember_conversation)")
    def remember_conversation(conversation: Annotated[f.Conversation, Path()], req: ConversationRequest,
                              credentials: Credentials) -> dict[str, Any]:
        return run(credentials, lambda v: v.remember_conversation(
            scope_of(req.scope), conversation, [t.as_turn() for t in req.turns], session=req.session,
            sessions=req.sessions, tenant=req.tenant, personal=req.personal))

    @app.get("/v1/memories", tags=["memory"], summary="List memories, newest first (dna.list_memories)")
    def list_memories(
        credentials: Credentials,
        scope: Annotated[ScopeOpt, Query()] = None,
        kind: Annotated[Optional[list[f.MemoryKind]], Query(description=f.Kinds.__metadata__[0].description)] = None,
        tenant: Annotated[f.Tenant, Query()] = "",
        personal: Annotated[f.Personal, Query()] = False,
        include_forgotten: Annotated[f.IncludeForgotten, Query()] = False,
        now: Annotated[f.Now, Query()] = None,
        limit: Annotated[f.ListLimit, Query()] = 100,
        filter: Annotated[f.FilterJson, Query()] = None,
        offset: Annotated[f.ListOffset, Query()] = 0,
    ) -> dict[str, Any]:
        narrow = filter_param(filter)
        return run(credentials, lambda v: v.list_memories(
            scope_of(scope), kinds=kind, tenant=tenant, personal=personal, include_forgotten=include_forgotten,
            now=now, limit=limit, filter=narrow, offset=offset, refuse_missing_scope=named(scope)))

    @app.get("/v1/memories/search", tags=["memory"],
             summary="Recall memories (dna.recall); strengthens what it surfaces unless reconsolidate=false or as_of")
    def recall(
        credentials: Credentials,
        q: Annotated[f.Query, Query()],
        k: Annotated[f.RecallK, Query()] = 5,
        as_of: Annotated[f.AsOf, Query()] = None,
        now: Annotated[f.Now, Query()] = None,
        scope: Annotated[ScopeOpt, Query()] = None,
        kind: Annotated[Optional[list[f.MemoryKind]], Query(description=f.Kinds.__metadata__[0].description)] = None,
        tenant: Annotated[f.Tenant, Query()] = "",
        personal: Annotated[f.Personal, Query()] = False,
        reconsolidate: Annotated[f.Reconsolidate, Query()] = True,
        actor: Annotated[f.Actor, Query()] = None,
        filter: Annotated[f.FilterJson, Query()] = None,
        context: Annotated[f.Context, Query()] = 0,
        offset: Annotated[f.RecallOffset, Query()] = 0,
        diversity: Annotated[f.RecallDiversity, Query()] = None,
        duplicate_similarity: Annotated[f.DuplicateSimilarity, Query()] = None,
    ) -> dict[str, Any]:
        narrow = filter_param(filter)
        return run(credentials, lambda v: v.recall(
            scope_of(scope), q, k=k, kinds=kind, tenant=tenant, personal=personal, now=now, as_of=as_of,
            reconsolidate=reconsolidate, actor=actor, filter=narrow, context=context, offset=offset,
            diversity=diversity, duplicate_similarity=duplicate_similarity, refuse_missing_scope=named(scope)))

    @app.post("/v1/memories/{name}/forget", tags=["memory"],
              summary="Forget (dna.forget): close the memory's validity window; nothing is deleted; idempotent")
    def forget(name: Annotated[f.MemoryName, Path()], credentials: Credentials,
               req: Annotated[Optional[ForgetRequest], Body()] = None) -> dict[str, Any]:
        req = req or ForgetRequest()
        return run(credentials, lambda v: v.forget(
            scope_of(req.scope), name, kind=req.kind, tenant=req.tenant, personal=req.personal,
            superseded_by=req.superseded_by, now=req.now))

    @app.post("/v1/memories/{name}/revive", tags=["memory"],
              summary="Revive (dna.revive): reopen a forgotten memory; a memory in force is a no-op")
    def revive(name: Annotated[f.MemoryName, Path()], credentials: Credentials,
               req: Annotated[Optional[ReviveRequest], Body()] = None) -> dict[str, Any]:
        req = req or ReviveRequest()
        return run(credentials, lambda v: v.revive(
            scope_of(req.scope), name, kind=req.kind, tenant=req.tenant, personal=req.personal,
            revived_by=req.revived_by, now=req.now))

    @app.get("/v1/memories/{name}", tags=["memory"],
             summary="One memory by name as it stands (dna.get_memory); reinforces nothing")
    def get_memory(
        name: Annotated[f.MemoryName, Path()], credentials: Credentials,
        scope: Annotated[ScopeOpt, Query()] = None, kind: Annotated[f.Kind, Query()] = "Engram",
        tenant: Annotated[f.Tenant, Query()] = "", personal: Annotated[f.Personal, Query()] = False,
        now: Annotated[f.Now, Query()] = None,
    ) -> dict[str, Any]:
        return run(credentials, lambda v: v.get_memory(scope_of(scope), name, kind=kind, tenant=tenant,
                                                       personal=personal, now=now))

    @app.get("/v1/memories/{name}/history", tags=["memory"],
             summary="Every version kept of one memory, oldest first, with who wrote it (dna.memory_history)")
    def memory_history(
        name: Annotated[f.MemoryName, Path()], credentials: Credentials,
        scope: Annotated[ScopeOpt, Query()] = None, kind: Annotated[f.Kind, Query()] = "Engram",
        tenant: Annotated[f.Tenant, Query()] = "", personal: Annotated[f.Personal, Query()] = False,
    ) -> dict[str, Any]:
        return run(credentials, lambda v: v.memory_history(scope_of(scope), name, kind=kind, tenant=tenant,
                                                           personal=personal))

    @app.delete("/v1/memories/{name}", tags=["memory"], status_code=405,
                summary="Refused (405): memories are never deleted; use POST /v1/memories/{name}/forget",
                responses={405: {"description": "Always: the body names POST /v1/memories/{name}/forget."}})
    def delete(name: Annotated[f.MemoryName, Path()], credentials: Credentials) -> None:
        run(credentials, lambda v: None)  # the key is checked (401) like any request; nothing else runs
        raise delete_refused(name, f"POST /v1/memories/{name}/forget")

    @app.post("/v1/consolidate", tags=["memory"],
              summary="Consolidate (dna.consolidate): a dry run unless apply=true")
    def consolidate(credentials: Credentials,
                    req: Annotated[Optional[ConsolidateRequest], Body()] = None) -> dict[str, Any]:
        req = req or ConsolidateRequest()
        return run(credentials, lambda v: v.consolidate(
            scope_of(req.scope), kind=req.kind, tenant=req.tenant, personal=req.personal, apply=req.apply,
            stale_retention_floor=req.stale_retention_floor, merge_overlap_floor=req.merge_overlap_floor,
            now=req.now))

    return app


def serve(dsn: str, embedder: EmbeddingPort | None, *, host: str = "127.0.0.1", port: int = 8080,
          scope: str = DEFAULT_SCOPE, min_size: int = 1, max_size: int = 8, log_level: str = "info") -> None:
    """Run the app under uvicorn until interrupted."""
    import uvicorn

    app = create_app(dsn, embedder, scope=scope, min_size=min_size, max_size=max_size)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
