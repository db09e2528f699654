"""Single node vs Citus in one run (issue 24): read latency, write latency, bulk index throughput, and
the plan that shows a scope's search touching one shard.

Needs a Citus coordinator with its workers (``../shared/citus/cluster start DIR PORT 2`` prints the
DSN). Two databases are made on it for the run and dropped after it: ``dna_bench_single`` on the
coordinator's server without the citus extension (one node: the same binary, the same machine) and
``dna_bench_citus`` on every node, distributed by ``dna.distribute(shards)``. Both load the same
documents (SciFact's corpus by default, ``--dataset``) through ``Client.index`` with the fake
embedder, one after the other (docs/s, wall and server CPU), and the same memories through
``dna.remember`` (ms per call). Then each query runs on both, alternately, ``--reps`` times:
``dna.search`` hybrid (HNSW, the default path) and lexical, ``dna.recall`` (no reconsolidation,
fixed now); p50/p95 of every call. Targets: reads ≤ 1.5× the single node's p50 and p95, writes ≤ 2.5×,
bulk index ≥ 0.5× its docs/s. Server CPU is the utime+stime of every ``postgres`` process on this
machine (/proc), so it counts the workers too; load averages are taken before and after each phase.
Prints a Markdown table and writes JSON (``--json``, default bench/results/citus-<UTC>.json).

    python bench/citus.py --dsn 'host=127.0.0.1 port=5800 user=postgres dbname=citus' \\
        [--dataset ../shared/data/scifact] [--docs 5183] [--queries 100] [--reps 3] [--memories 300] [--shards 4]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pydna  # noqa: E402
from pydna import migrate  # noqa: E402

SCOPE, MEM = "scifact", "bench-mem"
NOW = datetime(2026, 7, 1, 9, 0, tzinfo=timezone.utc)
TARGETS = {"read": 1.5, "write": 2.5, "bulk": 0.5}
EMBEDDER = pydna.FakeEmbeddingProvider()


POSTMASTERS: list[int] = []          # the cluster's nodes (main fills it from each node's data_directory)


def _stat(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def server_cpu_s() -> float:
    """CPU seconds of the cluster's servers (Linux /proc): every node's postmaster with its live
    children (utime + stime) and the children it has reaped (cutime + cstime), so a backend that ended
    is still counted. Both sides live on these servers; the phases run one side at a time, except the
    alternating read and remember phases, which count both."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    children: dict[int, list[str]] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            f = _stat(pid)
            if f and int(f[1]) in POSTMASTERS:
                children[int(pid)] = f
    for pm in POSTMASTERS:
        f = _stat(pm)
        if f:
            total += sum(int(x) for x in f[11:15])
    total += sum(int(f[11]) + int(f[12]) for f in children.values())
    return total / tick


def find_postmasters(dsn: str, nodes: list[tuple[str, int]]) -> list[int]:
    params = conninfo_to_dict(dsn)
    out = []
    for host, port in nodes + [(params.get("host") or "localhost", int(params.get("port") or 5432))]:
        with psycopg.connect(make_conninfo(dsn, host=host, port=port, dbname="postgres"), autocommit=True) as conn:
            folder = conn.execute("SHOW data_directory").fetchone()[0]
        with open(Path(folder) / "postmaster.pid", encoding="ascii") as fh:
            out.append(int(fh.readline()))
    return out


class Phase:
    """Wall time, this process's CPU, the servers' CPU and the load average around a block."""

    def __enter__(self):
        self.load = os.getloadavg()
        self.t0, self.c0, self.s0 = time.perf_counter(), time.process_time(), server_cpu_s()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        self.client_cpu = time.process_time() - self.c0
        self.server_cpu = server_cpu_s() - self.s0
        self.load_after = os.getloadavg()

    def json(self) -> dict:
        return {"wall_s": round(self.wall, 3), "client_cpu_s": round(self.client_cpu, 3),
                "server_cpu_s": round(self.server_cpu, 3), "loadavg_before": self.load, "loadavg_after": self.load_after}


# -- the two databases --------------------------------------------------------------------------------


def workers(dsn: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 "
                            "ORDER BY nodeport").fetchall()


def fresh_database(dsn: str, name: str, nodes: list[tuple[str, int]], citus: bool) -> str:
    """``name`` dropped and made again on the coordinator (and on every worker with citus)."""
    params = conninfo_to_dict(dsn)
    coordinator = (params.get("host") or "localhost", int(params.get("port") or 5432))
    for host, port in (nodes + [coordinator]) if citus else [coordinator]:
        with psycopg.connect(make_conninfo(dsn, host=host, port=port, dbname="postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        if citus:
            with psycopg.connect(make_conninfo(dsn, host=host, port=port, dbname=name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
    out = make_conninfo(dsn, dbname=name)
    if citus:
        with psycopg.connect(out, autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host(%s, %s)", coordinator)
            for host, port in nodes:
                conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
    return out


def drop_database(dsn: str, name: str, nodes: list[tuple[str, int]]) -> None:
    params = conninfo_to_dict(dsn)
    coordinator = (params.get("host") or "localhost", int(params.get("port") or 5432))
    for host, port in nodes + [coordinator]:
        with psycopg.connect(make_conninfo(dsn, host=host, port=port, dbname="postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- data ------------------------------------------------------------------------------------------


def read_dataset(root: Path, docs: int, queries: int) -> tuple[list[dict], list[str]]:
    corpus, texts = [], []
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            corpus.append({"kind": "Doc", "name": d["_id"], "title": d.get("title") or None, "body": d["text"]})
            if len(corpus) >= docs:
                break
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) >= queries:
                break
    return corpus, texts


def vector(text: str) -> str:
    return "[" + ",".join(repr(x) for x in EMBEDDER.embed([text])[0]) + "]"


# The client's call shapes (pydna/client.py, pydna/memory.py): Citus delegates these to the scope's node.
CALLS = {
    "hybrid": "SELECT kind, name, tenant, score FROM dna.search(%(scope)s, %(q)s, %(v)s::vector)",
    "lexical": "SELECT kind, name, tenant, score FROM dna.search(%(scope)s, %(q)s)",
    "recall": "SELECT dna.recall(%(mem)s, %(q)s, %(v)s::vector, reconsolidate => false, now => %(now)s)",
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def explain_one_shard(dsn: str, query: str) -> list[str]:
    """The distributed plan of a scope's search and of a read of its documents: one task, one node."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        lines = [r[0] for r in conn.execute("EXPLAIN (VERBOSE) SELECT kind, name, tenant, score FROM dna.search(%s, %s, %s::vector)",
                                            (SCOPE, query, vector(query)))]
        lines += [""] + [r[0] for r in conn.execute(
            "EXPLAIN SELECT name FROM dna.dna_search_docs_384 WHERE scope = %s AND tsv @@ plainto_tsquery('english', %s)",
            (SCOPE, query))]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", required=True, help="the Citus coordinator, as a superuser")
    ap.add_argument("--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    ap.add_argument("--docs", type=int, default=5183)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--memories", type=int, default=300)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    corpus, queries = read_dataset(args.dataset, args.docs, args.queries)
    nodes = workers(args.dsn)
    POSTMASTERS[:] = find_postmasters(args.dsn, nodes)
    started = datetime.now(timezone.utc)
    result: dict = {"date": started.isoformat(timespec="seconds"), "docs": len(corpus), "queries": len(queries),
                    "reps": args.reps, "memories": args.memories, "shards": args.shards, "workers": len(nodes),
                    "cpus": os.cpu_count(), "python": platform.python_version(), "phases": {}}
    sides = {"single": fresh_database(args.dsn, "dna_bench_single", nodes, citus=False),
             "citus": fresh_database(args.dsn, "dna_bench_citus", nodes, citus=True)}
    try:
        for name, dsn in sides.items():
            with Phase() as p:
                migrate.upgrade(dsn)
                if name == "citus":
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        conn.execute("SELECT dna.distribute(%s)", (args.shards,))
            result["phases"][f"migrate {name}"] = p.json()
        with psycopg.connect(sides["single"]) as conn:
            result["versions"] = {"postgresql": conn.execute("SHOW server_version").fetchone()[0],
                                  "pgvector": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]}
        with psycopg.connect(sides["citus"]) as conn:
            result["versions"]["citus"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()[0]
        # -- bulk index: Client.index, the same records, one side after the other
        for name, dsn in sides.items():
            with pydna.connect(dsn, embedder=EMBEDDER) as client, Phase() as p:
                report = client.index(SCOPE, corpus)
            result["phases"][f"bulk index {name}"] = dict(p.json(), rows=report.inserted,
                                                           docs_per_s=round(len(corpus) / p.wall, 1))
            print(f"indexed {len(corpus)} documents into {name} in {p.wall:.1f} s", flush=True)
        # -- remember: one call at a time, alternating sides
        times: dict[str, dict[str, list[float]]] = {n: {c: [] for c in (*CALLS, "remember")} for n in sides}
        conns = {n: psycopg.connect(dsn, autocommit=True) for n, dsn in sides.items()}
        with Phase() as p:
            for i in range(args.memories):
                text = queries[i % len(queries)] + f" (note {i})"
                for name, conn in conns.items():
                    t0 = time.perf_counter()
                    conn.execute("SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => %s::vector, "
                                 "model_id => %s)", (MEM, Jsonb({"summary": text}), f"m{i}", NOW, vector(text),
                                                     EMBEDDER.model_id)).fetchone()
                    times[name]["remember"].append((time.perf_counter() - t0) * 1000)
        result["phases"]["remember (both)"] = p.json()
        # -- reads: every query on both sides, alternately, reps passes after a warm-up pass
        answers_equal = 0
        with Phase() as p:
            for rep in range(args.reps + 1):
                for q in queries:
                    params = {"scope": SCOPE, "mem": MEM, "q": q, "v": vector(q), "now": NOW}
                    for call, sql in CALLS.items():
                        got = {}
                        for name, conn in (conns.items() if rep % 2 == 0 else reversed(list(conns.items()))):
                            t0 = time.perf_counter()
                            got[name] = conn.execute(sql, params).fetchall()
                            if rep:
                                times[name][call].append((time.perf_counter() - t0) * 1000)
                        if rep == 1 and call == "lexical":
                            a, b = got["single"], got["citus"]
                            answers_equal += [r[:3] for r in a] == [r[:3] for r in b] and all(
                                abs(x[3] - y[3]) <= 1e-9 for x, y in zip(a, b))
        result["phases"]["reads (both)"] = p.json()
        result["lexical_answers_equal"] = f"{answers_equal}/{len(queries)}"
        for conn in conns.values():
            conn.close()
        result["explain"] = explain_one_shard(sides["citus"], queries[0])
    finally:
        drop_database(args.dsn, "dna_bench_single", [])
        drop_database(args.dsn, "dna_bench_citus", nodes)

    # -- the table
    rows = []
    for call in (*CALLS, "remember"):
        s, c = times["single"][call], times["citus"][call]
        kind = "write" if call == "remember" else "read"
        r50, r95 = pct(c, 0.5) / pct(s, 0.5), pct(c, 0.95) / pct(s, 0.95)
        rows.append({"call": call, "kind": kind, "n": len(s), "single_p50_ms": round(pct(s, 0.5), 2),
                     "single_p95_ms": round(pct(s, 0.95), 2), "citus_p50_ms": round(pct(c, 0.5), 2),
                     "citus_p95_ms": round(pct(c, 0.95), 2), "ratio_p50": round(r50, 2), "ratio_p95": round(r95, 2),
                     "target": f"<= {TARGETS[kind]}x", "met": max(r50, r95) <= TARGETS[kind]})
    bs, bc = result["phases"]["bulk index single"], result["phases"]["bulk index citus"]
    bulk_ratio = bc["docs_per_s"] / bs["docs_per_s"]
    rows.append({"call": "bulk index (Client.index)", "kind": "bulk", "n": len(corpus),
                 "single_docs_per_s": bs["docs_per_s"], "citus_docs_per_s": bc["docs_per_s"],
                 "ratio": round(bulk_ratio, 2), "target": f">= {TARGETS['bulk']}x", "met": bulk_ratio >= TARGETS["bulk"]})
    result["table"] = rows
    out = args.json or Path(__file__).resolve().parent / "results" / f"citus-{started:%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\nbench/citus.py {result['date']}: {len(corpus)} documents, {len(queries)} queries x {args.reps} reps, "
          f"{args.memories} memories; Citus {result['versions']['citus']} with {len(nodes)} workers and "
          f"{args.shards} shards, PostgreSQL {result['versions']['postgresql']}, {os.cpu_count()} CPUs\n")
    print("| call | single p50 / p95 ms | Citus p50 / p95 ms | Citus / single (p50, p95) | target | met |")
    print("|---|---:|---:|---:|---|---|")
    for r in rows[:-1]:
        print(f"| {r['call']} | {r['single_p50_ms']} / {r['single_p95_ms']} | {r['citus_p50_ms']} / {r['citus_p95_ms']} "
              f"| {r['ratio_p50']}×, {r['ratio_p95']}× | {r['target']} | {'yes' if r['met'] else 'no'} |")
    b = rows[-1]
    print(f"| bulk index, docs/s | {b['single_docs_per_s']} | {b['citus_docs_per_s']} | {b['ratio']}× | {b['target']} "
          f"| {'yes' if b['met'] else 'no'} |")
    print("\n| phase | wall s | server CPU s | client CPU s | load avg before → after |")
    print("|---|---:|---:|---:|---|")
    for name, ph in result["phases"].items():
        print(f"| {name} | {ph['wall_s']} | {ph['server_cpu_s']} | {ph['client_cpu_s']} | "
              f"{ph['loadavg_before'][0]:.2f} → {ph['loadavg_after'][0]:.2f} |")
    print(f"\nlexical answers equal (names in order): {result['lexical_answers_equal']}; "
          f"client CPU total {ru.ru_utime + ru.ru_stime:.1f} s")
    print("\nEXPLAIN of a scope's search and of a read of its documents on Citus:\n")
    print("\n".join("    " + (line if len(line) <= 160 else line[:157] + "...") for line in result["explain"]))
    print(f"\nJSON: {out}")


if __name__ == "__main__":
    main()
