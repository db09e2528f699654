"""What the REST door refuses before a request reaches FastAPI: a body over the size limit (413), JSON
nested deeper than a request needs or not parseable (422), and a NUL byte in the path, a query
parameter or any string of a JSON body (422 naming the field: PostgreSQL text cannot hold NUL, and the
driver's refusal was an unnamed 500). Each answer has the door's error shape
``{"error": {"status", "sqlstate": null, "message", "field"?}}``; nothing runs in the database.

A pure ASGI middleware (Starlette's), so the body is read once, bounded as it streams in, and handed on
unchanged to the app.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, unquote_to_bytes

from pydna.doors.verbs import nul_field  # shared with the MCP door's argument check

MAX_BODY_BYTES = 1 << 20   # 1 MiB: the largest request a verb takes (10,000-character query, 280-character
                           # summary, a body of text) is far below it
MAX_DEPTH = 32             # nesting of a JSON body; the deepest request model nests 3 levels


class Refusal(Exception):
    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field

    def body(self) -> bytes:
        err: dict[str, Any] = {"status": self.status, "sqlstate": None, "message": self.message}
        if self.field is not None:
            err["field"] = self.field
        return json.dumps({"error": err}).encode()


def json_depth_exceeds(raw: bytes, limit: int) -> bool:
    """Whether the nesting of ``[``/``{`` outside strings passes ``limit`` (checked before parsing, so a
    50,000-deep body never reaches the recursive parser)."""
    depth = 0
    in_string = escaped = False
    for b in raw:
        if in_string:
            if escaped:
                escaped = False
            elif b == 0x5C:        # backslash
                escaped = True
            elif b == 0x22:        # closing quote
                in_string = False
        elif b == 0x22:
            in_string = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif b in (0x5D, 0x7D):
            depth -= 1
    return False


def check_target(path: str, raw_path: bytes | None, query: bytes) -> None:
    """A NUL byte in the path (raw or %00) or in a query parameter's name or value: 422 naming it."""
    if "\x00" in path or b"%00" in (raw_path or b"") or b"\x00" in (raw_path or b""):
        raise Refusal(422, "the path holds a NUL byte (U+0000), which no name can contain", "path")
    if b"%00" in query or b"\x00" in query:
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if "\x00" in name or "\x00" in value:
                field = unquote_to_bytes(name).decode("utf-8", "replace").replace("\x00", "\\u0000")
                raise Refusal(422, f"query parameter {field} holds a NUL byte (U+0000), which text cannot contain",
                              f"query.{field}")
        raise Refusal(422, "the query string holds a NUL byte (U+0000)", "query")


def check_body(raw: bytes, content_type: str) -> None:
    """A JSON body nested past MAX_DEPTH, not JSON, or holding a NUL in a string: 422."""
    if not raw or "json" not in content_type:
        return
    if json_depth_exceeds(raw, MAX_DEPTH):
        raise Refusal(422, f"the JSON body is nested deeper than {MAX_DEPTH} levels", "body")
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise Refusal(422, f"the body is not valid JSON: {exc}", "body") from None
    where = nul_field(parsed)
    if where is not None:
        raise Refusal(422, f"{where} holds a NUL byte (U+0000), which text cannot contain", where)


class RequestGuard:
    """ASGI middleware: refuses the requests above before the app runs; passes every other one on with
    its body as received."""

    def __init__(self, app, max_body: int = MAX_BODY_BYTES):
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        try:
            check_target(scope.get("path", ""), scope.get("raw_path"), scope.get("query_string", b""))
            declared = headers.get(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_body:
                raise Refusal(413, f"the body is {int(declared):,} bytes; a request takes at most {self.max_body:,}")
            chunks: list[bytes] = []
            size = 0
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    raise Refusal(413, f"the body passes {self.max_body:,} bytes, the most a request takes")
                chunks.append(chunk)
                more = message.get("more_body", False)
            raw = b"".join(chunks)
            check_body(raw, headers.get(b"content-type", b"").decode("latin-1"))
        except Refusal as refusal:
            await _answer(send, refusal)
            return

        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()       # after the body: the client's disconnect, as Starlette waits for it
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await self.app(scope, replay, send)


async def _answer(send, refusal: Refusal) -> None:
    body = refusal.body()
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
