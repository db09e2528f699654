"""BM25 statistics at 100k documents: maintained by trigger, or computed on demand?

Usage (from the repository root)::

    python bench/bm25_stats.py [DATASET_DIR] [--docs 100000] [--bulk] [--dsn DSN] [--out bench/results/bm25-stats.json]

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

``--bulk`` reaches the ``--docs`` state without paying the row-by-row trigger load (which did not
finish in 43 minutes at 100k): the documents are loaded with the three BM25 row triggers disabled,
then ``dna_bm25_postings`` and ``dna_bm25_stats`` are built for them by one set-based
``INSERT … SELECT`` each, with the expressions of ``dna.bm25_maintain()`` (``unnest(tsv)``,
``coalesce(cardinality(positions), 1)``, ``dna.bm25_doc_length``). Before that, the bulk build is
checked row for row against trigger-built postings and statistics of ``--verify-docs`` documents
(default 2,000), and after it, against the tsvectors of a sample of the ``--docs`` documents. With the
triggers re-enabled and ANALYZE run, it measures the same reads as above, plus the per-write cost of
the triggers at that size: single-row insert / update / delete latency (``--writes`` each, default
200) with the BM25 triggers on vs off, checking after the trigger-on writes that the maintained
N and total length still equal the on-demand count and sum.
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
    ap.add_argument("--bulk", action="store_true",
                    help="load with the BM25 triggers off, then build postings and stats set-based (see above)")
    ap.add_argument("--verify-docs", type=int, default=2000,
                    help="--bulk: documents loaded with the triggers on to check the bulk build against")
    ap.add_argument("--writes", type=int, default=200, help="--bulk: single-row writes timed per kind and mode")
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
    res: dict = {"docs": args.docs, "mode": "bulk" if args.bulk else "trigger-load"}
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE src (name text, title text, body text)")
            with conn.cursor().copy("COPY src FROM STDIN") as cp:
                for row in bodies:
                    cp.write_row(row)
            if args.bulk:
                bulk_load(conn, args, res, console)
            else:
                trigger_load(conn, args, res, console)
            measure_reads(conn, res, list(queries.values()))
            if args.bulk:
                measure_writes(conn, args, res, bodies, console)
            res["versions"] = beir.versions(conn)
    finally:
        cleanup()
    print_table(console, res)
    console.print_json(data=res)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    return 0


LOAD_SQL = ("SELECT count(dna.index_document(%s, 'Doc', s.name, s.body, NULL, %s, s.title)) "
            "FROM (SELECT * FROM src LIMIT %s) AS s")
DOCS = "dna.dna_search_docs_384"

# The set-based equivalent of dna.bm25_maintain() on INSERT, for every document of one scope that
# has no postings yet: the same rows (unnest(tsv): lexeme, coalesce(cardinality(positions), 1),
# dna.bm25_doc_length(tsv), kind), inserted in primary-key order. OFFSET 0 keeps the length computed once
# per document, not once per posting.
POSTINGS_BULK = f"""
INSERT INTO dna.dna_bm25_postings (scope, model_id, tenant, lexeme, doc_id, tf, doc_len, kind)
SELECT d.scope, d.model_id, d.tenant, u.lexeme, d.doc_id, coalesce(cardinality(u.positions), 1), d.len, d.kind
FROM (SELECT t.scope, t.model_id, t.tenant, t.doc_id, t.kind, t.tsv, dna.bm25_doc_length(t.tsv) AS len
      FROM {DOCS} AS t WHERE t.scope = %(scope)s OFFSET 0) AS d
CROSS JOIN LATERAL unnest(d.tsv) AS u
ORDER BY d.scope, d.model_id, d.tenant, u.lexeme, d.doc_id
"""
STATS_BULK = f"""
INSERT INTO dna.dna_bm25_stats (scope, model_id, tenant, n_docs, total_len)
SELECT t.scope, t.model_id, t.tenant, count(*), sum(dna.bm25_doc_length(t.tsv))
FROM {DOCS} AS t WHERE t.scope = %(scope)s
GROUP BY t.scope, t.model_id, t.tenant
"""


def bm25_triggers(conn, on: bool) -> None:
    """Enable or disable the three BM25 row triggers (insert, update, delete) of the 384 table only."""
    for op in ("ins", "upd", "del"):
        conn.execute(f"ALTER TABLE {DOCS} {'ENABLE' if on else 'DISABLE'} TRIGGER dna_search_docs_384_bm25_{op}")


def bulk_build(conn, scope: str) -> tuple[float, float]:
    conn.execute("SET work_mem = '1GB'")          # this session only: the sort of the postings
    t = time.perf_counter()
    conn.execute(POSTINGS_BULK, {"scope": scope})
    t_post = time.perf_counter() - t
    t = time.perf_counter()
    conn.execute(STATS_BULK, {"scope": scope})
    t_stats = time.perf_counter() - t
    conn.execute("RESET work_mem")
    return t_post, t_stats


def bulk_load(conn, args, res, console) -> None:
    # 1. check the bulk build against the triggers: load --verify-docs documents with the triggers
    #    on, keep their postings and stats, drop them, rebuild set-based, compare row for row.
    v = "verify"
    conn.execute(LOAD_SQL, (v, MODEL, args.verify_docs))
    conn.execute("CREATE TEMP TABLE trig_post AS SELECT * FROM dna.dna_bm25_postings WHERE scope = %s", (v,))
    conn.execute("CREATE TEMP TABLE trig_stats AS SELECT * FROM dna.dna_bm25_stats WHERE scope = %s", (v,))
    conn.execute("DELETE FROM dna.dna_bm25_postings WHERE scope = %s", (v,))
    conn.execute("DELETE FROM dna.dna_bm25_stats WHERE scope = %s", (v,))
    bulk_build(conn, v)
    diff = conn.execute("""
        SELECT (SELECT count(*) FROM trig_post),
               (SELECT count(*) FROM (SELECT * FROM trig_post EXCEPT ALL
                                      SELECT * FROM dna.dna_bm25_postings WHERE scope = %(v)s) AS x),
               (SELECT count(*) FROM (SELECT * FROM dna.dna_bm25_postings WHERE scope = %(v)s EXCEPT ALL
                                      SELECT * FROM trig_post) AS x),
               (SELECT count(*) FROM trig_stats),
               (SELECT count(*) FROM (SELECT * FROM trig_stats EXCEPT ALL
                                      SELECT * FROM dna.dna_bm25_stats WHERE scope = %(v)s) AS x),
               (SELECT count(*) FROM (SELECT * FROM dna.dna_bm25_stats WHERE scope = %(v)s EXCEPT ALL
                                      SELECT * FROM trig_stats) AS x)""", {"v": v}).fetchone()
    res["verify"] = {"docs": args.verify_docs, "trigger_postings": diff[0], "postings_missing": diff[1],
                     "postings_extra": diff[2], "trigger_stats_rows": diff[3], "stats_missing": diff[4],
                     "stats_extra": diff[5]}
    console.print({"verify": res["verify"]})
    assert diff[0] > 0 and diff[3] == 1 and diff[1] == diff[2] == diff[4] == diff[5] == 0, diff
    bm25_triggers(conn, False)
    conn.execute(f"DELETE FROM {DOCS} WHERE scope = %s", (v,))
    conn.execute("DELETE FROM dna.dna_bm25_postings WHERE scope = %s", (v,))
    conn.execute("DELETE FROM dna.dna_bm25_stats WHERE scope = %s", (v,))

    # 2. the --docs documents, BM25 triggers off (the other triggers stay on), then the bulk build
    t = time.perf_counter()
    conn.execute(LOAD_SQL, (SCOPE, MODEL, args.docs))
    res["load_without_bm25_s"] = round(time.perf_counter() - t, 1)
    console.print(f"loaded {args.docs} documents without the BM25 triggers in {res['load_without_bm25_s']} s")
    t_post, t_stats = bulk_build(conn, SCOPE)
    res["bulk_postings_s"] = round(t_post, 1)
    res["bulk_stats_s"] = round(t_stats, 2)
    bm25_triggers(conn, True)
    t = time.perf_counter()
    conn.execute("VACUUM ANALYZE")
    res["vacuum_analyze_s"] = round(time.perf_counter() - t, 1)
    res["postings"] = conn.execute("SELECT count(*) FROM dna.dna_bm25_postings").fetchone()[0]
    res["postings_mb"] = round(conn.execute(
        "SELECT pg_total_relation_size('dna.dna_bm25_postings')").fetchone()[0] / 2**20, 1)
    # every document's lexemes have a posting (count), and a sample of 500 documents has exactly the
    # postings the trigger would write (lexeme, tf, doc_len)
    expected = conn.execute(f"SELECT sum(length(tsv)) FROM {DOCS} WHERE scope = %s", (SCOPE,)).fetchone()[0]
    bad = conn.execute(f"""
        SELECT count(*) FROM (SELECT t.* FROM {DOCS} AS t WHERE t.scope = %(s)s
                              ORDER BY hashint8(t.doc_id) LIMIT 500) AS d
        CROSS JOIN LATERAL unnest(d.tsv) AS u
        LEFT JOIN dna.dna_bm25_postings AS p
          ON p.scope = d.scope AND p.model_id = d.model_id AND p.tenant = d.tenant
         AND p.lexeme = u.lexeme AND p.doc_id = d.doc_id
        WHERE p.tf IS DISTINCT FROM coalesce(cardinality(u.positions), 1)
           OR p.doc_len IS DISTINCT FROM dna.bm25_doc_length(d.tsv)""", {"s": SCOPE}).fetchone()[0]
    res["sample_check"] = {"postings_expected": expected, "sample_docs": 500, "sample_mismatches": bad}
    assert expected == res["postings"] and bad == 0, res["sample_check"]
    console.print(res)


def trigger_load(conn, args, res, console) -> None:
    load_sql = LOAD_SQL
    # without the BM25 triggers (then cleared) ...
    conn.execute(f"ALTER TABLE {DOCS} DISABLE TRIGGER USER")
    t = time.perf_counter()
    conn.execute(load_sql, ("nobm25", MODEL, args.docs))
    res["load_without_bm25_s"] = round(time.perf_counter() - t, 1)
    conn.execute(f"DELETE FROM {DOCS} WHERE scope = 'nobm25'")
    conn.execute(f"ALTER TABLE {DOCS} ENABLE TRIGGER USER")
    # ... and with them
    t = time.perf_counter()
    conn.execute(load_sql, (SCOPE, MODEL, args.docs))
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


def p50_p95(lat: list[float]) -> dict:
    return {"p50": round(beir.pct(lat, 50), 2), "p95": round(beir.pct(lat, 95), 2)}


def measure_reads(conn, res, qtexts) -> None:
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
    # fully on demand: no stored length, computed from the stored tsvectors
    res["stats_on_demand_tsv_ms"] = round(timed(lambda: conn.execute(
        "SELECT count(*), sum(dna.bm25_doc_length(tsv)) FROM dna.dna_search_docs_384 WHERE scope = %s "
        "AND model_id = %s AND tenant IN ('', '')", (SCOPE, MODEL)).fetchall(), 3), 1)

    # df: on demand (from the postings read anyway) vs a maintained table
    conn.execute("""CREATE TABLE public.bench_df AS
                    SELECT scope, model_id, tenant, lexeme, count(*)::bigint AS df
                    FROM dna.dna_bm25_postings GROUP BY 1, 2, 3, 4""")
    conn.execute("ALTER TABLE public.bench_df ADD PRIMARY KEY (scope, model_id, tenant, lexeme)")
    conn.execute("VACUUM ANALYZE public.bench_df")
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
        res[label] = p50_p95(lat)

    # the lane
    for q in qtexts:
        conn.execute("SELECT * FROM dna.bm25(%s, %s, %s)", (SCOPE, q, MODEL)).fetchall()
    lat = []
    for q in qtexts:
        t = time.perf_counter()
        conn.execute("SELECT * FROM dna.bm25(%s, %s, %s)", (SCOPE, q, MODEL)).fetchall()
        lat.append((time.perf_counter() - t) * 1000)
    res["bm25_lane_k10_ms"] = p50_p95(lat)


def measure_writes(conn, args, res, bodies, console) -> None:
    """Single-row insert / update / delete latency, BM25 triggers on vs off, disjoint documents.

    Inserts are new documents, updates replace a document's text by another document's (a real
    tsvector change), deletes remove existing documents; 5 untimed warm-up writes of each kind first.
    The trigger-off writes come last: they leave the postings out of date, and nothing is read after.
    """
    import random

    n, warm = args.writes, 5
    rng = random.Random(7)
    pool = rng.sample(range(args.docs), 4 * (n + warm))
    pools = {k: pool[i * (n + warm):(i + 1) * (n + warm)] for i, k in enumerate(
        ("upd_on", "del_on", "upd_off", "del_off"))}
    idx_sql = "SELECT dna.index_document(%s, 'Doc', %s, %s, NULL, %s, %s)"
    del_sql = "SELECT dna.delete_document(%s, 'Doc', %s)"

    def body(j):
        return bodies[(j * 13 + 5) % len(bodies)]

    def run(calls):
        lat = []
        for i, (sql, params) in enumerate(calls):
            t = time.perf_counter()
            conn.execute(sql, params)
            if i >= warm:
                lat.append((time.perf_counter() - t) * 1000)
        return lat

    writes: dict = {}
    for mode in ("on", "off"):
        bm25_triggers(conn, mode == "on")
        ins = run([(idx_sql, (SCOPE, f"new-{mode}-{i}", body(i + (0 if mode == "on" else 10_000))[2], MODEL,
                              body(i)[1])) for i in range(n + warm)])
        upd = run([(idx_sql, (SCOPE, f"d{j}", body(j + 1)[2], MODEL, body(j + 1)[1]))
                   for j in pools[f"upd_{mode}"]])
        dele = run([(del_sql, (SCOPE, f"d{j}")) for j in pools[f"del_{mode}"]])
        for kind, lat in (("insert", ins), ("update", upd), ("delete", dele)):
            writes.setdefault(kind, {})[mode] = p50_p95(lat)
        if mode == "on":
            # the maintained statistics are still exact after the inserts, updates and deletes
            maintained = conn.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats(%s, %s)",
                                      (SCOPE, MODEL)).fetchone()
            ondemand = conn.execute(f"SELECT count(*), sum(dna.bm25_doc_length(tsv)) FROM {DOCS} "
                                    "WHERE scope = %s AND model_id = %s", (SCOPE, MODEL)).fetchone()
            postings = conn.execute("SELECT count(*) FROM dna.dna_bm25_postings WHERE scope = %s",
                                    (SCOPE,)).fetchone()[0]
            expected = conn.execute(f"SELECT sum(length(tsv)) FROM {DOCS} WHERE scope = %s",
                                    (SCOPE,)).fetchone()[0]
            res["after_writes_check"] = {"maintained": list(maintained), "on_demand": list(ondemand),
                                         "postings": postings, "postings_expected": expected}
            assert tuple(maintained) == tuple(ondemand) and postings == expected, res["after_writes_check"]
    bm25_triggers(conn, True)
    res["writes_ms"] = writes
    res["writes_per_kind"] = n
    console.print({"writes_ms": writes})


def print_table(console, res) -> None:
    from rich.table import Table

    table = Table(title=f"BM25 statistics at {res['docs']} documents ({res['mode']})")
    table.add_column("measure")
    table.add_column("value", justify="right")

    def fmt(v):
        return f"{v['p50']} / {v['p95']}" if isinstance(v, dict) and "p50" in v else str(v)

    for key, v in res.items():
        if key in ("versions", "verify", "sample_check", "after_writes_check"):
            continue
        if key == "writes_ms":
            for kind, modes in v.items():
                for mode, lat in modes.items():
                    table.add_row(f"{kind}_ms_triggers_{mode}", fmt(lat))
        else:
            table.add_row(key, fmt(v))
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
