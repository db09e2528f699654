"""The peers of bench/scale.py alone (bm25s, SQLite FTS5 + sqlite-vec and their RRF hybrid, numpy exact
KNN) on the rows of one scope size: for a run whose pydna part was measured by ``scale.py`` and whose
own peer phase was cut short (the 1M run, where the SQLite peers take seconds per query).

Usage::

    python bench/scale_peers.py --docs 1000000 [--sqlite-queries 30] [--out bench/results/scale-peers-1m.json]

Same corpus, vectors, queries and measures as ``scale.py`` (its functions), one timed pass above
200k documents; prints one line per peer and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--sqlite-queries", type=int, default=30)
    ap.add_argument("--dataset", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--out", default=str(scale.REPO / "bench" / "results" / "scale-peers-1m.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)
    real, queries, qrels, _ = scale.load_dataset(Path(args.dataset), "test")
    qids = list(queries)
    from pydna.embeddings import OnnxEmbeddingProvider

    embedder = scale.CachedEmbedder(OnnxEmbeddingProvider())
    real_vecs = embedder.embed([scale.doc_text(d) for d in real])
    qmat = embedder.embed([queries[q] for q in qids])
    qvecs = {q: qmat[i] for i, q in enumerate(qids)}
    distractors = scale.load_distractors(real, args.docs - len(real))
    dvecs = scale.distractor_vectors(real_vecs, distractors, embedder.model_id)
    corpus = scale.Corpus(real, real_vecs, distractors, dvecs)
    scale.PROXY.update(scale.proxy_relevant(corpus, args.docs, qrels))
    passes = 3 if args.docs <= 200_000 else 1
    peers, ingest, info = scale.run_peers(corpus.docs(0, args.docs), corpus.vectors(0, args.docs), [], [], qids,
                                          queries, qvecs, qrels, 1.2, 0.4, passes, sqlite_queries=args.sqlite_queries)
    out = {"docs": args.docs, "passes": passes, "ingest": ingest, "info": info,
           "peers": {k: {m: v for m, v in r.items() if m not in ("run", "run10", "raw_ms", "raw_cpu_ms")}
                     for k, r in peers.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    for k, r in out["peers"].items():
        print(k, json.dumps(r))
    print(json.dumps(ingest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
