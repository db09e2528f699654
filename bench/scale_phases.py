"""Where the lexical lane's time goes per posting, statement by statement (issue 11).

Usage (after ``python bench/scale.py --docs 100000 --keep``, on the kept database)::

    python bench/scale_phases.py DSN [--scope scale] [--model-id M] [--queries 20] [--rounds 7]
                                     [--budget 20000] [--candidates 200] [--out bench/results/scale-phases.json]

For each of the first ``--queries`` SciFact test claims that take the budgeted path, the chunks the
lane chooses (``dna.bm25_lane``'s chunk statement: bound order, running sum of postings up to the
budget) are computed once; then statements that do successively more of the accumulate step over
exactly those postings run round-robin ``--rounds`` times each (so load changes hit every variant
alike), timed by the backend's CPU (/proc/<pid>/schedstat). Per variant: the median over queries
of each query's fastest round, in ms and in µs per posting read, with the load average. Variants:

- ``fetch``: the chosen chunk rows and their arrays (detoasted), nothing decoded;
- ``decode (unnest in FROM)`` / ``decode (unnest in select list)``: the postings as rows, counted
  (a FunctionScan materializes the set in a tuplestore; ProjectSet does not);
- ``+ BM25 arithmetic``: every posting's contribution, summed into one number;
- ``+ hash aggregation``: partial sums per document (HashAggregate), all groups kept;
- ``0011 plain accumulate``: the statement 0011 runs after a compaction (adds the top C+1 cut);
- ``0010 accumulate``: the statement 0010 ran (memtable branch, tombstone anti-join, shadow filter);
- ``floor: hash aggregation of the ids alone``: SELECT DISTINCT of the decoded doc ids, no
  arithmetic: what PostgreSQL's HashAggregate costs per posting on its own.

Prints a table, writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[1]

CHOSEN = """
WITH q AS (SELECT * FROM unnest(%(lex)s::text[], %(w)s::float8[]) AS q (lexeme, w)),
h AS (SELECT c.tenant, c.lexeme, c.kind, c.seg_id, c.chunk, c.n, q.w, sg.base_doc_id,
             q.w * least(CASE WHEN sg.k1 = %(k1)s AND sg.b = %(b)s
                              THEN c.max_imp * greatest(1.0, %(avgl)s / sg.avgdl_ref) * 1.000001 ELSE 'Infinity'::float8 END,
                         dna.bm25_weight(c.max_tf, c.min_len, %(k1)s, %(b)s, %(avgl)s) * 1.000001) AS bound
      FROM q JOIN dna.dna_bm25_chunks AS c
        ON c.scope = %(scope)s AND c.model_id = %(m)s AND c.tenant = '' AND c.lexeme = q.lexeme
      JOIN dna.dna_bm25_segments AS sg
        ON sg.scope = c.scope AND sg.model_id = c.model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id),
o AS (SELECT h.*, sum(h.n) OVER (ORDER BY h.bound DESC, h.lexeme, h.kind, h.tenant, h.seg_id, h.chunk) AS cum FROM h)
SELECT tenant, lexeme, kind, seg_id, chunk,
       CASE WHEN cum - n >= %(spent)s THEN 0 WHEN cum > %(spent)s THEN (%(spent)s - (cum - n))::int ELSE n END, w, base_doc_id
FROM o"""

CH = """unnest(%(t)s::text[], %(l)s::text[], %(k)s::text[], %(s)s::int[], %(c)s::int[], %(take)s::int[], %(w)s::float8[],
              %(base)s::int8[]) AS ch (tenant, lexeme, kind, seg_id, chunk, take, w, base)
        JOIN dna.dna_bm25_chunks AS c
          ON c.scope = %(scope)s AND c.model_id = %(m)s AND c.tenant = ch.tenant AND c.lexeme = ch.lexeme
         AND c.kind = ch.kind AND c.seg_id = ch.seg_id AND c.chunk = ch.chunk"""
ARR = "(CASE WHEN ch.take >= c.n THEN c.postings ELSE c.postings[1:ch.take] END)"
PS = f"(SELECT ch.base, ch.seg_id, ch.w * (%(k1)s + 1) AS wk, unnest{ARR} AS p FROM {CH}) AS x"
CONTRIB = "x.wk * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + %(kk)s + %(kl)s * (x.p >> 42)::float8)"

VARIANTS = {
    "fetch": f"SELECT sum(cardinality(c.postings)) FROM {CH}",
    "decode (unnest in FROM)": f"SELECT count(*) FROM {CH} CROSS JOIN LATERAL unnest{ARR} AS x (p)",
    "decode (unnest in select list)": f"SELECT count(*) FROM {PS}",
    "+ BM25 arithmetic": f"SELECT sum({CONTRIB}) FROM {PS}",
    "+ hash aggregation": f"SELECT sum(a) FROM (SELECT x.base + (x.p & 8589934591), sum({CONTRIB}) AS a FROM {PS} GROUP BY 1) AS z",
    "0011 plain accumulate": f"""SELECT array_agg(d ORDER BY a DESC, d), array_agg(a ORDER BY a DESC, d)
        FROM (SELECT x.base + (x.p & 8589934591) AS d, sum({CONTRIB}) AS a FROM {PS} GROUP BY 1 ORDER BY 2 DESC, 1
              LIMIT %(cand)s + 1) AS z""",
    "0010 accumulate": f"""WITH tomb AS MATERIALIZED (
            SELECT t.doc_id, t.seg_id FROM dna.dna_bm25_tombstones AS t
            WHERE t.scope = %(scope)s AND t.model_id = %(m)s AND t.tenant = ANY ('{{""}}')),
        post AS (
            SELECT sg.base_doc_id + (x.p & 8589934591) AS doc_id, c.seg_id, ch.w * (%(k1)s + 1) AS wk,
                   ((x.p >> 33) & 511)::float8 AS tf, (x.p >> 42)::float8 AS len
            FROM {CH}
            JOIN dna.dna_bm25_segments AS sg
              ON sg.scope = c.scope AND sg.model_id = c.model_id AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id
            CROSS JOIN LATERAL unnest{ARR} AS x (p)
            UNION ALL
            SELECT p.doc_id, NULL::integer, q.w * (%(k1)s + 1), p.tf::float8, p.doc_len::float8
            FROM unnest(%(lex)s::text[], %(wq)s::float8[]) AS q (lexeme, w)
            JOIN dna.dna_bm25_postings AS p
              ON p.scope = %(scope)s AND p.model_id = %(m)s AND p.tenant = ANY ('{{""}}') AND p.lexeme = q.lexeme),
        acc AS (
            SELECT a.doc_id, sum(a.wk * a.tf / (a.tf + %(kk)s + %(kl)s * a.len)) AS acc
            FROM post AS a
            WHERE NOT (a.doc_id = ANY ('{{}}'::bigint[]))
              AND NOT EXISTS (SELECT 1 FROM tomb AS t WHERE t.doc_id = a.doc_id AND t.seg_id = a.seg_id)
            GROUP BY a.doc_id ORDER BY 2 DESC, 1 LIMIT %(cand)s + 1)
        SELECT array_agg(acc.doc_id ORDER BY acc.acc DESC, acc.doc_id), array_agg(acc.acc ORDER BY acc.acc DESC, acc.doc_id)
        FROM acc""",
    "floor: hash aggregation of the ids alone": f"SELECT count(*) FROM (SELECT DISTINCT x.base + (x.p & 8589934591) FROM {PS}) AS z",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dsn")
    ap.add_argument("--scope", default="scale")
    ap.add_argument("--model-id", default="all-MiniLM-L6-v2-onnx-int8-w8a8")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--budget", type=int, default=20000)
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--dataset", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "scale-phases.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    root = Path(args.dataset)
    ids = {line.split("\t")[0] for line in (root / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    queries = [json.loads(x) for x in (root / "queries.jsonl").read_text().splitlines()]
    queries = [q["text"] for q in queries if q["_id"] in ids]
    with psycopg.connect(args.dsn, autocommit=True) as c:
        def cpu() -> int:
            with open(f"/proc/{c.info.backend_pid}/schedstat") as fh:
                return int(fh.read().split()[0])

        cfg = c.execute("SELECT bm25_k1, bm25_b FROM dna.search_config(%s)", (args.scope,)).fetchone()
        per: dict[str, list[float]] = {v: [] for v in VARIANTS}
        postings, used, load0 = [], 0, os.getloadavg()[0]
        for text in queries:
            if used >= args.queries:
                break
            e = c.execute("SELECT dna.bm25_explain(%s, %s, %s, k => 10, budget => %s)",
                          (args.scope, text, args.model_id, args.budget)).fetchone()[0]
            if e.get("path") != "budgeted":
                continue
            used += 1
            avgl = e["avg_len"]
            p = {"lex": e["terms"], "w": e["idf"], "wq": e["idf"], "avgl": avgl, "k1": cfg[0], "b": cfg[1], "scope": args.scope,
                 "m": args.model_id, "spent": e["budget"], "kk": cfg[0] * (1 - cfg[1]), "kl": cfg[0] * cfg[1] / avgl,
                 "cand": args.candidates}
            rows = [r for r in c.execute(CHOSEN, p).fetchall() if r[5] > 0]
            for key, col in zip(("t", "l", "k", "s", "c", "take", "w", "base"), zip(*rows)):
                p[key] = list(col)
            postings.append(sum(p["take"]))
            best = {v: float("inf") for v in VARIANTS}
            for v, sql in VARIANTS.items():      # warm
                c.execute(sql, p).fetchall()
            for _ in range(args.rounds):
                for v, sql in VARIANTS.items():
                    c0 = cpu()
                    c.execute(sql, p).fetchall()
                    best[v] = min(best[v], (cpu() - c0) / 1e6)
            for v in VARIANTS:
                per[v].append(best[v])
            print(f"query {used}: {postings[-1]:,} postings, " + ", ".join(f"{v} {best[v]:.2f}" for v in VARIANTS),
                  file=sys.stderr, flush=True)
        n_docs = c.execute("SELECT n_docs FROM dna.bm25_stats(%s, %s, '')", (args.scope, args.model_id)).fetchone()[0]
    load1 = os.getloadavg()[0]
    post = statistics.median(postings)
    rows = [{"variant": v, "cpu_ms_p50": round(statistics.median(x), 2), "us_per_posting": round(1000 * statistics.median(x) / post, 3)}
            for v, x in per.items()]
    print(f"{n_docs:,} documents, {used} budgeted queries, {post:,.0f} postings each (median), "
          f"load {load0:.2f} → {load1:.2f}")
    print("| statement over the chosen postings | CPU ms (median of per-query best) | µs per posting |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['cpu_ms_p50']} | {r['us_per_posting']} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"docs": n_docs, "queries": used, "postings_median": post, "budget": args.budget,
                                          "candidates": args.candidates, "rounds": args.rounds, "load1_start": load0,
                                          "load1_end": load1, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
