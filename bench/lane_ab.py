"""One call, two databases of one server, interleaved claim by claim: backend CPU and answers side by side.

Usage (from the repository root)::

    python bench/lane_ab.py "host=… user=postgres" DB_A,DB_B [--scope scale] [--model-id M]
                            [--call bm25|lexical] [--queries 300] [--rounds 3] [--dataset DIR] [--out FILE]

For A/B comparisons of two revisions on the same rows: e.g. a copy of a kept database (``CREATE DATABASE b
TEMPLATE a``) migrated up or down with ``pydna.migrate``. For every SciFact test claim (``--dataset``,
default ``../shared/data/scifact``), each round calls ``dna.bm25(scope, claim, model_id, k => 10)`` (``--call
bm25``) or ``dna.search(scope, claim, NULL, model_id, k => 10)`` (``lexical``) on both databases, the order
swapped every claim and round; per claim the median of its rounds, then p50 / p95 over the claims of the
backend's CPU time (``/proc/<pid>/schedstat``). Answers (names and scores) of the first round are compared.
Prints a table with the 1-minute load average; writes JSON (``--out``).
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

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from beir import load_dataset, pct  # noqa: E402
from scale import BackendCpu  # noqa: E402

CALLS = {"bm25": "SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10)",
         "lexical": "SELECT name, score FROM dna.search(%s, %s, NULL, %s, k => 10)"}


def claims(dataset: Path, limit: int) -> list[str]:
    """The first ``limit`` SciFact test claims, in queries.jsonl's order."""
    return list(load_dataset(dataset, "test")[1].values())[:limit]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("server", help="libpq options of the server without dbname (a superuser's, or the owner's)")
    ap.add_argument("dbs", help="two database names, comma-separated")
    ap.add_argument("--scope", default="scale")
    ap.add_argument("--model-id", default="all-MiniLM-L6-v2-onnx-int8-w8a8")
    ap.add_argument("--call", choices=sorted(CALLS), default="bm25")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dbs = args.dbs.split(",")
    if len(dbs) != 2:
        raise SystemExit("lane_ab: name two databases, comma-separated")
    qs = claims(args.dataset, args.queries)
    conns = {d: psycopg.connect(f"{args.server} dbname={d}", autocommit=True) for d in dbs}
    cpus = {d: BackendCpu(conns[d]) for d in dbs}
    cpu = {d: [[] for _ in qs] for d in dbs}
    answers = {d: [] for d in dbs}
    load = [os.getloadavg()[0], None]
    t0 = time.time()
    for rnd in range(args.rounds):
        for i, q in enumerate(qs):
            for d in (dbs if (i + rnd) % 2 == 0 else dbs[::-1]):
                c0 = cpus[d].read()
                rows = conns[d].execute(CALLS[args.call], (args.scope, q, args.model_id)).fetchall()
                cpu[d][i].append((cpus[d].read() - c0) / 1e6)
                if rnd == 0:
                    answers[d].append([(n, round(s, 9)) for n, s in rows])
    load[1] = os.getloadavg()[0]
    result = {"command": "python bench/lane_ab.py " + " ".join(sys.argv[1:]), "call": args.call, "scope": args.scope,
              "queries": len(qs), "rounds": args.rounds, "seconds": round(time.time() - t0, 1), "load1": load,
              "identical": sum(a == b for a, b in zip(answers[dbs[0]], answers[dbs[1]])), "databases": {}}
    for d in dbs:
        med = [statistics.median(x) for x in cpu[d]]
        result["databases"][d] = {"cpu_p50_ms": round(pct(med, 50), 2), "cpu_p95_ms": round(pct(med, 95), 2)}
    a, b = (result["databases"][d] for d in dbs)
    print(f"{args.call}, {len(qs)} claims x {args.rounds} rounds interleaved, load {load[0]:.2f} -> {load[1]:.2f}")
    print("| database | CPU p50 / p95 ms |\n|---|---:|")
    for d in dbs:
        r = result["databases"][d]
        print(f"| {d} | {r['cpu_p50_ms']} / {r['cpu_p95_ms']} |")
    print(f"{dbs[1]} / {dbs[0]}: x{b['cpu_p50_ms'] / a['cpu_p50_ms']:.2f} / x{b['cpu_p95_ms'] / a['cpu_p95_ms']:.2f}; "
          f"identical answers {result['identical']} / {len(qs)}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
