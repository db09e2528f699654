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
    """

    model_id: str
    dims: int

    def embed(self, texts: Sequence[str]): ...
