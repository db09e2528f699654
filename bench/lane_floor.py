"""What a BM25 lane in SQL must cost at a given postings budget: the lane beside the executor's floor.

The lexical lane (``dna.bm25``, sql/bm25_lane.sql) reads at most ``budget`` postings of a query's
impact-ordered chunks, sums them per document (hash aggregation), keeps the best C + 1 and rescores
the best C from their forward rows. This bench puts, per budget and query, beside the lane's backend
CPU time:

- ``floor unnest``: the same number of the query's own postings (its chunks' arrays in bound order,
  cut at the budget, copied once into a temporary table) only unnested and counted;
- ``floor aggregate``: the same postings decoded (tf, len), BM25-weighted and summed per document by
  hash aggregation, the best 201 kept: the accumulate step and nothing else, in one plain SQL
  statement (no PL/pgSQL, no chunk selection, no rerank, no tombstones);

and the lane's agreement with exhaustive BM25 at that budget (``dna.bm25(..., exact => true)``; top-10
identical, mean overlap@10). The floor is what any plan that sums those postings in the executor
pays: a lane target below the floor at the budget the quality needs is out of reach of SQL/PL/pgSQL
on this machine (a C extension's inner loop is what goes below it).

Usage (a database built by ``bench/scale.py --keep``; read only):

    python bench/lane_floor.py "host=/tmp/pydna-scale-XXXX/pgdata dbname=dna_bench_scale_100000 user=postgres" \\
        --queries 100 --budgets 5000,10000,20000 --out /tmp/lane-floor.json

Queries: SciFact **train** claims (qrels/train.tsv order), so that nothing here is tuned on test.
Backend CPU from ``/proc/<backend pid>/schedstat`` (the server must run on this machine), the faster
of ``--rounds`` calls; p50/p95 over the queries; the 1-minute load average before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import BackendCpu  # noqa: E402

SCOPE = "scale"      # bench/scale.py's scope; --scope for another (bench/beir.py: "beir")


def train_claims(dataset: Path, n: int) -> list[str]:
    texts = {}
    with open(dataset / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            texts[d["_id"]] = d["text"]
    order: list[str] = []
    with open(dataset / "qrels" / "train.tsv", encoding="utf-8") as fh:
        for line in list(fh)[1:]:
            qid = line.split("\t")[0]
            if qid and qid not in order:
                order.append(qid)
    return [texts[q] for q in order[:n]]


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


# The query's postings in the order the budgeted lane reads them (chunks by descending bound), cut
# at the budget, with their document ids resolved: one row per posting of a temporary table.
FILL = """
INSERT INTO lane_floor_postings (p, w)
SELECT ((s.base + (x.p & 8589934591)) | (x.p & ~8589934591)), s.w
FROM (SELECT c.postings, sg.base_doc_id AS base, q.w,
             sum(c.n) OVER (ORDER BY q.w * c.max_imp DESC, c.lexeme, c.seg_id, c.chunk) AS cum, c.n
      FROM unnest(%(lex)s::text[], %(w)s::float8[]) AS q (lexeme, w)
      JOIN dna.dna_bm25_chunks AS c ON c.scope = %(scope)s AND c.model_id = %(model)s AND c.tenant = ''
                                   AND c.lexeme = q.lexeme
      JOIN dna.dna_bm25_segments AS sg ON sg.scope = c.scope AND sg.model_id = c.model_id
                                      AND sg.tenant = c.tenant AND sg.seg_id = c.seg_id) AS s
CROSS JOIN LATERAL unnest(s.postings[1:greatest(0, least(s.n, %(budget)s - (s.cum - s.n)))::integer]) AS x (p)
WHERE s.cum - s.n < %(budget)s
"""
# The floor statements over that table (k1 1.2, b 0.4 folded into constants like the lane's kk, kl).
FLOOR_UNNEST = "SELECT count(*) FROM (SELECT x.p FROM lane_floor_arrays AS a, unnest(a.ps) AS x (p)) AS y"
FLOOR_AGG = """
SELECT count(*) FROM (
    SELECT x.p & 8589934591 AS doc,
           sum(a.w * 2.2 * ((x.p >> 33) & 511)::float8 / (((x.p >> 33) & 511)::float8 + %(kk)s + %(kl)s * (x.p >> 42)::float8)) AS acc
    FROM lane_floor_arrays AS a, unnest(a.ps) AS x (p)
    GROUP BY 1 ORDER BY 2 DESC LIMIT 201) AS t
"""


def cpu_of(conn, backend: BackendCpu, sql: str, params, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        c0 = backend.read()
        conn.execute(sql, params).fetchall()
        best = min(best, (backend.read() - c0) / 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dsn")
    ap.add_argument("--dataset", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--budgets", default="5000,10000,20000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scope", default=SCOPE, help="the scope to read (default scale; bench/beir.py's is beir)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/lane-floor.json"))
    args = ap.parse_args()
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = Path(scifact_dir(args.dataset, ap))
    budgets = [int(b) for b in args.budgets.split(",")]
    claims = train_claims(args.dataset, args.queries)
    load0 = os.getloadavg()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        backend = BackendCpu(conn)
        if backend.path is None:
            raise SystemExit("lane_floor.py needs the server on this machine (/proc/<backend pid>/schedstat)")
        conn.execute("SET jit = off")
        model = conn.execute("SELECT model_id FROM dna.dna_search_docs_384 WHERE scope = %s LIMIT 1",
                             (args.scope,)).fetchone()[0]
        n_docs, avgl = conn.execute("SELECT n_docs, avg_len FROM dna.bm25_stats(%s, %s, '')", (args.scope, model)).fetchone()
        kk, kl = 1.2 * (1 - 0.4), 1.2 * 0.4 / avgl
        conn.execute("CREATE TEMP TABLE lane_floor_postings (p bigint, w float8)")
        conn.execute("CREATE TEMP TABLE lane_floor_arrays (w float8, ps bigint[])")
        rows = {b: {"lane": [], "unnest": [], "aggregate": [], "identical": 0, "overlap": [], "postings": []}
                for b in budgets}
        t0 = time.time()
        for qi, claim in enumerate(claims):
            exact = conn.execute("SELECT doc_id FROM dna.bm25(%s, %s, %s, exact => true) ORDER BY score DESC, doc_id",
                                 (args.scope, claim, model)).fetchall()
            exact_ids = [r[0] for r in exact]
            terms = conn.execute("SELECT dna.bm25_terms(%s, 'english')", (claim,)).fetchone()[0] or []
            idf = conn.execute(
                "SELECT array_agg(ln(1 + (%s - d.df + 0.5) / (d.df + 0.5)) ORDER BY t.i) "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t (lexeme, i) "
                "CROSS JOIN LATERAL (SELECT coalesce(sum(c.n), 0) AS df FROM dna.dna_bm25_chunks AS c "
                "WHERE c.scope = %s AND c.model_id = %s AND c.tenant = '' AND c.lexeme = t.lexeme) AS d",
                (n_docs, terms, args.scope, model)).fetchone()[0] or []
            for b in budgets:
                lane_sql = "SELECT doc_id FROM dna.bm25(%s, %s, %s, budget => %s) ORDER BY score DESC, doc_id"
                ids = [r[0] for r in conn.execute(lane_sql, (args.scope, claim, model, b)).fetchall()]
                rows[b]["lane"].append(cpu_of(conn, backend, lane_sql, (args.scope, claim, model, b), args.rounds))
                rows[b]["identical"] += ids == exact_ids
                rows[b]["overlap"].append(len(set(ids) & set(exact_ids)) / max(1, min(10, len(exact_ids))))
                conn.execute("TRUNCATE lane_floor_postings, lane_floor_arrays")
                conn.execute(FILL, {"lex": terms, "w": idf, "scope": args.scope, "model": model, "budget": b})
                # one array per 256 postings, like the lane's chunks, so unnest works on arrays as it does there
                conn.execute("INSERT INTO lane_floor_arrays SELECT min(w), array_agg(p) FROM "
                             "(SELECT p, w, (row_number() OVER () - 1) / 256 AS g FROM lane_floor_postings) AS s GROUP BY g")
                rows[b]["postings"].append(conn.execute("SELECT count(*) FROM lane_floor_postings").fetchone()[0])
                # hashed, as the lane does (SET enable_sort = off on dna.bm25_lane)
                conn.execute("SET enable_sort = off")
                rows[b]["unnest"].append(cpu_of(conn, backend, FLOOR_UNNEST, None, args.rounds))
                rows[b]["aggregate"].append(cpu_of(conn, backend, FLOOR_AGG, {"kk": kk, "kl": kl}, args.rounds))
                conn.execute("RESET enable_sort")
            if (qi + 1) % 20 == 0:
                print(f"  {qi + 1}/{len(claims)} queries, {time.time() - t0:.0f} s", flush=True)
    load1 = os.getloadavg()
    out = {"scope_docs": n_docs, "queries": len(claims), "load_before": load0, "load_after": load1, "budgets": {}}
    print(f"\nBM25 lane vs the executor's floor: {n_docs:,} documents, {len(claims)} SciFact train claims, k = 10, "
          f"backend CPU ms (fastest of {args.rounds}); load {load0[0]:.2f} -> {load1[0]:.2f}\n")
    print("| budget | postings read p50 | lane p50 / p95 | floor: unnest p50 / p95 | floor: aggregate p50 / p95 "
          "| aggregate µs/posting | lane − aggregate p50 | identical top-10 | overlap@10 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in budgets:
        r = rows[b]
        per = sum(r["aggregate"]) * 1000 / max(1, sum(r["postings"]))
        summary = {"postings_p50": pct(r["postings"], 0.5), "lane_p50": pct(r["lane"], 0.5), "lane_p95": pct(r["lane"], 0.95),
                   "unnest_p50": pct(r["unnest"], 0.5), "unnest_p95": pct(r["unnest"], 0.95),
                   "aggregate_p50": pct(r["aggregate"], 0.5), "aggregate_p95": pct(r["aggregate"], 0.95),
                   "aggregate_us_per_posting": per, "identical": r["identical"],
                   "overlap10": sum(r["overlap"]) / len(r["overlap"])}
        out["budgets"][str(b)] = {**summary, "per_query": r}
        print(f"| {b:,} | {summary['postings_p50']:,.0f} | {summary['lane_p50']:.1f} / {summary['lane_p95']:.1f} "
              f"| {summary['unnest_p50']:.1f} / {summary['unnest_p95']:.1f} "
              f"| {summary['aggregate_p50']:.1f} / {summary['aggregate_p95']:.1f} | {per:.3f} "
              f"| {summary['lane_p50'] - summary['aggregate_p50']:.1f} | {r['identical']}/{len(claims)} "
              f"| {summary['overlap10']:.3f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
