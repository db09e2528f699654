"""pydna — hybrid search and agent memory inside PostgreSQL.

The SQL package (schema ``dna``) does the work; this client embeds text and calls it.
``import pydna`` is light: psycopg, alembic and the embedders load on first use.

    >>> import pydna
    >>> client = pydna.connect()                 # DNA_DATABASE_URL, else the embedded server
    >>> client.index("docs", [{"kind": "Doc", "name": "a", "body": "reciprocal rank fusion"}])
    >>> client.search("docs", "rank fusion", k=3).hits
"""
from __future__ import annotations

__version__ = "0.1.0.dev0"

_LAZY = {
    "connect": "pydna.connection",
    "Client": "pydna.client",
    "Record": "pydna.client",
    "Hit": "pydna.client",
    "SearchResult": "pydna.client",
    "IndexReport": "pydna.client",
    "NotMigratedError": "pydna.client",
    "EmbeddingPort": "pydna.embeddings.base",
    "EmbeddingError": "pydna.embeddings.base",
    "FakeEmbeddingProvider": "pydna.embeddings.fake",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pydna' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
