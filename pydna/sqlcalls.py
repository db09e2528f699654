"""Helpers for calling the SQL functions, shared by ``pydna.client`` and ``pydna.memory`` (which
import them from here, so neither imports the other for them): the shape of a Kind-list argument
and the NOTICEs the server sends during a call.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Sequence

import psycopg


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
