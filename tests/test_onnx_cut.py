"""The ONNX embedder cuts a text before it tokenizes it: bounded work per text whatever its size,
and the same tokens (so the same vector) as tokenizing the whole text and keeping 256 tokens.

The work is measured by counting the characters handed to the tokenizer, never by timing.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from pydna.embeddings import OnnxEmbeddingProvider
from pydna.embeddings import onnx as onnx_mod

ENGLISH = ("The dense lane sees only the first 256 tokens of a document, so a long file is cut. "
           "Reciprocal rank fusion adds the lanes; BM25 scores the lexical one. ")
BOUND = onnx_mod.HEAD_CHARS + 4 * onnx_mod.HEAD_CHARS + onnx_mod.MAX_HEAD_CHARS     # 86,016


class CountingTokenizer:
    """The provider's tokenizer, counting the characters of every text it is given."""

    def __init__(self, inner):
        self.inner, self.chars, self.calls = inner, 0, 0

    def encode(self, text):
        self.chars += len(text)
        self.calls += 1
        return self.inner.encode(text)

    def encode_batch(self, texts):
        self.chars += sum(len(t) for t in texts)
        self.calls += 1
        return self.inner.encode_batch(texts)


@pytest.fixture(scope="module")
def loaded():
    p = OnnxEmbeddingProvider(compute="float32")
    p.embed(["warm up"])
    return p


@pytest.fixture
def counting(loaded, monkeypatch):
    counter = CountingTokenizer(loaded._tokenizer)
    monkeypatch.setattr(loaded, "_tokenizer", counter)
    return loaded, counter


def _cases():
    rng = random.Random(7)
    words = ["the", "quick", "brown", "fox", "café", "naïve", "résumé", "猫在沙发上睡觉", "don't", "e.g.", "x=1;",
             "foo-bar", "EADDRINUSE", "\t", "\n\n"]
    made = [" ".join(rng.choice(words) for _ in range(rng.choice([50, 900, 1500, 3000]))) for _ in range(60)]
    at_cut = onnx_mod.HEAD_CHARS
    return made + [
        "a" * 5000 + " b",                                          # one 100+ character word: [UNK]
        " " * 10_000 + "hello world",                               # whitespace runs longer than the head
        ("x" * 101 + " ") * 400,                                    # every word [UNK]
        "e" * (at_cut - 1) + "\u0301" * 3 + " tail" * 400,           # a combining accent across the cut
        "猫" * 10_000,                                               # one token per character
        "\x00" * 20_000 + " real words after control characters",  # removed by the normalizer
        "word " * (at_cut // 5) + "splitting-at-the-cut" + " more" * 400,
    ]


def test_tokens_are_those_of_the_whole_text(loaded):
    tok = loaded._tokenizer
    for text in _cases():
        assert onnx_mod.head_token_ids(tok, text) == tok.encode(text).ids, repr(text[:60])


def test_a_megabyte_gives_the_vector_of_its_prefix_and_of_the_whole_text(counting):
    provider, counter = counting
    big = (ENGLISH * 8000)[:1_000_000]
    vec = provider.embed([big])[0]
    assert counter.chars == onnx_mod.HEAD_CHARS                  # one head, nothing else
    prefix = provider.embed([big[:5000]])[0]
    assert np.array_equal(vec, prefix)
    # What the embedder computed before the cut: the whole text tokenized, then truncated.
    whole_ids = counter.inner.encode(big).ids
    assert len(whole_ids) == onnx_mod.MAX_TOKENS
    assert np.array_equal(vec, provider._run([whole_ids])[0])


def test_tokenizer_work_is_bounded_whatever_the_text(counting):
    provider, counter = counting
    hard = [" " * 1_000_000 + "hello", ("y" * 150 + " ") * 7000, "\x00" * 1_000_000, "猫" * 1_000_000,
            (ENGLISH * 8000)[:1_000_000]]
    for text in hard:
        counter.chars = 0
        provider.embed([text])
        assert counter.chars <= BOUND, (repr(text[:20]), counter.chars)
    assert BOUND == 86_016
    # A batch of five large texts: the tokenizer sees five heads.
    counter.chars = 0
    provider.embed([(ENGLISH * 8000)[:900_000 + i] for i in range(5)])
    assert counter.chars == 5 * onnx_mod.HEAD_CHARS


def test_past_the_longest_prefix_the_vector_is_that_of_the_prefix(loaded):
    text = " " * (onnx_mod.MAX_HEAD_CHARS + 10) + "hello"        # no token within MAX_HEAD_CHARS
    vec = loaded.embed([text])[0]
    assert np.array_equal(vec, loaded.embed([text[:onnx_mod.MAX_HEAD_CHARS]])[0])
    assert np.array_equal(vec, loaded.embed([""])[0])          # [CLS] [SEP]: the whitespace is nothing


def test_short_texts_are_tokenized_whole_in_one_batch(counting):
    provider, counter = counting
    texts = ["Short.", "", "O gato está dormindo no sofá.", ENGLISH * 20]
    got = provider.embed(texts)
    assert counter.calls == 1 and counter.chars == sum(min(len(t), onnx_mod.HEAD_CHARS) for t in texts)
    for text, vec in zip(texts, got):
        assert np.array_equal(vec, provider._run([counter.inner.encode(text).ids])[0])
