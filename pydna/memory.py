"""The memory plane from Python: ``Client.memory``.

Each verb embeds what it needs with the client's embedder and calls ONE SQL function
(``dna.remember``, ``dna.recall``, ``dna.forget``, ``dna.revive``, ``dna.list_memories``,
``dna.consolidate``), returning its jsonb as a dict. Nothing here decides an answer: validation,
stamping, ranking, validity, reconsolidation and the bitemporal guard all run in the database.

    >>> mem = client.memory
    >>> mem.remember("team", "always deep-copy before mutating documents", area="Feature/kernel")
    >>> mem.recall("team", "mutating documents", k=3)["hits"]
    >>> mem.forget("team", name, superseded_by=other)
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from psycopg.errors import SerializationFailure
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from pydna.embeddings.base import embed_for
from pydna.sqlcalls import captured_notices, kinds_arg, register_embedder

if TYPE_CHECKING:  # pragma: no cover
    from pydna.client import Client

#: The model_id the SQL verbs use when none is given (lexical indexing still needs a width table).
DEFAULT_MODEL_ID = "dna-fake-hash-v1"


#: The keys of a ``remember_many`` item that are the item's own (the others are the memory's spec fields).
ITEM_KEYS = ("name", "kind", "now", "passages")


def batch_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """One item of ``dna.remember_many``: ``{spec, name?, kind?, now?}`` from a mapping of the memory's
    fields (or one with a ``spec``; its other fields are merged over it), ``now`` as ISO-8601."""
    fields = {k: v for k, v in item.items() if k not in ITEM_KEYS and k != "spec" and v is not None}
    spec = {**dict(item.get("spec") or {}), **fields}
    out: dict[str, Any] = {"spec": spec}
    for key in ITEM_KEYS:
        value = item.get(key)
        if value is not None:
            out[key] = value.isoformat() if isinstance(value, datetime) else value
    return out


def _jsonb(value: Mapping[str, Any] | None) -> Jsonb | None:
    """A mapping as a jsonb argument (None: SQL NULL)."""
    return Jsonb(dict(value)) if value is not None else None


def _vector(values) -> Any:
    from pgvector import Vector

    return Vector([float(x) for x in values])


class Memory:
    """Memory verbs over one ``Client`` (its connection and embedder)."""

    def __init__(self, client: "Client"):
        self.client = client

    @property
    def conn(self):
        """The client's connection (checked, and renewed after an embedded server restart, by the client)."""
        return self.client.conn

    # -- helpers ---------------------------------------------------------------------------

    def _model(self) -> str:
        embedder = self.client.embedder
        return embedder.model_id if embedder is not None else DEFAULT_MODEL_ID

    def _embed(self, text: str, purpose: str) -> tuple[Any, str | None]:
        """``(vector or None, error or None)`` of ``text`` embedded for ``purpose`` ("document" for
        a memory written, "query" for a recall: the embedder's role prefix for it, as
        ``Client.index`` / ``Client.search`` do); never raises (honest degradation). The model_id is
        registered with the embedder's role prefixes, so a scope never mixes embedding spaces (a
        registry holding other prefixes: 22023, reported as the error)."""
        embedder = self.client.embedder
        if embedder is None or not text or not text.strip():
            return None, None
        try:
            register_embedder(self.conn, embedder)
            return _vector(embed_for(embedder, [text], purpose)[0]), None
        except Exception as exc:  # a missing model degrades to lexical; the answer says so
            return None, f"{type(exc).__name__}: {exc}"

    def _one(self, query: str, params: Sequence[Any] | Mapping[str, Any]) -> dict:
        return self.conn.execute(query, params).fetchone()[0]

    # -- verbs -----------------------------------------------------------------------------

    def remember(self, scope: str, summary: str | None = None, *, spec: Mapping[str, Any] | None = None,
                 kind: str = "Engram", name: str | None = None, tenant: str = "", now: datetime | None = None,
                 area: str | None = None, affect: str | None = None, tags: Sequence[str] | None = None,
                 source_refs: Sequence[str] | None = None, claims: Sequence[Mapping[str, Any]] | None = None,
                 title: str | None = None, body: str | None = None, personal: bool = False,
                 metadata: Mapping[str, Any] | None = None) -> dict:
        """Write a memory through ``dna.remember`` and index it with this client's embedding of
        ``dna.memory_text(kind, spec)``. Keyword fields are merged into ``spec`` (explicit ``spec``
        keys win); ``metadata`` (a mapping: user, project, source...) is ``spec.metadata``, what
        filters read beside the memory's own fields (tags, area, created_at...; docs/memory.md,
        "Filters"). Returns ``{kind, name, spec, action, indexed, index, version, recorded_at, ...}``
        (plus ``embedding_error`` when the embedder failed and the memory was indexed lexically)."""
        full: dict[str, Any] = {}
        for key, value in (("summary", summary), ("title", title), ("body", body), ("area", area),
                           ("affect", affect), ("tags", list(tags) if tags is not None else None),
                           ("source_refs", list(source_refs) if source_refs is not None else None),
                           ("claims", [dict(c) for c in claims] if claims is not None else None),
                           ("metadata", dict(metadata) if metadata is not None else None)):
            if value is not None:
                full[key] = value
        full.update(dict(spec or {}))
        text = self.conn.execute("SELECT dna.memory_text(%s, %s)", (kind, Jsonb(full))).fetchone()[0] or ""
        embedding, error = self._embed(text, "document")
        result = self._one(
            "SELECT dna.remember(%s, %s, kind => %s, name => %s, tenant => %s, now => %s, "
            "embedding => %s, model_id => %s, personal => %s)",
            (scope, Jsonb(full), kind, name, tenant, now, embedding, self._model(), personal))
        if error:
            result["embedding_error"] = error
        return result

    def remember_many(self, scope: str, items: Sequence[Mapping[str, Any]], *, kind: str = "Engram",
                      tenant: str = "", now: datetime | None = None, personal: bool = False,
                      atomic: bool = True) -> dict:
        """Write many memories in one call and one transaction (``dna.remember_many``), each embedded
        with this client's embedder (all texts in one ``embed`` call). An item is a mapping of the
        memory's fields (summary, title, body, area, affect, tags, source_refs, claims, metadata, or a
        whole ``spec``) with optional ``name``, ``kind``, ``now`` (its world time) and ``passages``
        (further texts it is found by, indexed and embedded beside its text). ``atomic``
        (default): all or nothing, a bad item fails the call naming its position (``item 3: …``);
        ``atomic=False`` writes the good items and reports the bad ones. Returns {count, created,
        updated, unchanged, failed, results: one per item, in order} (plus ``embedding_error`` when the
        embedder failed and the memories were indexed lexically)."""
        wire: list[dict[str, Any]] = [batch_item(item) for item in items]
        kinds = [w.get("kind") or kind for w in wire]
        own = [t or "" for (t,) in self.conn.execute(
            "SELECT dna.memory_text(k, s) FROM unnest(%s::text[], %s::jsonb[]) WITH ORDINALITY AS u(k, s, o) ORDER BY o",
            (kinds, [Jsonb(w.get("spec")) for w in wire])).fetchall()] if wire else []
        # one vector per indexed text: each item's text, then its passages (dna.remember_many)
        texts = [t for text, w in zip(own, wire) for t in [text, *(w.get("passages") or [])]]
        embeddings, error = self._embed_many(texts)
        result = self._one(
            "SELECT dna.remember_many(%s, %s, kind => %s, tenant => %s, now => %s, embeddings => %s::vector[], "
            "model_id => %s, personal => %s, atomic => %s)",
            (scope, Jsonb(wire), kind, tenant, now, embeddings, self._model(), personal, atomic))
        if error:
            result["embedding_error"] = error
        return result

    def remember_conversation(self, scope: str, conversation: str, turns: Sequence[Mapping[str, Any]], *,
                              session: str | None = None, sessions: Mapping[str, Any] | None = None,
                              tenant: str = "", personal: bool = False, now: datetime | None = None,
                              context_turns: int | None = None, atomic: bool = True) -> dict:
        """A conversation's turns in one call (``dna.remember_conversation``): each turn ({text, speaker,
        role, time, session, id, metadata}) becomes a memory of Kind Turn that knows its conversation,
        session, place, speaker and time, indexed with the turns before it; each session touched is an
        Episode with its time span. ``sessions``: ``{session: ISO-8601 time}`` (a turn without a time takes
        its session's). The texts to embed come from ``dna.conversation_plan`` (one ``embed`` call); the
        verb refuses vectors of a plan that changed since (40001), and the call is then planned again
        (once). Re-sending the same turns changes nothing. Returns {conversation, turns: a result per turn,
        episodes, created, updated, unchanged, failed}."""
        wire = [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in turn.items() if v is not None}
                for turn in turns]
        times = {str(k): (v.isoformat() if isinstance(v, datetime) else v) for k, v in (sessions or {}).items()}
        args = (scope, conversation, Jsonb(wire), session, Jsonb(times) if sessions is not None else None, tenant,
                personal, now, context_turns)
        for attempt in (1, 2):
            embeddings = digest = error = None
            if self.client.embedder is not None:
                plan = self._one("SELECT dna.conversation_plan(%s, %s, %s, %s, %s, %s, %s, %s, %s) - 'items'", args)
                embeddings, error = self._embed_many(plan["texts"])
                digest = plan["digest"] if embeddings is not None else None
            try:
                result = self._one(
                    "SELECT dna.remember_conversation(%s, %s, %s, %s, %s, %s, %s, %s, embeddings => %s::vector[], "
                    "model_id => %s, digest => %s, context_turns => %s, atomic => %s)",
                    (*args[:-1], embeddings, self._model(), digest, context_turns, atomic))
            except SerializationFailure:
                if attempt == 2 or self.conn.info.transaction_status != TransactionStatus.IDLE:
                    raise
                continue
            if error:
                result["embedding_error"] = error
            return result
        raise AssertionError("unreachable")

    def _embed_many(self, texts: Sequence[str]) -> tuple[list[Any] | None, str | None]:
        """Vectors for ``texts`` (one ``embed`` call; a blank text: None), or (None, error) when the
        embedder fails (lexical only, as ``_embed``)."""
        embedder = self.client.embedder
        if embedder is None or not any(t.strip() for t in texts):
            return None, None
        try:
            register_embedder(self.conn, embedder)
            todo = [i for i, t in enumerate(texts) if t.strip()]
            vectors = embed_for(embedder, [texts[i] for i in todo], "document")
            out: list[Any] = [None] * len(texts)
            for i, vec in zip(todo, vectors):
                out[i] = _vector(vec)
            return out, None
        except Exception as exc:  # a missing model degrades to lexical; the answer says so
            return None, f"{type(exc).__name__}: {exc}"

    def recall(self, scope: str, query: str, *, k: int = 5, kinds: str | Sequence[str] | None = None,
               tenant: str = "", reconsolidate: bool = True, actor: str | None = None,
               now: datetime | None = None, as_of: datetime | None = None, personal: bool = False,
               decay: str | None = None, explain: bool = False, receipt: bool = False,
               keep_query: bool = False, min_similarity: float | None = None,
               min_lexical_score: float | None = None, filter: Mapping[str, Any] | None = None,
               context: int = 0, offset: int = 0, diversity: str | None = None,
               duplicate_similarity: float | None = None) -> dict:
        """Recall through ``dna.recall`` with this client's query embedding (a failing embedder →
        lexical only, ``degraded`` true and ``embedding_error`` set). Without an embedder the recall
        is lexical over the rows of the scope's model with the most documents (dna.recall's default).
        ``decay``: ``surfaced`` (default), ``written`` or ``off`` (22023 otherwise, raised as
        ``psycopg.errors.InvalidParameterValue``); ``explain=True`` adds the memory factors of each hit
        (``factor`` = max(0.05, retention) × affect, which multiplies the hybrid score; the ecphory
        terms under ``tie_break``, which only order equal scores) and the pool, filters and
        degradations of the answer (docs/memory.md, "How recall ranks").
        What the server said (e.g. no documents for this model_id in the scope) is in ``notices``.
        ``min_similarity`` (cosine in [-1, 1]) / ``min_lexical_score`` (BM25 >= 0): relevance floors on
        dna.search's lanes; the answer's ``floors`` says how many candidates each removed (22023 out of range).
        ``filter``: the metadata filter (docs/memory.md, "Filters": ``{"user": "u1"}``, ``{"tags": {"contains":
        "ops"}}``, ``{"created_at": {"gte": "2026-05-01", "lt": "2026-06-01"}}``, and/or/not...), applied inside
        both of dna.search's lanes before their top k; each hit carries its ``metadata``. ``context=n``: each
        hit that is a conversation's turn carries ``context``, the n turns before and after it in its session.
        ``offset``: the hits are ranks offset+1 .. offset+k of the recall at ``k=offset + k`` (offset + k at most
        1000); the answer's ``next_offset`` is where the next page starts (None on the last page).
        ``diversity``: ``'collapse'`` (None: the default) leaves out a memory whose text is a near-duplicate
        of a higher-ranked one (the same text, or a cosine >= ``duplicate_similarity``, default 1: the text alone);
        ``'off'`` keeps every one; with ``explain`` each hit's ``explain.collapsed`` names what it absorbed.

        ``receipt=True``: the recall through ``dna.take_receipt`` — read-only (nothing is reinforced,
        whatever ``reconsolidate`` says), the same hits — and the answer carries its ``receipt_id``
        (``keep_query``: the receipt keeps the query text and embedding; ``Client.replay`` re-runs it)."""
        embedding, error = self._embed(query, "query")
        embedder = self.client.embedder
        with captured_notices(self.conn) as notices:
            result = self._recall_receipt(   # receipt=True: through dna.take_receipt (read-only)
                keep_query, scope=scope, query=query, query_embedding=embedding, kinds=kinds_arg(kinds), k=k,
                model_id=embedder.model_id if embedder is not None else None, tenant=tenant, actor=actor, now=now,
                as_of=as_of, personal=personal, decay=decay, explain=explain, min_similarity=min_similarity,
                min_lexical_score=min_lexical_score, filter=dict(filter) if filter else None,
                context=context or None, offset=offset or None, diversity=diversity,
                duplicate_similarity=duplicate_similarity) if receipt else self._one(
                "SELECT dna.recall(%s, %s, %s, %s, kinds => %s, k => %s, tenant => %s, reconsolidate => %s, "
                "actor => %s, now => %s, as_of => %s, personal => %s, decay => %s, explain => %s, "
                "min_similarity => %s, min_lexical_score => %s, filter => %s, context => %s, \"offset\" => %s, "
                "diversity => %s, duplicate_similarity => %s)",
                (scope, query, embedding, embedder.model_id if embedder is not None else None,
                 kinds_arg(kinds), k, tenant, reconsolidate, actor, now, as_of, personal, decay, explain,
                 min_similarity, min_lexical_score, _jsonb(filter), context, offset, diversity, duplicate_similarity))
        if error:
            result["embedding_error"] = error
        if notices:
            result["notices"] = list(dict.fromkeys(notices))
        return result

    def _recall_receipt(self, keep_query: bool, **args: Any) -> dict:
        """``recall(..., receipt=True)``: ``dna.take_receipt('recall', args)`` (``Client._receipt``:
        None leaves an argument out; reconsolidate is not sent, the receipt's recall is read-only)."""
        if args["query_embedding"] is not None:
            args["query_embedding"] = args["query_embedding"].to_list()
        return self.client._receipt("recall", args, keep_query)

    def forget(self, scope: str, name: str, *, superseded_by: str | None = None, kind: str = "Engram",
               tenant: str = "", now: datetime | None = None, personal: bool = False) -> dict:
        """Retire a memory in world time (``dna.forget``); idempotent."""
        return self._one("SELECT dna.forget(%s, %s, %s, kind => %s, tenant => %s, now => %s, personal => %s)",
                         (scope, name, superseded_by, kind, tenant, now, personal))

    def revive(self, scope: str, name: str, *, revived_by: str | None = None, kind: str = "Engram",
               tenant: str = "", now: datetime | None = None, personal: bool = False) -> dict:
        """Reopen a forgotten memory (``dna.revive``); a memory in force is a no-op."""
        return self._one("SELECT dna.revive(%s, %s, %s, kind => %s, tenant => %s, now => %s, personal => %s)",
                         (scope, name, revived_by, kind, tenant, now, personal))

    def get(self, scope: str, name: str, *, kind: str = "Engram", tenant: str = "", personal: bool = False,
            now: datetime | None = None) -> dict:
        """One memory by name as it stands (``dna.get_memory``): spec, metadata, validity, ``in_force`` at
        ``now``, its latest version and the role that wrote it. ``psycopg.errors.NoDataFound`` (P0002,
        the hint names the nearest names) when the caller sees no such memory. Reinforces nothing."""
        return self._one("SELECT dna.get_memory(%s, %s, kind => %s, tenant => %s, personal => %s, now => %s)",
                         (scope, name, kind, tenant, personal, now))

    def history(self, scope: str, name: str, *, kind: str = "Engram", tenant: str = "",
                personal: bool = False) -> dict:
        """Every version kept of one memory, oldest first (``dna.memory_history``): op, recorded_at,
        recorded_by (who wrote it: who forgot a shared memory), validity, summary, spec. P0002 as :meth:`get`."""
        return self._one("SELECT dna.memory_history(%s, %s, kind => %s, tenant => %s, personal => %s)",
                         (scope, name, kind, tenant, personal))

    def list(self, scope: str, *, kinds: str | Sequence[str] | None = None, tenant: str = "",
             include_invalid: bool = False, now: datetime | None = None, limit: int = 100,
             personal: bool = False, filter: Mapping[str, Any] | None = None, offset: int = 0) -> dict:
        """The memories of a scope (``dna.list_memories``), newest first; ``filter``: only those whose
        metadata passes it (docs/memory.md, "Filters"). ``offset``: skip that many of the listing's order
        (created desc, then name, kind, tenant); the answer's ``next_offset`` starts the next page (None: last)."""
        return self._one("SELECT dna.list_memories(%s, %s, %s, %s, %s, %s, personal => %s, filter => %s, "
                         "\"offset\" => %s)",
                         (scope, kinds_arg(kinds), tenant, include_invalid, now, limit, personal, _jsonb(filter),
                          offset))

    def consolidate(self, scope: str, *, kind: str = "Engram", tenant: str = "",
                    stale_retention_floor: float = 0.15, apply: bool = False, dry_run: bool = False,
                    merge_overlap_floor: float = 0.5, now: datetime | None = None,
                    merge_scribe: Callable[[list[dict]], Mapping[str, Any]] | None = None,
                    contradiction_scribe: Callable[[list[dict]], Mapping[str, Any]] | None = None,
                    personal: bool = False) -> dict:
        """The decay pass (``dna.consolidate``). With ``dry_run`` the report also carries actions,
        merge candidates, contradictions and undecided groups. The optional scribes are external
        judges: ``merge_scribe(group_specs) → merged spec`` is asked for each merge candidate group
        and ``contradiction_scribe(group_specs) → {contradicts, reason}`` for each undecided group.
        A scribe's answer is added to the report beside the deterministic proposal, never applied; a
        scribe that raises leaves the proposal as it was and reports the error."""
        report = self._one(
            "SELECT dna.consolidate(%s, %s, %s, %s, %s, %s, %s, %s::timestamptz, personal => %s)",
            (scope, kind, tenant, stale_retention_floor, apply, dry_run, merge_overlap_floor, now, personal))
        if merge_scribe is not None or contradiction_scribe is not None:
            if personal:  # the partition the server resolved from the connected role
                tenant = self._one("SELECT dna.resolve_tenant(%s, true)", (tenant,))
            self._apply_scribes(scope, kind, tenant, report, merge_scribe, contradiction_scribe, now)
        return report

    def _apply_scribes(self, scope: str, kind: str, tenant: str, report: dict, merge_scribe: Callable | None,
                       contradiction_scribe: Callable | None, now: datetime | None) -> None:
        """Ask the external judges about a dry-run report, in place. Every verdict sits beside the
        deterministic proposal (``synthesized``/``decided_by`` say which is which); the survivor of a
        promoted contradiction is elected by ``dna.elect_survivor``; nothing is written."""
        if merge_scribe is not None:
            for group in report.get("merge_candidates") or []:
                names = [group["canonical"], *group["superseded"]]
                specs = self._one("SELECT dna.memory_specs(%s, %s, %s, %s)", (scope, kind, tenant, names))
                try:
                    fused = merge_scribe([specs[n] for n in names])
                except Exception as exc:  # the scribe is optional: keep the deterministic proposal
                    group["scribe_error"] = f"{type(exc).__name__}: {exc}"
                    continue
                if isinstance(fused, Mapping) and fused.get("summary"):
                    group.update(strategy="synthesize", proposed_spec=dict(fused),
                                 proposed_text=fused.get("summary"), synthesized=True)
                else:
                    group["scribe_error"] = "scribe returned no summary"
        if contradiction_scribe is not None:
            still: list[dict] = []
            for group in report.get("undecided") or []:
                names = list(group["names"])
                specs = self._one("SELECT dna.memory_specs(%s, %s, %s, %s)", (scope, kind, tenant, names))
                try:
                    verdict = contradiction_scribe([specs[n] for n in names])
                except Exception as exc:
                    still.append({**group, "scribe_error": f"{type(exc).__name__}: {exc}"})
                    continue
                if not isinstance(verdict, Mapping) or "contradicts" not in verdict:
                    still.append({**group, "scribe_error": "scribe returned no verdict"})
                    continue
                if not verdict.get("contradicts"):
                    still.append(group)
                    continue
                proposal = self._one(
                    "SELECT dna.elect_survivor(%s, dna.memory_recorded_at(%s, %s, %s, %s), "
                    "dna.memory_specs(%s, %s, %s, %s), coalesce(%s::timestamptz, now()))",
                    (names, scope, kind, tenant, names, scope, kind, tenant, names, now))
                report.setdefault("contradictions", []).append({
                    "subject": group["referent"], "predicate": str(verdict.get("predicate") or ""),
                    "names": names, "pairs": [], "decided_by": "scribe",
                    "reason": str(verdict.get("reason") or ""), "proposal": proposal})
            report["undecided"] = still
            report.get("contradictions", []).sort(key=lambda c: (c["subject"], c["predicate"], c["names"]))

