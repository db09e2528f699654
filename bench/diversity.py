"""Duplicate collapse and MMR (dna.search's diversity) on SciFact and on a duplicate-heavy SciFact, with
diversity => 'off' (the fused ranking as it was before 0022) as the peer in the same run.

Usage (from the repository root)::

    python bench/diversity.py ../shared/data/scifact [--embedder onnx|fake] [--out bench/results/diversity.json]

Two scopes in one embedded PostgreSQL (or ``--dsn``), filled through ``Client.index`` (one passage per
abstract, as bench/beir.py):

- ``beir``: SciFact's 5,183 abstracts as they are. Metric: nDCG@10 from depth-100 runs (as bench/beir.py)
  and of the default k = 10 call, per mode, on the train split (where the defaults are chosen) and the
  test split (reported: the default must not lose nDCG@10 there).
- ``dup``: the same abstracts plus copies of every abstract a train or test query judges relevant, as
  release notes repeat documentation: 1 or 2 copies each (by a hash of its id), each under another title,
  of one of three kinds (by the same hash): ``exact`` (the same text), ``trimmed`` (the first sentence
  dropped: its text is inside the original's) and ``edited`` (a sentence added, the first word changed, so
  neither the same nor contained: found by the cosine only). A copy is relevant as its original; metrics
  map it to its original: ``copies@3`` = hits in the top 3 whose original is already above them (mean per
  query), ``novel nDCG@10`` = nDCG@10 where a repeated original gains nothing (alpha-nDCG with alpha = 1
  on one subtopic per document), ``distinct@10`` = distinct originals in the top 10.

Modes (dna.search over both lanes, ``hybrid``, and the lexical lane alone, ``lexical``): ``off``;
``collapse`` at duplicate_similarity 0.90 / 0.95 / 0.98; ``mmr`` at mmr_lambda 0.5 / 0.7 / 0.9 (collapse
at the default threshold). Each mode's nDCG@10 is that of the default k = 10 call (the top 10 is all it
reads); off and the default also get bench/beir.py's depth-100 nDCG@10 and R@100 on the test split. Latency of the k = 10 call (p50/p95 of the per-query median of ``--passes``
passes, after a warm-up) for off, the default and mmr 0.7 on the test split. The table goes to stdout, the
JSON (config, versions, load average before/after, the bench's CPU time, every metric) to ``--out``.

Rule for the defaults (written before the run; docs/hybrid-search.md quotes the outcome): the default
duplicate_similarity is the lowest threshold of the grid whose SciFact *train* nDCG@10 (depth 100, hybrid
and lexical) is not below off's, breaking ties by the duplicate set's *train* novel nDCG@10; mmr_lambda
(mmr is not the default) is the grid's best train novel nDCG@10 on the duplicate set among those losing
at most 0.01 SciFact train nDCG@10 (hybrid). The test split is never used to choose.
"""
from __future__ import annotations

import argparse
import hashlib
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

from beir import (DEPTH, K_DEFAULT, evaluate, load_dataset, make_provider, pct, setup_database,  # noqa: E402
                  versions)
from embcache import CachedEmbedder  # noqa: E402

THRESHOLDS = (0.90, 0.95, 0.98)
DEFAULT_THRESHOLD = 1.0    # dna.default_duplicate_similarity(): the depth-100 test figure is taken for it
LAMBDAS = (0.5, 0.7, 0.9)
SQL = ("SELECT name FROM dna.search(%(scope)s, %(q)s, %(vec)s, %(model)s, k => %(k)s, diversity => %(div)s, "
       "duplicate_similarity => %(thr)s, mmr_lambda => %(lam)s)")


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def copies_of(doc: dict) -> list[dict]:
    """1 or 2 copies of an abstract (by a hash of its id), each of one kind: exact, trimmed, edited."""
    h = _h(doc["_id"])
    out = []
    for i in range(1 + h % 2):
        kind = ("exact", "trimmed", "edited")[(h // 2 + i) % 3]
        body = doc["text"]
        sentences = re.split(r"(?<=[.!?])\s+", body)
        if kind == "trimmed" and len(sentences) > 2:
            body = " ".join(sentences[1:])
        elif kind == "trimmed":
            kind, body = "exact", doc["text"]
        if kind == "edited":
            words = body.split(" ", 1)
            body = ("In short, " + words[1] if len(words) > 1 else body) + " This summary repeats an earlier report."
        out.append({"_id": f"{doc['_id']}~{i}{kind[0]}", "title": f"Release notes {h % 97}.{i}: {doc['title']}",
                    "text": body, "source": doc["_id"], "copy": kind})
    return out


def novelty(run: dict[str, list[str]], source: dict[str, str], qrels) -> dict[str, float]:
    """copies@3, distinct@10 and novel nDCG@10 (a repeated original gains nothing)."""
    mapped, copies3, distinct10 = {}, [], []
    for q, names in run.items():
        seen, ranked, dup3 = set(), [], 0
        for i, n in enumerate(names):
            s = source.get(n, n)
            if s in seen:
                ranked.append((f"~dup~{q}~{i}", 0.0))
                dup3 += i < 3
            else:
                seen.add(s)
                ranked.append((s, 0.0))
        mapped[q] = ranked
        copies3.append(dup3)
        distinct10.append(len({source.get(n, n) for n in names[:10]}))
    agg, _ = evaluate(mapped, qrels)
    return {"novel nDCG@10": round(agg["nDCG@10"], 4), "copies@3": round(statistics.fmean(copies3), 3),
            "distinct@10": round(statistics.fmean(distinct10), 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None)
    ap.add_argument("--dsn", default=os.environ.get("DNA_BENCH_DSN"))
    ap.add_argument("--embedder", choices=("onnx", "fake"), default="onnx")
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--splits", default="train,test", help="which splits to run (comma-separated)")
    ap.add_argument("--grid", choices=("full", "default", "text"), default="full",
                    help="full: every threshold and lambda; default: off, collapse 0.95 and mmr 0.7; text: collapse 1 "
                         "(the text rules alone, the default since the run of 2026-12-03)")
    ap.add_argument("--no-index", action="store_true",
                    help="with --dsn: the scopes beir and dup are there already (a run beside another on its database)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N queries of each split (a smoke run)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "diversity.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir
    args.dataset = scifact_dir(args.dataset, ap)
    import pydna
    from pgvector import Vector

    cpu0, wall0, load_before = os.times(), time.perf_counter(), os.getloadavg()
    root = Path(args.dataset).resolve()
    corpus, test_q, test_rel, hashes = load_dataset(root, "test")
    _, train_q, train_rel, train_hashes = load_dataset(root, "train")
    if args.limit:
        train_q, test_q = dict(list(train_q.items())[:args.limit]), dict(list(test_q.items())[:args.limit])
        train_rel = {q: v for q, v in train_rel.items() if q in train_q}
        test_rel = {q: v for q, v in test_rel.items() if q in test_q}
    relevant = {d for rel in (test_rel, train_rel) for q in rel.values() for d in q}
    copies = [c for d in corpus if d["_id"] in relevant for c in copies_of(d)]
    source = {c["_id"]: c["source"] for c in copies}
    kinds = ", ".join(f"{k} {sum(c['copy'] == k for c in copies)}" for k in ("exact", "trimmed", "edited"))
    print(f"{root.name}: {len(corpus)} documents, {len(train_q)} train / {len(test_q)} test queries; "
          f"duplicate set: {len(copies)} copies of {len(relevant)} relevant abstracts "
          f"({kinds})")
    embedder = CachedEmbedder(make_provider(args.embedder))
    dsn, cleanup = setup_database(args, type("C", (), {"print": staticmethod(print)})())
    results: dict = {}
    try:
        client = pydna.connect(dsn, embedder=embedder)
        t = time.perf_counter()
        if not args.no_index:
            rows = [{"name": d["_id"], "title": d["title"] or None, "body": d["text"]} for d in corpus]
            client.index("beir", rows, kind="Doc", passages=False)
            client.index("dup", rows + [{"name": c["_id"], "title": c["title"], "body": c["text"]} for c in copies],
                         kind="Doc", passages=False)
            embedder.flush()
            client.conn.execute("VACUUM ANALYZE")
        print(f"indexed in {time.perf_counter() - t:.1f} s", flush=True)
        model = embedder.model_id
        qtext = {**train_q, **test_q}
        qids = list(qtext)
        mat = embedder.embed([qtext[q] for q in qids])
        embedder.flush()
        qvec = {q: Vector(mat[i]) for i, q in enumerate(qids)}
        conn = client.conn

        def run(scope, queries, lane, div, thr=None, lam=None, k=DEPTH):
            return {q: [r[0] for r in conn.execute(SQL, {
                "scope": scope, "q": text, "vec": qvec[q] if lane == "hybrid" else None, "model": model, "k": k,
                "div": div, "thr": thr, "lam": lam}).fetchall()] for q, text in queries.items()}

        modes = [("off", None, None)] + [("collapse", t, None) for t in THRESHOLDS] + \
                [("mmr", None, lam) for lam in LAMBDAS]
        if args.grid == "default":
            modes = [("off", None, None), ("collapse", 0.95, None), ("mmr", None, 0.7)]
        if args.grid == "text":
            modes = [("off", None, None), ("collapse", 1.0, None)]
        known = {"train": ("train", train_q, train_rel), "test": ("test", test_q, test_rel)}
        splits = [known[name] for name in args.splits.split(",")]
        for split, queries, rel in splits:
            for lane in ("hybrid", "lexical"):
                for div, thr, lam in modes:
                    if lane == "lexical" and div == "mmr":
                        continue
                    label = f"{lane} {div}" + (f" {thr:.2f}" if thr else "") + (f" λ{lam}" if lam else "")
                    t = time.perf_counter()
                    # the default k = 10 call (nDCG@10 needs only the top 10); depth 100 as bench/beir.py for
                    # off and the default threshold on the test split, the figures quoted in bench/RESULTS.md
                    plain = run("beir", queries, lane, div, thr, lam, k=K_DEFAULT)
                    agg, _ = evaluate({q: [(n, 0.0) for n in v] for q, v in plain.items()}, rel)
                    dup = novelty(run("dup", queries, lane, div, thr, lam, k=K_DEFAULT), source, rel)
                    row = {"split": split, "lane": lane, "diversity": div, "duplicate_similarity": thr,
                           "mmr_lambda": lam, "nDCG@10 (k=10)": round(agg["nDCG@10"], 4),
                           **{f"dup {k}": v for k, v in dup.items()}}
                    if split == "test" and (div == "off" or (div == "collapse" and thr in (0.95, DEFAULT_THRESHOLD))):
                        deep, _ = evaluate({q: [(n, 0.0) for n in v] for q, v in
                                            run("beir", queries, lane, div, thr, lam).items()}, rel)
                        row["nDCG@10"] = round(deep["nDCG@10"], 4)
                        row["R@100"] = round(deep["R@100"], 4)
                    row["seconds"] = round(time.perf_counter() - t, 1)
                    results[f"{split} {label}"] = row
                    deep = f" (depth 100: {row['nDCG@10']:.4f})" if "nDCG@10" in row else ""
                    print(f"{split:5} {label:24} nDCG@10 k=10 {row['nDCG@10 (k=10)']:.4f}{deep} "
                          f"| dup: novel nDCG@10 {dup['novel nDCG@10']:.4f} copies@3 {dup['copies@3']:.3f} "
                          f"distinct@10 {dup['distinct@10']:.2f} | {row['seconds']} s", flush=True)
        # latency of the default k = 10 call, off / default / mmr, test split, hybrid
        latency = {}
        for div, lam in (("off", None), ("collapse", None)) + ((("mmr", 0.7),) if args.grid != "text" else ()):
            for scope in ("beir", "dup"):
                raw = {q: [] for q in test_q}
                for _ in range(1 + args.passes):   # the first pass warms up
                    for q, text in test_q.items():
                        t = time.perf_counter()
                        conn.execute(SQL, {"scope": scope, "q": text, "vec": qvec[q], "model": model, "k": K_DEFAULT,
                                           "div": div, "thr": None, "lam": lam}).fetchall()
                        raw[q].append((time.perf_counter() - t) * 1000)
                lat = [statistics.median(v[1:]) for v in raw.values()]
                latency[f"{scope} hybrid {div}"] = {"p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2)}
                print(f"latency {scope} hybrid {div:8} k=10: p50 {pct(lat, 50):.2f} ms, p95 {pct(lat, 95):.2f} ms")
        vers = versions(conn)
        client.close()
    finally:
        cleanup()
    cpu1, load_after = os.times(), os.getloadavg()
    doc = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "dataset": str(root),
           "hashes": {**hashes, **train_hashes}, "embedder": embedder.model_id, "copies": len(copies),
           "copy_kinds": {k: sum(c["copy"] == k for c in copies) for k in ("exact", "trimmed", "edited")},
           "results": results, "latency": latency, "versions": vers,
           "load_average": {"before": load_before, "after": load_after}, "cpus": os.cpu_count(),
           "bench_cpu_s": {"user": round(cpu1.user - cpu0.user, 1), "system": round(cpu1.system - cpu0.system, 1)},
           "wall_s": round(time.perf_counter() - wall0, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"load average before {load_before}, after {load_after}; bench CPU {doc['bench_cpu_s']}; wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
