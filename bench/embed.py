"""Embedding throughput of ``OnnxEmbeddingProvider`` on SciFact abstracts.

Documents per second for batch sizes 16/32/64, with texts length-sorted into batches (the
provider's default) and unsorted (input order), plus the process's peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``). A document is ``title + " " + text`` of a line of
``corpus.jsonl``; each is truncated to 256 tokens by the provider.

Usage (from the repository root)::

    python bench/embed.py [DATASET_DIR] [--limit 2000] [--batch-sizes 16,32,64] [--threads N]
                          [--model-dir DIR] [--out bench/results/embed.json]

Wall-clock docs/s depends on what else runs on the machine, so each run also records the process
CPU time (docs per CPU-second, all onnxruntime threads together) and the 1-minute load average.

``DATASET_DIR`` defaults to ``../shared/data/scifact`` relative to the repository root. One warm-up
``embed`` of 64 documents creates the session before any timing; all runs share that session. Prints a table (rich) and writes JSON to ``bench/results/embed.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--limit", type=int, default=2000, help="documents to embed (default 2000)")
    ap.add_argument("--batch-sizes", default="16,32,64")
    ap.add_argument("--threads", type=int, default=None, help="intra_op_num_threads")
    ap.add_argument("--model-dir", default=None, help="model.onnx + tokenizer.json directory")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "embed.json"))
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from pydna.embeddings.onnx import OnnxEmbeddingProvider

    console = Console()
    rss_before = peak_rss_mb()
    docs = load_docs(Path(args.dataset), args.limit)
    if not docs:
        console.print(f"[red]no documents in {args.dataset}/corpus.jsonl[/red]")
        return 1
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]

    base = OnnxEmbeddingProvider(args.model_dir, threads=args.threads)
    t0 = time.perf_counter()
    base.embed(docs[:64])  # creates the session (and pays first-run allocations)
    load_s = time.perf_counter() - t0
    tokenizer = base._tokenizer
    n_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(docs))

    runs = []
    for bs in batch_sizes:
        for sort in (True, False):
            # Same session, different batching: the batching knobs are plain attributes.
            base.batch_size, base.sort_by_length = bs, sort
            load_before = os.getloadavg()[0]
            t, c = time.perf_counter(), time.process_time()
            base.embed(docs)
            dt, cpu = time.perf_counter() - t, time.process_time() - c
            runs.append(
                {
                    "batch_size": bs,
                    "length_sorted": sort,
                    "seconds": round(dt, 3),
                    "docs_per_s": round(len(docs) / dt, 1),
                    "tokens_per_s": round(n_tokens / dt, 1),
                    "cpu_seconds": round(cpu, 3),
                    "docs_per_cpu_s": round(len(docs) / cpu, 1),
                    "loadavg_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                }
            )
            console.print(
                f"batch {bs:>3} sorted={sort!s:<5} {len(docs) / dt:8.1f} docs/s "
                f"({len(docs) / cpu:.1f} docs per CPU-second, load {os.getloadavg()[0]:.1f})"
            )

    result = {
        "provider": "OnnxEmbeddingProvider",
        "model_id": base.model_id,
        "source": base.source.description,
        "dataset": str(Path(args.dataset)),
        "docs": len(docs),
        "tokens_after_truncation": n_tokens,
        "max_tokens": 256,
        "threads": base.threads,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "onnxruntime": __import__("onnxruntime").__version__,
        "session_load_and_warmup_s": round(load_s, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "peak_rss_mb_before_model": round(rss_before, 1),
        "target_docs_per_s": TARGET_DOCS_PER_S,
        "runs": runs,
    }
    best = max(r["docs_per_s"] for r in runs)
    result["best_docs_per_s"] = best
    result["meets_target"] = best >= TARGET_DOCS_PER_S

    table = Table(
        title=f"{base.model_id}: {len(docs)} SciFact docs, {base.threads} threads, "
        f"peak RSS {result['peak_rss_mb']} MiB"
    )
    for col in ("batch", "length-sorted", "seconds", "docs/s", "tokens/s", "docs/CPU-s", "load"):
        table.add_column(col, justify="right")
    for r in runs:
        table.add_row(
            str(r["batch_size"]), "yes" if r["length_sorted"] else "no", f"{r['seconds']:.2f}",
            f"{r['docs_per_s']:.1f}", f"{r['tokens_per_s']:.0f}", f"{r['docs_per_cpu_s']:.1f}",
            f"{r['loadavg_1m_before_after'][1]:.1f}",
        )
    console.print(table)
    console.print(
        f"best {best:.1f} docs/s (target {TARGET_DOCS_PER_S:.0f}: "
        f"{'met' if result['meets_target'] else 'NOT met'})"
    )

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
