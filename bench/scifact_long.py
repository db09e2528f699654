"""SciFact-long: whole-document indexing vs passages on long documents, with bm25s beside each.

Usage (from the repository root)::

    python bench/scifact_long.py [DATASET_DIR] [--embedder onnx|fake] [--split test] [--group 10]
                                 [--seed 20261201] [--out bench/results/scifact-long.json]

The corpus: SciFact's 5,183 abstracts shuffled with ``random.Random(seed)`` and grouped, in that
order, into long plain-text documents of ``--group`` (10) abstracts each (``long-0000.txt`` …; each
abstract as ``title`` + blank line + ``text``, abstracts separated by a blank line; no document
title). A query's relevant documents are those holding a relevant abstract (gain = the best of their
abstracts' qrels). Two scopes are filled through the public client (``Client.index``) with the same
records: ``whole`` (``passages=False``: one row per document, the embedder reading its first 256
tokens) and ``passages`` (the default: ``pydna.passages``, plain text cut at paragraphs then
sentences, ~200 tokens with 32 of overlap). Nothing was tuned on this benchmark: the passage sizes are
the module's defaults (MiniLM reads 256 tokens).

Modes, in each scope: ``lexical`` (``dna.search`` without a query vector), ``dense`` (``dna.search``
with weights (1, 0): the dense lane's order, MaxP over passages), ``hybrid`` (``dna.search`` at its
defaults). Peers in the same run: ``bm25s`` over the whole documents, and over the very passages the
database stores with a document's best passage as its score (MaxP), same k1/b and stemming as
bench/beir.py's peer. Metrics (ir-measures, bench/beir.py): nDCG@10 and R@100 from depth-100 calls;
p50/p95 of the k = 10 hybrid call (client wall time, median of 3 passes per query) with the load
average; index seconds (embedding included; vectors cached in bench/.cache, so reruns embed nothing)
and rows per document. Passage choice (issue 27 item 3), in the ``passages`` scope per mode: of the
relevant documents among a query's first 10 hits, the share whose shown passage lies at least half
inside a relevant abstract (``passage_choice``). One table on stdout, JSON to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from beir import (REPO, Bm25sPeer, evaluate, load_dataset, make_provider, pct,  # noqa: E402
                  setup_database, versions)
from embcache import CachedEmbedder  # noqa: E402

DEPTH = 100
K = 10
KIND = "Doc"
SCOPES = ("whole", "passages")


def grouped_spans(corpus: list[dict], size: int, seed: int) -> tuple[list[dict], dict[str, tuple[str, int, int]]]:
    """The long documents and abstract id → (document name, char_start, char_end) of its text there."""
    ids = [d["_id"] for d in corpus]
    by_id = {d["_id"]: d for d in corpus}
    random.Random(seed).shuffle(ids)
    docs, spans = [], {}
    for g in range(0, len(ids), size):
        name = f"long-{g // size:04d}.txt"
        parts, at = [], 0
        for i in ids[g:g + size]:
            text = f"{by_id[i]['title']}\n\n{by_id[i]['text']}".strip()
            if parts:
                at += 2
            spans[i] = (name, at, at + len(text))
            parts.append(text)
            at += len(text)
        docs.append({"name": name, "body": "\n\n".join(parts)})
    return docs, spans


def passage_choice(conn, scope: str, model_id: str, mode: str, queries, qvecs, qrels, spans) -> dict:
    """Of the relevant documents among a query's first K hits, the share whose shown passage lies mostly
    (at least half of its characters) inside a relevant abstract: the passage that answers."""
    from pgvector import Vector

    sql = ("SELECT name, char_start, char_end FROM dna.search(%s, %s, %s, %s, k => %s, weights => %s)")
    weights = [1.0, 0.0] if mode == "dense" else None
    found = ok = 0
    for q, text in queries.items():
        vec = None if mode == "lexical" else Vector(qvecs[q])
        relevant: dict[str, list[tuple[int, int]]] = {}
        for did in qrels.get(q, {}):
            if did in spans:
                name, a, b = spans[did]
                relevant.setdefault(name, []).append((a, b))
        for name, start, end in conn.execute(sql, (scope, text, vec, model_id, K, weights)).fetchall():
            if name not in relevant:
                continue
            found += 1
            if start is None:
                continue
            inside = max((min(end, b) - max(start, a) for a, b in relevant[name]), default=0)
            ok += inside * 2 >= end - start
    return {"relevant_hits": found, "passage_ok": ok, "share": round(ok / max(found, 1), 4)}


def long_qrels(qrels: dict[str, dict[str, int]], owner: dict[str, str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for q, rels in qrels.items():
        for did, gain in rels.items():
            if did in owner:
                name = owner[did]
                out.setdefault(q, {})[name] = max(gain, out.get(q, {}).get(name, 0))
    return out


def search_runner(conn, scope: str, model_id: str, mode: str):
    from pgvector import Vector

    sql = "SELECT name, score FROM dna.search(%s, %s, %s, %s, k => %s, weights => %s)"

    def run(text, vec, k):
        if mode == "lexical":
            return conn.execute(sql, (scope, text, None, model_id, k, None)).fetchall()
        weights = [1.0, 0.0] if mode == "dense" else None
        return conn.execute(sql, (scope, text, Vector(vec), model_id, k, weights)).fetchall()

    return run


def bm25s_maxp(passages: list[tuple[str, str]], k1: float, b: float):
    """bm25s over passages (name, text); a document's score is its best passage's."""
    peer = Bm25sPeer([{"_id": str(i), "title": "", "text": t} for i, (_, t) in enumerate(passages)], k1, b)
    names = [n for n, _ in passages]

    def run(text, vec, k):
        best: dict[str, float] = {}
        for pid, score in peer(text, None, min(len(passages), k * 20)):
            n = names[int(pid)]
            best[n] = max(best.get(n, float("-inf")), score)
        return sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]

    return run


def measure(fn, queries, qvecs, qrels, timed: bool):
    run = {q: [(str(d), float(s)) for d, s in fn(t, qvecs[q], DEPTH)] for q, t in queries.items()}
    agg, _ = evaluate(run, qrels)
    out = {"nDCG@10": round(agg["nDCG@10"], 4), "R@100": round(agg["R@100"], 4)}
    if timed:
        for q, t in queries.items():
            fn(t, qvecs[q], K)   # warm-up
        raw = {q: [] for q in queries}
        for _ in range(3):
            for q, t in queries.items():
                t0 = time.perf_counter()
                fn(t, qvecs[q], K)
                raw[q].append((time.perf_counter() - t0) * 1000)
        lat = [statistics.median(v) for v in raw.values()]
        out.update(p50_ms=round(pct(lat, 50), 2), p95_ms=round(pct(lat, 95), 2),
                   load=round(os.getloadavg()[0], 2))
    return out


def main(argv=None) -> int:
    from rich.console import Console
    from rich.table import Table

    import pydna

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--dsn", default=os.environ.get("DNA_BENCH_DSN"))
    ap.add_argument("--embedder", choices=("onnx", "fake"), default="onnx")
    ap.add_argument("--split", default="test")
    ap.add_argument("--group", type=int, default=10)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", default=str(HERE / "results" / "scifact-long.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    console = Console()

    corpus, queries, qrels, hashes = load_dataset(Path(args.dataset), args.split)
    docs, spans = grouped_spans(corpus, args.group, args.seed)
    owner = {i: name for i, (name, _, _) in spans.items()}
    lqrels = long_qrels(qrels, owner)
    queries = {q: t for q, t in queries.items() if q in lqrels}
    console.print(f"{len(corpus)} abstracts → {len(docs)} documents of {args.group}; {len(queries)} queries "
                  f"({args.split})")
    embedder = CachedEmbedder(make_provider(args.embedder))
    qvecs = dict(zip(queries, np.asarray(embedder.embed(list(queries.values())))))
    load_before = os.getloadavg()
    dsn, cleanup = setup_database(args, console)
    results: dict[str, dict] = {}
    try:
        with pydna.connect(dsn, embedder=embedder) as client:
            conn = client.conn
            conn.autocommit = True
            cfg = conn.execute("SELECT bm25_k1, bm25_b FROM dna.search_config('x')").fetchone()
            for scope in SCOPES:
                conn.execute("DELETE FROM dna.dna_search_docs_384 WHERE scope = %s", (scope,))
                t0 = time.perf_counter()
                report = client.index(scope, docs, kind=KIND, batch_size=512, passages=scope == "passages")
                embedder.flush()
                secs = time.perf_counter() - t0
                conn.execute("VACUUM ANALYZE")
                rows = conn.execute("SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = %s",
                                    (scope,)).fetchone()[0]
                results[f"index/{scope}"] = {"seconds": round(secs, 1), "documents": report.total, "rows": rows,
                                             "rows_per_document": round(rows / max(report.total, 1), 2),
                                             "embedded_texts": report.embedded_texts}
                console.print(f"{scope}: {report.total} documents → {rows} rows in {secs:.1f} s "
                              f"({report.embedded_texts} texts embedded)")
                for mode in ("lexical", "dense", "hybrid"):
                    results[f"{scope}/{mode}"] = measure(search_runner(conn, scope, client.model_id, mode),
                                                         queries, qvecs, lqrels, timed=mode == "hybrid")
                    if scope == "passages":
                        results[f"choice/{mode}"] = passage_choice(conn, scope, client.model_id, mode, queries,
                                                                   qvecs, qrels, spans)
                passages = conn.execute("SELECT name, coalesce(title || ' ', '') || body FROM dna.dna_search_docs_384 "
                                        "WHERE scope = %s ORDER BY name, passage", (scope,)).fetchall()
                peer = bm25s_maxp(passages, cfg[0], cfg[1])
                results[f"{scope}/bm25s"] = measure(peer, queries, qvecs, lqrels, timed=False)
            load_after = os.getloadavg()
            meta = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "load_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
                    "group": args.group, "seed": args.seed, "split": args.split, "hashes": hashes,
                    "model_id": client.model_id, "versions": versions(conn)}
    finally:
        cleanup()

    table = Table(title=f"SciFact-long ({len(docs)} documents of {args.group} abstracts, {args.split} queries)")
    for col in ("indexing", "mode", "nDCG@10", "R@100", "p50 ms", "p95 ms", "load"):
        table.add_column(col, justify="left" if col in ("indexing", "mode") else "right")
    for scope in SCOPES:
        for mode in ("lexical", "dense", "hybrid", "bm25s"):
            r = results[f"{scope}/{mode}"]
            table.add_row(scope if mode == "lexical" else "", mode, f"{r['nDCG@10']:.4f}", f"{r['R@100']:.4f}",
                          str(r.get("p50_ms", "")), str(r.get("p95_ms", "")), str(r.get("load", "")))
    console.print(table)
    for scope in SCOPES:
        ix = results[f"index/{scope}"]
        console.print(f"index {scope}: {ix['seconds']} s, {ix['rows_per_document']} rows per document")
    for mode in ("lexical", "dense", "hybrid"):
        c = results[f"choice/{mode}"]
        console.print(f"passage choice, {mode}: {c['passage_ok']}/{c['relevant_hits']} relevant hits show a passage "
                      f"inside a relevant abstract ({c['share']:.3f})")
    gain = results["passages/hybrid"]["nDCG@10"] - results["whole/hybrid"]["nDCG@10"]
    console.print(f"passages − whole, hybrid nDCG@10: {gain:+.4f} (target ≥ +0.05); "
                  f"load before/after {meta['load_before_after']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str))
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
