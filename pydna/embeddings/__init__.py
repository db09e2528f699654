"""Embedding providers: the ``EmbeddingPort`` protocol and its implementations.

``FakeEmbeddingProvider`` has no dependencies. ``OnnxEmbeddingProvider`` (extra ``onnx``) is
imported lazily on attribute access so that ``import pydna`` never imports onnxruntime or
tokenizers.
"""
from __future__ import annotations

from pydna.embeddings.base import KNOWN_ROLE_PREFIXES, EmbeddingError, EmbeddingPort, embed_for, role_prefix
from pydna.embeddings.fake import FAKE_MODEL_ID, FakeEmbeddingProvider, fake_embed_one

__all__ = [
    "EmbeddingPort",
    "EmbeddingError",
    "KNOWN_ROLE_PREFIXES",
    "embed_for",
    "role_prefix",
    "FakeEmbeddingProvider",
    "FAKE_MODEL_ID",
    "fake_embed_one",
    "OnnxEmbeddingProvider",
    "get_provider",
]


def __getattr__(name: str):
    if name == "OnnxEmbeddingProvider":
        from pydna.embeddings.onnx import OnnxEmbeddingProvider

        return OnnxEmbeddingProvider
    if name == "get_provider":
        from pydna.embeddings.select import get_provider

        return get_provider
    raise AttributeError(name)
