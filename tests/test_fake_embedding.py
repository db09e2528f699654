"""dna-fake-hash-v1: the SQL function and the Python provider reproduce the reference goldens
bit-for-bit as float32 (tests/data/conformance/dna/fake-embedding-golden.json, tests/data/README.md)."""
from __future__ import annotations

import json
import struct
from array import array

import pytest

from conftest import DATA
from pydna.embeddings import FakeEmbeddingProvider, fake_embed_one

GOLDEN = json.loads((DATA / "conformance" / "dna" / "fake-embedding-golden.json").read_text())
CASES = sorted(GOLDEN["vectors"].items())


def f32(values) -> bytes:
    return array("f", values).tobytes()


def test_golden_metadata():
    assert GOLDEN["model_id"] == FakeEmbeddingProvider().model_id == "dna-fake-hash-v1"
    assert GOLDEN["dims"] == FakeEmbeddingProvider().dims == 384
    assert len(CASES) == 5 and "" in GOLDEN["vectors"]


@pytest.mark.parametrize("text,expected", CASES, ids=[repr(t) for t, _ in CASES])
def test_python_provider_matches_golden(text, expected):
    assert f32(FakeEmbeddingProvider().embed([text])[0]) == f32(expected)
    assert f32(fake_embed_one(text)) == f32(expected)


@pytest.mark.parametrize("text,expected", CASES, ids=[repr(t) for t, _ in CASES])
def test_sql_function_matches_golden(sql, text, expected):
    # vector_send is pgvector's binary form: int16 dims, int16 unused, then big-endian float4s.
    raw = sql.execute("SELECT vector_send(dna.fake_embed(%s, 384))", (text,)).fetchone()[0]
    dims, _ = struct.unpack(">hh", raw[:4])
    got = struct.unpack(f">{dims}f", raw[4:])
    assert dims == 384
    assert f32(got) == f32(expected)


def test_sql_and_python_agree_on_other_text_and_widths(sql):
    for text, dims in [("Hybrid search: BM25 + dense, fused by RRF (k=60)!", 384), ("a b c a", 768),
                       ("Ünïcode wörds and CAPS 123", 16)]:
        raw = sql.execute("SELECT vector_send(dna.fake_embed(%s, %s))", (text, dims)).fetchone()[0]
        got = struct.unpack(f">{dims}f", raw[4:])
        assert f32(got) == f32(fake_embed_one(text, dims))


def test_sql_rejects_bad_dims(sql):
    import psycopg

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="dims"):
        sql.execute("SELECT dna.fake_embed('x', 0)")
