"""The embedding port every provider implements."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable


class EmbeddingError(RuntimeError):
    """A provider could not produce embeddings (model missing, runtime failure)."""


@runtime_checkable
class EmbeddingPort(Protocol):
    """What the client needs from an embedder.

    - ``model_id``: names the exact embedding space (two artifacts whose vectors are not
      interchangeable, e.g. an int8 and an fp32 export, have different ids). Stored with every
      vector and used as a filter on every read.
    - ``dims``: the vector width; it routes to ``dna.dna_search_docs_<dims>``.
    - ``embed(texts)``: ``n`` texts → float32 array of shape ``(n, dims)``, L2-normalised
      (a text without tokens may give the zero vector). A sequence of float lists is accepted
      from providers that do not use numpy.
    - ``query_prefix`` / ``document_prefix`` (optional, default ``""``): the role prefixes the model
      was trained with, put before a query / a document before embedding (see
      ``KNOWN_ROLE_PREFIXES``; all-MiniLM-L6-v2 has none). ``embed_for(port, texts, purpose)`` applies
      them; the client records them with the model_id (``dna.register_model``), so vectors of one
      model_id never mix purposes or prefixes.
    """

    model_id: str
    dims: int

    def embed(self, texts: Sequence[str]): ...


#: The purposes a text is embedded for.
PURPOSES = ("query", "document")

#: Role prefixes of well-known model families (from each model card): (query prefix, document prefix).
KNOWN_ROLE_PREFIXES: dict[str, tuple[str, str]] = {
    "intfloat/e5": ("query: ", "passage: "),                # E5 (Wang et al. 2022), multilingual-e5
    "BAAI/bge-en-v1.5": ("Represent this sentence for searching relevant passages: ", ""),  # bge-*-en-v1.5
    "sentence-transformers/all-MiniLM-L6-v2": ("", ""),     # symmetric: no prefixes
}


def role_prefix(port, purpose: str) -> str:
    """The prefix ``port`` puts before a text embedded for ``purpose`` (``"query"`` or ``"document"``)."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {PURPOSES}, got {purpose!r}")
    return getattr(port, f"{purpose}_prefix", "") or ""


def embed_for(port, texts: Sequence[str], purpose: str):
    """``port.embed`` of ``texts`` embedded for ``purpose``: each text behind the port's role prefix
    for that purpose. Without prefixes (MiniLM, the fake) exactly ``port.embed(texts)``."""
    prefix = role_prefix(port, purpose)
    return port.embed([prefix + t for t in texts] if prefix else texts)
