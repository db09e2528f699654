"""The BM25 lane in the states live writes leave: this checkout's ``dna.bm25_lane`` (``sql/bm25_lane.sql``,
loaded as ``lanebench_this.bm25_lane``) beside an earlier text of it, interleaved query by query on the same database, after a full compaction (the plain
form), with new documents in the memtable, and with changed documents (tombstones + memtable).

Usage (a database built by ``bench/scale.py --keep``; it is changed: documents are added and
rewritten under the names ``lanebench-*`` and the BM25 index compacted):

    python bench/lane_states.py "host=/tmp/pydna-scale-XXXX/pgdata dbname=dna_bench_scale_100000 user=postgres" \
        --add 1000 --update 1000 --queries 40 --out /tmp/lane-states.json

The earlier text (``--against``, default the lane as revision 0013_passages released it, frozen in
``migrations/versions/0013_passages/bm25.sql``) is loaded as ``lanebench.bm25_lane``. Per state and
query: the fastest of ``--rounds`` calls of each text (k = 10, the scope's k1/b, SciFact test claims in
file order), backend CPU from ``/proc/<backend pid>/schedstat`` (the server runs on this machine) and
client wall time; p50/p95 over the queries, the ratio, how many answers are identical (doc_ids,
scores to 1e-9, exact flags), and the 1-minute load average. Prints a table, writes JSON.

``--stats`` (issue 26 item 3) runs ``dna.bm25`` (k = 10) instead in the states of the planner's statistics,
autovacuum off on the BM25 tables for the run (restored after), ``--add`` documents written one
``dna.index_document`` call each after a full compaction and a VACUUM ANALYZE that saw the memtable empty:

- ``fresh, compacted``: the compacted scope, analyzed;
- ``stale, before``: the documents written with the write path's ANALYZE turned off
  (``dna.bm25_keep_statistics`` replaced by a no-op in this database for the phase: statistics left to
  autovacuum, as revision 0020 did): the memtable analyzed empty, now full;
- ``fresh``: the same after VACUUM ANALYZE;
- ``stale, after``: compacted and analyzed again, then ``--add`` new documents by this tree's write path
  (which analyzes what it changes);
- ``empty statistics``: the same scope with every BM25 table's statistics removed (``pg_statistic`` rows
  deleted, ``reltuples`` = −1: never analyzed; needs a superuser), and the same after one more document
  written (its statement analyzes the tables never analyzed).

``--scope`` names the scope (default ``scale``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import psycopg

from scale import BackendCpu   # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
SCOPE = "scale"   # --scope


def claims(dataset: Path, n: int) -> list[str]:
    texts = {}
    with open(dataset / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            texts[d["_id"]] = d["text"]
    order: list[str] = []
    with open(dataset / "qrels" / "test.tsv", encoding="utf-8") as fh:
        for line in list(fh)[1:]:
            qid = line.split("\t")[0]
            if qid and qid not in order:
                order.append(qid)
    return [texts[q] for q in order[:n]]


def load_lane(conn, path: Path, schema: str) -> None:
    """The dna.bm25_lane of a plane-file text, created as <schema>.bm25_lane."""
    text = path.read_text(encoding="utf-8")
    lane = re.search(r"CREATE OR REPLACE FUNCTION dna\.bm25_lane\(.*?\n\$\$;\n", text, re.S).group(0)
    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    conn.execute("SET check_function_bodies = off")
    conn.execute(lane.replace("dna.bm25_lane(", f"{schema}.bm25_lane("))


def state(conn) -> dict:
    return {"memtable_docs": conn.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = %s AND seg_id IS NULL",
                                          (SCOPE,)).fetchone()[0],
            "segments": conn.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = %s", (SCOPE,)).fetchone()[0],
            "tombstones": conn.execute("SELECT count(*) FROM dna.dna_bm25_tombstones WHERE scope = %s",
                                       (SCOPE,)).fetchone()[0]}


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))]


def measure(conn, model: str, queries: list[str], rounds: int) -> dict:
    backend = BackendCpu(conn)   # /proc/<pid>/schedstat, ns
    if backend.path is None:
        raise SystemExit("lane_states.py needs the server on this machine (its backend's /proc/<pid>/schedstat)")
    k1, b = conn.execute("SELECT bm25_k1, bm25_b FROM dna.search_config(%s)", (SCOPE,)).fetchone()
    sql = ("SELECT doc_id, score, exact FROM {}.bm25_lane(%s, %s, '', dna.bm25_terms(%s, 'english'), %s, %s, 10) "
           "ORDER BY score DESC, doc_id")
    cpu = {"lanebench_this": [], "lanebench": []}
    wall = {"lanebench_this": [], "lanebench": []}
    identical = 0
    for q in queries:
        best: dict[str, tuple[float, float, list]] = {}
        for _ in range(rounds):
            for schema in ("lanebench_this", "lanebench"):
                c0, w0 = backend.read(), time.perf_counter()
                rows = conn.execute(sql.format(schema), (SCOPE, model, q, k1, b)).fetchall()
                c, w = (backend.read() - c0) / 1e6, (time.perf_counter() - w0) * 1000
                old = best.get(schema)
                best[schema] = (min(old[0], c) if old else c, min(old[1], w) if old else w, rows)
        for schema in best:
            cpu[schema].append(best[schema][0])
            wall[schema].append(best[schema][1])
        a, o = best["lanebench_this"][2], best["lanebench"][2]
        identical += len(a) == len(o) and all(x[0] == y[0] and x[2] == y[2] and abs(x[1] - y[1]) <= 1e-9
                                              for x, y in zip(a, o))
    out = {"queries": len(queries), "identical": identical, "load": round(os.getloadavg()[0], 2)}
    for schema, name in (("lanebench_this", "this"), ("lanebench", "against")):
        out[name] = {"cpu_p50": round(pct(cpu[schema], .5), 2), "cpu_p95": round(pct(cpu[schema], .95), 2),
                     "wall_p50": round(pct(wall[schema], .5), 2), "wall_p95": round(pct(wall[schema], .95), 2)}
    out["ratio_cpu_p50"] = round(out["this"]["cpu_p50"] / out["against"]["cpu_p50"], 3)
    out["ratio_cpu_p95"] = round(out["this"]["cpu_p95"] / out["against"]["cpu_p95"], 3)
    return out


def write_docs(conn, model: str, n: int, tag: str, rewrite: bool) -> float:
    """n new documents (copies of the scope's first ones under new names) or n rewritten ones (the
    scope's last real names, text + ' revised'), one dna.index_document statement each."""
    if rewrite:
        rows = conn.execute("SELECT kind, name, body, title, embedding FROM dna.dna_search_docs_384 "
                            "WHERE scope = %s AND name NOT LIKE 'lanebench-%%' ORDER BY doc_id DESC LIMIT %s",
                            (SCOPE, n)).fetchall()
    else:
        rows = conn.execute("SELECT kind, name, body, title, embedding FROM dna.dna_search_docs_384 "
                            "WHERE scope = %s ORDER BY doc_id LIMIT %s", (SCOPE, n)).fetchall()
    t = time.perf_counter()
    for kind, name, body, title, emb in rows:
        conn.execute("SELECT dna.index_document(%s, %s, %s, %s, %s, %s, %s)",
                     (SCOPE, kind, name if rewrite else f"lanebench-{tag}-{name}",
                      body + " revised" if rewrite else body, emb, model, title))
    return time.perf_counter() - t


def measure_bm25(conn, model: str, queries: list[str], rounds: int) -> dict:
    """dna.bm25 (k = 10) per query, the fastest of ``rounds``: backend CPU and wall p50/p95 (ms)."""
    backend = BackendCpu(conn)
    if backend.path is None:
        raise SystemExit("lane_states.py needs the server on this machine (its backend's /proc/<pid>/schedstat)")
    cpu, wall, answers = [], [], []
    load = round(os.getloadavg()[0], 2)
    for q in queries:
        bc = bw = None
        for _ in range(rounds):
            c0, w0 = backend.read(), time.perf_counter()
            rows = conn.execute("SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10)", (SCOPE, q, model)).fetchall()
            c, w = (backend.read() - c0) / 1e6, (time.perf_counter() - w0) * 1000
            bc, bw = (c if bc is None else min(bc, c)), (w if bw is None else min(bw, w))
        cpu.append(bc)
        wall.append(bw)
        answers.append([(r[0], round(r[1], 9)) for r in rows])
    return {"cpu_p50": round(pct(cpu, .5), 2), "cpu_p95": round(pct(cpu, .95), 2),
            "wall_p50": round(pct(wall, .5), 2), "wall_p95": round(pct(wall, .95), 2),
            "load": load, "answers": answers}


def statistics(conn, table: str) -> dict:
    r = conn.execute("SELECT c.reltuples, s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL "
                     "FROM pg_class AS c LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid WHERE c.oid = %s::regclass",
                     (f"dna.{table}",)).fetchone()
    return {"reltuples": r[0], "rows": conn.execute(f"SELECT count(*) FROM dna.{table}").fetchone()[0]}


NO_OP = ("CREATE OR REPLACE FUNCTION dna.bm25_keep_statistics(scope text, tables text[]) RETURNS integer "
         "LANGUAGE sql AS $$ SELECT 0 $$")


def stats_states(conn, model: str, queries: list[str], args) -> list[dict]:
    """The lane in each state of the statistics (module docstring, --stats)."""
    out = []
    kept = conn.execute("SELECT pg_get_functiondef('dna.bm25_keep_statistics(text, text[])'::regprocedure)").fetchone()[0]

    def record(name: str) -> None:
        m = measure_bm25(conn, model, queries, args.rounds)
        out.append({"state": name, **state(conn), "postings": statistics(conn, "dna_bm25_postings"), **m})
        log = out[-1]
        print(f"  {name}: {log['cpu_p50']} / {log['cpu_p95']} ms (postings {log['postings']})", flush=True)

    def compact_and_analyze() -> None:
        conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (SCOPE,))
        settle(conn, True)

    for t in BM25_TABLES:
        conn.execute(f"ALTER TABLE dna.{t} SET (autovacuum_enabled = off)")
    try:
        compact_and_analyze()
        record("fresh, compacted")
        conn.execute(NO_OP)
        try:
            write_docs(conn, model, args.add, f"s{int(time.time())}", rewrite=False)
        finally:
            conn.execute(kept)
        record(f"stale, before: +{args.add} in the memtable analyzed empty (no ANALYZE by the write path)")
        settle(conn, True)
        record(f"fresh: +{args.add}, VACUUM ANALYZE")
        compact_and_analyze()
        write_docs(conn, model, args.add, f"t{int(time.time())}", rewrite=False)
        record(f"stale, after: +{args.add} by this write path (it analyzes what it changes)")
        for t in BM25_TABLES:
            conn.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", (f"dna.{t}",))
            conn.execute("UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = %s::regclass", (f"dna.{t}",))
        record("empty statistics (never analyzed)")
        write_docs(conn, model, 1, f"u{int(time.time())}", rewrite=False)
        record("empty statistics, then one document written (the write path analyzes)")
    finally:
        for t in BM25_TABLES:
            conn.execute(f"ALTER TABLE dna.{t} RESET (autovacuum_enabled)")
        compact_and_analyze()
    for r in out:
        r["same_answers_as_fresh_compacted"] = r["answers"] == out[0]["answers"]
    return out


BM25_TABLES = ("dna_bm25_postings", "dna_bm25_chunks", "dna_bm25_segments", "dna_bm25_docs", "dna_bm25_forward",
               "dna_bm25_tombstones", "dna_bm25_tombstone_terms")


def settle(conn, vacuum: bool) -> None:
    if vacuum:
        for table in BM25_TABLES:
            conn.execute(f"VACUUM ANALYZE dna.{table}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dsn")
    ap.add_argument("--dataset", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--against", default=str(ROOT / "migrations" / "versions" / "0013_passages" / "bm25.sql"))
    ap.add_argument("--add", type=int, default=1000, help="new documents for the memtable state")
    ap.add_argument("--update", type=int, default=1000, help="rewritten documents for the tombstone state")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--vacuum", action="store_true",
                    help="VACUUM ANALYZE the BM25 tables after each write phase (a settled state: what autovacuum "
                         "reaches soon after; without it the planner may still see the tables as they were)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--stats", action="store_true", help="dna.bm25 in the states of the planner's statistics (docstring)")
    ap.add_argument("--scope", default="scale")
    args = ap.parse_args()
    global SCOPE
    SCOPE = args.scope
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    queries = claims(Path(args.dataset), args.queries)
    results = []
    if args.stats:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            model = conn.execute("SELECT model_id FROM dna.dna_bm25_docs WHERE scope = %s LIMIT 1", (SCOPE,)).fetchone()[0]
            results = stats_states(conn, model, queries, args)
        print("| state | memtable docs | segments | postings rows / reltuples | dna.bm25 CPU p50/p95 ms "
              "| × fresh p50/p95 | wall p50/p95 ms | load |")
        print("|" + "---|" * 8)
        fresh = next(r for r in results if r["state"].startswith("fresh:"))
        for r in results:
            print(f"| {r['state']} | {r['memtable_docs']:,} | {r['segments']} "
                  f"| {r['postings']['rows']:,} / {r['postings']['reltuples']:,.0f} | {r['cpu_p50']} / {r['cpu_p95']} "
                  f"| × {r['cpu_p50'] / fresh['cpu_p50']:.2f} / × {r['cpu_p95'] / fresh['cpu_p95']:.2f} "
                  f"| {r['wall_p50']} / {r['wall_p95']} | {r['load']} |")
        if args.out:
            Path(args.out).write_text(json.dumps({"stats": [{k: v for k, v in r.items() if k != "answers"}
                                                            for r in results]}, indent=2))
        return
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        load_lane(conn, ROOT / "sql" / "bm25_lane.sql", "lanebench_this")
        load_lane(conn, Path(args.against), "lanebench")
        model = conn.execute("SELECT model_id FROM dna.dna_bm25_segments WHERE scope = %s LIMIT 1", (SCOPE,)).fetchone()[0]
        conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (SCOPE,))
        settle(conn, args.vacuum)
        results.append({"state": "compacted (plain form)", **state(conn), **measure(conn, model, queries, args.rounds)})
        if args.add:
            write_docs(conn, model, args.add, str(int(time.time())), rewrite=False)
            settle(conn, args.vacuum)
            results.append({"state": f"+{args.add} new documents (memtable)", **state(conn),
                            **measure(conn, model, queries, args.rounds)})
        if args.update:
            write_docs(conn, model, args.update, "", rewrite=True)
            settle(conn, args.vacuum)
            results.append({"state": f"+{args.update} rewritten documents (tombstones)", **state(conn),
                            **measure(conn, model, queries, args.rounds)})
        conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (SCOPE,))
    head = ("| state | memtable docs | segments | tombstones | this CPU p50/p95 ms | against CPU p50/p95 ms "
            "| ratio p50/p95 | identical | load |")
    print(head)
    print("|" + "---|" * 9)
    for r in results:
        print(f"| {r['state']} | {r['memtable_docs']:,} | {r['segments']} | {r['tombstones']:,} "
              f"| {r['this']['cpu_p50']} / {r['this']['cpu_p95']} | {r['against']['cpu_p50']} / {r['against']['cpu_p95']} "
              f"| × {r['ratio_cpu_p50']} / × {r['ratio_cpu_p95']} | {r['identical']}/{r['queries']} | {r['load']} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"against": args.against, "results": results}, indent=2))


if __name__ == "__main__":
    main()
