"""Recall latency of two databases holding the same 10,000 memories, measured in one run, query by query.

``bench/recall.py`` seeds a database and times it alone, so two trees compared by two of its runs meet
different machine loads (on a shared machine the same tree's p95 moved 2x between runs). Here two
databases seeded by ``bench/recall.py`` (one per tree: e.g. ``CREATE DATABASE recall_main TEMPLATE
dna_bench_recall_fake`` after main's run, the same after this tree's) are asked the same queries
(bench/recall.py's generator, same seed), alternating which goes first per query, for each mode:
``recall (read)`` (reconsolidate => false), ``recall (default)`` (reconsolidating: both databases get
the same writes) and ``recall (lexical)``. Prints p50/p95 per database and mode and their ratio.

Usage::

    python bench/recall_pair.py --a DSN_A --b DSN_B [--queries 300] [--k 5] [--out bench/results/recall_pair.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from recall import SCOPE, summarize, synth_memories, synth_queries  # noqa: E402

SQL = "SELECT dna.recall(%s, %s, %s, %s, k => %s, reconsolidate => %s, actor => 'bench')"


def main(argv: list[str] | None = None) -> int:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    from pydna.embeddings import FakeEmbeddingProvider

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="DSN of the first database (e.g. main's)")
    ap.add_argument("--b", required=True, help="DSN of the second (e.g. this tree's)")
    ap.add_argument("--memories", type=int, default=10_000, help="as seeded (for the query generator)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--out", default=str(BENCH / "results" / "recall_pair.json"))
    args = ap.parse_args(argv)
    emb = FakeEmbeddingProvider()
    queries = [q for q, _ in synth_queries(synth_memories(args.memories), args.queries)]
    vecs = [Vector([float(x) for x in v]) for v in emb.embed(queries)]
    conns = {}
    for label, dsn in (("a", args.a), ("b", args.b)):
        conns[label] = psycopg.connect(dsn, autocommit=True)
        register_vector(conns[label])
    load_start = os.getloadavg()
    out: dict[str, dict] = {}
    for mode, use_vec, recon in (("read", True, False), ("default", True, True), ("lexical", False, False)):
        times = {"a": [], "b": []}
        for i, (q, v) in enumerate(zip(queries, vecs)):
            order = ("a", "b") if i % 2 == 0 else ("b", "a")
            for label in order:
                t0 = time.perf_counter()
                conns[label].execute(SQL, (SCOPE, q, v if use_vec else None, emb.model_id, args.k, recon)).fetchone()
                if i >= 10:                                   # the first ten warm both up
                    times[label].append((time.perf_counter() - t0) * 1000)
        out[mode] = {label: summarize(ts) for label, ts in times.items()}
        out[mode]["p95_ratio_b_over_a"] = round(out[mode]["b"]["p95_ms"] / out[mode]["a"]["p95_ms"], 3)
        out[mode]["p50_ratio_b_over_a"] = round(out[mode]["b"]["p50_ms"] / out[mode]["a"]["p50_ms"], 3)
    load_end = os.getloadavg()
    for mode, r in out.items():
        print(f"recall ({mode}): a p50 {r['a']['p50_ms']:.2f} p95 {r['a']['p95_ms']:.2f} ms | "
              f"b p50 {r['b']['p50_ms']:.2f} p95 {r['b']['p95_ms']:.2f} ms | b/a p95 {r['p95_ratio_b_over_a']:.2f}x")
    print(f"load average {', '.join(f'{x:.2f}' for x in load_start)} -> {', '.join(f'{x:.2f}' for x in load_end)} "
          f"on {os.cpu_count()} CPUs")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"benchmark": "recall_pair", "results": out, "queries": args.queries,
                                          "load_start": load_start, "load_end": load_end,
                                          "command": "python bench/recall_pair.py " + " ".join(argv or sys.argv[1:])},
                                         indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
