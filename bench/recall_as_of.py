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
                                 [--keep-old SCHEMA]

Each figure has its backend's CPU time beside it (``cpu p50``, /proc/<pid>/schedstat, when the server
runs on this machine): on a shared machine the wall time also holds the time spent waiting for a CPU.
``--parts`` also times, in the same loop, the parts of a lexical as_of recall (head's functions only):
``dna.as_of_past_texts`` alone, ``dna.search`` handed those past texts (the finding included), and the
same ``dna.search`` without them.

``--reuse`` keeps the database a previous run seeded (T = just before its first restatement);
``--keep-old SCHEMA`` copies the database's current ``dna.recall`` and ``dna.search`` into SCHEMA
(``SCHEMA.recall`` calling ``SCHEMA.search``) and stops, so that a later ``--reuse --compare SCHEMA``
(after the new plane files were loaded, e.g. by ``alembic upgrade``) times ``SCHEMA.recall`` in the
same interleaved loop and checks that every as_of answer is identical to the old one's (the
mismatches are printed and counted in the JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall import fresh_database, summarize, synth_memories, synth_queries  # noqa: E402
from scale import BackendCpu  # noqa: E402

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


def keep_old(conn, schema: str) -> None:
    """Copy dna.recall and dna.search as they are now into ``schema`` (recall calling its copy of search)."""
    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    for fn in ("search", "recall"):
        for (text,) in conn.execute("SELECT pg_get_functiondef(p.oid) FROM pg_proc AS p "
                                    "WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = %s", (fn,)).fetchall():
            head, body = text.split("\n", 1)
            assert head.startswith(f"CREATE OR REPLACE FUNCTION dna.{fn}("), head
            head = head.replace(f"FUNCTION dna.{fn}(", f'FUNCTION "{schema}".{fn}(', 1)
            conn.execute(head + "\n" + body.replace("dna.search(", f'"{schema}".search('))


def main(argv: list[str] | None = None) -> int:
    import psycopg

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--restated", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "recall_as_of.json"))
    ap.add_argument("--reuse", action="store_true", help="time the database a previous run seeded")
    ap.add_argument("--compare", metavar="SCHEMA", help="also time SCHEMA.recall, interleaved, and compare answers")
    ap.add_argument("--keep-old", metavar="SCHEMA", help="copy dna.recall and dna.search into SCHEMA, then stop")
    ap.add_argument("--parts", action="store_true", help="also time the parts of a lexical as_of recall")
    args = ap.parse_args(argv)
    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start()
    memories = synth_memories(args.memories)
    rng = random.Random(5)
    if args.reuse or args.keep_old:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(server_dsn)
        params["dbname"] = "dna_bench_recall_as_of"
        dsn = make_conninfo(**params)
    else:
        dsn = fresh_database(server_dsn, "dna_bench_recall_as_of")
    with psycopg.connect(dsn, autocommit=True) as conn:
        if args.keep_old:
            keep_old(conn, args.keep_old)
            print(f"kept dna.recall and dna.search as {args.keep_old}.recall / {args.keep_old}.search")
            return 0
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
        recall_sql = ("SELECT {schema}.recall('bench', %(q)s, CASE WHEN %(embed)s THEN dna.fake_embed(%(q)s) END, "
                      "%(model)s, as_of => %(as_of)s, reconsolidate => false)")
        statements = {w: recall_sql.format(schema=schema) for w, (_, _, schema) in ways.items()}
        if args.parts:
            past = "dna.as_of_past_texts('bench', %(as_of)s, %(q)s)"
            search = ("SELECT count(*) FROM dna.search('bench', %(q)s, NULL, %(model)s, k => 15, kinds => dna.recallable_kinds(), "
                      "candidates => 100, valid_time => NULL{past})")
            parts = {"part: as_of_past_texts": f"SELECT count(*) FROM {past}",
                     "part: search + past": search.format(past=f", past => ARRAY(SELECT p FROM {past} AS p)"),
                     "part: search": search.format(past="")}
            ways.update({w: (between, False, "dna") for w in parts})
            statements.update(parts)
        cpu = BackendCpu(conn)
        samples = {w: [] for w in ways}
        cpu_ms = {w: [] for w in ways}
        past_text_hits = {w: 0 for w in ways}
        first_past = {w: 0 for w in ways}
        compared, mismatches = 0, []
        for query, _ in queries:
            answers = {}
            for way, (as_of, embed, schema) in ways.items():
                c0 = cpu.read()
                t = time.perf_counter()
                got = conn.execute(statements[way], {"q": query, "embed": embed, "model": MODEL, "as_of": as_of}).fetchone()[0]
                samples[way].append((time.perf_counter() - t) * 1000)
                if c0 is not None:
                    cpu_ms[way].append((cpu.read() - c0) / 1e6)
                answers[way] = got
                if way.startswith("part: "):
                    continue
                past_text_hits[way] += sum(1 for h in got["hits"] if h.get("ranked_by") == "past_text")
                first_past[way] += bool(got["hits"]) and got["hits"][0].get("ranked_by") == "past_text"
            if args.compare:
                for lane in ("lexical", "embedded"):
                    compared += 1
                    if answers[f"as_of, {lane}"] != answers[f"as_of, {lane} ({args.compare})"]:
                        # untimed: is it only the dense lane's path? The old text read the partition
                        # exactly (a bitmap scan) where the exact rule says HNSW; with bitmap scans off
                        # it takes HNSW too
                        with conn.transaction():
                            conn.execute("SET LOCAL enable_bitmapscan = off")
                            hnsw = conn.execute(f"SELECT {args.compare}.recall('bench', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, "
                                                "%s, as_of => %s, reconsolidate => false)",
                                                (query, lane == "embedded", query, MODEL, between)).fetchone()[0]
                        mismatches.append({"query": query, "lane": lane,
                                           "same_with_old_on_hnsw": hnsw == answers[f"as_of, {lane}"]})
    load = os.getloadavg()
    results = {w: summarize(v) for w, v in samples.items()}
    print(f"dna.recall at {args.memories:,} memories, {args.restated:,} restated after as_of (k=5; target as_of p95 <= {TARGET_P95_MS:g} ms)")
    peer = {True: results["now, embedded"]["p95_ms"], False: results["now, lexical"]["p95_ms"]}
    print(f"{'what':<26}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'p95/now':>9}{'cpu p50':>9}"
          f"{'past hits':>10}{'past @1':>8}")
    for w, r in results.items():
        ratio = r["p95_ms"] / peer[ways[w][1]]
        r.update(p95_over_now=round(ratio, 2), past_text_hits=past_text_hits[w], past_text_first=first_past[w],
                 cpu_p50_ms=round(statistics.median(cpu_ms[w]), 3) if cpu_ms[w] else None)
        cpu_text = f"{r['cpu_p50_ms']:>9.2f}" if cpu_ms[w] else f"{'-':>9}"
        print(f"{w:<26}{r['p50_ms']:>10.2f}{r['p95_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['mean_ms']:>10.2f}"
              f"{ratio:>8.2f}x{cpu_text}{past_text_hits[w]:>10}{first_past[w]:>8}")
    if args.compare:
        hnsw_only = sum(m["same_with_old_on_hnsw"] for m in mismatches)
        print(f"as_of answers identical to {args.compare}.recall's: {compared - len(mismatches)}/{compared}; "
              f"of the {len(mismatches)} others, {hnsw_only} identical once the old text's dense lane takes HNSW "
              "(enable_bitmapscan off)"
              + "".join(f"\n  differs: {m['lane']} {m['query']!r}" for m in mismatches if not m["same_with_old_on_hnsw"]))
    print(f"seeded in {seed_s:.1f} s; "
          f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load)} on {os.cpu_count()} CPUs")
    payload = {"benchmark": "recall_as_of", "memories": args.memories, "restated": args.restated,
               "queries": args.queries, "target_p95_ms": TARGET_P95_MS, "results": results,
               "past_text_hits": past_text_hits, "loadavg": load, "seed_s": round(seed_s, 1),
               "compared": compared, "mismatches": mismatches,
               "meets_target": max(results["as_of, lexical"]["p95_ms"], results["as_of, embedded"]["p95_ms"]) <= TARGET_P95_MS}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
