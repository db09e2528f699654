"""Choose the lexical and hybrid defaults on the SciFact TRAIN split (never on test).

Usage (from the repository root)::

    python bench/tune.py [DATASET_DIR] [--embedder onnx|fake] [--dsn DSN] [--split train]
                         [--out bench/results/tune-<dataset>.json]

Loads the corpus like ``bench/beir.py`` (fresh embedded database, public client, cached vectors),
then scores the ``--split`` queries (default train: 809 SciFact claims) with nDCG@10 of the default
k = 10 call for:

1. the text-search configuration (``english`` vs ``simple``, through ``dna.set_search_config``,
   which re-tokenizes the scope) with the BM25 lane alone, plus its latency;
2. BM25 k1 × b (``dna.bm25(..., k1, b)``) on the chosen configuration;
3. hybrid RRF settings of ``dna.search``: weights (dense, lexical) × rrf_k × per-lane depth;
4. (step ``fusion``) the fusion of ``dna.search``: RRF at its defaults against the convex combination of
   min-max normalised lane scores (``fusion => 'convex'``) at dense_weight 0.3 … 0.8, beside each lane
   alone (``lexical``: no query vector; ``dense``: ``dense_weight => 1``).

``--scope-dsn DSN --scope NAME`` runs the steps on a scope that is already loaded (e.g. the 1M scope
bench/scale.py keeps with ``--keep``: ``--scope scale``) instead of loading the corpus into a fresh
database; its documents must be named by the dataset's ids (distractors are never relevant).

Prints the grid and the best cell of each, and writes JSON. The chosen values are the defaults
in sql/bm25.sql and sql/search.sql; bench/RESULTS.md records the figures.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import beir  # noqa: E402
from embcache import CachedEmbedder  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--embedder", choices=("onnx", "fake"), default="onnx")
    ap.add_argument("--split", default="train")
    ap.add_argument("--steps", default="ts_config,bm25,hybrid", help="comma list of ts_config, bm25, hybrid, fusion")
    ap.add_argument("--scope-dsn", default=None, help="a database holding --scope already (nothing is loaded)")
    ap.add_argument("--scope", default=None, help="with --scope-dsn: the loaded scope")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if bool(args.scope_dsn) != bool(args.scope):
        ap.error("--scope-dsn and --scope go together")
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    steps = set(args.steps.split(","))
    if args.split == "test":
        print("refusing to tune on the test split", file=sys.stderr)
        return 2

    from pgvector import Vector
    from rich.console import Console

    import pydna

    console = Console()
    root = Path(args.dataset).resolve()
    corpus, queries, qrels, hashes = beir.load_dataset(root, args.split)
    console.print(f"{root.name}: {len(corpus)} documents, {len(queries)} {args.split} queries")
    embedder = CachedEmbedder(beir.make_provider(args.embedder))
    scope = args.scope or beir.SCOPE
    if args.scope_dsn:
        dsn, cleanup = args.scope_dsn, (lambda: None)
    else:
        dsn, cleanup = beir.setup_database(args, console)
    out: dict = {"dataset": root.name, "split": args.split, "queries": len(queries), "sha256": hashes,
                 "model_id": embedder.model_id, "scope": scope}
    try:
        client = pydna.connect(dsn, embedder=embedder)
        if args.scope_dsn:
            out["scope_documents"] = client.conn.execute(
                "SELECT count(*) FROM dna.dna_search_docs_384 WHERE scope = %s", (scope,)).fetchone()[0]
            if not out["scope_documents"]:
                ap.error(f"scope {scope!r} holds no 384-dim documents in that database")
            console.print(f"scope {scope}: {out['scope_documents']:,} documents (loaded)")
        else:
            beir.load_corpus(client, corpus, console)
        conn = client.conn
        model = embedder.model_id
        qids = list(queries)
        qmat = embedder.embed([queries[q] for q in qids])
        embedder.flush()
        qvec = {q: Vector([float(x) for x in qmat[i]]) for i, q in enumerate(qids)}

        def ndcg(run):
            return beir.evaluate(run, qrels)[0]["nDCG@10"]

        # 1. regconfig
        out["ts_config"] = {}
        for cfg in (("simple", "english") if "ts_config" in steps else ()):
            conn.execute("SELECT dna.set_search_config(%s, %s)", (scope, cfg))
            conn.execute("VACUUM ANALYZE")
            lat, run = [], {}
            for q in qids:
                t = time.perf_counter()
                run[q] = conn.execute("SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10)",
                                      (scope, queries[q], model)).fetchall()
                lat.append((time.perf_counter() - t) * 1000)
            out["ts_config"][cfg] = {"nDCG@10": round(ndcg(run), 4), "p50_ms": round(beir.pct(lat, 50), 2),
                                     "p95_ms": round(beir.pct(lat, 95), 2), "mean_ms": round(statistics.fmean(lat), 2)}
            console.print(f"ts_config {cfg}: {out['ts_config'][cfg]}")
        best_cfg = max(out["ts_config"], key=lambda c: out["ts_config"][c]["nDCG@10"], default="english")
        conn.execute("SELECT dna.set_search_config(%s, %s)", (scope, best_cfg))
        conn.execute("VACUUM ANALYZE")

        # 2. k1 x b
        out["bm25"] = []
        for k1, b in itertools.product(*(((0.6, 0.9, 1.2, 1.5), (0.3, 0.4, 0.5, 0.75)) if "bm25" in steps else ((), ()))):
            run = {q: conn.execute("SELECT name, score FROM dna.bm25(%s, %s, %s, k => 10, k1 => %s, b => %s)",
                                   (scope, queries[q], model, k1, b)).fetchall() for q in qids}
            out["bm25"].append({"k1": k1, "b": b, "nDCG@10": round(ndcg(run), 4)})
            console.print(f"k1 {k1} b {b}: {out['bm25'][-1]['nDCG@10']}")

        # 3. hybrid
        out["hybrid"] = []
        grid = itertools.product(((1.0, 1.0), (1.0, 1.5), (1.5, 1.0), (1.0, 2.0), (2.0, 1.0)), (10.0, 30.0, 60.0),
                                 (None, 100)) if "hybrid" in steps else ()
        for (wd, wl), rrf_k, cand in grid:
            run = {q: conn.execute("SELECT name, score FROM dna.search(%s, %s, %s, %s, k => 10, candidates => %s, "
                                   "weights => %s, rrf_k => %s)",
                                   (scope, queries[q], qvec[q], model, cand, [wd, wl], rrf_k)).fetchall()
                   for q in qids}
            out["hybrid"].append({"weights": [wd, wl], "rrf_k": rrf_k, "candidates": cand or "max(4k,40)",
                                  "nDCG@10": round(ndcg(run), 4)})
            console.print(f"hybrid {out['hybrid'][-1]}")
        # 4. fusion: RRF (defaults) vs convex at dense_weight
        out["fusion"] = []
        cells = [("lexical", None), ("dense", 1.0), ("rrf", None)] + [("convex", w) for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)]
        for fusion, w in (cells if "fusion" in steps else ()):
            lat, run = [], {}
            for q in qids:
                t = time.perf_counter()
                run[q] = conn.execute("SELECT name, score FROM dna.search(%s, %s, %s, %s, k => 10, fusion => %s, "
                                      "dense_weight => %s)",
                                      (scope, queries[q], None if fusion == "lexical" else qvec[q], model,
                                       {"lexical": None, "dense": "convex"}.get(fusion, fusion), w)).fetchall()
                lat.append((time.perf_counter() - t) * 1000)
            out["fusion"].append({"fusion": fusion, "dense_weight": w, "nDCG@10": round(ndcg(run), 4),
                                  "p50_ms": round(beir.pct(lat, 50), 2), "p95_ms": round(beir.pct(lat, 95), 2),
                                  "load": os.getloadavg()})
            console.print(f"fusion {out['fusion'][-1]}")
        client.close()
    finally:
        cleanup()

    out["best"] = {"ts_config": best_cfg,
                   "bm25": max(out["bm25"], key=lambda r: r["nDCG@10"], default=None),
                   "hybrid": max(out["hybrid"], key=lambda r: r["nDCG@10"], default=None),
                   "fusion": max((r for r in out["fusion"] if r["fusion"] in ("rrf", "convex")),
                                 key=lambda r: r["nDCG@10"], default=None)}
    console.print(f"best on {args.split}: {out['best']}")
    path = Path(args.out) if args.out else REPO / "bench" / "results" / f"tune-{root.name}-{'-'.join(sorted(steps))}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    console.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
