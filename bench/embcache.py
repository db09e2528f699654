"""A disk cache in front of an ``EmbeddingPort``: vectors keyed by ``model_id`` + SHA-256 of the text.

``CachedEmbedder(provider)`` is itself an ``EmbeddingPort`` (same ``model_id`` and ``dims``), so it
can be handed to ``pydna.connect(..., embedder=...)``: the client's public indexing path runs
unchanged, and reruns of a benchmark never embed the same text twice. The cache lives in
``bench/.cache/<model_id>/`` as ``vectors.npy`` (float32, one row per text) + ``keys.txt`` (one
hex SHA-256 per row, same order); new vectors are appended on ``flush()``.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Sequence

import numpy as np

CACHE_ROOT = Path(__file__).resolve().parent / ".cache"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    def __init__(self, provider, root: Path = CACHE_ROOT):
        self.provider = provider
        self.model_id = provider.model_id
        self.dims = provider.dims
        self.source = getattr(provider, "source", None)   # the tokenizer file, for passage sizing
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model_id)
        self.dir = Path(root) / safe
        self.dir.mkdir(parents=True, exist_ok=True)
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._vectors = np.zeros((0, self.dims), dtype=np.float32)
        keys_file, vec_file = self.dir / "keys.txt", self.dir / "vectors.npy"
        if keys_file.exists() and vec_file.exists():
            keys = keys_file.read_text().split()
            vecs = np.load(vec_file)
            n = min(len(keys), len(vecs))
            self._keys, self._vectors = keys[:n], vecs[:n].astype(np.float32)
            self._index = {k: i for i, k in enumerate(self._keys)}
        self._pending_keys: list[str] = []
        self._pending: list[np.ndarray] = []
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        keys = [text_key(t) for t in texts]
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        missing = [i for i, k in enumerate(keys) if k not in self._index]
        # de-duplicate within the call
        todo: dict[str, int] = {}
        for i in missing:
            todo.setdefault(keys[i], i)
        if todo:
            vecs = np.asarray(self.provider.embed([texts[i] for i in todo.values()]), dtype=np.float32)
            for k, v in zip(todo.keys(), vecs):
                self._index[k] = len(self._keys)
                self._keys.append(k)
                self._pending_keys.append(k)
                self._pending.append(v)
            self._vectors = np.vstack([self._vectors, vecs])
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        for i, k in enumerate(keys):
            out[i] = self._vectors[self._index[k]]
        return out

    def flush(self) -> None:
        if not self._pending:
            return
        np.save(self.dir / "vectors.npy", self._vectors)
        (self.dir / "keys.txt").write_text("\n".join(self._keys) + "\n")
        self._pending, self._pending_keys = [], []
