"""Latency of an ``as_of`` recall that ranks the past's text, at 10,000 memories.

A fresh database gets N synthetic Engrams (bench/recall.py's generator, fake embedder computed in SQL
by ``dna.fake_embed``), then R of them are restated with new text; ``T`` is an instant between the two.
Q queries (words of a random memory's original text) are timed, interleaved, four ways: recall now
(the peer, the same statement without as_of), recall as_of T (R memories ranked by their past text),
each with and without a query embedding. Target: as_of p95 <= 100 ms. Prints a table, the load
average, and writes JSON.

Usage (from the repository root)::

    python bench/recall_as_of.py [--dsn DSN] [--memories 10000] [--restated 2000] [--queries 200]
                                 [--out bench/results/recall_as_of.json] [--reuse] [--compare SCHEMA]

``--reuse`` keeps the database a previous run seeded (T = just before its first restatement);
``--compare SCHEMA`` also times ``SCHEMA.recall`` (a previous text of dna.recall kept there, e.g. by
``--keep-old SCHEMA`` before the new plane files were loaded) in the same interleaved loop.
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


def seed(conn, memories, rng, restated_n):
    """Remember every memory, take T, restate restated_n of them; returns (seconds, T)."""
    from psycopg.types.json import Jsonb

    t0 = time.perf_counter()
    for i in range(0, len(memories), 500):
        batch = memories[i:i + 500]
        conn.execute("""SELECT dna.remember('bench', s.spec, name => s.name, model_id => %s,
                                            embedding => dna.fake_embed(dna.memory_text('Engram', s.spec)))
                        FROM jsonb_to_recordset(%s) AS s(name text, spec jsonb)""",
                     (MODEL, Jsonb([{"name": m["name"], "spec": m["spec"]} for m in batch])))
    seed_s = time.perf_counter() - t0
    between = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    restated = rng.sample(memories, restated_n)
    for i in range(0, len(restated), 500):
        batch = restated[i:i + 500]
        conn.execute("""SELECT dna.remember('bench', s.spec, name => s.name, model_id => %s,
                                            embedding => dna.fake_embed(dna.memory_text('Engram', s.spec)))
                        FROM jsonb_to_recordset(%s) AS s(name text, spec jsonb)""",
                     (MODEL, Jsonb([{"name": m["name"], "spec": {**m["spec"], "summary": "restated: " + m["spec"]["summary"][::-1],
                                                                  "body": "rewritten later"}} for m in batch])))
    return seed_s, between



def main(argv: list[str] | None = None) -> int:
    import psycopg

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--restated", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "recall_as_of.json"))
    ap.add_argument("--reuse", action="store_true", help="time the database a previous run seeded")
    ap.add_argument("--compare", metavar="SCHEMA", help="also time SCHEMA.recall, interleaved")
    args = ap.parse_args(argv)
    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start()
    memories = synth_memories(args.memories)
    rng = random.Random(5)
    if args.reuse:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(server_dsn)
        params["dbname"] = "dna_bench_recall_as_of"
        dsn = make_conninfo(**params)
    else:
        dsn = fresh_database(server_dsn, "dna_bench_recall_as_of")
    with psycopg.connect(dsn, autocommit=True) as conn:
        if args.reuse:
            seed_s = 0.0
            # every first version was written before every restatement: T just before the first of these
            between = conn.execute("SELECT min(created_at) - interval '1 microsecond' FROM dna.dna_versions "
                                   "WHERE scope = 'bench' AND version = 2").fetchone()[0]
        else:
            seed_s, between = seed(conn, memories, rng, args.restated)
        conn.execute("ANALYZE")
        queries = synth_queries(memories, args.queries)
        ways = {"now, lexical": (None, False, "dna"), "now, embedded": (None, True, "dna"),
                "as_of, lexical": (between, False, "dna"), "as_of, embedded": (between, True, "dna")}
        if args.compare:
            ways.update({f"as_of, lexical ({args.compare})": (between, False, args.compare),
                         f"as_of, embedded ({args.compare})": (between, True, args.compare)})
        samples = {w: [] for w in ways}
        past_text_hits = {w: 0 for w in ways}
        first_past = {w: 0 for w in ways}
        for query, _ in queries:
            for way, (as_of, embed, schema) in ways.items():
                t = time.perf_counter()
                got = conn.execute(f"SELECT {schema}.recall('bench', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, %s, "
                                   "as_of => %s, reconsolidate => false)", (query, embed, query, MODEL, as_of)).fetchone()[0]
                samples[way].append((time.perf_counter() - t) * 1000)
                past_text_hits[way] += sum(1 for h in got["hits"] if h.get("ranked_by") == "past_text")
                first_past[way] += bool(got["hits"]) and got["hits"][0].get("ranked_by") == "past_text"
    load = os.getloadavg()
    results = {w: summarize(v) for w, v in samples.items()}
    print(f"dna.recall at {args.memories:,} memories, {args.restated:,} restated after as_of (k=5; target as_of p95 <= {TARGET_P95_MS:g} ms)")
    peer = {True: results["now, embedded"]["p95_ms"], False: results["now, lexical"]["p95_ms"]}
    print(f"{'what':<26}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'p95/now':>9}{'past hits':>10}{'past @1':>8}")
    for w, r in results.items():
        ratio = r["p95_ms"] / peer[ways[w][1]]
        r.update(p95_over_now=round(ratio, 2), past_text_hits=past_text_hits[w], past_text_first=first_past[w])
        print(f"{w:<26}{r['p50_ms']:>10.2f}{r['p95_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['mean_ms']:>10.2f}"
              f"{ratio:>8.2f}x{past_text_hits[w]:>10}{first_past[w]:>8}")
    print(f"seeded in {seed_s:.1f} s; "
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
