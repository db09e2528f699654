"""A document to index (``Record``) and the metadata of a record mapping: what ``Client.index`` and
``dna index`` take. Plain data; no database."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Record:
    """A document to index: ``kind``/``name`` identify it in a scope; ``title`` + ``body`` are its text."""

    kind: str
    name: str
    body: str
    title: str | None = None
    tenant: str = ""
    snippet: str | None = None
    #: How to cut ``body`` into passages: "markdown", "rst" or "text"; None = by ``name``'s suffix.
    format: str | None = None
    #: What filters read (``dna.search(filter => ...)``): a JSON object; None = none (``{}``).
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)

    @classmethod
    def coerce(cls, item: "Record | Mapping[str, Any]", kind: str | None = None, tenant: str = "") -> "Record":
        """A ``Record`` from a mapping: the known keys (``RECORD_KEYS``) are its fields, every other
        key goes into ``metadata`` (an explicit ``metadata`` mapping wins over them)."""
        if isinstance(item, Record):
            return item
        body = item.get("body", item.get("text"))
        return cls(kind=item.get("kind") or kind or "", name=str(item.get("name", item.get("_id", ""))),
                   body=body if body is not None else "", title=item.get("title"),
                   tenant=item.get("tenant", tenant) or "", snippet=item.get("snippet"),
                   format=item.get("format"), metadata=record_metadata(item))


#: The keys of a record mapping (a JSONL line) that are a ``Record``'s own fields; any other key is metadata.
RECORD_KEYS = frozenset({"kind", "name", "_id", "title", "body", "text", "tenant", "snippet", "format", "metadata"})


def record_metadata(item: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a record mapping: its keys beyond ``RECORD_KEYS``, then the entries of its
    ``metadata`` mapping (which win). A ``metadata`` that is not a mapping is refused (ValueError)."""
    extra = {k: v for k, v in item.items() if k not in RECORD_KEYS}
    given = item.get("metadata")
    if given is not None and not isinstance(given, Mapping):
        raise ValueError(f"`metadata` must be a JSON object, got {type(given).__name__}")
    return {**extra, **dict(given or {})}


def heading_context(title: str | None, heading: str | None) -> str | None:
    """What a passage's heading path adds to its document's title: the path without a first title equal
    to ``title`` (``"Django's cache framework > The per-view cache"`` → ``"The per-view cache"``); None when
    nothing is left. The rule of ``dna.heading_context`` (sql/documents.sql), whose result every search
    row's tsvector holds."""
    if heading is None:
        return None
    if title is not None:
        if heading == title:
            heading = ""
        elif heading.startswith(title + " > "):
            heading = heading[len(title) + 3:]
    return heading.strip() or None


def embedding_text(title: str | None, heading: str | None, body: str) -> str:
    """The text a document's row is embedded from: its title, its passage's heading context and its
    body, joined by spaces (what the row's tsvector is made of too)."""
    return " ".join(t for t in (title, heading_context(title, heading), body) if t)
