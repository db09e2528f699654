"""Live ingest through ``dna.index_document``, this tree beside an older one and SQLite, in one run (issue 26 item 2).

Usage (from the repository root)::

    python bench/live_ingest.py [DATASET_DIR] --old DIR [--docs 5183] [--chunk 250] [--bulk-batch 1000]
                                [--dsn DSN] [--out bench/results/live_ingest.json]

``--old DIR``: a second source tree (e.g. ``git archive main | tar -x -C DIR``), migrated by its own
``pydna.migrate`` (a subprocess with ``PYTHONPATH=DIR``) into a database of the same server.

Rows: the SciFact abstracts (``DATASET_DIR``, default ``../shared/data/scifact``), pre-embedded before
anything is timed with pydna's deterministic hash embedder (``dna-fake-hash-v1``, 384 dims; the ONNX
model's ~190 CPU-s would dominate a shared machine, and the write path does not look at the values).

Phases, each tree's database written alternately chunk by chunk (the order swapped every chunk, so both
see the same load), SQLite beside them on the same chunk:

- **live**: every index live (HNSW included), one set-based statement per ``--chunk`` documents —
  ``SELECT count(dna.index_document(…)) FROM unnest(…)`` — one transaction each; peer: SQLite FTS5
  (porter unicode61) + sqlite-vec vec0 (cosine) in a WAL file (``synchronous = NORMAL``), the same rows
  inserted in one transaction per chunk;
- **live, no vectors** (``--lexical``, the default): the same statements with NULL vectors, into another
  scope: the write path without the HNSW insert; peer: FTS5 alone;
- **bulk** (``--bulk-batch`` > 0): the operator path of docs/bulk-load.md in another scope — HNSW
  dropped, COPY + ``dna.index_staged`` per batch, then ``dna.bm25_compact(full_merge => true)``;
  peer: the same SQLite tables, one transaction per batch.

Recorded per tree and phase: docs/s (wall), backend CPU per document (``/proc/<pid>/schedstat``), the
1-minute load average before and after, and — ``track_functions = 'pl'`` on the loading session — the
calls and self time of every dna function per document (``pg_stat_xact_user_functions`` of each chunk's
transaction): the cost by step; "statements of index_document" is its self time (the executor of its
own statements: the INSERT with its tsvector, heap, TOAST, btree and HNSW work). SQLite's CPU is this
process's (``time.process_time``). From the function counts: **BM25 upkeeps per call**
(``dna.bm25_sync`` runs per ``dna.index_document`` call: 2 before revision 0022, whose upsert fired the
INSERT and the UPDATE statement triggers; 1 from 0022) and the cost per document **by step** (ms, self
time): BM25 sync (the trigger), BM25 add_docs (memtable postings), the rest of the BM25 upkeep
(``bm25_index_docs``, ``bm25_bound_memtable``, ``bm25_keep_statistics``, seals), tokenizing
(``text_tsvector``), the HNSW insert (``index_document``'s self time with vectors minus without), the rest of
``index_document``'s statements, and everything else. **Floors**, same run, same server, the same chunks
written set-based into plain tables (no trigger): the vectors into a pgvector table with the same HNSW index
(``vector_cosine_ops``, the width tables' parameters ``pydna.maintenance.HNSW_BUILD``; pgvector's defaults before
revision 0026's run), and the memtable postings of the live phase into a table with
``dna_bm25_postings``' primary key. The ANALYZEs of the BM25 tables over the live phases
(``pg_stat_user_tables``: the write path's ``dna.bm25_keep_statistics`` and autovacuum) are counted: their
cost is part of ``bm25_keep_statistics``' self time. At the end both databases answer the same calls: ``dna.bm25`` and
``dna.search`` (lexical and hybrid) top 10 for every SciFact test claim (names, and scores within
1e-9), and nDCG@10 of each. Prints a Markdown table; writes JSON (``--out``) and the Markdown beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
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

from beir import evaluate, load_dataset  # noqa: E402
from scale import BackendCpu, Server, connect, load1, log, stage_and_index  # noqa: E402

from pydna.maintenance import HNSW_BUILD  # noqa: E402

MODEL = "dna-fake-hash-v1"
LIVE, LEXICAL, BULK = "live", "lexical", "scale"   # scopes (stage_and_index writes into scale.SCOPE)
INDEX_SQL = ("SELECT count(dna.index_document(%s, 'Doc', x.name, x.body, x.emb, %s, x.title)) "
             "FROM unnest(%s::text[], %s::text[], %s::text[], %s::vector[]) AS x (name, title, body, emb)")
FUNCS = ("SELECT funcname, calls, total_time, self_time FROM pg_stat_xact_user_functions WHERE schemaname = 'dna'")


class Tree:
    """One source tree's database and its loading session."""

    def __init__(self, label: str, srv: Server, db: str, tree: Path | None):
        self.label = label
        self.dsn = srv.fresh(db, tree)
        self.conn = connect(self.dsn)
        self.conn.execute("SET track_functions = 'pl'")
        self.cpu = BackendCpu(self.conn)
        self.t = {}                              # phase -> {"s", "cpu_ns", "docs", "funcs": {name: [calls, total, self]}}

    def _phase(self, phase: str) -> dict:
        return self.t.setdefault(phase, {"s": 0.0, "cpu_ns": 0, "docs": 0, "funcs": {}, "load": [load1(), None]})

    def _funcs(self, ph: dict) -> None:
        for name, calls, total, own in self.conn.execute(FUNCS).fetchall():
            f = ph["funcs"].setdefault(name, [0, 0.0, 0.0])
            f[0] += calls
            f[1] += total
            f[2] += own

    def live(self, chunk: list[dict], phase: str = "live", scope: str = LIVE, vectors: bool = True) -> None:
        ph = self._phase(phase)
        args = (scope, MODEL, [d["_id"] for d in chunk], [d["title"] or None for d in chunk],
                [d["text"] for d in chunk], [d["vec"] if vectors else None for d in chunk])
        self.conn.execute("BEGIN")
        c0, t0 = self.cpu.read(), time.perf_counter()
        n = self.conn.execute(INDEX_SQL, args).fetchone()[0]
        t1, c1 = time.perf_counter(), self.cpu.read()
        self._funcs(ph)
        t2 = time.perf_counter()
        self.conn.execute("COMMIT")
        t3 = time.perf_counter()
        if n != len(chunk):
            raise RuntimeError(f"{self.label}: dna.index_document answered {n} of {len(chunk)}")
        ph["s"] += (t1 - t0) + (t3 - t2)
        ph["cpu_ns"] += (c1 - c0) if c0 is not None else 0
        ph["docs"] += len(chunk)
        ph["load"][1] = load1()

    def floors_setup(self) -> None:
        self.conn.execute("CREATE TABLE public.floor_vec (id bigint PRIMARY KEY, embedding vector(384))")
        # the width tables' own graph parameters (pydna.maintenance.HNSW_BUILD), as the write path pays them
        self.conn.execute(f"CREATE INDEX ON public.floor_vec USING hnsw (embedding vector_cosine_ops) WITH ({HNSW_BUILD})")
        self.conn.execute("CREATE TABLE public.floor_post (LIKE dna.dna_bm25_postings INCLUDING DEFAULTS)")
        self.conn.execute("ALTER TABLE public.floor_post ADD PRIMARY KEY (scope, model_id, tenant, lexeme, doc_id) "
                          "INCLUDE (tf, doc_len, kind)")
        self.floor = {"hnsw": [0.0, 0, 0], "postings": [0.0, 0, 0]}       # s, cpu_ns, docs

    def _floor(self, name: str, sql: str, args: tuple, n: int) -> None:
        self.conn.execute("BEGIN")
        c0, t0 = self.cpu.read(), time.perf_counter()
        self.conn.execute(sql, args)
        self.conn.execute("COMMIT")
        t1, c1 = time.perf_counter(), self.cpu.read()
        f = self.floor[name]
        f[0] += t1 - t0
        f[1] += (c1 - c0) if c0 is not None else 0
        f[2] += n

    def floor_hnsw(self, chunk: list[dict], first: int) -> None:
        self._floor("hnsw", "INSERT INTO public.floor_vec SELECT i, e FROM unnest(%s::bigint[], %s::vector[]) AS x (i, e)",
                    (list(range(first, first + len(chunk))), [d["vec"] for d in chunk]), len(chunk))

    def floor_postings(self, chunk: list[dict]) -> None:
        """The memtable postings the live phase wrote for these documents, again, into the plain table."""
        self._floor("postings", "INSERT INTO public.floor_post (scope, model_id, tenant, lexeme, doc_id, tf, doc_len, kind) SELECT p.* FROM dna.dna_bm25_forward AS f "
                    "JOIN dna.dna_search_docs_384 AS s ON s.scope = f.scope AND s.doc_id = f.doc_id "
                    "CROSS JOIN LATERAL (SELECT f.scope, f.model_id, f.tenant, e.lexeme, f.doc_id, e.v::integer, "
                    "f.doc_len, f.kind FROM jsonb_each_text(f.terms) AS e (lexeme, v)) AS p "
                    "WHERE f.scope = %s AND s.name = ANY (%s)", (LIVE, [d["_id"] for d in chunk]), len(chunk))

    def bulk(self, batch: list[dict]) -> None:
        ph = self._phase("bulk")
        local: dict = {}
        c0 = self.cpu.read()
        copy_s, staged_s, _actions = stage_and_index(self.conn, MODEL, batch, local)
        c1 = self.cpu.read()
        for name, v in local.items():
            f = ph["funcs"].setdefault(name, [0, 0.0, 0.0])
            for i in range(3):
                f[i] += v[i]
        ph["s"] += copy_s + staged_s
        ph["cpu_ns"] += (c1 - c0) if c0 is not None else 0
        ph["docs"] += len(batch)
        ph["load"][1] = load1()

    def compact(self) -> dict:
        c0, l0, t0 = self.cpu.read(), load1(), time.perf_counter()
        self.conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (BULK,))
        secs, c1 = time.perf_counter() - t0, self.cpu.read()
        return {"s": round(secs, 2), "cpu_s": None if c0 is None else round((c1 - c0) / 1e9, 2), "load": [l0, load1()]}


class Sqlite:
    """FTS5 + vec0 in a WAL file: the peer's tables, one transaction per chunk."""

    def __init__(self, path: Path, dims: int):
        import apsw
        import sqlite_vec

        self.db = apsw.Connection(str(path))
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        c = self.db.cursor()
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")
        c.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body, tokenize = 'porter unicode61')")
        c.execute(f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{dims}] distance_metric=cosine)")
        self.rowid = 0
        self.t: dict[str, list[float]] = {}
        self.versions = {"sqlite": apsw.sqlite_lib_version(), "sqlite-vec": next(c.execute("SELECT vec_version()"))[0],
                         "apsw": apsw.apsw_version()}

    def write(self, phase: str, chunk: list[dict], vectors: bool = True) -> None:
        import numpy as np

        c = self.db.cursor()
        p0, t0 = time.process_time(), time.perf_counter()
        with self.db:
            for d in chunk:
                self.rowid += 1
                c.execute("INSERT INTO fts(rowid, title, body) VALUES (?, ?, ?)", (self.rowid, d["title"], d["text"]))
                if vectors:
                    c.execute("INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                              (self.rowid, np.asarray(d["vec"], dtype=np.float32).tobytes()))
        t = self.t.setdefault(phase, [0.0, 0.0, 0])
        t[0] += time.perf_counter() - t0
        t[1] += time.process_time() - p0
        t[2] += len(chunk)


def answers(conn, queries: dict[str, str], qvecs: dict) -> dict:
    out = {}
    for qid, text in queries.items():
        out[("bm25", qid)] = conn.execute("SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10)", (LIVE, text, MODEL)).fetchall()
        out[("lexical", qid)] = conn.execute("SELECT name, score FROM dna.search(%s, %s, NULL, %s, k => 10)",
                                             (LIVE, text, MODEL)).fetchall()
        out[("hybrid", qid)] = conn.execute("SELECT name, score FROM dna.search(%s, %s, %s::vector, %s, k => 10)",
                                            (LIVE, text, qvecs[qid], MODEL)).fetchall()
    return out


def same(a: list, b: list) -> bool:
    return [n for n, _ in a] == [n for n, _ in b] and all(abs(x - y) <= 1e-9 for (_, x), (_, y) in zip(a, b))


def steps(ph: dict) -> dict:
    n = max(ph["docs"], 1)
    return {name: {"calls_per_doc": round(c / n, 3), "self_us_per_doc": round(1000 * own / n, 1),
                   "total_us_per_doc": round(1000 * tot / n, 1)}
            for name, (c, tot, own) in sorted(ph["funcs"].items(), key=lambda kv: -kv[1][2])}


BM25_REST = ("bm25_index_docs", "bm25_remove_docs", "bm25_bound_memtable", "bm25_keep_statistics", "bm25_seal",
             "bm25_merge", "bm25_build_segment", "bm25_next_seg", "bm25_doc_ranges")


def by_step(phases: dict) -> dict:
    """Per phase: BM25 upkeeps per index_document call and ms per document by step (self times)."""
    out = {}
    lexical = phases.get("live, no vectors")
    for ph, v in phases.items():
        if ph == "bulk":
            continue
        n = max(v["docs"], 1)
        f = v["funcs"]
        own = {name: vals[2] / n for name, vals in f.items()}       # ms per document
        calls = f.get("index_document", [0])[0] or 1
        step = {"bm25 sync (trigger)": own.get("bm25_sync", 0.0),
                "bm25 add_docs (memtable postings)": own.get("bm25_add_docs", 0.0),
                "bm25 rest (index_docs, bound_memtable, keep_statistics, seals)": sum(own.get(x, 0.0) for x in BM25_REST),
                "tokenizing (text_tsvector)": own.get("text_tsvector", 0.0)}
        doc = own.get("index_document", 0.0)
        if ph == "live" and lexical:
            hnsw = max(doc - lexical["funcs"].get("index_document", [0, 0, 0])[2] / max(lexical["docs"], 1), 0.0)
            step["HNSW insert (index_document self, with vectors − without)"] = hnsw
            doc -= hnsw
        step["index_document's other statements (heap, btrees)"] = doc
        known = {"bm25_sync", "bm25_add_docs", "text_tsvector", "index_document", *BM25_REST}
        step["the rest (checks, config, …)"] = sum(x for name, x in own.items() if name not in known)
        wall = 1000 * v["s"] / n
        step["untracked (wall − tracked self times)"] = max(wall - sum(step.values()), 0.0)
        out[ph] = {"upkeeps_per_call": round(f.get("bm25_sync", [0])[0] / calls, 3),
                   "wall_ms_per_doc": round(wall, 3), "ms_per_doc": {k: round(x, 3) for k, x in step.items()}}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--old", type=Path, default=None, help="a second source tree, loaded beside this one")
    ap.add_argument("--docs", type=int, default=5183)
    ap.add_argument("--chunk", type=int, default=250, help="documents per live statement (one transaction)")
    ap.add_argument("--bulk-batch", type=int, default=1000, help="documents per bulk transaction (0: no bulk phase)")
    ap.add_argument("--lexical", action=argparse.BooleanOptionalAction, default=True,
                    help="the live phase again with NULL vectors (another scope): the same path without the HNSW insert")
    ap.add_argument("--dsn", default=None, help="a server to use (superuser) instead of an embedded one")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "live_ingest.json"))
    args = ap.parse_args(argv)

    from pydna import FakeEmbeddingProvider

    corpus, queries, qrels, hashes = load_dataset(Path(args.dataset).resolve(), "test")
    docs = corpus[:args.docs]
    emb = FakeEmbeddingProvider()
    import numpy as np

    for d, v in zip(docs, emb.embed([" ".join(p for p in (d["title"], d["text"]) if p) for d in docs])):
        d["vec"] = np.asarray(v, dtype=np.float32)
    qvecs = {qid: np.asarray(v, dtype=np.float32) for qid, v in zip(queries, emb.embed(list(queries.values())))}
    log(f"{len(docs):,} documents and {len(queries)} queries embedded ({emb.model_id})")

    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    srv = Server(args.dsn)
    tmp = Path(tempfile.mkdtemp(prefix="pydna-live-ingest-", dir="/tmp"))
    trees: list[Tree] = []
    try:
        trees.append(Tree("this tree", srv, "dna_live_new", None))
        if args.old:
            trees.append(Tree("old tree", srv, "dna_live_old", args.old.resolve()))
        peer = Sqlite(tmp / "peer.sqlite", 384)
        load_start, cpu0 = os.getloadavg(), time.process_time()
        for j, a in enumerate(range(0, len(docs), args.chunk)):
            chunk = docs[a:a + args.chunk]
            for t in (trees if j % 2 == 0 else trees[::-1]):
                t.live(chunk)
            peer.write("live", chunk)
            log(f"  live {a + len(chunk):,}/{len(docs):,}: " + ", ".join(
                f"{t.label} {t.t['live']['docs'] / t.t['live']['s']:,.0f} docs/s" for t in trees) + f", load {load1()}")
        for t in trees:
            t.floors_setup()
        for j, a in enumerate(range(0, len(docs), args.chunk)):
            chunk = docs[a:a + args.chunk]
            for t in (trees if j % 2 == 0 else trees[::-1]):
                t.floor_hnsw(chunk, a)
                t.floor_postings(chunk)
        if args.lexical:
            for j, a in enumerate(range(0, len(docs), args.chunk)):
                chunk = docs[a:a + args.chunk]
                for t in (trees if j % 2 == 0 else trees[::-1]):
                    t.live(chunk, "live, no vectors", LEXICAL, vectors=False)
                peer.write("live, no vectors", chunk, vectors=False)          # FTS5 alone
            log("  live without vectors: " + ", ".join(
                f"{t.label} {t.t['live, no vectors']['docs'] / t.t['live, no vectors']['s']:,.0f} docs/s" for t in trees))
        analyzed = {t.label: dict(t.conn.execute(
            "SELECT relname, analyze_count + autoanalyze_count FROM pg_stat_user_tables "
            "WHERE schemaname = 'dna' AND relname LIKE 'dna_bm25%%' AND analyze_count + autoanalyze_count > 0 "
            "ORDER BY relname").fetchall()) for t in trees}
        compacts = {}
        if args.bulk_batch > 0:
            for t in trees:
                t.conn.execute("DROP INDEX dna.dna_search_docs_384_embedding_hnsw")
            bulk_peer = Sqlite(tmp / "bulk.sqlite", 384)
            for j, a in enumerate(range(0, len(docs), args.bulk_batch)):
                batch = docs[a:a + args.bulk_batch]
                for t in (trees if j % 2 == 0 else trees[::-1]):
                    t.bulk(batch)
                bulk_peer.write("bulk", batch)
            for t in trees:
                compacts[t.label] = t.compact()
            peer.t["bulk"] = bulk_peer.t["bulk"]
        log("answers …")
        got = {t.label: answers(t.conn, queries, qvecs) for t in trees}
        quality = {}
        for t in trees:
            for mode in ("bm25", "lexical", "hybrid"):
                run = {qid: [(n, s) for n, s in got[t.label][(mode, qid)]] for qid in queries}
                quality.setdefault(t.label, {})[mode] = round(evaluate(run, qrels)[0]["nDCG@10"], 4)
        identical = None
        if len(trees) == 2:
            a, b = got[trees[0].label], got[trees[1].label]
            identical = {"calls": len(a), "identical": sum(1 for k in a if same(a[k], b[k])),
                         "by_mode": {m: sum(1 for k in a if k[0] == m and same(a[k], b[k]))
                                     for m in ("bm25", "lexical", "hybrid")}}
        result = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "started": started,
            "command": "python bench/live_ingest.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "dataset": hashes, "docs": len(docs), "chunk": args.chunk, "bulk_batch": args.bulk_batch,
            "embedder": emb.model_id, "server_settings": srv.settings, "cpus": os.cpu_count(),
            "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
            "bench_process_cpu_s": round(time.process_time() - cpu0, 2), "sqlite": peer.versions,
            "trees": {t.label: {"tree": str(args.old.resolve()) if t.label == "old tree" else str(REPO),
                                "phases": {ph: {"docs": v["docs"], "s": round(v["s"], 2),
                                                "docs_per_s": round(v["docs"] / v["s"], 1),
                                                "backend_cpu_us_per_doc": round(v["cpu_ns"] / 1e3 / v["docs"], 1),
                                                "load": v["load"], "steps": steps(v)}
                                           for ph, v in t.t.items()},
                                "compact": compacts.get(t.label), "ndcg@10": quality[t.label],
                                "floors": {k: {"docs": n, "s": round(secs, 2), "docs_per_s": round(n / secs, 1),
                                               "backend_cpu_us_per_doc": round(cpu / 1e3 / n, 1)}
                                           for k, (secs, cpu, n) in t.floor.items()},
                                "by_step": by_step(t.t), "analyzed_after_live": analyzed[t.label]}
                      for t in trees},
            "peer": {ph: {"docs": n, "s": round(s, 2), "docs_per_s": round(n / s, 1), "cpu_us_per_doc": round(1e6 * c / n, 1)}
                     for ph, (s, c, n) in peer.t.items()},
            "answers_old_vs_new": identical,
        }
    finally:
        for t in trees:
            t.conn.close()
        for db in ("dna_live_new", "dna_live_old"):
            try:
                srv.drop(db)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        srv.close()
        shutil.rmtree(tmp, ignore_errors=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    md = report(result)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


def report(r: dict) -> str:
    labels = list(r["trees"])
    lines = [f"live ingest of {r['docs']:,} SciFact abstracts ({r['embedder']} vectors, pre-embedded), "
             f"{r['chunk']} per statement; {r['date']}; load {r['loadavg_start'][0]:.2f} → {r['loadavg_end'][0]:.2f}; "
             f"`{r['command']}`", ""]
    lines.append("| phase | measure | " + " | ".join(labels) + " | SQLite FTS5 + sqlite-vec |")
    lines.append("|---|---|" + "---:|" * (len(labels) + 1))
    for ph in ("live", "live, no vectors", "bulk"):
        if ph not in r["trees"][labels[0]]["phases"]:
            continue
        peer = r["peer"].get(ph, {})
        cells = [f"{r['trees'][lb]['phases'][ph]['docs_per_s']:,.0f}" for lb in labels]
        lines.append(f"| {ph} | docs/s (wall) | " + " | ".join(cells) + f" | {peer.get('docs_per_s', 0):,.0f} |")
        cells = [f"{r['trees'][lb]['phases'][ph]['backend_cpu_us_per_doc']:,.0f}" for lb in labels]
        lines.append(f"| {ph} | CPU µs/doc | " + " | ".join(cells) + f" | {peer.get('cpu_us_per_doc', 0):,.0f} |")
        cells = [" → ".join(f"{x:.2f}" for x in r["trees"][lb]["phases"][ph]["load"]) for lb in labels]
        lines.append(f"| {ph} | load average | " + " | ".join(cells) + " | |")
    if all(r["trees"][lb]["compact"] for lb in labels):
        lines.append("| bulk | bm25_compact(full_merge), s | " + " | ".join(
            f"{r['trees'][lb]['compact']['s']:.1f}" for lb in labels) + " | |")
    for mode in ("bm25", "lexical", "hybrid"):
        lines.append(f"| answers | nDCG@10 {mode} | " + " | ".join(f"{r['trees'][lb]['ndcg@10'][mode]:.4f}" for lb in labels) + " | |")
    if r["answers_old_vs_new"]:
        a = r["answers_old_vs_new"]
        lines.append(f"| answers | identical calls (old vs new) | {a['identical']}/{a['calls']} | | |")
        for m, n in a.get("by_mode", {}).items():
            lines.append(f"| answers | identical calls, {m} | {n}/{a['calls'] // 3} | | |")
    lines.append("| live phases | ANALYZEs of the BM25 tables (write path + autovacuum) | " + " | ".join(
        ", ".join(f"{k.removeprefix('dna_bm25_')} {v}" for k, v in r["trees"][lb].get("analyzed_after_live", {}).items())
        for lb in labels) + " | |")
    lines.append("| live | BM25 upkeeps per index_document call | " + " | ".join(
        f"{r['trees'][lb]['by_step']['live']['upkeeps_per_call']:g}" for lb in labels) + " | |")
    for k, label in (("hnsw", f"floor: the vectors into a plain pgvector table + HNSW ({HNSW_BUILD})"),
                     ("postings", "floor: the memtable postings into a plain table, same key")):
        lines.append(f"| {label} | docs/s (wall) | " + " | ".join(
            f"{r['trees'][lb]['floors'][k]['docs_per_s']:,.0f}" for lb in labels) + " | |")
        lines.append(f"| {label} | CPU µs/doc | " + " | ".join(
            f"{r['trees'][lb]['floors'][k]['backend_cpu_us_per_doc']:,.0f}" for lb in labels) + " | |")
    for ph in ("live", "live, no vectors"):
        if ph not in r["trees"][labels[0]]["by_step"]:
            continue
        lines += ["", f"Cost per document by step, {ph} (ms, self time; wall {' / '.join(str(r['trees'][lb]['by_step'][ph]['wall_ms_per_doc']) for lb in labels)} ms/doc):", "",
                  "| step | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        for step in r["trees"][labels[0]]["by_step"][ph]["ms_per_doc"]:
            lines.append(f"| {step} | " + " | ".join(
                f"{r['trees'][lb]['by_step'][ph]['ms_per_doc'].get(step, 0):.3f}" for lb in labels) + " |")
    for ph in ("live", "live, no vectors", "bulk"):
        if ph not in r["trees"][labels[0]]["phases"]:
            continue
        lines += ["", f"Cost by step, {ph} (track_functions: self time µs/doc, calls/doc):", "",
                  "| function | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        names = []
        for lb in labels:
            for n, v in r["trees"][lb]["phases"][ph]["steps"].items():
                if n not in names and v["self_us_per_doc"] >= 1.0:
                    names.append(n)
        for n in names:
            cells = []
            for lb in labels:
                v = r["trees"][lb]["phases"][ph]["steps"].get(n)
                cells.append(f"{v['self_us_per_doc']:,.1f} ({v['calls_per_doc']:g})" if v else "—")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
