"""Embedding throughput of ``OnnxEmbeddingProvider`` on SciFact abstracts.

Documents per second for batch sizes 16/32/64, with texts length-sorted into batches (the
provider's default) and unsorted (input order), for each arithmetic of the int8 export
(``--computes``: ``w8a8`` integer products, the default, and ``float32`` the graph as exported),
plus peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``). Each configuration runs in a fresh Python process
so that its peak RSS is its own (onnxruntime's memory arena keeps what it grew to). A document is ``title + " " + text`` of a line of
``corpus.jsonl``; each is truncated to 256 tokens by the provider.

Usage (from the repository root)::

    python bench/embed.py [DATASET_DIR] [--limit 2000] [--batch-sizes 16,32,64] [--threads N]
                          [--computes w8a8,float32] [--model-dir DIR]
                          [--out bench/results/embed.json]

The target (40 docs/s) is judged on the first compute listed (the provider's default).

Wall-clock docs/s depends on what else runs on the machine, so each run also records the process
CPU time (docs per CPU-second, all onnxruntime threads together) and the 1-minute load average.

``DATASET_DIR`` (SciFact's BEIR folder) is needed: where to get it, bench/data_sets.py. In each
process one warm-up ``embed`` of one batch creates the session before the timing. Prints a table (rich) and writes JSON to ``bench/results/embed.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGET_DOCS_PER_S = 40.0


def load_docs(dataset: Path, limit: int) -> list[str]:
    """The first ``limit`` documents of ``dataset/corpus.jsonl`` as ``title + " " + text``."""
    docs: list[str] = []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if len(docs) >= limit:
                break
            row = json.loads(line)
            docs.append(f"{row.get('title', '')} {row.get('text', '')}".strip())
    return docs


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def run_one(dataset: Path, limit: int, batch_size: int, sort: bool, threads: int | None,
            model_dir: str | None, compute: str | None) -> dict:
    """One configuration in this (fresh) process: warm-up, timed ``embed`` of all docs, peak RSS."""
    from pydna.embeddings.onnx import OnnxEmbeddingProvider

    docs = load_docs(dataset, limit)
    p = OnnxEmbeddingProvider(model_dir, threads=threads, batch_size=batch_size,
                              sort_by_length=sort, compute=compute)
    t0 = time.perf_counter()
    p.embed(docs[:batch_size])  # creates the session
    load_s = time.perf_counter() - t0
    n_tokens = sum(len(e.ids) for e in p._tokenizer.encode_batch(docs))
    load_before = os.getloadavg()[0]
    t, c = time.perf_counter(), time.process_time()
    p.embed(docs)
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    import onnxruntime

    return {
        "compute": p.compute,
        "model_id": p.model_id,
        "batch_size": batch_size,
        "length_sorted": sort,
        "docs": len(docs),
        "seconds": round(dt, 3),
        "docs_per_s": round(len(docs) / dt, 1),
        "tokens_per_s": round(n_tokens / dt, 1),
        "cpu_seconds": round(cpu, 3),
        "docs_per_cpu_s": round(len(docs) / cpu, 1),
        "loadavg_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "session_load_s": round(load_s, 3),
        # shared facts, read once by the parent
        "tokens_after_truncation": n_tokens,
        "source": p.source.description,
        "threads": p.threads,
        "onnxruntime": onnxruntime.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--limit", type=int, default=2000, help="documents to embed (default 2000)")
    ap.add_argument("--batch-sizes", default="16,32,64")
    ap.add_argument("--threads", type=int, default=None, help="intra_op_num_threads")
    ap.add_argument("--model-dir", default=None, help="model.onnx + tokenizer.json directory")
    ap.add_argument("--computes", default="w8a8,float32",
                    help="arithmetics to measure, first = judged against the target")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "embed.json"))
    ap.add_argument("--one", nargs=3, metavar=("BATCH", "SORTED", "COMPUTE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    dataset = Path(args.dataset)

    if args.one:  # worker: one configuration, JSON on stdout
        bs, sort, compute = int(args.one[0]), args.one[1] == "1", args.one[2]
        print(json.dumps(run_one(dataset, args.limit, bs, sort, args.threads, args.model_dir,
                                 compute)))
        return 0

    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, Console().width))
    if not (dataset / "corpus.jsonl").is_file():
        console.print(f"[red]no {dataset}/corpus.jsonl[/red]")
        return 1
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    computes = [c.strip() for c in args.computes.split(",") if c.strip()]

    runs = []
    for compute, bs, sort in ((c, b, s) for c in computes for b in batch_sizes
                              for s in (True, False)):
        # A fresh process per configuration: its own peak RSS, no arena carried over.
        cmd = [sys.executable, str(Path(__file__).resolve()), str(dataset),
               "--limit", str(args.limit), "--one", str(bs), "1" if sort else "0", compute]
        if args.threads is not None:
            cmd += ["--threads", str(args.threads)]
        if args.model_dir is not None:
            cmd += ["--model-dir", args.model_dir]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO))
        if out.returncode != 0:
            console.print(f"[red]{compute} batch {bs} sorted={sort} failed:[/red]\n{out.stderr}")
            return 1
        r = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append(r)
        console.print(
            f"{compute:7s} batch {bs:>3} sorted={sort!s:<5} {r['docs_per_s']:8.1f} docs/s "
            f"({r['docs_per_cpu_s']:.1f} docs per CPU-second, load "
            f"{r['loadavg_1m_before_after'][1]:.1f}, peak RSS {r['peak_rss_mb']:.0f} MiB)"
        )

    shared = ("tokens_after_truncation", "source", "threads", "onnxruntime")
    facts = {k: runs[0][k] for k in shared}
    for r in runs:
        for k in shared:
            del r[k]
    first = runs[0]
    result = {
        "provider": "OnnxEmbeddingProvider",
        "model_id": runs[0]["model_id"],
        "compute": runs[0]["compute"],
        "source": facts["source"],
        "dataset": str(dataset),
        "docs": first["docs"],
        "tokens_after_truncation": facts["tokens_after_truncation"],
        "max_tokens": 256,
        "threads": facts["threads"],
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "onnxruntime": facts["onnxruntime"],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "target_docs_per_s": TARGET_DOCS_PER_S,
        "runs": runs,
    }
    result["best_docs_per_s_by_compute"] = {
        c: max(r["docs_per_s"] for r in runs if r["compute"] == c) for c in computes}
    best = result["best_docs_per_s_by_compute"][computes[0]]
    result["best_docs_per_s"] = best
    result["meets_target"] = best >= TARGET_DOCS_PER_S

    table = Table(
        title=f"all-MiniLM-L6-v2 ({result['source']}): {result['docs']} SciFact docs, "
              f"{result['threads']} threads"
    )
    for col in ("compute", "batch", "length-sorted", "seconds", "docs/s", "tokens/s", "docs/CPU-s", "load",
                "peak RSS MiB"):
        table.add_column(col, justify="right")
    for r in runs:
        table.add_row(
            r["compute"], str(r["batch_size"]), "yes" if r["length_sorted"] else "no", f"{r['seconds']:.2f}",
            f"{r['docs_per_s']:.1f}", f"{r['tokens_per_s']:.0f}", f"{r['docs_per_cpu_s']:.1f}",
            f"{r['loadavg_1m_before_after'][1]:.1f}", f"{r['peak_rss_mb']:.0f}",
        )
    console.print(table)
    for c in computes:
        console.print(f"{c}: model_id {next(r['model_id'] for r in runs if r['compute'] == c)}")
    console.print(
        f"best {computes[0]} {best:.1f} docs/s (target {TARGET_DOCS_PER_S:.0f}: "
        f"{'met' if result['meets_target'] else 'NOT met'})"
    )

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
