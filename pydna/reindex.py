"""Re-embed what a model lacks: ``dna reindex --model <model_id>``.

The list comes from SQL (``dna.reconcile(scope, 'reembed', model_id)``: the memory records of a scope
without a search row or a vector under ``model_id``, with the text to embed); this module only embeds
that text with the provider of ``model_id`` and writes each vector with ``dna.index_document`` — the
same write every indexing path makes. Nothing here decides what is missing.
"""
from __future__ import annotations

from typing import Any


def reindex(conn, scope: str, provider, batch_size: int = 64) -> dict[str, Any]:
    """Embed and write every memory of ``scope`` that ``provider.model_id`` lacks.

    ``conn``: a psycopg connection (autocommit or not: each batch is one ``dna.index_document`` call
    per memory, committed by the caller's transaction mode). ``provider``: an ``EmbeddingPort``
    (``model_id``, ``dims``, ``embed(texts)``). Returns ``{scope, model_id, to_embed, written}``.
    Errors are the server's (psycopg errors with their SQLSTATE, e.g. 22023 for an unknown scope)."""
    from pgvector.psycopg import register_vector

    from pydna.embeddings.base import embed_for
    from pydna.sqlcalls import register_embedder

    register_vector(conn)
    register_embedder(conn, provider)
    todo = conn.execute("SELECT dna.reconcile(%s, 'reembed', %s)", (scope, provider.model_id)).fetchone()[0]
    items = todo["to_embed"]
    written = 0
    for start in range(0, len(items), batch_size):
        chunk = items[start:start + batch_size]
        vectors = embed_for(provider, [item["text"] for item in chunk], "document")   # as Client.memory writes them
        for item, vector in zip(chunk, vectors):
            personal = item["tenant"].startswith("personal:")
            conn.execute("SELECT dna.index_document(%s, %s, %s, %s, %s::real[]::vector, %s, %s, %s, personal => %s)",
                         (scope, item["kind"], item["name"], item["text"], [float(x) for x in vector],
                          provider.model_id, item["title"], "" if personal else item["tenant"], personal))
            written += 1
    return {"scope": scope, "model_id": provider.model_id, "to_embed": len(items), "written": written}
