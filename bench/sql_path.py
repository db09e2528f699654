"""A scope written only through the SQL verbs: lexical speed with the bounded memtable beside the same scope
compacted, in one run (issue 26 item 1).

Usage (from the repository root)::

    python bench/sql_path.py [DATASET_DIR] [--docs 30000] [--chunk 250] [--queries 100] [--rounds 3]
                             [--unbounded] [--limit N] [--dsn DSN] [--keep] [--stop-full] [--out bench/results/sql_path.json]

Corpus: the 5,183 SciFact abstracts (``DATASET_DIR``, default ``../shared/data/scifact``) then the
distractors of ``bench/scale.py`` (seed 42, its cache), ``--docs`` in all, written with no vector under
a lexical-only model through ``dna.index_document``, one call per document (``SELECT
count(dna.index_document(…)) FROM unnest(…)``, ``--chunk`` calls per transaction: each call's
statements fire the BM25 trigger as a client writing one document at a time does). No
``dna.bm25_compact`` runs until the last state.

States of the scope, each measured with the same queries (the first ``--queries`` SciFact test claims),
``dna.bm25`` (k = 10, budgeted) and ``dna.search`` without a vector (the lexical lane as a caller
reaches it), the fastest of ``--rounds`` calls per query; backend CPU from ``/proc/<pid>/schedstat``
and wall time, p50/p95, the 1-minute load average:

- ``bounded, memtable full``: after the writes, topped up one document at a time until the memtable
  holds exactly ``dna.bm25_memtable_limit()`` documents (the most it holds after a statement: the
  slowest moment);
- ``bounded, just sealed``: one more document (its statement seals the memtable);
- ``compacted``: ``dna.bm25_compact(scope, full_merge => true)``, then nothing else (the figure the
  others are divided by);
- ``--unbounded``: first, the same documents in another scope with the limit raised to 10^9 for
  the phase (``CREATE OR REPLACE dna.bm25_memtable_limit()`` in the bench database, restored after),
  written by ``dna.index_documents`` statements of 999 (under the bulk threshold: the memtable, as
  revision 0020 left one-at-a-time writes): the state the issue measured.

Without ``--dsn`` an embedded PostgreSQL is started and tuned as ``bench/scale.py`` does. Prints a
Markdown table; writes JSON (``--out``) and the Markdown beside it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from lane_states import claims, pct  # noqa: E402
from scale import BackendCpu, Server, connect, load1, load_distractors, log  # noqa: E402

MODEL = "lexical-only-384"
BOUNDED, UNBOUNDED = "sqlpath", "sqlpath-unbounded"
INDEX_SQL = ("SELECT count(dna.index_document(%s, 'Doc', x.name, x.body, NULL, %s, x.title)) "
             "FROM unnest(%s::text[], %s::text[], %s::text[]) AS x (name, body, title)")
LIMIT_SQL = "CREATE OR REPLACE FUNCTION dna.bm25_memtable_limit() RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT {} $$"


def corpus(dataset: Path, n: int) -> list[dict]:
    real = []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            real.append({"_id": d["_id"], "title": d.get("title") or "", "text": d["text"]})
    docs = [{"name": d["_id"], "title": d["title"], "body": d["text"]} for d in real[:n]]
    if n > len(real):
        docs += [{"name": d["name"], "title": d["title"], "body": d["body"]} for d in load_distractors(real, n - len(real))]
    return docs


def write_one_by_one(conn, scope: str, docs: list[dict], chunk: int) -> dict:
    if not docs:
        return {"docs": 0}
    cpu = BackendCpu(conn)
    c0, t0 = cpu.read(), time.perf_counter()
    for a in range(0, len(docs), chunk):
        part = docs[a:a + chunk]
        with conn.transaction():
            conn.execute(INDEX_SQL, (scope, MODEL, [d["name"] for d in part], [d["body"] for d in part],
                                     [d["title"] for d in part]))
        if (a // chunk) % 20 == 0:
            log(f"  {scope}: {a + len(part):,} written")
    wall = time.perf_counter() - t0
    return {"docs": len(docs), "docs_per_s": round(len(docs) / wall, 1), "wall_s": round(wall, 1),
            "cpu_ms_per_doc": round((cpu.read() - c0) / 1e6 / len(docs), 3) if cpu.path else None}


def state(conn, scope: str) -> dict:
    return {"memtable_docs": conn.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = %s AND seg_id IS NULL",
                                          (scope,)).fetchone()[0],
            "segments": conn.execute("SELECT count(*) FROM dna.dna_bm25_segments WHERE scope = %s", (scope,)).fetchone()[0],
            "documents": conn.execute("SELECT count(*) FROM dna.dna_bm25_docs WHERE scope = %s", (scope,)).fetchone()[0]}


def measure(conn, scope: str, queries: list[str], rounds: int) -> dict:
    cpu = BackendCpu(conn)
    if cpu.path is None:
        raise SystemExit("sql_path.py needs the server on this machine (its backend's /proc/<pid>/schedstat)")
    calls = {"bm25": "SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10)",
             "search": "SELECT name, score FROM dna.search(%s, %s, NULL, %s, k => 10)"}
    out = {"load_before": load1()}
    answers = {}
    for lane, sql in calls.items():
        c_ms, w_ms, got = [], [], []
        for q in queries:
            best_c = best_w = None
            for _ in range(rounds):
                c0, w0 = cpu.read(), time.perf_counter()
                rows = conn.execute(sql, (scope, q, MODEL)).fetchall()
                c, w = (cpu.read() - c0) / 1e6, (time.perf_counter() - w0) * 1000
                best_c = c if best_c is None else min(best_c, c)
                best_w = w if best_w is None else min(best_w, w)
            c_ms.append(best_c)
            w_ms.append(best_w)
            got.append([(r[0], round(r[1], 9)) for r in rows])
        out[lane] = {"cpu_p50": round(pct(c_ms, .5), 2), "cpu_p95": round(pct(c_ms, .95), 2),
                     "wall_p50": round(pct(w_ms, .5), 2), "wall_p95": round(pct(w_ms, .95), 2)}
        answers[lane] = got
    out["load_after"] = load1()
    return out, answers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--docs", type=int, default=30_000)
    ap.add_argument("--chunk", type=int, default=250)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--unbounded", action="store_true")
    ap.add_argument("--limit", type=int, default=None,
                    help="another memtable limit for the bounded scope (dna.bm25_memtable_limit() replaced in the "
                         "bench database: what a limit costs and buys)")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--keep", action="store_true",
                    help="keep the database (compacted) and the embedded server; print its DSN (e.g. for "
                         "bench/lane_states.py --stats --scope sqlpath)")
    ap.add_argument("--stop-full", action="store_true",
                    help="stop after the memtable-full state and keep that database and the server (print its DSN): "
                         "e.g. for bench/sql_path_states.py beside a compacted copy")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "sql_path.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir
    dataset = Path(scifact_dir(args.dataset, ap))
    docs = corpus(dataset, args.docs)
    queries = claims(dataset, args.queries)
    srv = Server(args.dsn)
    results, states = {"settings": srv.settings, "docs": args.docs, "queries": len(queries)}, []
    try:
        if args.unbounded:
            # Its own database: the memtable of 30k documents is millions of rows of dna_bm25_postings.
            with connect(srv.fresh("dna_bench_sql_path_unbounded")) as conn:
                conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
                conn.execute(LIMIT_SQL.format(10**9))
                t0 = time.perf_counter()
                for a in range(0, len(docs), 999):
                    part = docs[a:a + 999]
                    conn.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, NULL, %s, %s)",
                                 (UNBOUNDED, ["Doc"] * len(part), [d["name"] for d in part], [d["body"] for d in part],
                                  MODEL, [d["title"] for d in part]))
                log(f"unbounded scope written in {time.perf_counter() - t0:.0f} s")
                m, _ = measure(conn, UNBOUNDED, queries, args.rounds)
                states.append({"state": "unbounded memtable (revision 0020)", "scope": UNBOUNDED,
                               **state(conn, UNBOUNDED), **m})
            srv.drop("dna_bench_sql_path_unbounded")
        dsn = srv.fresh("dna_bench_sql_path")
        with connect(dsn) as conn:
            conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
            if args.limit is not None:
                conn.execute(LIMIT_SQL.format(int(args.limit)))
            limit = conn.execute("SELECT dna.bm25_memtable_limit()").fetchone()[0]
            results["memtable_limit"] = limit
            compacted_answers = None
            log(f"writing {len(docs):,} documents one dna.index_document call each")
            results["write"] = write_one_by_one(conn, BOUNDED, docs, args.chunk)
            log(f"written: {results['write']}")
            left = limit - state(conn, BOUNDED)["memtable_docs"]
            top = [{"name": f"top{i}", "title": d["title"], "body": d["body"] + " top-up"} for i, d in enumerate(docs[:left + 1])]
            write_one_by_one(conn, BOUNDED, top[:left], args.chunk)
            assert state(conn, BOUNDED)["memtable_docs"] == limit, state(conn, BOUNDED)
            m, _ = measure(conn, BOUNDED, queries, args.rounds)
            states.append({"state": f"bounded, memtable full ({limit:,})", "scope": BOUNDED, **state(conn, BOUNDED), **m})
            if args.stop_full:
                print(json.dumps(states, indent=1))
                print(f"kept at memtable full: {dsn}", file=sys.stderr)
                return 0
            write_one_by_one(conn, BOUNDED, top[left:], args.chunk)
            m, sealed_answers = measure(conn, BOUNDED, queries, args.rounds)
            states.append({"state": "bounded, just sealed", "scope": BOUNDED, **state(conn, BOUNDED), **m})
            conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (BOUNDED,))
            m, compacted_answers = measure(conn, BOUNDED, queries, args.rounds)
            states.append({"state": "compacted (full merge)", "scope": BOUNDED, **state(conn, BOUNDED), **m})
            results["same_answers_sealed_vs_compacted"] = {
                lane: f"{sum(a == b for a, b in zip(sealed_answers[lane], compacted_answers[lane]))}/{len(queries)}"
                for lane in sealed_answers}
        if args.keep:
            print(f"kept: {dsn}" + (f" (server home {srv.home}; stop it with pydna.server.stop)" if srv.home else ""),
                  file=sys.stderr)
        else:
            srv.drop("dna_bench_sql_path")
    finally:
        if not (args.keep or args.stop_full):
            srv.close()
    base = states[-1]
    for s in states:
        for lane in ("bm25", "search"):
            s[lane]["ratio_cpu_p50"] = round(s[lane]["cpu_p50"] / base[lane]["cpu_p50"], 2)
            s[lane]["ratio_cpu_p95"] = round(s[lane]["cpu_p95"] / base[lane]["cpu_p95"], 2)
    results["states"] = states
    lines = [f"SQL-path scope: {args.docs:,} documents written by dna.index_document one call each "
             f"({results['write']['docs_per_s']} docs/s, {results['write']['cpu_ms_per_doc']} ms CPU/doc); "
             f"{len(queries)} SciFact claims, best of {args.rounds}; top 10 after the last seal identical to compacted "
             f"(budgeted lane: equal scores, the set may differ where uncertified): "
             f"{results['same_answers_sealed_vs_compacted']}",
             "",
             "| state | memtable docs | segments | dna.bm25 CPU p50/p95 ms | × compacted | dna.search (lexical) CPU p50/p95 ms "
             "| × compacted | wall p50 bm25/search ms | load |",
             "|" + "---|" * 9]
    for s in states:
        lines.append(f"| {s['state']} | {s['memtable_docs']:,} | {s['segments']} "
                     f"| {s['bm25']['cpu_p50']} / {s['bm25']['cpu_p95']} | × {s['bm25']['ratio_cpu_p50']} / × {s['bm25']['ratio_cpu_p95']} "
                     f"| {s['search']['cpu_p50']} / {s['search']['cpu_p95']} | × {s['search']['ratio_cpu_p50']} / × {s['search']['ratio_cpu_p95']} "
                     f"| {s['bm25']['wall_p50']} / {s['search']['wall_p50']} | {s['load_before']} |")
    md = "\n".join(lines)
    print(md)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    out.with_suffix(".md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
