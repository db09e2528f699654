"""Helpers for calling the SQL functions, shared by ``pydna.client``, ``pydna.memory``, the doors and
``pydna.reindex`` (which import them from here, so none imports another for them): the shape of a
Kind-list argument, the NOTICEs the server sends during a call, and registering an embedder's model.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Sequence

import psycopg

from pydna.embeddings.base import role_prefix


def kinds_arg(kinds: str | Sequence[str] | None) -> list[str] | None:
    """A ``kind``/``kinds`` argument as the SQL functions take it: one Kind or several → a list;
    None or empty → None (no Kind filter)."""
    return [kinds] if isinstance(kinds, str) else (list(kinds) if kinds else None)


@contextmanager
def captured_notices(conn: psycopg.Connection):
    """Collect the primary text of each NOTICE the server sends while the block runs (e.g.
    dna.search's "no documents for model_id …"); yields the list it fills."""
    notices: list[str] = []
    handler = lambda diag: notices.append(diag.message_primary)  # noqa: E731
    conn.add_notice_handler(handler)
    try:
        yield notices
    finally:
        conn.remove_notice_handler(handler)


def register_embedder(conn: psycopg.Connection, embedder) -> None:
    """``dna.register_model`` of the embedder's model_id and width with its role prefixes (query,
    document), so that vectors of one model_id are never embedded two ways: 22023 from the server
    when the registry records other prefixes for that model_id. Idempotent."""
    conn.execute("SELECT dna.register_model(%s, %s, NULL, %s, %s)",
                 (embedder.model_id, embedder.dims, role_prefix(embedder, "query"), role_prefix(embedder, "document")))
