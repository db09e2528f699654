"""Latency of an ``as_of`` recall that ranks the past's text, at 10,000 memories.

A fresh database gets N synthetic Engrams (bench/recall.py's generator, fake embedder computed in SQL
by ``dna.fake_embed``), then R of them are restated with new text; ``T`` is an instant between the two.
Q queries (words of a random memory's original text) are timed, interleaved, four ways: recall now
(the peer, the same statement without as_of), recall as_of T (R memories ranked by their past text),
each with and without a query embedding. Target: as_of p95 <= 100 ms. Prints a table, the load
average, and writes JSON.

Usage (from the repository root)::

    python bench/recall_as_of.py [--dsn DSN] [--memories 10000] [--restated 2000] [--queries 200]
                                 [--out bench/results/recall_as_of.json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall import fresh_database, summarize, synth_memories, synth_queries  # noqa: E402

TARGET_P95_MS = 100.0
MODEL = "dna-fake-hash-v1"


def main(argv: list[str] | None = None) -> int:
    import psycopg
    from psycopg.types.json import Jsonb

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--restated", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "recall_as_of.json"))
    args = ap.parse_args(argv)
    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start()
    dsn = fresh_database(server_dsn, "dna_bench_recall_as_of")
    memories = synth_memories(args.memories)
    rng = random.Random(5)
    with psycopg.connect(dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        for i in range(0, len(memories), 500):
            batch = memories[i:i + 500]
            conn.execute("""SELECT dna.remember('bench', s.spec, name => s.name, model_id => %s,
                                                embedding => dna.fake_embed(dna.memory_text('Engram', s.spec)))
                            FROM jsonb_to_recordset(%s) AS s(name text, spec jsonb)""",
                         (MODEL, Jsonb([{"name": m["name"], "spec": m["spec"]} for m in batch])))
        seed_s = time.perf_counter() - t0
        between = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        restated = rng.sample(memories, args.restated)
        for i in range(0, len(restated), 500):
            batch = restated[i:i + 500]
            conn.execute("""SELECT dna.remember('bench', s.spec, name => s.name, model_id => %s,
                                                embedding => dna.fake_embed(dna.memory_text('Engram', s.spec)))
                            FROM jsonb_to_recordset(%s) AS s(name text, spec jsonb)""",
                         (MODEL, Jsonb([{"name": m["name"], "spec": {**m["spec"], "summary": "restated: " + m["spec"]["summary"][::-1],
                                                                      "body": "rewritten later"}} for m in batch])))
        conn.execute("ANALYZE")
        queries = synth_queries(memories, args.queries)
        ways = {"now, lexical": (None, False), "now, embedded": (None, True),
                "as_of, lexical": (between, False), "as_of, embedded": (between, True)}
        samples = {w: [] for w in ways}
        past_text_hits = 0
        for query, _ in queries:
            for way, (as_of, embed) in ways.items():
                t = time.perf_counter()
                got = conn.execute("SELECT dna.recall('bench', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, %s, "
                                   "as_of => %s, reconsolidate => false)", (query, embed, query, MODEL, as_of)).fetchone()[0]
                samples[way].append((time.perf_counter() - t) * 1000)
                if as_of is not None:
                    past_text_hits += sum(1 for h in got["hits"] if h.get("ranked_by") == "past_text")
    load = os.getloadavg()
    results = {w: summarize(v) for w, v in samples.items()}
    print(f"dna.recall at {args.memories:,} memories, {args.restated:,} restated after as_of (k=5; target as_of p95 <= {TARGET_P95_MS:g} ms)")
    print(f"{'what':<18}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for w, r in results.items():
        print(f"{w:<18}{r['p50_ms']:>10.2f}{r['p95_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['mean_ms']:>10.2f}")
    print(f"seeded in {seed_s:.1f} s; hits ranked by past text: {past_text_hits}; "
          f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load)} on {os.cpu_count()} CPUs")
    payload = {"benchmark": "recall_as_of", "memories": args.memories, "restated": args.restated,
               "queries": args.queries, "target_p95_ms": TARGET_P95_MS, "results": results,
               "past_text_hits": past_text_hits, "loadavg": load, "seed_s": round(seed_s, 1),
               "meets_target": max(results["as_of, lexical"]["p95_ms"], results["as_of, embedded"]["p95_ms"]) <= TARGET_P95_MS}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
