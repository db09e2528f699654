"""States of a SQL-written scope side by side: databases holding copies of one scope in different states
(made with ``CREATE DATABASE … TEMPLATE`` from a bench/sql_path.py database, then sealed, merged, compacted
or with memtable documents deleted), measured query by query in turn, so every state sees the same load
(issue 26 item 1: what the memtable and the segments each cost the lane).

Usage (from the repository root)::

    python bench/sql_path_states.py "HOST" DB1,DB2,…,BASE [--rounds 3] [--queries 60] [--scope sqlpath]

For each of the first ``--queries`` SciFact test claims, ``dna.bm25`` (k = 10) and ``dna.search`` without
a vector are called ``--rounds`` times in every database in turn (backend CPU, ``/proc/<pid>/schedstat``);
the fastest call per query and database counts. Prints p50 / p95 per database and the ratio to the last
one (BASE, e.g. the compacted copy), with the 1-minute load average.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from lane_states import claims, pct  # noqa: E402
from scale import BackendCpu, load1  # noqa: E402

MODEL = "lexical-only-384"
CALLS = {"bm25": "SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10)",
         "search": "SELECT name, score FROM dna.search(%s, %s, NULL, %s, k => 10)"}


def main(argv=None) -> int:
    import psycopg

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("host")
    ap.add_argument("dbs")
    ap.add_argument("--dataset", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--scope", default="sqlpath")
    args = ap.parse_args(argv)
    dbs = args.dbs.split(",")
    qs = claims(Path(args.dataset), args.queries)
    conns = {d: psycopg.connect(f"user=postgres host={args.host} dbname={d}", autocommit=True) for d in dbs}
    cpus = {d: BackendCpu(c) for d, c in conns.items()}
    res = {(d, lane): [] for d in dbs for lane in CALLS}
    before = load1()
    for q in qs:
        for lane, sql in CALLS.items():
            best = {d: None for d in dbs}
            for _ in range(args.rounds):
                for d in dbs:
                    c0 = cpus[d].read()
                    conns[d].execute(sql, (args.scope, q, MODEL)).fetchall()
                    c = (cpus[d].read() - c0) / 1e6
                    best[d] = c if best[d] is None else min(best[d], c)
            for d in dbs:
                res[(d, lane)].append(best[d])
    print(f"load {before} → {load1()}; {len(qs)} claims, best of {args.rounds}\n")
    print("| lane | database | CPU p50 / p95 ms | × last p50 / p95 |\n|---|---|---|---|")
    for lane in CALLS:
        b = res[(dbs[-1], lane)]
        for d in dbs:
            v = res[(d, lane)]
            print(f"| {lane} | {d} | {pct(v, .5):.2f} / {pct(v, .95):.2f} | × {pct(v, .5) / pct(b, .5):.2f} / × {pct(v, .95) / pct(b, .95):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
