"""``dna-fake-hash-v1``: the deterministic feature-hashing embedder.

Bit-identical (as float32) to the SQL function ``dna.fake_embed`` and to the reference goldens in
``shared/conformance/dna/fake-embedding-golden.json``. Scheme: tokens ``[a-z0-9]+`` of the
lower-cased text; per token SHA-256; index = first 4 bytes big-endian mod dims; sign = +1 if byte 4
is odd else −1; integer counts; L2-normalise (in float64, then stored as float32); no tokens → the
zero vector. It carries no semantics: it is a floor for tests and offline use, not a model.
"""
from __future__ import annotations

import hashlib
import math
import re
from array import array
from typing import Sequence

FAKE_MODEL_ID = "dna-fake-hash-v1"
_TOKEN = re.compile(r"[a-z0-9]+")


def fake_embed_one(text: str, dims: int = 384) -> list[float]:
    """One text → ``dims`` float64 values (the exact values before float32 storage)."""
    if dims < 1:
        raise ValueError(f"dims must be >= 1, got {dims}")
    counts = [0] * dims
    for token in _TOKEN.findall(text.lower()):
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        index = int.from_bytes(digest[:4], "big") % dims
        counts[index] += 1 if digest[4] % 2 == 1 else -1
    norm = math.sqrt(sum(c * c for c in counts))
    if norm == 0:
        return [0.0] * dims
    return [c / norm for c in counts]


class FakeEmbeddingProvider:
    """Zero-dependency provider implementing ``EmbeddingPort`` with ``dna-fake-hash-v1``."""

    def __init__(self, dims: int = 384):
        self.dims = dims
        self.model_id = FAKE_MODEL_ID if dims == 384 else f"{FAKE_MODEL_ID}-{dims}"

    def embed(self, texts: Sequence[str]) -> list[array]:
        """``n`` texts → ``n`` float32 arrays of ``dims`` values."""
        return [array("f", fake_embed_one(t, self.dims)) for t in texts]

    def __repr__(self) -> str:
        return f"FakeEmbeddingProvider(model_id={self.model_id!r}, dims={self.dims})"
