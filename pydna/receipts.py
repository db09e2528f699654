"""Receipts from Python: ``Client.take_receipt``, ``Client.replay`` and what ``Client.search(...,
receipt=True)`` / ``Client.memory.recall(..., receipt=True)`` send (``dna.take_receipt`` and
``dna.replay``, sql/receipts.sql). The server runs the question, stores the receipt and compares the
replay; this mixin only embeds the query and passes the arguments as JSON.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Mapping

from psycopg.types.json import Jsonb

from pydna.embeddings.base import embed_for


class ReceiptsMixin:
    """The receipt verbs of ``pydna.client.Client`` (its ``conn``, ``embedder`` and ``_check_prefixes``)."""

    def take_receipt(self, verb: str, scope: str, query: str, *, keep_query: bool = False, **args: Any) -> dict:
        """Answer ``query`` through ``dna.take_receipt`` and keep a receipt of the answer: verb
        ``'search'`` runs ``dna.search``, ``'recall'`` a read-only ``dna.recall``. ``args``: the verb's
        other named arguments as SQL names them (``k``, ``kinds``, ``tenant``, ``personal``, ``fusion``,
        ``explain``, ...; datetimes are sent as ISO 8601). The query is embedded with the client's
        embedder when ``model_id`` is None or the embedder's (a failing embedder: lexical only, as
        ``search``). ``keep_query``: store the query text and embedding (default: only their digests).
        Returns the server's JSON answer (search: ``hits``; recall: its answer) with ``receipt_id``.
        Errors are the server's (``psycopg.Error``; SQLSTATE 22023 for a bad verb or argument)."""
        embedding = self._receipt_embedding(query, args.get("model_id"))
        if embedding is not None:
            args.setdefault("model_id", self.embedder.model_id)
        payload = {key: value.isoformat() if isinstance(value, datetime) else value for key, value in args.items()}
        payload.update(scope=scope, query=query)
        if embedding is not None:
            payload["query_embedding"] = embedding
        return self.conn.execute("SELECT dna.take_receipt(%s, %s, keep_query => %s)",
                                 (verb, Jsonb(payload), keep_query)).fetchone()[0]

    def _receipt(self, verb: str, args: Mapping[str, Any], keep_query: bool) -> dict:
        """``dna.take_receipt(verb, args, keep_query)`` with the arguments of ``search`` /
        ``memory.recall``: None leaves an argument out (its SQL default; for search's ``valid_time``
        the receipt's moment), False for ``valid_time`` sends JSON null (no validity filter),
        datetimes are sent as ISO 8601."""
        payload: dict[str, Any] = {}
        for key, value in args.items():
            if key == "valid_time" and value is False:
                payload[key] = None
            elif value is not None:
                payload[key] = value.isoformat() if isinstance(value, datetime) else value
        return self.conn.execute("SELECT dna.take_receipt(%s, %s, keep_query => %s)",
                                 (verb, Jsonb(payload), keep_query)).fetchone()[0]

    def replay(self, receipt_id: str | uuid.UUID, query: str | None = None, *, now: datetime | None = None) -> dict:
        """``dna.replay``: re-run a receipt's question and say whether the answer is the same (``match``,
        ``scores_match``, ``ids_then``, ``ids_now``, ``first_difference``, ``settings_changed``). A
        receipt taken without ``keep_query`` needs ``query``; the client then embeds it as when the
        receipt was taken (when the receipt has an embedding digest), and the server checks both
        digests (22023 when they differ). ``now``: replay at that world time instead of the receipt's."""
        embedding = None
        if query is not None:
            row = self.conn.execute("SELECT embedding_digest IS NOT NULL, args ->> 'model_id' "
                                    "FROM dna.dna_search_receipts WHERE receipt_id = %s::uuid", (str(receipt_id),)).fetchone()
            if row is not None and row[0]:
                embedding = self._receipt_embedding(query, row[1])
        return self.conn.execute("SELECT dna.replay(%s::uuid, query => %s, query_embedding => %s::vector, now => %s)",
                                 (str(receipt_id), query, None if embedding is None else str(embedding),
                                  now)).fetchone()[0]

    def _receipt_embedding(self, query: str, model_id: str | None) -> list[float] | None:
        """The query's embedding as the receipt verbs are given it, or None (no embedder, another
        model, a blank query, or a failing embedder)."""
        if self.embedder is None or model_id not in (None, self.embedder.model_id) or not (query and query.strip()):
            return None
        self._check_prefixes(self.embedder.model_id)
        try:
            return [float(x) for x in embed_for(self.embedder, [query], "query")[0]]
        except Exception:  # honest degradation: the receipt is of a lexical answer
            return None

