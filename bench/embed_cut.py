"""The ONNX embedder cuts a text before it tokenizes it (issue 12): time and tokenizer input for
large texts, beside the peer measured in the same run — tokenizing the whole text, then keeping 256
tokens (what the embedder did before). Both give the same token ids (checked here).

    .venv/bin/python bench/embed_cut.py [--sizes 10000,100000,956000] [--out bench/results/embed_cut.json]

Prints a table and writes JSON with the load average (os.getloadavg()) before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from pydna.embeddings import OnnxEmbeddingProvider
from pydna.embeddings import onnx as onnx_mod

REPO = Path(__file__).resolve().parents[1]


def corpus_text(size: int) -> str:
    """``size`` characters of real prose: the project's docs/ and README, repeated."""
    parts = [p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md"))]
    parts.append((REPO / "README.md").read_text(encoding="utf-8"))
    base = "\n\n".join(parts)
    return (base * (size // len(base) + 1))[:size]


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,956000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "embed_cut.json"))
    args = ap.parse_args()
    load_before = os.getloadavg()
    provider = OnnxEmbeddingProvider()
    provider.embed(["warm up"])
    tok = provider._tokenizer
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        text = corpus_text(size)
        whole_ids = tok.encode(text).ids
        head_ids = onnx_mod.head_token_ids(tok, text)
        assert whole_ids == head_ids, size
        t_whole = best_of(lambda: tok.encode(text), args.repeat)
        t_head = best_of(lambda: onnx_mod.head_token_ids(tok, text), args.repeat)
        t_embed = best_of(lambda: provider.embed([text]), args.repeat)
        t_embed_old = best_of(lambda: provider._run([tok.encode(text).ids]), args.repeat)
        same = bool(np.array_equal(provider.embed([text])[0], provider._run([whole_ids])[0]))
        rows.append({"chars": size, "tokenize_whole_s": t_whole, "tokenize_head_s": t_head,
                     "embed_now_s": t_embed, "embed_before_s": t_embed_old, "same_vector": same,
                     "chars_tokenized_now": min(size, onnx_mod.HEAD_CHARS)})
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; best of {args.repeat}")
    print(f"{'chars':>9} | {'tokenize whole':>14} | {'tokenize head':>13} | {'embed before':>12} | "
          f"{'embed now':>9} | same vector")
    for r in rows:
        print(f"{r['chars']:>9,} | {r['tokenize_whole_s']:>12.4f} s | {r['tokenize_head_s']:>11.4f} s | "
              f"{r['embed_before_s']:>10.4f} s | {r['embed_now_s']:>7.4f} s | {r['same_vector']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"model_id": provider.model_id, "repeat": args.repeat,
                                          "loadavg_before": load_before, "loadavg_after": load_after,
                                          "rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
