"""What ``dna index`` records of its inputs: where each document came from (``dna.source_conflicts``,
``dna.record_document_sources``) and each input's digest per model_id, so that an unchanged input is
skipped before it is split (``dna.unchanged_sources``, ``dna.record_source_digests``).
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Iterator

from rich.text import Text

from pydna.cli_common import stderr

if TYPE_CHECKING:
    from pydna.client import Record

#: Keys per call of dna.source_conflicts / dna.record_document_sources.
SOURCE_CHUNK = 5000


def _key_arrays(keys: list[tuple[str, str, str, str]]) -> tuple[list[str], ...]:
    return tuple(list(column) for column in zip(*keys)) if keys else ([], [], [], [])


def warn_replaced(conn, scope: str, keys: list[tuple[str, str, str, str]]) -> list[tuple]:
    """Warn (stderr, one line each) about the documents about to be written that stand in ``scope``
    indexed from another source (``dna.source_conflicts``); returns them."""
    found = []
    for start in range(0, len(keys), SOURCE_CHUNK):
        kinds, names, tenants, sources = _key_arrays(keys[start:start + SOURCE_CHUNK])
        found += conn.execute("SELECT kind, name, tenant, source, new_source FROM dna.source_conflicts(%s, %s, %s, %s, %s)",
                              (scope, kinds, names, tenants, sources)).fetchall()
    err = stderr()
    for kind_, name, tenant_, old, new in found:
        where = f" (tenant {tenant_})" if tenant_ else ""
        err.print(Text(f"warning: {kind_}/{name}{where} in scope {scope} was indexed from {old}; it is replaced by "
                       f"{new} (--name-prefix keeps both)", style="yellow"), soft_wrap=True)
    return found


def input_digest(record: "Record", passages: bool, splitter: str) -> str:
    """sha256 of everything that decides an input's rows under one model_id: kind, name, tenant, title,
    text, snippet, format, metadata, passages on/off and the splitter (``splitter_fingerprint``)."""
    h = hashlib.sha256()
    for part in (record.kind, record.name, record.tenant, record.title or "", record.body, record.snippet or "",
                 record.format or "", json.dumps(dict(record.metadata or {}), sort_keys=True, default=str),
                 "passages" if passages else "whole", splitter):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


class UnchangedFilter:
    """Streams the inputs that changed since they were last written under ``model_id`` and counts the
    rest: per chunk of inputs one ``dna.unchanged_sources`` call says which digests are the recorded
    ones, so an unchanged file is neither split into passages nor sent to the server again. Keeps each
    input's digest for :meth:`record` (``dna.record_source_digests``). On a database before revision
    0021 (no ``dna.unchanged_sources``) every input streams, as before."""

    CHUNK = 500

    def __init__(self, conn, scope: str, model_id: str, passages: bool, sources: dict[tuple[str, str, str], str]):
        from pydna.passages import splitter_fingerprint

        self.conn, self.scope, self.model_id, self.passages, self.sources = conn, scope, model_id, passages, sources
        self.splitter = splitter_fingerprint()
        self.enabled = conn.execute("SELECT to_regproc('dna.unchanged_sources') IS NOT NULL").fetchone()[0]
        self.unchanged: list["Record"] = []
        self.streamed: list["Record"] = []
        self.digests: dict[tuple[str, str, str], str] = {}
        self.rows = 0              # rows (passages) of the unchanged inputs' documents

    def __call__(self, records: Iterator["Record"], on_skip=None) -> Iterator["Record"]:
        chunk: list["Record"] = []
        for record in records:
            chunk.append(record)
            if len(chunk) >= self.CHUNK:
                yield from self._pass(chunk, on_skip)
                chunk = []
        if chunk:
            yield from self._pass(chunk, on_skip)

    def _pass(self, chunk: list["Record"], on_skip) -> Iterator["Record"]:
        digests = [input_digest(r, self.passages, self.splitter) for r in chunk]
        for r, d in zip(chunk, digests):
            self.digests[(r.kind, r.name, r.tenant)] = d
        same: dict[int, int] = {}
        if self.enabled:
            same = {row[0]: row[1] for row in self.conn.execute(
                "SELECT ord, passages FROM dna.unchanged_sources(%s, %s, %s, %s, %s, %s)",
                (self.scope, self.model_id, [r.kind for r in chunk], [r.name for r in chunk],
                 [r.tenant for r in chunk], digests))}
        for i, record in enumerate(chunk, start=1):
            if i in same:
                self.unchanged.append(record)
                self.rows += same[i]
                if on_skip:
                    on_skip(same[i])
                continue
            self.streamed.append(record)
            yield record

    def _done(self, written: int | None) -> list["Record"]:
        return self.unchanged + (self.streamed if written is None else self.streamed[:written])

    def done_keys(self, written: int | None = None) -> list[tuple[str, str, str, str]]:
        """(kind, name, tenant, source) of the unchanged inputs and the first ``written`` streamed ones."""
        return [(r.kind, r.name, r.tenant, self.sources.get((r.kind, r.name, r.tenant))) for r in self._done(written)]

    def record(self, written: int | None = None) -> None:
        """Record the digests of the unchanged inputs and of the first ``written`` streamed ones (all: None)."""
        if not self.enabled:
            return
        done = self._done(written)
        for start in range(0, len(done), SOURCE_CHUNK):
            part = done[start:start + SOURCE_CHUNK]
            keys = [(r.kind, r.name, r.tenant) for r in part]
            self.conn.execute("SELECT dna.record_source_digests(%s, %s, %s, %s, %s, %s, %s)",
                              (self.scope, self.model_id, [k[0] for k in keys], [k[1] for k in keys],
                               [k[2] for k in keys], [self.sources.get(k) for k in keys],
                               [self.digests[k] for k in keys]))


def record_sources(conn, scope: str, keys: list[tuple[str, str, str, str]]) -> None:
    """Record where the written documents came from (``dna.record_document_sources``)."""
    for start in range(0, len(keys), SOURCE_CHUNK):
        kinds, names, tenants, sources = _key_arrays(keys[start:start + SOURCE_CHUNK])
        conn.execute("SELECT dna.record_document_sources(%s, %s, %s, %s, %s)", (scope, kinds, names, tenants, sources))
