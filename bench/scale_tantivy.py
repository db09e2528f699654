"""tantivy beside pydna on bench/scale.py's corpus and queries, interleaved (issue 26 item 6).

``bench/scale.py`` calls :func:`beside_tantivy` after its own query passes (same run, same database);
on a database kept by ``bench/scale.py --keep`` (e.g. a ``--bulk-only`` build) this file runs alone::

    python bench/scale_tantivy.py DSN --docs 1000000 [--bulk-json bench/results/scale-1m-bulk.json]
                                  [--passes 1] [--threads 2] [--floor-docs N] [--no-floors]
                                  [--out bench/results/scale-tantivy-1m.json]

The peer: tantivy (PyPI ``tantivy``, in process), one text field = title + " " + body (the text of
pydna's ``tsv``), analyzer simple tokenizer → remove_long(40) → lowercase → English stop words →
English (Snowball) stemmer; tantivy's BM25 is fixed at k1 = 1.2, b = 0.75 (pydna's k1/b are read from
``dna.search_config`` and printed beside it). A query is the claim lower-cased with every character
that is not a letter or digit replaced by a space, parsed by tantivy's query parser into a disjunction
of its terms (the query parser's default), top k by BM25 (block-max WAND), the stored ``id`` of each
hit fetched. Index build: ``IndexWriter(heap, --threads)``, every document added, committed, merges
awaited; CPU = this process's CPU time (all threads), with the Python-side cost of building the
``Document`` objects measured alone beside it.

Interleaved, query by query (order rotated per query, so load changes hit every call alike), k = 10,
the 300 SciFact test claims: ``dna.bm25`` (budgeted), ``dna.search`` lexical, the dense lane (as
``bench/scale.py`` isolates it), ``dna.search`` hybrid, tantivy. CPU: the backend's
``/proc/<pid>/schedstat`` for pydna, ``time.process_time`` for tantivy. Then the floors of the same
run: per query, the postings ``dna.bm25`` reads (``dna.bm25_explain``: path and budget spent) summed
per document in one plain SQL statement (``bench/lane_floor.py``'s ``floor aggregate``: decode, BM25
arithmetic, hash aggregation, top 201; best of 3), and for the hybrid the sum of its two lanes' CPU per
query. Targets (issue 26 item 6): ``dna.bm25`` ≤ 5× tantivy's p50 and ≤ 4× its p95; hybrid p95 ≤ 35 ms
at 1M; bulk ingest CPU per document ≤ 3× tantivy's.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TANTIVY_K1, TANTIVY_B = 1.2, 0.75
ANALYZER = "dna_english"
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")


def pct(values, p: float) -> float:
    from beir import pct as _pct

    return _pct(values, p)


class TantivyPeer:
    """An on-disk tantivy index (temporary folder) of ``docs`` ({_id, title, text}); ``peer(text,
    vec, k)`` → [(id, score)] like the other peers of bench/scale.py."""

    def __init__(self, docs: list[dict], threads: int = 2, heap: int = 1_000_000_000):
        import tantivy

        from beir import doc_text

        self.tantivy = tantivy
        self.dir = tempfile.mkdtemp(prefix="tantivy-scale-", dir="/tmp")
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw")
        sb.add_text_field("text", stored=False, tokenizer_name=ANALYZER)
        schema = sb.build()
        self.index = tantivy.Index(schema, path=self.dir)
        self.index.register_tokenizer(ANALYZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                                      .filter(tantivy.Filter.remove_long(40)).filter(tantivy.Filter.lowercase())
                                      .filter(tantivy.Filter.stopword("english"))
                                      .filter(tantivy.Filter.stemmer("english")).build())
        texts = [(d["_id"], doc_text(d)) for d in docs]
        # the Python side alone: building the Document objects (part of the CPU below)
        c0 = time.process_time()
        for i, t in texts[: min(len(texts), 100_000)]:
            tantivy.Document(id=i, text=t)
        self.build_docs_cpu_us = 1e6 * (time.process_time() - c0) / max(1, min(len(texts), 100_000))
        load0, c0, t0 = os.getloadavg()[0], time.process_time(), time.perf_counter()
        w = self.index.writer(heap_size=heap, num_threads=threads)
        for i, t in texts:
            w.add_document(tantivy.Document(id=i, text=t))
        w.commit()
        w.wait_merging_threads()
        self.index.reload()
        self.seconds, self.cpu_s = time.perf_counter() - t0, time.process_time() - c0
        self.docs, self.threads = len(docs), threads
        self.searcher = self.index.searcher()
        self.ingest = {"docs": len(docs), "seconds": round(self.seconds, 2), "docs_per_s": round(len(docs) / self.seconds, 1),
                       "cpu_s": round(self.cpu_s, 2), "cpu_us_per_doc": round(1e6 * self.cpu_s / len(docs), 1),
                       "python_document_build_cpu_us_per_doc": round(self.build_docs_cpu_us, 1),
                       "threads": threads, "heap_bytes": heap, "segments": self.searcher.num_segments, "load1_start": round(load0, 2),
                       "load1_end": round(os.getloadavg()[0], 2)}

    def __call__(self, text, vec, k):
        clean = _NON_WORD.sub(" ", text).lower().strip()
        if not clean:
            return []
        q = self.index.parse_query(clean, ["text"])
        s = self.searcher
        return [(s.doc(a)["id"][0], float(sc)) for sc, a in s.search(q, k).hits]

    def close(self) -> None:
        del self.searcher, self.index
        shutil.rmtree(self.dir, ignore_errors=True)


def floor_statements(conn, scope: str, model_id: str, text: str, k1: float, b: float) -> tuple[str, float, int] | None:
    """(path, best-of-3 CPU ms, postings) of lane_floor.py's ``floor aggregate`` over the postings
    dna.bm25 reads for ``text`` (its budget as dna.bm25_explain reports it); None for no terms."""
    from lane_floor import FILL, FLOOR_AGG, cpu_of
    from scale import BackendCpu

    e = conn.execute("SELECT dna.bm25_explain(%s, %s, %s, k => 10)", (scope, text, model_id)).fetchone()[0]
    if not e or not e.get("terms"):
        return None
    avgl = float(e["avg_len"])
    conn.execute("TRUNCATE lane_floor_postings, lane_floor_arrays")
    conn.execute(FILL, {"lex": e["terms"], "w": e["idf"], "scope": scope, "model": model_id,
                        "budget": int(e.get("budget") or e.get("postings") or 0) if e.get("path") == "budgeted"
                        else int(e.get("postings") or 0) + 1})
    conn.execute("INSERT INTO lane_floor_arrays SELECT min(w), array_agg(p) FROM "
                 "(SELECT p, w, (row_number() OVER () - 1) / 256 AS g FROM lane_floor_postings) AS s GROUP BY g")
    n = conn.execute("SELECT count(*) FROM lane_floor_postings").fetchone()[0]
    conn.execute("SET enable_sort = off")
    agg = FLOOR_AGG.replace("2.2", str(k1 + 1))
    ms = cpu_of(conn, BackendCpu(conn), agg, {"kk": k1 * (1 - b), "kl": k1 * b / avgl}, 3)
    conn.execute("RESET enable_sort")
    return e.get("path", "?"), ms, n


def beside_tantivy(dsn: str, docs: list[dict], model_id: str, qids, queries, qvecs, qrels, passes: int,
                   threads: int = 2, floors: bool = True, log=print) -> dict:
    """Build the tantivy peer over ``docs`` (the scope's rows), then the interleaved calls and the
    floors (module docstring). Returns JSON-able figures; per-call p50/p95 over the queries of each
    query's median."""
    import scale
    from pgvector.psycopg import register_vector  # noqa: F401 - scale.connect registers it

    log(f"  tantivy: indexing {len(docs):,} documents ({threads} writer threads) …")
    peer = TantivyPeer(docs, threads=threads)
    log(f"  tantivy: {json.dumps(peer.ingest)}")
    conn = scale.connect(dsn)
    try:
        conn.execute("SET jit = off")
        k1, b = conn.execute("SELECT bm25_k1, bm25_b FROM dna.search_config(%s)", (scale.SCOPE,)).fetchone()
        feats = scale.require_new_sql(conn)
        modes = scale.pg_modes(conn, model_id, feats["search_exact"])
        calls = {"dna.bm25": modes["bm25"], "dna.search lexical": modes["lexical"], "dense lane": modes["dense-hnsw"],
                 "dna.search hybrid": modes["hybrid"], "tantivy": peer}
        backend, proc = scale.BackendCpu(conn), scale.ProcessCpu()
        if backend.path is None:
            raise SystemExit("scale_tantivy.py needs the server on this machine (/proc/<backend pid>/schedstat)")
        load0 = round(os.getloadavg()[0], 2)
        run = {q: [tuple(r) for r in peer(queries[q], None, scale.DEPTH)] for q in qids}   # quality + warm-up
        for q in qids:
            for name, fn in calls.items():
                if name != "tantivy":
                    fn(queries[q], qvecs[q], scale.K)
        wall = {c: {q: [] for q in qids} for c in calls}
        cpu = {c: {q: [] for q in qids} for c in calls}
        run10 = {}
        names = list(calls)
        for _ in range(passes):
            for i, q in enumerate(qids):
                for name in names[i % len(names):] + names[:i % len(names)]:
                    clock = proc if name == "tantivy" else backend
                    c0, t0 = clock.read(), time.perf_counter()
                    rows = calls[name](queries[q], qvecs[q], scale.K)
                    wall[name][q].append((time.perf_counter() - t0) * 1000)
                    cpu[name][q].append((clock.read() - c0) / 1e6)
                    if name == "tantivy":
                        run10[q] = [tuple(r) for r in rows]
        load1 = round(os.getloadavg()[0], 2)
        med = {c: {q: statistics.median(v) for q, v in cpu[c].items()} for c in calls}
        out: dict = {"docs": len(docs), "queries": len(qids), "passes": passes, "k": scale.K,
                     "bm25": {"pydna": {"k1": k1, "b": b}, "tantivy": {"k1": TANTIVY_K1, "b": TANTIVY_B}},
                     "ingest": peer.ingest, "load1_start": load0, "load1_end": load1, "calls": {}}
        for c in calls:
            w = [statistics.median(v) for v in wall[c].values()]
            out["calls"][c] = {"cpu_p50_ms": round(pct(list(med[c].values()), 50), 2),
                               "cpu_p95_ms": round(pct(list(med[c].values()), 95), 2),
                               "p50_ms": round(pct(w, 50), 2), "p95_ms": round(pct(w, 95), 2)}
        out["calls"]["tantivy"].update(scale.quality({"run": run, "run10": run10}, qrels))
        t = out["calls"]["tantivy"]
        out["ratios"] = {f"{c} / tantivy": {"cpu_p50": round(out["calls"][c]["cpu_p50_ms"] / t["cpu_p50_ms"], 2),
                                            "cpu_p95": round(out["calls"][c]["cpu_p95_ms"] / t["cpu_p95_ms"], 2)}
                         for c in calls if c != "tantivy"}
        lanes = [med["dna.bm25"][q] + med["dense lane"][q] for q in qids]
        out["floors"] = {"hybrid: dna.bm25 + dense lane, per query (CPU)": {
            "cpu_p50_ms": round(pct(lanes, 50), 2), "cpu_p95_ms": round(pct(lanes, 95), 2)}}
        if floors:
            log("  floors: the postings dna.bm25 reads, summed per document in one plain statement …")
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS lane_floor_postings (p bigint, w float8)")
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS lane_floor_arrays (w float8, ps bigint[])")
            f = {q: floor_statements(conn, scale.SCOPE, model_id, queries[q], k1, b) for q in qids}
            fl = [v[1] for v in f.values() if v]
            post = [v[2] for v in f.values() if v]
            out["floors"]["dna.bm25: floor aggregate over the postings it reads (best of 3)"] = {
                "cpu_p50_ms": round(pct(fl, 50), 2), "cpu_p95_ms": round(pct(fl, 95), 2),
                "postings_p50": pct(post, 50), "postings_p95": pct(post, 95),
                "us_per_posting": round(1000 * sum(fl) / max(1, sum(post)), 3),
                "paths": {p: sum(1 for v in f.values() if v and v[0] == p) for p in {v[0] for v in f.values() if v}},
                "floor / tantivy": {"cpu_p50": round(pct(fl, 50) / t["cpu_p50_ms"], 2),
                                    "cpu_p95": round(pct(fl, 95) / t["cpu_p95_ms"], 2)},
                "load1_end": round(os.getloadavg()[0], 2)}
    finally:
        conn.close()
        peer.close()
    return out


def ingest_ratio(out: dict, bulk: dict, floor_lexical: dict | None) -> None:
    """Adds pydna's bulk CPU per document (backend, load + compact, lexical side) beside tantivy's."""
    cpu = (bulk.get("backend_cpu_load_s") or 0) + (bulk.get("backend_cpu_compact_s") or 0)
    if not cpu:
        return
    us = 1e6 * cpu / bulk["docs"]
    t = out["ingest"]["cpu_us_per_doc"]
    out["ingest_ratio"] = {"pydna backend CPU µs/doc (COPY + index_staged + bm25_compact)": round(us, 1),
                           "tantivy CPU µs/doc (all writer threads + Python)": t, "pydna / tantivy": round(us / t, 2)}
    if floor_lexical and floor_lexical.get("backend_cpu_us_per_doc"):
        f = floor_lexical["backend_cpu_us_per_doc"]
        out["ingest_ratio"]["floor: COPY into a plain table computing to_tsvector, µs/doc"] = f
        out["ingest_ratio"]["floor / tantivy"] = round(f / t, 2)


def table(out: dict) -> str:
    n = f"{out['docs']:,}"
    t = out["calls"]["tantivy"]
    lines = [f"{n} documents, {out['queries']} queries × {out['passes']} passes, k = {out['k']}; pydna BM25 k1 "
             f"{out['bm25']['pydna']['k1']} b {out['bm25']['pydna']['b']}, tantivy k1 {TANTIVY_K1} b {TANTIVY_B}; "
             f"load {out['load1_start']} → {out['load1_end']}",
             "", "| call | CPU p50 / p95 ms | wall p50 / p95 ms | CPU / tantivy p50 | p95 |", "|---|---:|---:|---:|---:|"]
    for c, r in out["calls"].items():
        ra = out["ratios"].get(f"{c} / tantivy", {})
        lines.append(f"| {c} | {r['cpu_p50_ms']} / {r['cpu_p95_ms']} | {r['p50_ms']} / {r['p95_ms']} | "
                     f"{ra.get('cpu_p50', '')}{'×' if ra else ''} | {ra.get('cpu_p95', '')}{'×' if ra else ''} |")
    for c, r in out["floors"].items():
        ra = r.get("floor / tantivy", {})
        extra = (f" ({r['postings_p50']:,.0f} / {r['postings_p95']:,.0f} postings, {r['us_per_posting']} µs each)"
                 if "postings_p50" in r else "")
        lines.append(f"| floor, {c}{extra} | {r['cpu_p50_ms']} / {r['cpu_p95_ms']} | | "
                     f"{ra.get('cpu_p50', '')}{'×' if ra else ''} | {ra.get('cpu_p95', '')}{'×' if ra else ''} |")
    if "nDCG@10" in t:
        lines.append(f"\ntantivy nDCG@10 {t['nDCG@10']}, R@100 {t['R@100']}, proxy P@10 {t.get('proxy P@10')}")
    i = out["ingest"]
    lines.append(f"tantivy ingest: {i['docs']:,} docs in {i['seconds']} s ({i['docs_per_s']:,.0f} docs/s), CPU "
                 f"{i['cpu_us_per_doc']} µs/doc (of which building the Python Documents "
                 f"{i['python_document_build_cpu_us_per_doc']}), {i['threads']} threads, {i['segments']} segments, "
                 f"load {i['load1_start']} → {i['load1_end']}")
    if "ingest_ratio" in out:
        lines.append("ingest CPU per document: " + "; ".join(f"{k} {v}" for k, v in out["ingest_ratio"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dsn")
    ap.add_argument("--docs", type=int, required=True, help="the scope's size (bench/scale.py's first n rows)")
    ap.add_argument("--dataset", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--bulk-json", type=Path, default=None, help="bench/scale.py's JSON of the build (for the ingest ratio)")
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-floors", action="store_true")
    ap.add_argument("--floor-docs", type=int, default=0,
                    help="also COPY the first N rows into a plain table computing to_tsvector (bench/scale.py's bulk "
                         "floor, 2 sessions, 10,000-row transactions): its backend CPU per document beside tantivy's")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import scale
    from data_sets import scifact_dir
    from pydna.embeddings import OnnxEmbeddingProvider

    args.dataset = scifact_dir(args.dataset, ap)
    real, queries, qrels, _ = scale.load_dataset(Path(args.dataset), "test")
    qids = list(queries)
    embedder = scale.CachedEmbedder(OnnxEmbeddingProvider())
    real_vecs = embedder.embed([scale.doc_text(d) for d in real])
    qmat = embedder.embed([queries[q] for q in qids])
    qvecs = {q: qmat[i] for i, q in enumerate(qids)}
    distractors = scale.load_distractors(real, args.docs - len(real))
    dvecs = scale.distractor_vectors(real_vecs, distractors, embedder.model_id)
    corpus = scale.Corpus(real, real_vecs, distractors, dvecs)
    scale.PROXY.update(scale.proxy_relevant(corpus, args.docs, qrels))
    out = beside_tantivy(args.dsn, corpus.docs(0, args.docs), embedder.model_id, qids, queries, qvecs, qrels,
                         args.passes, args.threads, not args.no_floors, log=scale.log)
    floor = None
    if args.floor_docs:
        conn = scale.connect(args.dsn)
        try:
            scale.log(f"floor: {args.floor_docs:,} rows COPYed into a plain table computing to_tsvector …")
            floor = scale.lexical_floor(conn, corpus, args.floor_docs, 10_000, 2, args.dsn)
        finally:
            conn.close()
        out["floor_lexical"] = floor
    if args.bulk_json:
        sizes = json.loads(args.bulk_json.read_text())
        size = next(s for s in (sizes["sizes"] if isinstance(sizes, dict) else sizes) if s["docs"] == args.docs)
        ingest_ratio(out, size["bulk"], size.get("floor_lexical") or floor)
        out["bulk_json"] = str(args.bulk_json)
    out["command"] = "python bench/scale_tantivy.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(table(out))
    dest = args.out or scale.REPO / "bench" / "results" / f"scale-tantivy-{args.docs}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
