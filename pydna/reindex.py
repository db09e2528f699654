"""Re-embed what a model lacks: ``dna reindex --model <model_id>``.

The list comes from SQL (``dna.reconcile(scope, 'reembed', model_id)``: the memory records of a scope
without a search row or a vector under ``model_id``, with the text to embed, and the documents with no
vector under it, passage by passage as another model_id holds them); this module only embeds that text
with the provider of ``model_id`` and writes it — memories with ``dna.index_document``, documents with
``dna.index_documents`` (every passage, its heading and span) and ``dna.set_document_metadata``, the
writes every indexing path makes. Nothing here decides what is missing.
"""
from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb


def reindex(conn, scope: str, provider, batch_size: int = 64) -> dict[str, Any]:
    """Embed and write every memory of ``scope`` that ``provider.model_id`` lacks.

    ``conn``: a psycopg connection (autocommit or not: each batch is one ``dna.index_document`` call
    per memory, one ``dna.index_documents`` per document, committed by the caller's transaction mode).
    ``provider``: an ``EmbeddingPort`` (``model_id``, ``dims``, ``embed(texts)``). Returns ``{scope,
    model_id, to_embed, written}`` (memories) with ``documents`` and ``passages`` (documents written).
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
    documents = todo.get("documents_to_embed") or []
    passages = _write_documents(conn, scope, provider, documents, batch_size)
    return {"scope": scope, "model_id": provider.model_id, "to_embed": len(items), "written": written,
            "documents": len(documents), "passages": passages}


def _write_documents(conn, scope: str, provider, documents: list[dict[str, Any]], batch_size: int) -> int:
    """Embed each passage's title, heading context and body (``embedding_text``, what ``Client.index``
    embeds) and write each document whole — its passages, headings and spans — under
    ``provider.model_id``, then its metadata.
    One ``dna.index_documents`` call per document (a document's passages are written together)."""
    from pgvector import Vector

    from pydna.embeddings.base import embed_for
    from pydna.records import embedding_text

    written = 0
    for start in range(0, len(documents), batch_size):
        chunk = documents[start:start + batch_size]
        rows = [p for doc in chunk for p in doc["passages"]]
        vectors = iter(embed_for(provider, [embedding_text(p["title"], p["heading"], p["body"]) for p in rows],
                                 "document"))
        for doc in chunk:
            personal = doc["tenant"].startswith("personal:")
            tenant = "" if personal else doc["tenant"]
            parts = doc["passages"]
            n = len(parts)
            conn.execute(
                "SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, %s::vector[], %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s)",
                (scope, [doc["kind"]] * n, [doc["name"]] * n, [p["body"] for p in parts],
                 [Vector([float(x) for x in next(vectors)]) for _ in parts], provider.model_id,
                 [p["title"] for p in parts], tenant, [p["snippet"] for p in parts], personal,
                 [p["passage"] for p in parts], [p["heading"] for p in parts],
                 [p["char_start"] for p in parts], [p["char_end"] for p in parts]))
            conn.execute("SELECT dna.set_document_metadata(%s, %s, %s, %s::jsonb[], %s, %s)",
                         (scope, [doc["kind"]], [doc["name"]], [Jsonb(doc.get("metadata") or {})], tenant, personal))
            written += n
    return written
