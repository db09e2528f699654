"""W8A8 (integer products) against the float32 computation of the same int8 export.

The W8A8 graph must stay in the same embedding space as the export computed in float32 (high
cosine per text, same nearest neighbours), give the same vectors whichever integer kernel runs
(uint8×int8 on VNNI CPUs, uint8×uint8 elsewhere), and refuse what it cannot build.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pydna.embeddings import EmbeddingError, OnnxEmbeddingProvider
from pydna.embeddings import onnx as onnx_mod
from pydna.embeddings import onnx_w8a8

REPO = Path(__file__).resolve().parent.parent

TEXTS = [
    "Alveolar macrophages regulate lung inflammation after viral infection.",
    "Aspirin lowers the risk of heart attacks.",
    "Taking aspirin reduces myocardial infarction risk.",
    "The central bank raised interest rates again.",
    "O gato está dormindo no sofá da sala, perto da janela.",
    "猫在沙发上睡觉。",
    "",
    "Short.",
    " ".join(["token"] * 300),
    "Row-level security makes PostgreSQL enforce tenant isolation for every query. " * 8,
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(onnx_mod.ENV_MODEL_DIR, raising=False)
    monkeypatch.delenv(onnx_mod.ENV_COMPUTE, raising=False)


@pytest.fixture(scope="module")
def vectors() -> dict[str, np.ndarray]:
    w8a8 = OnnxEmbeddingProvider(compute="w8a8")
    f32 = OnnxEmbeddingProvider(compute="float32")
    return {"w8a8": w8a8.embed(TEXTS), "float32": f32.embed(TEXTS)}


def test_same_space_as_float32(vectors):
    cos = (vectors["w8a8"] * vectors["float32"]).sum(axis=1)
    assert cos.mean() > 0.995, cos
    assert cos.min() > 0.98, cos  # the worst is "" ([CLS] [SEP]): two tokens average no noise away
    real = [c for t, c in zip(TEXTS, cos) if len(t.split()) >= 5]
    assert min(real) > 0.995, cos
    # but not the same bytes: that is why it has its own model_id
    assert vectors["w8a8"].tobytes() != vectors["float32"].tobytes()


def test_same_neighbours_as_float32(vectors):
    """Each text's ranking of the others is the same under both computations (top 3)."""
    for name in ("w8a8", "float32"):
        sims = vectors[name] @ vectors[name].T
        np.fill_diagonal(sims, -2)
        vectors[f"{name}_top"] = np.argsort(-sims, axis=1)[:, :3]
    assert (vectors["w8a8_top"][:, 0] == vectors["float32_top"][:, 0]).all()
    overlap = [len(set(a) & set(b)) for a, b in zip(vectors["w8a8_top"], vectors["float32_top"])]
    assert sum(overlap) >= 0.9 * 3 * len(TEXTS), overlap


def test_unsigned_weights_give_the_same_vectors(vectors, monkeypatch):
    """The uint8×uint8 layout (CPUs without VNNI) computes the same integer sums."""
    monkeypatch.setattr(onnx_w8a8, "signed_weights_safe", lambda *a, **k: False)
    unsigned = OnnxEmbeddingProvider(compute="w8a8").embed(TEXTS)
    np.testing.assert_allclose(unsigned, vectors["w8a8"], atol=1e-5, rtol=0)


def test_signed_weights_only_where_the_kernel_cannot_saturate(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    monkeypatch.setattr(onnx_w8a8.platform, "machine", lambda: "x86_64")
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni\n")
    assert onnx_w8a8.signed_weights_safe(str(info)) is True
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx_vnni\n")
    assert onnx_w8a8.signed_weights_safe(str(info)) is True
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512bw\n")
    assert onnx_w8a8.signed_weights_safe(str(info)) is False  # AVX2/AVX-512 without VNNI
    assert onnx_w8a8.signed_weights_safe(str(tmp_path / "missing")) is False  # unknown: safe kernel
    monkeypatch.setattr(onnx_w8a8.platform, "machine", lambda: "aarch64")
    assert onnx_w8a8.signed_weights_safe(str(tmp_path / "missing")) is True


def test_batch_composition_does_not_change_a_vector():
    """Per-token activation scales: a text's vector is the same alone, in any batch, any padding."""
    p = OnnxEmbeddingProvider(compute="w8a8", batch_size=len(TEXTS), sort_by_length=False)
    together = p.embed(TEXTS)
    reversed_ = p.embed(TEXTS[::-1])[::-1]
    alone = np.stack([p.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)
    np.testing.assert_allclose(together, reversed_, atol=1e-5, rtol=0)


def test_builder_refuses_another_export(tmp_path):
    """A graph whose linear weights are not int8 (here: the export with its weights folded to
    float32 by onnxruntime) cannot be rebuilt; the error says what to use instead."""
    import onnxruntime as ort

    model, _ = onnx_mod.offline_package_paths()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(tmp_path / "folded.onnx")
    ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
    with pytest.raises(EmbeddingError, match="not the int8 all-MiniLM-L6-v2 export.*compute='float32'"):
        onnx_w8a8.build_w8a8_model(tmp_path / "folded.onnx")


def test_missing_onnx_package_is_a_clear_error():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["onnx"] = None  # as if not installed
        from pydna.embeddings import OnnxEmbeddingProvider, EmbeddingError
        try:
            OnnxEmbeddingProvider(compute="w8a8").embed(["hello"])
        except EmbeddingError as exc:
            print("ERROR:", exc)
        v = OnnxEmbeddingProvider(compute="float32").embed(["hello"])
        print("FLOAT32:", v.shape)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(onnx_mod.ENV_MODEL_DIR, None)
    env.pop(onnx_mod.ENV_COMPUTE, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ERROR: the onnx package is needed to build the W8A8 graph" in out.stdout
    assert "pip install 'pydna[onnx]'" in out.stdout and "compute='float32'" in out.stdout
    assert "FLOAT32: (1, 384)" in out.stdout
