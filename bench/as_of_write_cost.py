"""What the index dna_versions_scope_id_version (revision 0017, the as_of probe) costs a write.

Two copies of the database ``bench/recall_as_of.py`` seeded (``dna_bench_recall_as_of``: 10,000
Engrams), one without the index; batches of 50 ``dna.remember`` restatements run in each in turn (the
peer beside every figure), timed by wall clock and by the backend's CPU (/proc/<pid>/schedstat).
Prints a table and the load average, writes JSON; the copies are dropped afterwards.

Usage (from the repository root, after ``bench/recall_as_of.py`` seeded its database)::

    python bench/as_of_write_cost.py --dsn DSN [--batches 20] [--out bench/results/as_of_write_cost.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from scale import BackendCpu  # noqa: E402

SOURCE = "dna_bench_recall_as_of"
COPIES = {"with the index": "dna_bench_wc_with", "without it": "dna_bench_wc_without"}
BATCH = 50


def main(argv: list[str] | None = None) -> int:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.types.json import Jsonb

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"), required=False)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "as_of_write_cost.json"))
    args = ap.parse_args(argv)
    if not args.dsn:
        from pydna import server

        args.dsn = server.start()

    def dsn(db: str) -> str:
        params = conninfo_to_dict(args.dsn)
        params["dbname"] = db
        return make_conninfo(**params)

    with psycopg.connect(args.dsn, autocommit=True) as admin:
        for db in COPIES.values():
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{db}" TEMPLATE "{SOURCE}"')
    try:
        with psycopg.connect(dsn(COPIES["without it"]), autocommit=True) as conn:
            conn.execute("DROP INDEX dna.dna_versions_scope_id_version")
        conns = {way: psycopg.connect(dsn(db), autocommit=True) for way, db in COPIES.items()}
        cpus = {way: BackendCpu(conn) for way, conn in conns.items()}
        wall = {way: [] for way in conns}
        cpu = {way: [] for way in conns}
        for b in range(args.batches):
            items = [{"name": f"m{(b * BATCH + i) % 10000:06d}", "spec": {"summary": f"batch {b} restated {i}: the office"}}
                     for i in range(BATCH)]
            for way, conn in conns.items():
                c0 = cpus[way].read()
                t0 = time.perf_counter()
                conn.execute("SELECT count(dna.remember('bench', s.spec, name => s.name, model_id => 'dna-fake-hash-v1', "
                             "embedding => dna.fake_embed(s.spec ->> 'summary'))) "
                             "FROM jsonb_to_recordset(%s) AS s(name text, spec jsonb)", (Jsonb(items),))
                wall[way].append((time.perf_counter() - t0) * 1000 / BATCH)
                if c0 is not None:
                    cpu[way].append((cpus[way].read() - c0) / 1e6 / BATCH)
        for conn in conns.values():
            conn.close()
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for db in COPIES.values():
                admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    load = os.getloadavg()
    results = {way: {"wall_p50_ms": round(statistics.median(wall[way]), 3),
                     "cpu_p50_ms": round(statistics.median(cpu[way]), 3) if cpu[way] else None} for way in COPIES}
    print(f"dna.remember (a restatement) per call, {args.batches} batches of {BATCH} in each copy in turn")
    print(f"{'copy':<16}{'wall p50 ms':>13}{'cpu p50 ms':>12}")
    for way, r in results.items():
        print(f"{way:<16}{r['wall_p50_ms']:>13.3f}{(r['cpu_p50_ms'] or float('nan')):>12.3f}")
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load)} on {os.cpu_count()} CPUs")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"benchmark": "as_of_write_cost", "batches": args.batches, "batch": BATCH,
                                          "results": results, "loadavg": load}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
