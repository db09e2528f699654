"""The thin Python client: it embeds what a call needs and calls one SQL function.

Every answer comes from the SQL package (``dna.search``, ``dna.index_document``, ...); the client
adds embeddings, batching and typed results, never ranking logic.
"""
from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Sized
from datetime import datetime
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb
from pgvector import Vector
from pgvector.psycopg import register_vector

from pydna import maintenance, migrate
from pydna.embeddings.base import EmbeddingPort, embed_for, role_prefix
from pydna.memory import Memory
from pydna.receipts import ReceiptsMixin
from pydna.records import RECORD_KEYS, Record, embedding_text, record_metadata  # noqa: F401  (re-exported)
from pydna.sqlcalls import captured_notices, kinds_arg, register_embedder  # noqa: F401  (kinds_arg: re-exported)


class NotMigratedError(RuntimeError):
    """The database lacks the pydna schema, or is behind this package's head revision."""


def check_migrated(conn: psycopg.Connection) -> None:
    """Raise ``NotMigratedError`` (naming `dna db upgrade`, or an upgrade of this package when the
    database is newer) unless the database behind ``conn`` is at this package's head revision."""
    applied = migrate.current(conn)
    want = migrate.head()
    if applied is None:
        raise NotMigratedError("this database has no pydna schema: run `dna db upgrade` "
                               "(or `alembic upgrade head`) first")
    if applied != want:
        from alembic.script import ScriptDirectory

        known = {r.revision for r in ScriptDirectory.from_config(migrate.alembic_config()).walk_revisions()}
        if applied not in known:
            raise NotMigratedError(f"this database is at revision {applied}, newer than this pydna "
                                   f"(head {want}): upgrade the pydna package")
        raise NotMigratedError(f"this database is at revision {applied}, this pydna needs {want}: "
                               "run `dna db upgrade`")


@dataclass(frozen=True)
class _Row:
    """One staged element of ``Client.index``: a whole document (``passage`` 0, no span) or one
    passage of it (``body`` = the passage's text)."""

    record: Record
    body: str
    passage: int = 0
    heading: str | None = None
    char_start: int | None = None
    char_end: int | None = None

    kind = property(lambda self: self.record.kind)
    name = property(lambda self: self.record.name)
    title = property(lambda self: self.record.title)
    tenant = property(lambda self: self.record.tenant)


@dataclass(frozen=True)
class Hit:
    """One ranked hit: ``score`` is the fused score (the scope's fusion: convex by default, or RRF); ``similarity`` the cosine in [-1, 1];
    ``lexical_score`` the lexical lane's score; ranks are 1-based per lane (None = absent)."""

    scope: str
    kind: str
    name: str
    tenant: str
    score: float
    title: str | None
    snippet: str | None
    similarity: float | None
    lexical_score: float | None
    rank_dense: int | None
    rank_lexical: int | None
    personal: bool = False  # the hit is in the caller's personal partition
    passage: int = 0  # the passage that answers: its 0-based ordinal in the document
    heading: str | None = None  # its heading path ("Install > From source")
    char_start: int | None = None  # its span in the document's text (characters; None: whole document)
    char_end: int | None = None
    highlight: str | None = None  # the passage around the query's words, matches marked «like this»
    dense_exact: bool | None = None  # the dense lane was an exact scan (True) or HNSW (False); None: degraded
    floor_removed_dense: int | None = None  # candidates min_similarity removed (None: no such floor)
    floor_removed_lexical: int | None = None  # candidates min_lexical_score removed (None: no such floor)
    explain: dict | None = None  # with explain=True: lane ranks, raw scores, fusion terms, the answer's receipt
    metadata: dict | None = None  # the document's (or memory's) metadata, what filters read


@dataclass
class SearchResult:
    """Hits of one search; ``degraded`` is True when no query embedding was used (lexical only)."""

    hits: list[Hit]
    degraded: bool
    model_id: str | None  # None: no embedder, and the scope has no documents
    error: str | None = None  # why the query embedding is missing, when degraded
    notices: list[str] = field(default_factory=list)  # what dna.search said (e.g. no documents for model_id)
    receipt_id: str | None = None  # with receipt=True: the id of the receipt dna.take_receipt kept of this answer

    def __iter__(self):
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hits]


@dataclass
class IndexReport:
    """Counts of one ``Client.index`` call, per document (inserted, updated, embedded, unchanged: a
    document is updated when any of its passages changed, moved or went); ``passages`` = passage rows
    the documents now have; ``passages_deleted`` = passages that went; ``embedded_texts`` = texts
    sent to the model (passages, or whole documents)."""

    inserted: int = 0
    updated: int = 0
    embedded: int = 0
    unchanged: int = 0
    embedded_texts: int = 0
    passages: int = 0
    passages_deleted: int = 0
    tables: set[str] = field(default_factory=set)
    #: ``dna.bm25_compact``'s report for the scope after the last batch (``compact=True``), else None
    compaction: dict[str, Any] | None = None

    @property
    def total(self) -> int:
        return self.inserted + self.updated + self.embedded + self.unchanged


#: SQLSTATEs of a transaction the server aborted only because of other transactions (deadlock_detected,
#: serialization_failure): ``Client.index`` retries its batch on them, which is safe because indexing
#: is idempotent by text hash.
RETRY_SQLSTATES = frozenset({"40P01", "40001"})

_STAGE_COPY = ("COPY dna.dna_index_staging (batch, ord, kind, name, title, body, snippet, embedding, passage, "
               "heading, char_start, char_end) FROM STDIN (FORMAT BINARY)")
_STAGE_TYPES = ["uuid", "int4", "text", "text", "text", "text", "text", "vector", "int4", "text", "int4", "int4"]
_INDEX_STAGED_SQL = "SELECT kind, name, action FROM dna.index_staged(%s, %s, %s, %s)"
_SET_METADATA_SQL = "SELECT dna.set_document_metadata(%s, %s, %s, %s::jsonb[], %s)"


def _document_action(actions: set[str]) -> str:
    """One document's action from its passages' (``dna.index_documents``)."""
    if actions == {"unchanged"}:
        return "unchanged"
    if actions == {"inserted"}:
        return "inserted"
    if actions <= {"embedded", "unchanged"}:
        return "embedded"
    return "updated"


def retry_delay(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based) of an aborted batch: exponential from
    50 ms, capped at 2 s, with ±50 % jitter so that writers that collided do not collide again."""
    return min(2.0, 0.05 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)


#: Texts embedded per call when ``Client.index`` counts passages (``on_passages``): ~0.5 s of the ONNX model.
EMBED_CHUNK = 64

#: dna.index_document's limit on a document's text (title + body, bytes): passages do not lift it.
MAX_DOCUMENT_BYTES = 1_000_000


def _over_limit(record: Record) -> bool:
    size = len(record.body) + len(record.title or "")
    return size > MAX_DOCUMENT_BYTES // 4 and \
        len(record.body.encode()) + len((record.title or "").encode()) > MAX_DOCUMENT_BYTES


def _rows(record: Record, splitter) -> list[_Row]:
    """The staged rows of one record: its passages (``splitter``: a ``PassageSplitter``; None = whole)."""
    if splitter is None or _over_limit(record):
        return [_Row(record, record.body)]   # over the limit: whole, so the server refuses it (22001)
    from pydna.passages import text_format

    # split() answers one passage for a text that fits one window: then the record is indexed whole.
    parts = splitter.split(record.body, record.format or text_format(record.name))
    if len(parts) <= 1:
        return [_Row(record, record.body)]
    # A passage's snippet is its own start (the record's snippet describes the whole text).
    unsnipped = replace(record, snippet=None)
    return [_Row(unsnipped, p.text, p.ordinal, p.heading, p.char_start, p.char_end) for p in parts]


class Client(ReceiptsMixin):
    """A connection to a pydna database plus an embedding provider (may be None: lexical only)."""

    def __init__(self, conn: psycopg.Connection, embedder: EmbeddingPort | None, dsn: str | None = None,
                 embedded_home: "os.PathLike[str] | str | None" = None):
        self._conn = conn
        self.embedder = embedder
        self.dsn = dsn
        self._splitter = None
        self._closed = False
        self._prefixes_checked: set[str] = set()  # model_ids whose registered role prefixes are the embedder's
        # On the embedded default server (connect() without a DSN): its data home and postmaster,
        # so that a server stopped or crashed since is started again on the next call.
        self._home = embedded_home
        self._postmaster = None
        if embedded_home is not None:
            from pydna import server

            self._postmaster = server.running_pid(embedded_home)
        self._check_migrated()
        register_vector(conn)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def conn(self) -> psycopg.Connection:
        """The connection (autocommit). On the embedded default server it is checked first: when the
        server was stopped or crashed since (its postmaster is gone or another one runs), the server
        is started again (``pydna.server.client_dsn``: it waits for a dying postmaster) and a new
        connection replaces the old one. With a DSN, the connection is as it is."""
        if self._home is not None and not self._closed:
            self._revive()
        return self._conn

    @conn.setter
    def conn(self, value: psycopg.Connection) -> None:
        self._conn = value

    def _revive(self) -> None:
        from pydna import server

        pid = server.running_pid(self._home)
        if pid is not None and pid == self._postmaster and not self._conn.closed and not self._conn.broken:
            return
        old = self._conn
        new = psycopg.connect(server.client_dsn(self._home), autocommit=True)
        register_vector(new)
        self._conn, self._postmaster = new, server.running_pid(self._home)
        try:
            old.close()
        except Exception:  # the old server is gone: nothing to close cleanly
            pass

    def close(self) -> None:
        self._closed = True
        self._conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_migrated(self) -> None:
        check_migrated(self.conn)

    @property
    def memory(self):
        """The memory plane (remember, recall, forget, revive, list, consolidate): ``pydna.memory.Memory``."""
        return Memory(self)

    @property
    def model_id(self) -> str:
        if self.embedder is None:
            raise ValueError("no embedder: pass model_id explicitly")
        return self.embedder.model_id

    # -- search plane ------------------------------------------------------------------------

    def index(self, scope: str, records: Iterable[Record | Mapping[str, Any]], *, kind: str | None = None,
              tenant: str = "", batch_size: int = 2000, model_id: str | None = None,
              on_progress: Callable[[int], None] | None = None,
              progress: Callable[[int, int | None], None] | None = None, retries: int = 4,
              passages: bool = True, compact: bool = True,
              on_passages: Callable[[int], None] | None = None) -> IndexReport:
        """Upsert ``records`` (``Record`` or mappings with kind, name/_id, title, body/text, tenant,
        snippet, format) into ``scope``, about ``batch_size`` passages at a time; returns the counts.

        ``passages`` (default): a text longer than one passage window (``pydna.passages``: ~200 of
        the embedder's tokens) is indexed as passages — Markdown and reStructuredText cut at their
        headings, plain text at paragraphs then sentences with overlap — each a row searched on its
        own and tied to its document (ordinal, heading path, character span); a shorter text is one
        passage, as with ``passages=False`` (every record one row, the embedder reading its first
        256 tokens). Re-indexing a document replaces exactly its passages.

        Only texts that changed, or have no vector yet, are embedded: each batch is checked with
        ``dna.stale_documents`` first (a passage whose text the document already stores with a
        vector, at any ordinal, keeps it). Each batch is then written in one transaction:
        its rows are COPied (binary) into ``dna.dna_index_staging`` and ``dna.index_staged`` upserts
        them, one call per tenant of the batch. A bad record (blank kind/name, text over 1,000,000
        bytes, the same kind/name twice in a batch, a tenant you may not write) fails its batch with
        the server's error (``psycopg.Error``, SQLSTATE 22023, 22001, 42501, ...) and writes nothing
        of that batch; the batches before it stay written.

        A batch the server aborts with SQLSTATE 40P01 (deadlock) or 40001 (serialization failure) is
        retried up to ``retries`` times (``retry_delay``: 50 ms doubling to 2 s, jittered) without
        embedding again; that is safe because indexing is idempotent by text hash. The retry needs
        the batch's transaction to be the outermost one: inside a transaction of the caller the error
        propagates. ``model_id``: default the embedder's; another model_id indexes lexically (no
        vectors). After each written batch ``on_progress(documents in the batch)`` and
        ``progress(documents written so far, total)`` are called; ``total`` is ``len(records)``,
        or None when ``records`` has no length (a generator). ``on_passages(n)``: n more passages are
        done — embedded (after each sub-batch of ``EMBED_CHUNK`` texts) or, needing no vector, written;
        with it the first batch holds at most ``EMBED_CHUNK`` passages, so the first count comes within
        about a second (a progress bar's rate and ETA from the start).

        ``compact`` (default, as ``dna index`` does after each run): once every batch is written and
        something changed, the scope's BM25 index is compacted (``dna.bm25_compact(scope, model_id)``
        in a transaction of its own; its report is ``IndexReport.compaction``): the documents written
        in batches below ``dna.bm25_bulk_threshold()`` leave the memtable, which every query reads
        whole (SciFact, 5,183 documents in batches of 256: the lexical lane's backend CPU 9.9 → 5.5 ms
        p50, bench/RESULTS.md). Skipped inside a transaction of the caller (compaction must not hold
        the partition's lock until the caller commits: run ``pydna.maintenance.compact`` after it)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        report = IndexReport()
        model = model_id or self.model_id
        embeds = self.embedder is not None and model == self.embedder.model_id
        if embeds:
            # Once per call: stale_documents needs the model known even before its first vector.
            # The model_id's role prefixes are recorded with it: 22023 when the registry holds others.
            register_embedder(self.conn, self.embedder)
        splitter = self.passage_splitter() if passages else None
        total = len(records) if isinstance(records, Sized) else None
        done = 0
        items = iter(records)
        limit = min(batch_size, EMBED_CHUNK) if on_passages else batch_size   # a first count within a second
        while True:
            batch: list[_Row] = []
            documents = 0
            for item in items:
                batch += _rows(Record.coerce(item, kind=kind, tenant=tenant), splitter)
                documents += 1
                if len(batch) >= limit:
                    break
            limit = batch_size
            if not batch:
                if compact and report.inserted + report.updated + report.passages_deleted > 0 \
                        and self.conn.info.transaction_status == TransactionStatus.IDLE:
                    report.compaction = maintenance.compact(self.conn, scope, model_id=model)
                return report
            embedded_before = report.embedded_texts
            embeddings = self._embed_stale(scope, model, batch, report, on_passages) if embeds else [None] * len(batch)
            self._write_batch(scope, model, batch, embeddings, report, retries)
            if on_passages:
                on_passages(len(batch) - (report.embedded_texts - embedded_before))   # those needing no vector
            done += documents
            if on_progress:
                on_progress(documents)
            if progress:
                progress(done, total)

    def passage_splitter(self):
        """The ``pydna.passages.PassageSplitter`` of this client: windows sized in the embedder's
        tokens when its tokenizer file is known (ONNX), else in characters."""
        if self._splitter is None:
            from pydna.passages import PassageSplitter

            tokenizer = None
            path = getattr(getattr(self.embedder, "source", None), "tokenizer_path", None)
            if path is not None:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(path))
            self._splitter = PassageSplitter(tokenizer)
        return self._splitter

    def _embed_stale(self, scope: str, model_id: str, batch: list[_Row], report: IndexReport,
                     on_passages: Callable[[int], None] | None = None) -> list[Vector | None]:
        """Vectors for the rows of ``batch`` that ``dna.stale_documents`` names, None for the rest
        (embedded ``EMBED_CHUNK`` texts at a time when ``on_passages`` counts them)."""
        stale = [row[0] for row in self.conn.execute(
            "SELECT dna.stale_documents(%s, %s, %s, %s, %s, %s, %s)",
            (scope, model_id, [r.kind for r in batch], [r.name for r in batch], [r.title for r in batch],
             [r.body for r in batch], [r.tenant for r in batch]))]
        embeddings: list[Vector | None] = [None] * len(batch)
        if stale:
            texts = [embedding_text(batch[i - 1].title, batch[i - 1].heading, batch[i - 1].body) for i in stale]
            step = EMBED_CHUNK if on_passages else len(texts)
            vectors = []
            for start in range(0, len(texts), step):
                vectors.extend(embed_for(self.embedder, texts[start:start + step], "document"))  # an ndarray: not +=
                if on_passages:
                    on_passages(len(texts[start:start + step]))
            report.embedded_texts += len(texts)
            for i, vec in zip(stale, vectors):
                embeddings[i - 1] = Vector([float(x) for x in vec])
        return embeddings

    def _write_batch(self, scope: str, model_id: str, batch: list[_Row], embeddings: list[Vector | None],
                     report: IndexReport, retries: int) -> None:
        """COPY ``batch`` into the staging table and upsert it with ``dna.index_staged``, one staged
        batch per tenant, all in one transaction; retried on 40P01/40001 (see ``index``)."""
        by_tenant: dict[str, list[int]] = {}
        for i, r in enumerate(batch):
            by_tenant.setdefault(r.tenant, []).append(i)
        attempt = 0
        while True:
            outermost = self.conn.info.transaction_status == TransactionStatus.IDLE
            try:
                actions: dict[tuple[str, str, str], set[str]] = {}
                deleted = 0
                with self.conn.transaction(), self.conn.cursor() as cur:
                    for tenant, positions in by_tenant.items():
                        staged = uuid.uuid4()
                        with cur.copy(_STAGE_COPY) as copy:
                            copy.set_types(_STAGE_TYPES)
                            for ord_, i in enumerate(positions, start=1):
                                r = batch[i]
                                copy.write_row((staged, ord_, r.kind, r.name, r.title, r.body, r.record.snippet,
                                                embeddings[i], r.passage, r.heading, r.char_start, r.char_end))
                        for kind_, name, action in cur.execute(_INDEX_STAGED_SQL,
                                                               (scope, staged, model_id, tenant)).fetchall():
                            if action == "deleted":
                                deleted += 1
                                action = "moved"   # the document changed
                            actions.setdefault((tenant, kind_, name), set()).add(action)
                        # Each record's metadata (replacing what its document had), in the same transaction.
                        records = {(batch[i].kind, batch[i].name): batch[i].record.metadata for i in positions}
                        cur.execute(_SET_METADATA_SQL, (scope, [k for k, _ in records], [n for _, n in records],
                                                        [Jsonb(dict(m or {})) for m in records.values()], tenant))
                break
            except psycopg.Error as exc:
                attempt += 1
                if exc.sqlstate not in RETRY_SQLSTATES or not outermost or attempt > retries:
                    raise
                time.sleep(retry_delay(attempt))
        for passage_actions in actions.values():
            action = _document_action(passage_actions)
            setattr(report, action, getattr(report, action) + 1)
        report.passages += len(batch)
        report.passages_deleted += deleted
        if not report.tables:  # the model is registered now (by its first vector, or before)
            report.tables.add(self.conn.execute("SELECT dna.search_table(dna.model_dims(%s))::text",
                                                (model_id,)).fetchone()[0])

    def search(self, scope: str, query: str, *, kind: str | Sequence[str] | None = None, k: int = 10,
               tenant: str = "", name_prefix: str | None = None, candidates: int | None = None,
               weights: Sequence[float] | None = None, model_id: str | None = None,
               personal: bool = False, valid_time: datetime | None = None,
               include_retired: bool = False, passages: bool = False, offset: int = 0,
               min_similarity: float | None = None, min_lexical_score: float | None = None,
               exact: bool | None = None, fusion: str | None = None,
               dense_weight: float | None = None, explain: bool = False, receipt: bool = False,
               keep_query: bool = False, filter: Mapping[str, Any] | None = None, diversity: str | None = None,
               duplicate_similarity: float | None = None, mmr_lambda: float | None = None) -> SearchResult:
        """Hybrid search through ``dna.search``. Embeds the query with the client's embedder; when
        there is none or it fails, the answer is lexical only and ``degraded`` is True. Without an
        embedder and without ``model_id`` the search reads the scope's model (``dna.scope_model``: the
        one with the most documents there), as ``Client.memory.recall`` does.

        One hit per document, its best passage (``passage``, ``heading``, span, ``highlight``);
        ``passages=True``: one hit per passage. ``offset``: the hits are ranks offset+1 .. offset+k of
        one ranking (pages of one size compose). ``min_similarity`` / ``min_lexical_score``: relevance
        floors of the dense / lexical lane (each hit says how many candidates they removed; an
        emptied answer says so in ``notices``). ``exact``: True scans the dense lane exactly, None
        (default) does so for scopes of at most 2000 rows, False lets HNSW answer. ``fusion``: ``'convex'``
        (``dense_weight`` x z-score normalised cosine + (1 - dense_weight) x z-score normalised BM25; dense_weight
        default 0.5) or ``'rrf'``; None: the scope's setting, else convex. ``explain=True``: every hit's
        ``explain`` holds its lanes' ranks, raw scores and fusion terms and the answer's receipt (the
        dense lane's path — HNSW or exact scan —, ef_search, candidates per lane, filters, floors,
        degradation; see ``dna.search``).

        ``filter``: the metadata filter (docs/memory.md, "Filters"; e.g. ``{"user": "u1", "tags":
        {"contains": "urgent"}, "created_at": {"gte": "2026-01-01"}}``), applied inside both lanes before
        their top k; each hit's ``metadata`` is its document's (or memory's). A malformed filter is
        refused by the server (22023, the hint names the place).

        ``diversity``: ``'collapse'`` (None: the default) drops a hit whose passage is a near-duplicate of
        a higher-ranked one (the same text up to case, punctuation and markup, or a cosine between their
        vectors >= ``duplicate_similarity``, default 1: the text alone); ``'mmr'`` collapses too, then orders the rest
        by Maximal Marginal Relevance (``mmr_lambda``, default 0.7; giving it alone selects mmr);
        ``'off'``: the fused ranking as it is. ``explain=True``: each hit's ``explain["diversity"]``
        names the hits collapsed into it (docs/hybrid-search.md, "Duplicates and diversity").

        Memories out of force at ``valid_time`` (world time; default: the server's ``now()``) are
        left out, as ``dna.search`` does; ``include_retired=True`` turns that filter off.

        ``receipt=True``: the same search through ``dna.take_receipt`` (the same hits), which keeps a
        receipt of the answer (``SearchResult.receipt_id``; ``Client.replay`` re-runs it). The receipt
        pins the validity moment (default: the server's ``now()`` then) and the model; ``keep_query``
        stores the query text and embedding in it (default: only their digests, so a replay needs the
        query again). Bad arguments are refused by the server (``psycopg.Error``: 22023 naming the
        argument, with a hint of the valid values; 22001 for a query over 10,000 characters)."""
        if model_id is None and self.embedder is None:
            model_id = self.conn.execute("SELECT dna.scope_model(%s)", (scope,)).fetchone()[0]
        model = model_id or (self.embedder.model_id if self.embedder is not None else None)  # None: no documents
        embedding, error = None, None
        if self.embedder is not None and model == self.embedder.model_id and query and query.strip():
            self._check_prefixes(model)
            try:
                embedding = Vector([float(x) for x in embed_for(self.embedder, [query], "query")[0]])
            except Exception as exc:  # honest degradation: lexical only, flagged
                error = f"{type(exc).__name__}: {exc}"
        kinds = kinds_arg(kind)
        if receipt:
            return self._search_with_receipt(
                keep_query, query, embedding, error,
                {"scope": scope, "query": query, "model_id": model, "k": k, "kinds": kinds, "tenant": tenant,
                 "name_prefix": name_prefix, "candidates": candidates,
                 "weights": [float(w) for w in weights] if weights else None, "personal": personal,
                 "passages": passages, "offset": offset, "min_similarity": min_similarity,
                 "min_lexical_score": min_lexical_score, "exact": exact, "fusion": fusion,
                 "dense_weight": dense_weight, "explain": explain, "filter": dict(filter) if filter else None,
                 "diversity": diversity, "duplicate_similarity": duplicate_similarity, "mmr_lambda": mmr_lambda,
                 # JSON null: no validity filter; absent: the receipt pins the server's now()
                 "valid_time": False if include_retired else valid_time})
        with captured_notices(self.conn) as notices:
            rows = self.conn.execute(
                "SELECT scope, kind, name, tenant, score, title, snippet, similarity, lexical_score, "
                "rank_dense, rank_lexical, personal, passage, heading, char_start, char_end, highlight, "
                "dense_exact, floor_removed_dense, floor_removed_lexical, explain, metadata, degraded "
                "FROM dna.search(%s, %s, %s, %s, k => %s, kinds => %s, "
                "tenant => %s, name_prefix => %s, candidates => %s, weights => %s, personal => %s, "
                "valid_time => CASE WHEN %s THEN NULL ELSE coalesce(%s::timestamptz, now()) END, passages => %s, "
                "\"offset\" => %s, min_similarity => %s, min_lexical_score => %s, exact => %s, "
                "fusion => %s, dense_weight => %s, explain => %s, filter => %s, diversity => %s, "
                "duplicate_similarity => %s, mmr_lambda => %s)",
                (scope, query, embedding, model, k, kinds, tenant, name_prefix, candidates,
                 [float(w) for w in weights] if weights else None, personal, include_retired, valid_time,
                 passages, offset, min_similarity, min_lexical_score, exact, fusion, dense_weight,
                 explain, Jsonb(dict(filter)) if filter is not None else None, diversity, duplicate_similarity,
                 mmr_lambda)).fetchall()
        blank = not (query and query.strip())  # no hits by definition; nothing was degraded
        if rows:
            degraded = rows[0][-1]  # the server's word: no embedding, or the zero vector
        else:
            degraded = not blank and (embedding is None or not any(embedding.to_list()))
        return SearchResult(hits=[Hit(*row[:-1]) for row in rows], degraded=degraded,
                            model_id=model, error=error, notices=notices)

    def _search_with_receipt(self, keep_query: bool, query: str, embedding: Vector | None, error: str | None,
                             args: dict[str, Any]) -> SearchResult:
        """``search(..., receipt=True)``: the call through ``dna.take_receipt`` (its ``hits`` are
        ``dna.search_hit`` rows as JSON, mapped onto ``Hit`` by field name)."""
        if embedding is not None:
            args["query_embedding"] = embedding.to_list()
        with captured_notices(self.conn) as notices:
            answer = self._receipt("search", args, keep_query)
        names = [f.name for f in fields(Hit)]
        rows = answer["hits"]
        blank = not (query and query.strip())
        if rows:
            degraded = bool(rows[0]["degraded"])
        else:
            degraded = not blank and (embedding is None or not any(embedding.to_list()))
        return SearchResult(hits=[Hit(**{n: h.get(n) for n in names}) for h in rows], degraded=degraded,
                            model_id=args.get("model_id"), error=error, notices=notices,
                            receipt_id=answer["receipt_id"])

    def _check_prefixes(self, model: str) -> None:
        """ValueError when the registry records other role prefixes for ``model`` than the embedder's
        (once per model_id and client: the registry never changes them)."""
        if model in self._prefixes_checked:
            return
        row = self.conn.execute("SELECT query_prefix, document_prefix FROM dna.model_prefixes(%s)", (model,)).fetchone()
        mine = (role_prefix(self.embedder, "query"), role_prefix(self.embedder, "document"))
        if row is not None and tuple(row) != mine:
            raise ValueError(f"model_id {model!r} is registered with role prefixes {tuple(row)!r} (query, document), "
                             f"the embedder has {mine!r}: vectors of another embedding space")
        if row is not None:
            self._prefixes_checked.add(model)

    def delete(self, scope: str, kind: str, name: str, *, tenant: str = "", model_id: str | None = None) -> int:
        """Remove a document from both lanes (all models when ``model_id`` is None); returns rows deleted."""
        return self.conn.execute("SELECT dna.delete_document(%s, %s, %s, %s, %s)",
                                 (scope, kind, name, tenant, model_id)).fetchone()[0]

