"""What a receipt costs: dna.take_receipt and dna.replay beside dna.search on the same queries.

Builds a scratch database on an embedded PostgreSQL (``pydna.server``), indexes ``--docs`` synthetic
documents (random words of a 2,000-word vocabulary, fake embeddings, one scope), then runs
``--queries`` queries, each as four calls interleaved in one loop so load drifts hit all alike:
``dna.search`` (explain false), ``dna.search`` (explain true: the account a receipt stores),
``dna.take_receipt('search', ...)`` (keep_query false) and ``dna.replay`` of that receipt (query and
embedding passed). Wall time per call from the client (local socket), p50 / p95 in ms, with
``os.getloadavg()`` before and after; prints a table and writes JSON (``--out``).

    .venv/bin/python bench/receipts.py --docs 5000 --queries 60 --out bench/results/receipts.json
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate, server

MODEL = "dna-fake-hash-v1"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--out", default="bench/results/receipts.json")
    args = ap.parse_args()
    rng = random.Random(15)
    vocab = [f"w{i}{chr(97 + i % 26)}x" for i in range(2000)]
    home = Path(tempfile.mkdtemp(prefix="pydna-receipts-", dir="/tmp"))
    dsn = server.start(home, database="postgres")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench_receipts")
        dsn = dsn.replace("/postgres?", "/bench_receipts?")
        migrate.upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for start in range(0, args.docs, 500):
                n = min(500, args.docs - start)
                bodies = [" ".join(rng.choices(vocab, k=rng.randint(20, 60))) for _ in range(n)]
                conn.execute("SELECT dna.index_documents('bench', array_fill('Doc'::text, ARRAY[%s]), %s, %s, "
                             "ARRAY(SELECT dna.fake_embed(b) FROM unnest(%s::text[]) AS b), %s)",
                             (n, [f"d{start + i}" for i in range(n)], bodies, bodies, MODEL))
            conn.execute("ANALYZE")
            queries = [" ".join(rng.choices(vocab, k=rng.randint(2, 5))) for _ in range(args.queries)]
            times: dict[str, list[float]] = {"search": [], "search explain": [], "take_receipt": [], "replay": []}
            matches = 0
            load_before = os.getloadavg()
            for q in queries:
                t = time.perf_counter()
                conn.execute("SELECT count(*) FROM dna.search('bench', %s, dna.fake_embed(%s), %s)", (q, q, MODEL)).fetchone()
                times["search"].append(time.perf_counter() - t)
                t = time.perf_counter()
                conn.execute("SELECT count(*) FROM dna.search('bench', %s, dna.fake_embed(%s), %s, explain => true)",
                             (q, q, MODEL)).fetchone()
                times["search explain"].append(time.perf_counter() - t)
                t = time.perf_counter()
                rid = conn.execute("SELECT dna.take_receipt('search', %s::jsonb || jsonb_build_object("
                                   "'query_embedding', dna.fake_embed(%s)::text)) ->> 'receipt_id'",
                                   (Jsonb({"scope": "bench", "query": q, "model_id": MODEL}), q)).fetchone()[0]
                times["take_receipt"].append(time.perf_counter() - t)
                t = time.perf_counter()
                out = conn.execute("SELECT dna.replay(%s::uuid, query => %s, query_embedding => dna.fake_embed(%s))",
                                   (rid, q, q)).fetchone()[0]
                times["replay"].append(time.perf_counter() - t)
                matches += out["match"]
            load_after = os.getloadavg()
            size = conn.execute("SELECT pg_total_relation_size('dna.dna_search_receipts'), count(*) "
                                "FROM dna.dna_search_receipts").fetchone()
        rows = {name: {"p50_ms": round(1000 * statistics.median(xs), 2), "p95_ms": round(1000 * pct(xs, 0.95), 2)}
                for name, xs in times.items()}
        base = rows["search"]["p50_ms"]
        print(f"{args.docs} documents, {args.queries} queries, load {load_before[0]:.2f} -> {load_after[0]:.2f} "
              f"(os.getloadavg 1 min), {os.cpu_count()} CPUs")
        print(f"{'call':<16}{'p50 ms':>9}{'p95 ms':>9}{'p50 / search':>14}")
        for name, r in rows.items():
            print(f"{name:<16}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}{r['p50_ms'] / base:>14.2f}")
        print(f"replays that matched: {matches}/{args.queries}; receipts table {size[1]} rows, "
              f"{size[0] / max(size[1], 1):.0f} bytes a receipt (with indexes)")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"docs": args.docs, "queries": args.queries, "calls": rows,
                                              "replays_matched": matches, "receipt_bytes": size[0] / max(size[1], 1),
                                              "load_before": load_before, "load_after": load_after}, indent=2))
    finally:
        server.stop(home)


if __name__ == "__main__":
    main()
