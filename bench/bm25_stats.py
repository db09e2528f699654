"""BM25 statistics at 100k documents: maintained by trigger, or computed on demand?

Usage (from the repository root)::

    python bench/bm25_stats.py [DATASET_DIR] [--docs 100000] [--dsn DSN] [--out bench/results/bm25-stats.json]

Builds ``--docs`` lexical documents (model ``dna-fake-hash-v1``, no vectors) from SciFact abstracts
(document i = abstract i mod 5183 followed by the first half of abstract (7i + 3) mod 5183, so
every document is distinct and the vocabulary is real) in a fresh embedded database, then measures:

- **write cost of the triggers**: bulk ``dna.index_document`` of all documents with the BM25 triggers
  enabled vs disabled (``ALTER TABLE … DISABLE TRIGGER``; the postings are what scoring reads, so
  this is the price of the whole BM25 index), and single-row update/delete latency;
- **N and avglen**: the trigger-maintained ``dna.bm25_partition_stats`` (one primary-key read of
  ``dna_bm25_stats``) vs on demand (``count(*)``, ``sum(doc_len)`` over the partition's documents,
  given a per-document length column, the cheapest on-demand form);
- **df**: counted on demand from the postings the query reads anyway (what ``dna.bm25`` does) vs
  a maintained ``(scope, model_id, tenant, lexeme) → df`` table (built here once, to time the read);
- the BM25 lane (``dna.bm25``, k = 10) latency over the 300 SciFact test claims at this size.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import beir  # noqa: E402

MODEL = "dna-fake-hash-v1"
SCOPE = "s100k"


def timed(fn, n=1):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) * 1000 / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bm25-stats.json"))
    args = ap.parse_args(argv)

    import psycopg
    from rich.console import Console

    console = Console()
    corpus, queries, _, _ = beir.load_dataset(Path(args.dataset), "test")
    n = len(corpus)
    bodies = []
    for i in range(args.docs):
        a, b = corpus[i % n], corpus[(7 * i + 3) % n]["text"]
        bodies.append((f"d{i}", a["title"], a["text"] + " " + b[: len(b) // 2]))
    dsn, cleanup = beir.setup_database(args, console)
    res: dict = {"docs": args.docs}
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE src (name text, title text, body text)")
            with conn.cursor().copy("COPY src FROM STDIN") as cp:
                for row in bodies:
                    cp.write_row(row)
            load_sql = ("SELECT count(dna.index_document(%s, 'Doc', s.name, s.body, NULL, %s, s.title)) "
                        "FROM src AS s")
            # without the BM25 triggers (then cleared) ...
            conn.execute("ALTER TABLE dna.dna_search_docs_384 DISABLE TRIGGER USER")
            t = time.perf_counter()
            conn.execute(load_sql, ("nobm25", MODEL))
            res["load_without_bm25_s"] = round(time.perf_counter() - t, 1)
            conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = 'nobm25'")
            conn.execute("ALTER TABLE dna.dna_search_docs_384 ENABLE TRIGGER USER")
            # ... and with them
            t = time.perf_counter()
            conn.execute(load_sql, (SCOPE, MODEL))
            res["load_with_bm25_s"] = round(time.perf_counter() - t, 1)
            conn.execute("VACUUM ANALYZE")
            res["postings"] = conn.execute("SELECT count(*) FROM dna.dna_bm25_postings").fetchone()[0]
            res["postings_mb"] = round(conn.execute(
                "SELECT pg_total_relation_size('dna.dna_bm25_postings')").fetchone()[0] / 2**20, 1)
            console.print(res)

            # single-row writes (each fires the trigger)
            upd, dele = [], []
            for i in range(200):
                name = f"d{i * 97 % args.docs}"
                t = time.perf_counter()
                conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, NULL, %s)",
                             (SCOPE, name, f"updated text {i} about cells and proteins", MODEL))
                upd.append((time.perf_counter() - t) * 1000)
            for i in range(200):
                name = f"d{i * 89 % args.docs + 1}"
                t = time.perf_counter()
                conn.execute("SELECT dna.delete_document(%s, 'Doc', %s)", (SCOPE, name))
                dele.append((time.perf_counter() - t) * 1000)
            res["update_ms_p50"] = round(statistics.median(upd), 2)
            res["delete_ms_p50"] = round(statistics.median(dele), 2)

            # N, avglen: maintained vs on demand
            conn.execute("""CREATE TABLE public.bench_doclen AS
                            SELECT scope, model_id, tenant, doc_id, dna.bm25_doc_length(tsv) AS doc_len
                            FROM dna.dna_search_docs_384 WHERE scope = %s""", (SCOPE,))
            conn.execute("CREATE INDEX ON public.bench_doclen (scope, model_id, tenant) INCLUDE (doc_len)")
            conn.execute("VACUUM ANALYZE public.bench_doclen")
            maintained = conn.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s)",
                                      (SCOPE, MODEL)).fetchone()
            ondemand = conn.execute("SELECT count(*), sum(doc_len) FROM public.bench_doclen "
                                    "WHERE scope = %s AND model_id = %s AND tenant IN ('', '')",
                                    (SCOPE, MODEL)).fetchone()
            assert tuple(maintained) == tuple(ondemand), (maintained, ondemand)
            res["stats_maintained_ms"] = round(timed(lambda: conn.execute(
                "SELECT * FROM dna.bm25_partition_stats(%s, %s)", (SCOPE, MODEL)).fetchall(), 50), 3)
            res["stats_on_demand_ms"] = round(timed(lambda: conn.execute(
                "SELECT count(*), sum(doc_len) FROM public.bench_doclen WHERE scope = %s AND model_id = %s "
                "AND tenant IN ('', '')", (SCOPE, MODEL)).fetchall(), 20), 3)

            # df: on demand (from the postings read anyway) vs a maintained table
            conn.execute("""CREATE TABLE public.bench_df AS
                            SELECT scope, model_id, tenant, lexeme, count(*)::bigint AS df
                            FROM dna.dna_bm25_postings GROUP BY 1, 2, 3, 4""")
            conn.execute("ALTER TABLE public.bench_df ADD PRIMARY KEY (scope, model_id, tenant, lexeme)")
            conn.execute("VACUUM ANALYZE public.bench_df")
            qtexts = list(queries.values())
            terms = [conn.execute("SELECT dna.bm25_terms(%s, 'english')", (q,)).fetchone()[0] for q in qtexts]
            df_scan = ("SELECT p.lexeme, count(*) FROM dna.dna_bm25_postings AS p WHERE p.scope = %s "
                       "AND p.model_id = %s AND p.tenant = ANY ('{\"\"}') AND p.lexeme = ANY (%s) GROUP BY 1")
            df_read = ("SELECT d.lexeme, d.df FROM public.bench_df AS d WHERE d.scope = %s AND d.model_id = %s "
                       "AND d.tenant = '' AND d.lexeme = ANY (%s)")
            post_read = ("SELECT count(*) FROM dna.dna_bm25_postings AS p WHERE p.scope = %s "
                         "AND p.model_id = %s AND p.tenant = ANY ('{\"\"}') AND p.lexeme = ANY (%s)")
            for label, q in (("df_on_demand_ms", df_scan), ("df_table_read_ms", df_read),
                             ("postings_read_ms", post_read)):
                for t_ in terms:
                    conn.execute(q, (SCOPE, MODEL, t_)).fetchall()
                lat = []
                for t_ in terms:
                    t = time.perf_counter()
                    conn.execute(q, (SCOPE, MODEL, t_)).fetchall()
                    lat.append((time.perf_counter() - t) * 1000)
                res[label] = {"p50": round(beir.pct(lat, 50), 2), "p95": round(beir.pct(lat, 95), 2)}

            # the lane
            for q in qtexts:
                conn.execute("SELECT * FROM dna.bm25(%s, %s, %s)", (SCOPE, q, MODEL)).fetchall()
            lat = []
            for q in qtexts:
                t = time.perf_counter()
                conn.execute("SELECT * FROM dna.bm25(%s, %s, %s)", (SCOPE, q, MODEL)).fetchall()
                lat.append((time.perf_counter() - t) * 1000)
            res["bm25_lane_k10_ms"] = {"p50": round(beir.pct(lat, 50), 2), "p95": round(beir.pct(lat, 95), 2)}
            res["versions"] = beir.versions(conn)
    finally:
        cleanup()
    console.print_json(data=res)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
