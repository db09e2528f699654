"""The lexical lane with fresh planner statistics and with none: time, and the plan of every statement it runs.

Usage (from the repository root; a superuser's DSN: the statistics are removed and put back in one transaction)::

    python bench/plan_shapes.py DSN [--scope scale] [--model-id M] [--call bm25|lexical|hybrid]
                                [--tables bm25|all] [--queries 40] [--dataset DIR] [--out FILE]

"None" is the state a restore or a server upgrade leaves until something analyzes: the BM25 tables' rows of
``pg_statistic`` deleted and ``reltuples`` -1 (``--tables all``: the width table's too), inside a
transaction that is rolled back at the end, so the database is left as it was. For the first ``--queries``
SciFact test claims (``--dataset``, default ``../shared/data/scifact``): ``dna.bm25`` (``--call bm25``),
``dna.search`` without a vector (``lexical``) or with the vector of one of the scope's rows (``hybrid``),
k = 10; in each state one pass timed (backend CPU, ``/proc/<pid>/schedstat``; p50 / p95 over the claims),
then one pass under ``auto_explain`` (``log_nested_statements``: every statement of the PL/pgSQL functions)
whose plan shapes (node types and the indexes and tables they read) are compared. Prints the times and the
statements whose shape differs between the states; writes JSON (``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import psycopg

from beir import pct
from lane_ab import claims
from lane_states import BM25_TABLES
from scale import BackendCpu

REPO = Path(__file__).resolve().parent.parent
NODE = re.compile(r"(Seq Scan|Index Only Scan|Index Scan|Bitmap Index Scan|Bitmap Heap Scan|Nested Loop|Hash Join|"
                  r"Merge Join|Hash Right Join|Hash Left Join|HashAggregate|GroupAggregate|Sort)( using \S+)?( on \S+)?")


def call_sql(call: str) -> str:
    if call == "bm25":
        return "SELECT count(*) FROM dna.bm25(%(s)s, %(q)s, %(m)s, k => 10)"
    if call == "lexical":
        return "SELECT count(*) FROM dna.search(%(s)s, %(q)s, NULL, %(m)s, k => 10)"
    return ("SELECT count(*) FROM dna.search(%(s)s, %(q)s, (SELECT t.embedding FROM dna.dna_search_docs_384 AS t "
            "WHERE t.scope = %(s)s AND t.embedding IS NOT NULL ORDER BY t.doc_id OFFSET %(i)s LIMIT 1), %(m)s, k => 10)")


def timed(conn, sql: str, qs: list[str], scope: str, model: str) -> list[float]:
    cpu = BackendCpu(conn)
    out = []
    for i, q in enumerate(qs):
        c0 = cpu.read()
        conn.execute(sql, {"s": scope, "q": q, "m": model, "i": 7 * i})
        out.append((cpu.read() - c0) / 1e6)
    return out


def shapes(conn, sql: str, qs: list[str], scope: str, model: str) -> dict[str, set[str]]:
    notes: list[str] = []
    conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
    for s in ("auto_explain.log_min_duration = 0", "auto_explain.log_nested_statements = on",
              "auto_explain.log_level = notice", "client_min_messages = notice"):
        conn.execute(f"SET LOCAL {s}")
    for i, q in enumerate(qs):
        conn.execute(sql, {"s": scope, "q": q, "m": model, "i": 7 * i})
    conn.execute("SET LOCAL auto_explain.log_min_duration = -1")
    out: dict[str, set[str]] = {}
    for n in notes:
        m = re.search(r"Query Text: (.*?)\n(.*)", n, re.S)
        if m:
            key = " ".join(m.group(1).split())[:100]
            out.setdefault(key, set()).add(" | ".join(x.group(0) for x in NODE.finditer(m.group(2))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dsn")
    ap.add_argument("--scope", default="scale")
    ap.add_argument("--model-id", default="all-MiniLM-L6-v2-onnx-int8-w8a8")
    ap.add_argument("--call", choices=("bm25", "lexical", "hybrid"), default="bm25")
    ap.add_argument("--tables", choices=("bm25", "all"), default="bm25")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "data" / "scifact")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    qs = claims(args.dataset, args.queries)
    sql = call_sql(args.call)
    tables = BM25_TABLES + (("dna_search_docs_384",) if args.tables == "all" else ())
    conn = psycopg.connect(args.dsn)
    conn.execute("LOAD 'auto_explain'")
    load = [os.getloadavg()[0], None]
    state: dict[str, dict] = {}
    with conn.transaction(force_rollback=True):
        for name in ("fresh", "none"):
            if name == "none":
                for t in tables:
                    conn.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", (f"dna.{t}",))
                    conn.execute("UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = %s::regclass", (f"dna.{t}",))
            cpu = timed(conn, sql, qs, args.scope, args.model_id)
            state[name] = {"cpu_p50_ms": round(pct(cpu, 50), 2), "cpu_p95_ms": round(pct(cpu, 95), 2),
                           "shapes": shapes(conn, sql, qs, args.scope, args.model_id)}
    load[1] = os.getloadavg()[0]
    differ = {k: {"fresh": sorted(state["fresh"]["shapes"].get(k, ())), "none": sorted(v)}
              for k, v in state["none"]["shapes"].items() if v != state["fresh"]["shapes"].get(k)}
    print(f"{args.call}, scope {args.scope}, {len(qs)} claims, statistics removed from {args.tables} tables; "
          f"load {load[0]:.2f} -> {load[1]:.2f}")
    print("| statistics | CPU p50 / p95 ms | x fresh |\n|---|---:|---:|")
    for name in ("fresh", "none"):
        r = state[name]
        print(f"| {name} | {r['cpu_p50_ms']} / {r['cpu_p95_ms']} | x{r['cpu_p50_ms'] / state['fresh']['cpu_p50_ms']:.2f} / "
              f"x{r['cpu_p95_ms'] / state['fresh']['cpu_p95_ms']:.2f} |")
    print(f"statements whose plan differs: {len(differ)}")
    for k, v in differ.items():
        print(f"- {k}\n    fresh: {' || '.join(v['fresh'])}\n    none:  {' || '.join(v['none'])}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "command": "python bench/plan_shapes.py " + " ".join(sys.argv[1:]), "load1": load,
            "states": {n: {k: v for k, v in r.items() if k != "shapes"} for n, r in state.items()},
            "differ": differ}, indent=2))


if __name__ == "__main__":
    main()
