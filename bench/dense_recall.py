"""Dense recall: the dense lane's recall@10 against an exact scan per scope size, beside plain pgvector
defaults and the lane as revision 0019 released it, in one run (pydna issue 26, item 5).

Usage (from the repository root)::

    python bench/dense_recall.py [DATASET_DIR] [--sizes random5k,scifact,100k] [--queries 300]
                                 [--passes 3] [--dsn DSN] [--out bench/results/dense_recall.json]

Sizes (one database each, dropped at the end; the HNSW index built as revision 0001 defines it,
pgvector's m 16 / ef_construction 64, then ``VACUUM ANALYZE`` so the planner sees the scope's size):

- ``random5k``: 5,000 random unit vectors (384 dims, ``numpy.random.default_rng(26)``), inserted into
  ``dna.dna_search_docs_384`` directly (no text: only the dense lane is asked); the queries are as many
  random unit vectors (``default_rng(27)``). Random vectors are the graph's hardest case.
- ``scifact``: the 5,183 SciFact documents (ONNX all-MiniLM-L6-v2 int8 w8a8 vectors, cached in
  ``bench/.cache``) and its 300 test queries, loaded by the operator path of bench/scale.py
  (``dna.index_staged`` + ``dna.bm25_compact``), so the lexical lane and the hybrid run too.
- ``100k`` (or any ``<n>k``): bench/scale.py's corpus prefix of n documents (SciFact + derived
  distractors, its module docstring), the same queries.
- 1M is not built by default (its bulk load and HNSW build take about an hour on two cores); ``1000k``
  builds it.

Modes, k = 10, each query's modes interleaved in every pass (so a load spike hits them all):

- ``exact``: ``ORDER BY embedding <=> q LIMIT 10`` with index scans off: the reference;
- ``pgvector-default``: the same statement under pgvector's defaults (ef_search 40, no iterative scan);
- ``lane@0019``: the dense lane's statement as 0019 ran it: ``hnsw.ef_search`` = its depth (100),
  ``hnsw.iterative_scan = strict_order``, seq scans off, LIMIT 100, its first 10;
- ``lane``: the same under this checkout's ``hnsw.ef_search`` (``beir.lane_ef_search``: dna.hnsw_ef_search(10, 100, rows)) (the planner
  may then prefer an exact scan of a small scope); ``lane, graph``: the same with sorts off, so the graph
  answers at that ef_search whatever the planner would pick;
- ``search@0019`` / ``search``: the whole ``dna.search`` (0019's text loaded as ``bench_prev.search``
  from migrations/versions/0019_where_users_run/search.sql, and this checkout's) with a query text no
  document holds, so its hits are the dense lane's top 10; the path (hnsw / exact scan) and ef_search
  are read from ``explain`` on the first query;
- scifact and 100k only, nDCG@10 on the qrels: ``lexical`` (dna.search without embedding), ``dense``
  (``search`` above), ``hybrid`` (dna.search with the text and the embedding, this checkout) and
  ``hybrid@0019``.

recall@10 = mean over the queries of |top10(mode) ∩ top10(exact)| / 10. Latency: per query the median
of ``--passes`` passes, then p50/p95 over the queries; backend CPU time the same way (/proc/<backend
pid>/schedstat field 1); the 1-minute load average at the start and end of each size. Progress to
stderr, the table to stdout, the JSON to ``--out`` and a Markdown copy beside it (``.md``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

import scale  # noqa: E402
from beir import doc_text, evaluate, lane_ef_search, load_dataset, pct, versions  # noqa: E402
from embcache import CachedEmbedder  # noqa: E402
from scale import BackendCpu, Corpus, Server, connect, distractor_vectors, load1, load_distractors, log  # noqa: E402

K = 10
DEPTH = 100
RANDOM_MODEL = "dna-fake-hash-v1"
NONSENSE = "zqxjkvw"          # a lexeme no document holds: dna.search's hits are then the dense lane's
PREVIOUS = REPO / "migrations" / "versions" / "0019_where_users_run" / "search.sql"
HNSW_DDL = scale.HNSW_DDL

EXACT_SQL = ("SELECT t.name FROM dna.dna_search_docs_384 AS t WHERE t.scope = %(scope)s AND t.model_id = %(model)s "
             "AND t.embedding IS NOT NULL ORDER BY t.embedding <=> %(q)s, t.name LIMIT 10")
LANE_SQL = ("SELECT c.name FROM (SELECT t.name, t.embedding <=> %(q)s AS d FROM dna.dna_search_docs_384 AS t "
            "WHERE t.embedding IS NOT NULL AND t.scope = %(scope)s AND t.model_id = %(model)s AND t.tenant = '' "
            "ORDER BY t.embedding <=> %(q)s LIMIT 100) AS c ORDER BY c.d, c.name LIMIT 10")
SEARCH_SQL = "SELECT name FROM {fn}(%(scope)s, %(text)s, %(q)s, %(model)s, k => 10) ORDER BY score DESC, name"


def load_previous_search(conn) -> None:
    """dna.search as revision 0019 released it, as bench_prev.search (same arguments, same hit type)."""
    text = PREVIOUS.read_text(encoding="utf-8")
    fn = re.search(r"CREATE OR REPLACE FUNCTION dna\.search\(.*?\n\$\$;\n", text, re.S).group(0)
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench_prev")
    conn.execute(fn.replace("FUNCTION dna.search(", "FUNCTION bench_prev.search(", 1))


def load_random(conn, n: int) -> None:
    from pgvector import Vector

    rng = np.random.default_rng(26)
    vecs = rng.standard_normal((n, scale.DIMS))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    conn.execute("DROP INDEX dna.dna_search_docs_384_embedding_hnsw")
    with conn.transaction():
        with conn.cursor() as cur:
            with cur.copy("COPY dna.dna_search_docs_384 (scope, kind, name, model_id, text_hash, body, embedding) "
                          "FROM STDIN") as cp:
                for i, v in enumerate(vecs.astype(np.float32)):
                    cp.write_row(("dense", "Doc", f"r{i:06d}", RANDOM_MODEL, f"h{i}", f"vector {i}", Vector(v)))
    with conn.transaction():
        conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
        conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
        conn.execute(HNSW_DDL)
    conn.execute("VACUUM ANALYZE dna.dna_search_docs_384")


def random_queries(n: int) -> tuple[list[str], dict[str, np.ndarray]]:
    rng = np.random.default_rng(27)
    q = rng.standard_normal((n, scale.DIMS))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    qids = [f"q{i}" for i in range(n)]
    return qids, {qid: q[i].astype(np.float32) for i, qid in enumerate(qids)}


def modes(conn, scope: str, model: str, lexical: bool) -> dict:
    from pgvector import Vector

    def tx(settings: list[str], sql: str, params: dict) -> list[str]:
        with conn.transaction():
            for s in settings:
                conn.execute(s)
            return [r[0] for r in conn.execute(sql, params)]

    def p(vec, text=None):
        return {"q": Vector(vec), "scope": scope, "model": model, "text": text}

    ef_now = lane_ef_search(conn, K)
    out = {
        "exact": lambda v, t: tx(["SET LOCAL enable_indexscan = off"], EXACT_SQL, p(v)),
        "pgvector-default": lambda v, t: tx(["SET LOCAL hnsw.ef_search = 40", "SET LOCAL hnsw.iterative_scan = off"],
                                            EXACT_SQL, p(v)),
        "lane@0019": lambda v, t: tx(["SET LOCAL hnsw.ef_search = 100", "SET LOCAL hnsw.iterative_scan = strict_order",
                                      "SET LOCAL enable_seqscan = off"], LANE_SQL, p(v)),
        "lane": lambda v, t: tx([f"SET LOCAL hnsw.ef_search = {ef_now}", "SET LOCAL hnsw.iterative_scan = strict_order",
                                 "SET LOCAL enable_seqscan = off"], LANE_SQL, p(v)),
        "lane, graph": lambda v, t: tx([f"SET LOCAL hnsw.ef_search = {ef_now}", "SET LOCAL hnsw.iterative_scan = strict_order",
                                        "SET LOCAL enable_seqscan = off", "SET LOCAL enable_sort = off"], LANE_SQL, p(v)),
        "search@0019": lambda v, t: tx([], SEARCH_SQL.format(fn="bench_prev.search"), p(v, NONSENSE)),
        "search": lambda v, t: tx([], SEARCH_SQL.format(fn="dna.search"), p(v, NONSENSE)),
    }
    if lexical:
        out["lexical"] = lambda v, t: tx([], SEARCH_SQL.format(fn="dna.search").replace("%(q)s", "NULL"), p(v, t))
        out["hybrid@0019"] = lambda v, t: tx([], SEARCH_SQL.format(fn="bench_prev.search"), p(v, t))
        out["hybrid"] = lambda v, t: tx([], SEARCH_SQL.format(fn="dna.search"), p(v, t))
    return out


def dense_account(conn, fn: str, scope: str, model: str, vec) -> dict:
    from pgvector import Vector

    row = conn.execute(f"SELECT explain -> 'answer' -> 'dense' FROM {fn}(%s, %s, %s, %s, k => 10, explain => true) LIMIT 1",
                       (scope, NONSENSE, Vector(vec), model)).fetchone()
    d = row[0] if row else {}
    return {"path": d.get("path"), "ef_search": d.get("ef_search"), "iterative_scan": d.get("iterative_scan")}


def lane_path(conn, scope: str, model: str, vec, ef: int) -> str:
    from pgvector import Vector

    with conn.transaction():
        conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
        conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + LANE_SQL, {"q": Vector(vec), "scope": scope, "model": model}))
    return "hnsw" if "hnsw" in plan else "exact scan"


def measure(conn, fns: dict, qids, qvecs, qtexts, passes: int) -> dict:
    cpu = BackendCpu(conn)
    for q in qids[:20]:                                   # warm-up
        for fn in fns.values():
            fn(qvecs[q], qtexts.get(q))
    wall = {m: {q: [] for q in qids} for m in fns}
    cpus = {m: {q: [] for q in qids} for m in fns}
    runs = {m: {} for m in fns}
    for _ in range(passes):
        for q in qids:
            for m, fn in fns.items():
                c, t = cpu.read(), time.perf_counter()
                runs[m][q] = fn(qvecs[q], qtexts.get(q))
                wall[m][q].append((time.perf_counter() - t) * 1000)
                c2 = cpu.read()
                if c is not None and c2 is not None:
                    cpus[m][q].append((c2 - c) / 1e6)
    out = {}
    for m in fns:
        lat = [statistics.median(v) for v in wall[m].values()]
        clat = [statistics.median(v) for v in cpus[m].values() if v]
        out[m] = {"p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2),
                  "cpu_p50_ms": round(pct(clat, 50), 2) if clat else None,
                  "cpu_p95_ms": round(pct(clat, 95), 2) if clat else None, "run": runs[m]}
    exact = runs["exact"]
    for m in fns:
        if m in ("lexical", "hybrid", "hybrid@0019"):
            continue
        out[m]["recall@10"] = round(statistics.fmean(len(set(exact[q]) & set(runs[m][q])) / K for q in qids), 4)
    return out


def run_size(srv: Server, label: str, args, real, real_vecs, qids_real, qtext_real, qvec_real, qrels) -> dict:
    db = f"dna_bench_dense_{label}"
    dsn = srv.fresh(db)
    conn = connect(dsn)
    # no server-side prepared statements: a cached plan would keep the path chosen under one mode's settings
    conn.prepare_threshold = None
    load0, t0 = load1(), time.perf_counter()
    if label == "random5k":
        n = 5000
        load_random(conn, n)
        scope, model = "dense", RANDOM_MODEL
        qids, qvecs = random_queries(args.queries)
        qtexts: dict = {}
        lexical = False
    else:
        n = len(real) if label == "scifact" else int(label.removesuffix("k")) * 1000
        distractors = load_distractors(real, max(0, n - len(real)))
        dvecs = distractor_vectors(real_vecs, distractors, args.model_id) if distractors else np.zeros((0, scale.DIMS), np.float32)
        corpus = Corpus(real, real_vecs, distractors, dvecs)
        scale.bulk_load(conn, corpus, n, args.model_id, batch=10_000, loaders=2, dsn=dsn)
        scope, model = scale.SCOPE, args.model_id
        qids, qvecs, qtexts = qids_real[:args.queries], qvec_real, qtext_real
        lexical = True
    build_s = time.perf_counter() - t0
    rows = conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = %s", (scope,)).fetchone()[0]
    log(f"{label}: {rows:,} rows in {build_s:.0f} s (load {load0} -> {load1()})")
    vers = versions(conn)
    load_previous_search(conn)
    ef_now = lane_ef_search(conn, K)
    q0 = qvecs[qids[0]]
    accounts = {"search": dense_account(conn, "dna.search", scope, model, q0),
                "search@0019": dense_account(conn, "bench_prev.search", scope, model, q0),
                "lane": {"path": lane_path(conn, scope, model, q0, ef_now), "ef_search": ef_now},
                "lane@0019": {"path": lane_path(conn, scope, model, q0, DEPTH), "ef_search": DEPTH},
                "lane, graph": {"path": "hnsw", "ef_search": ef_now},
                "pgvector-default": {"ef_search": 40, "iterative_scan": "off"}}
    log(f"  paths: {json.dumps(accounts)}")
    fns = modes(conn, scope, model, lexical)
    load1_start = load1()
    res = measure(conn, fns, qids, qvecs, qtexts, args.passes if n <= 200_000 else 1)
    load1_end = load1()
    if lexical:
        for m in ("exact", "search", "lexical", "hybrid", "hybrid@0019", "search@0019"):
            agg, _ = evaluate({q: [(name, 0.0) for name in res[m]["run"][q]] for q in qids}, qrels)
            res[m]["nDCG@10"] = round(agg["nDCG@10"], 4)
    conn.close()
    srv.drop(db)
    for m in res:
        res[m].pop("run")
        res[m].update(accounts.get(m, {}))
    return {"size": label, "rows": rows, "queries": len(qids), "passes": args.passes if n <= 200_000 else 1,
            "build_s": round(build_s, 1), "versions": vers, "load1_start": load1_start, "load1_end": load1_end, "modes": res}


ORDER = ("exact", "pgvector-default", "lane@0019", "lane", "lane, graph", "search@0019", "search", "lexical", "hybrid@0019", "hybrid")


def table(results: list[dict]) -> list[str]:
    head = ("| size | mode | path | ef_search | recall@10 vs exact | nDCG@10 | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms "
            "| load1 start→end |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s in results:
        for m in ORDER:
            r = s["modes"].get(m)
            if r is None:
                continue
            f = lambda x: "" if x is None else str(x)  # noqa: E731
            lines.append(f"| {s['size']} ({s['rows']:,}) | {m} | {f(r.get('path'))} | {f(r.get('ef_search'))} "
                         f"| {f(r.get('recall@10'))} | {f(r.get('nDCG@10'))} | {r['p50_ms']} | {r['p95_ms']} "
                         f"| {f(r['cpu_p50_ms'])} | {f(r['cpu_p95_ms'])} | {s['load1_start']}→{s['load1_end']} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--sizes", default="random5k,scifact,100k")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--dsn", default=os.environ.get("DNA_BENCH_DSN"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "dense_recall.json"))
    args = ap.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in ("random5k", "scifact") and not re.fullmatch(r"\d+k", s):
            raise SystemExit(f"--sizes: {s!r} is not random5k, scifact or <n>k")
    real = real_vecs = qids = qtexts = qvecs = qrels = None
    if any(s != "random5k" for s in sizes):
        from data_sets import scifact_dir

        from pydna.embeddings import OnnxEmbeddingProvider

        root = Path(scifact_dir(args.dataset, ap)).resolve()
        real, qtexts, qrels, _ = load_dataset(root, "test")
        qids = list(qtexts)
        embedder = CachedEmbedder(OnnxEmbeddingProvider())
        args.model_id = embedder.model_id
        t = time.perf_counter()
        real_vecs = embedder.embed([doc_text(d) for d in real])
        qmat = embedder.embed([qtexts[q] for q in qids])
        embedder.flush()
        log(f"ONNX vectors: {embedder.misses} embedded, {embedder.hits} cached, {time.perf_counter() - t:.0f} s")
        qvecs = {q: qmat[i] for i, q in enumerate(qids)}
    srv = Server(args.dsn)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cpu0 = time.process_time()
    results = []
    try:
        for s in sizes:
            results.append(run_size(srv, s, args, real, real_vecs, qids, qtexts, qvecs, qrels))
            Path(args.out).with_suffix(".partial.json").write_text(json.dumps(results, indent=1))
    finally:
        srv.close()
    doc = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "started": started,
           "command": "python bench/dense_recall.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "k": K, "depth": DEPTH, "server": srv.settings, "tuned": srv.tuned, "versions": results[0].pop("versions") if results else None,
           "bench_process_cpu_s": round(time.process_time() - cpu0, 1), "loadavg_end": os.getloadavg(), "sizes": results}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    Path(args.out).with_suffix(".partial.json").unlink(missing_ok=True)
    lines = table(results)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
