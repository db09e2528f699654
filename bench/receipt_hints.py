"""What 0017's argument checks (topic hints: ``dna.receipt_arg`` on every argument of a receipt) cost
``dna.take_receipt`` and ``dna.replay``, beside the same calls at 0016 in the same run.

One embedded PostgreSQL (``pydna.server``), two databases with the same ``--docs`` synthetic
documents (bench/receipts.py's generator: random words of a 2,000-word vocabulary, fake embeddings,
one scope): one migrated to head, one to ``0016_answers_and_bounds``. Each of ``--queries`` queries
runs, interleaved so load drifts hit all alike: ``dna.search`` at head (the peer), then
``dna.take_receipt('search', ...)`` and ``dna.replay`` in each database, with the arguments
``Client.search(..., receipt=True)`` sends (scope, query, query_embedding, model_id, k, tenant,
personal, passages, offset, explain). Wall time per call from the client (local socket), p50 / p95
in ms, with ``os.getloadavg()`` before and after; prints a table and writes JSON (``--out``).

    .venv/bin/python bench/receipt_hints.py --docs 5000 --queries 60 --out bench/results/receipt_hints.json
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
BEFORE = "0016_answers_and_bounds"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def seed(conn, docs: int, rng: random.Random, vocab: list[str]) -> None:
    for start in range(0, docs, 500):
        n = min(500, docs - start)
        bodies = [" ".join(rng.choices(vocab, k=rng.randint(20, 60))) for _ in range(n)]
        conn.execute("SELECT dna.index_documents('bench', array_fill('Doc'::text, ARRAY[%s]), %s, %s, "
                     "ARRAY(SELECT dna.fake_embed(b) FROM unnest(%s::text[]) AS b), %s)",
                     (n, [f"d{start + i}" for i in range(n)], bodies, bodies, MODEL))
    conn.execute("ANALYZE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--out", default="bench/results/receipt_hints.json")
    args = ap.parse_args()
    vocab = [f"w{i}{chr(97 + i % 26)}x" for i in range(2000)]
    home = Path(tempfile.mkdtemp(prefix="pydna-receipt-hints-", dir="/tmp"))
    admin = server.start(home, database="postgres")
    try:
        dsns = {}
        for name, revision in (("head", None), ("0016", BEFORE)):
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE bench_hints_{name}")
            dsns[name] = admin.replace("/postgres?", f"/bench_hints_{name}?")
            migrate.upgrade(dsns[name], revision or "head")
        conns = {name: psycopg.connect(dsn, autocommit=True) for name, dsn in dsns.items()}
        for conn in conns.values():
            seed(conn, args.docs, random.Random(15), vocab)   # the same documents in both
        rng = random.Random(17)
        queries = [" ".join(rng.choices(vocab, k=rng.randint(2, 5))) for _ in range(args.queries)]
        times: dict[str, list[float]] = {"search (head)": [], "take_receipt (head)": [], "take_receipt (0016)": [],
                                         "replay (head)": [], "replay (0016)": []}
        matches = {"head": 0, "0016": 0}
        load_before = os.getloadavg()
        for q in queries:
            t = time.perf_counter()
            conns["head"].execute("SELECT count(*) FROM dna.search('bench', %s, dna.fake_embed(%s), %s)",
                                  (q, q, MODEL)).fetchone()
            times["search (head)"].append(time.perf_counter() - t)
            payload = Jsonb({"scope": "bench", "query": q, "model_id": MODEL, "k": 10, "tenant": "", "personal": False,
                             "passages": False, "offset": 0, "explain": False})
            for name in ("head", "0016"):
                conn = conns[name]
                t = time.perf_counter()
                rid = conn.execute("SELECT dna.take_receipt('search', %s::jsonb || jsonb_build_object("
                                   "'query_embedding', dna.fake_embed(%s)::text)) ->> 'receipt_id'", (payload, q)).fetchone()[0]
                times[f"take_receipt ({name})"].append(time.perf_counter() - t)
                t = time.perf_counter()
                out = conn.execute("SELECT dna.replay(%s::uuid, query => %s, query_embedding => dna.fake_embed(%s))",
                                   (rid, q, q)).fetchone()[0]
                times[f"replay ({name})"].append(time.perf_counter() - t)
                matches[name] += out["match"]
        load_after = os.getloadavg()
        for conn in conns.values():
            conn.close()
        rows = {name: {"p50_ms": round(1000 * statistics.median(xs), 2), "p95_ms": round(1000 * pct(xs, 0.95), 2)}
                for name, xs in times.items()}
        base = rows["search (head)"]["p50_ms"]
        print(f"{args.docs} documents, {args.queries} queries, load {load_before[0]:.2f} -> {load_after[0]:.2f} "
              f"(os.getloadavg 1 min), {os.cpu_count()} CPUs")
        print(f"{'call':<22}{'p50 ms':>9}{'p95 ms':>9}{'p50 / search':>14}")
        for name, r in rows.items():
            print(f"{name:<22}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}{r['p50_ms'] / base:>14.2f}")
        print(f"replays that matched: head {matches['head']}/{args.queries}, 0016 {matches['0016']}/{args.queries}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"docs": args.docs, "queries": args.queries, "calls": rows,
                                              "replays_matched": matches, "load_before": load_before,
                                              "load_after": load_after}, indent=2))
    finally:
        server.stop(home)


if __name__ == "__main__":
    main()
