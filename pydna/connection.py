"""Opening a :class:`pydna.client.Client`: which database (``dsn``, ``DNA_DATABASE_URL`` or the embedded
default server) and which embedder."""
from __future__ import annotations

import os

import psycopg

from pydna.client import Client
from pydna.embeddings.base import EmbeddingPort



def resolve_dsn(dsn: str | None = None) -> str:
    """``dsn``, else ``DNA_DATABASE_URL``, else the embedded default server (started if needed)."""
    if dsn:
        return dsn
    env = os.environ.get("DNA_DATABASE_URL")
    if env:
        return env
    from pydna import server

    return server.client_dsn()


def connect(dsn: str | None = None, embedder: EmbeddingPort | str | None = "auto") -> Client:
    """Open a ``Client``. ``dsn``: a libpq URL; None → ``DNA_DATABASE_URL`` → the embedded server.
    ``embedder``: an ``EmbeddingPort``, a name (``auto``, ``onnx``, ``fake``), or None (lexical only).
    Raises ``NotMigratedError`` when the database is not at this package's head revision."""
    if isinstance(embedder, str):
        from pydna.embeddings import get_provider

        embedder = get_provider(embedder)
    embedded = None
    if not dsn and not os.environ.get("DNA_DATABASE_URL"):
        from pydna import server

        embedded = server.data_home()
    conn = psycopg.connect(resolve_dsn(dsn), autocommit=True)
    try:
        return Client(conn, embedder, dsn=dsn, embedded_home=embedded)
    except Exception:
        conn.close()
        raise
