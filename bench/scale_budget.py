"""The lexical lane's budget and rescoring depth at scale, against exhaustive BM25 (issue 11).

Usage (after ``python bench/scale.py --docs 1000000 --keep``, on the kept database)::

    python bench/scale_budget.py DSN [--scope scale] [--model-id M] [--split test|train]
                                     [--grid 20000/200,20000/400,40000/200] [--out bench/results/scale-budget.json]

For each query of the split (SciFact claims; ``train`` is where defaults are chosen): the exhaustive
top 10 (``dna.bm25_lane(..., exhaustive => true)``) once, then every ``budget/C`` of the grid,
timed (wall and backend CPU from /proc/<pid>/schedstat) with the load average, and compared with
the exhaustive list: identical top 10, overlap@10, certified. Queries are split by their rarest
term's df (``dna.bm25_explain``): the "no rare term" ones (rarest df > budget) are where the budget
doubles by default, so the row ``no-doubling`` answers them with the budget not doubled (it asks
for half the budget, so that the doubled one is the default) to measure what the doubling buys.
Prints a table, writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[1]


def cpu_ns(conn) -> int | None:
    try:
        with open(f"/proc/{conn.info.backend_pid}/schedstat") as fh:
            return int(fh.read().split()[0])
    except OSError:
        return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs)) - 1))] if xs else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dsn")
    ap.add_argument("--scope", default="scale")
    ap.add_argument("--model-id", default="all-MiniLM-L6-v2-onnx-int8-w8a8")
    ap.add_argument("--split", default="test")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--grid", default="20000/200,20000/400,10000/200,40000/200")
    ap.add_argument("--dataset", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "scale-budget.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    root = Path(args.dataset)
    ids = {line.split("\t")[0] for line in (root / "qrels" / f"{args.split}.tsv").read_text().splitlines()[1:]}
    queries = [json.loads(x) for x in (root / "queries.jsonl").read_text().splitlines()]
    queries = [(q["_id"], q["text"]) for q in queries if q["_id"] in ids][:args.queries]
    grid = [tuple(map(int, g.split("/"))) for g in args.grid.split(",")]
    with psycopg.connect(args.dsn, autocommit=True) as c:
        cfg = c.execute("SELECT ts_config::text, bm25_k1, bm25_b FROM dna.search_config(%s)", (args.scope,)).fetchone()
        terms = {q: c.execute("SELECT dna.bm25_terms(%s, %s::regconfig)", (t, cfg[0])).fetchone()[0] for q, t in queries}
        lane = ("SELECT doc_id, score, exact FROM dna.bm25_lane(%s, %s, '', %s, %s, %s, 10, NULL, %s, %s, false, %s) "
                "ORDER BY score DESC, doc_id LIMIT 10")
        rarest, exact = {}, {}
        print(f"exhaustive top 10 of {len(queries)} queries …", file=sys.stderr, flush=True)
        for q, _ in queries:
            e = c.execute("SELECT dna.bm25_explain(%s, %s, %s)", (args.scope, dict(queries)[q], args.model_id)).fetchone()[0]
            rarest[q] = e.get("rarest_df") or 0
            exact[q] = [r[0] for r in c.execute(lane, (args.scope, args.model_id, terms[q], cfg[1], cfg[2], None, True, None))]
        rows = []
        variants = [(f"budget {b:,} / C {cand}", b, cand, False) for b, cand in grid] + \
                   [("no-doubling (budget 20,000 / C 200)", 20000, 200, True)]
        for name, budget, cand, no_doubling in variants:
            per = {}
            for q, _ in queries:
                asked = budget // 2 if no_doubling and rarest[q] > budget else budget
                c0, t0 = cpu_ns(c), time.perf_counter()
                got = c.execute(lane, (args.scope, args.model_id, terms[q], cfg[1], cfg[2], asked, False, cand)).fetchall()
                wall, c1 = (time.perf_counter() - t0) * 1000, cpu_ns(c)
                ids10 = [r[0] for r in got]
                per[q] = {"wall_ms": wall, "cpu_ms": None if c0 is None or c1 is None else (c1 - c0) / 1e6,
                          "identical": ids10 == exact[q], "overlap": len(set(ids10) & set(exact[q])) / max(1, len(exact[q])),
                          "certified": bool(got and got[0][2]), "rarest_df": rarest[q]}
            for subset, sel in (("all", lambda r: True), ("no rare term", lambda r: r["rarest_df"] > 20000)):
                xs = [r for r in per.values() if sel(r)]
                if not xs:
                    continue
                rows.append({"variant": name, "queries": subset, "n": len(xs),
                             "identical": sum(r["identical"] for r in xs), "overlap@10": round(statistics.fmean(r["overlap"] for r in xs), 4),
                             "certified": sum(r["certified"] for r in xs),
                             "wall_p50_ms": round(pct([r["wall_ms"] for r in xs], 50), 2), "wall_p95_ms": round(pct([r["wall_ms"] for r in xs], 95), 2),
                             "cpu_p50_ms": round(pct([r["cpu_ms"] for r in xs if r["cpu_ms"] is not None], 50) or 0, 2),
                             "cpu_p95_ms": round(pct([r["cpu_ms"] for r in xs if r["cpu_ms"] is not None], 95) or 0, 2),
                             "load1": round(os.getloadavg()[0], 2)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        n_docs = c.execute("SELECT n_docs FROM dna.bm25_stats(%s, %s, '')", (args.scope, args.model_id)).fetchone()[0]
    print(f"| variant | queries | n | identical top 10 | overlap@10 | certified | wall p50/p95 ms | CPU p50/p95 ms | load |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['queries']} | {r['n']} | {r['identical']} | {r['overlap@10']} | {r['certified']} | "
              f"{r['wall_p50_ms']} / {r['wall_p95_ms']} | {r['cpu_p50_ms']} / {r['cpu_p95_ms']} | {r['load1']} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"docs": n_docs, "split": args.split, "scope": args.scope, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
