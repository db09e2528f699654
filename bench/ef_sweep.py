"""The dense lane's recall@10 against an exact scan at several hnsw.ef_search values, on a database kept by
bench/scale.py (issue 26 item 5: what the lane's ef_search rule gives at 1M, and what a larger one would).

Usage (from the repository root)::

    python bench/scale.py ../shared/data/scifact --docs 1000000 ... --keep --out R.json   # keeps the database
    python bench/ef_sweep.py ../shared/data/scifact --dsn DSN --runs R.runs.json.gz [--size 1000000]
                             [--ef 100,400,600,800,1000] [--exclude-from x0994817] [--build m=16,ef_construction=128]
                             [--split test|train] [--out bench/results/ef_sweep.json]

The reference: the top 10 of ``numpy-exact`` that bench/scale.py wrote for the same 300 SciFact test claims
(``--runs``, its per-query runs); with ``--split train`` (the 809 train claims, where a rule is chosen) the
exact top 10 by numpy over the scope's vectors read from the table (``--runs`` is then not read). Rows written
after the bulk load (bench/scale.py's live phase: distractors from ``--exclude-from`` on) are left out of the
lane and of the reference by a filter. The lane's statement as bench/scale.py times
it (``ORDER BY embedding <=> q``, ``hnsw.iterative_scan = strict_order``, LIMIT 100, first 10), once per
ef_search, each query's values interleaved; backend CPU (``/proc/<pid>/schedstat``) p50 / p95, the 1-minute
load average. ``--build PARAMS``: first the 384 table's HNSW index is dropped and built again ``WITH (PARAMS)``
(pgvector's m and ef_construction; revision 0025 builds it WITH (m = 16, ef_construction = 128), 0001 built it with the defaults, ef_construction 64),
timed, with ``maintenance_work_mem`` 4GB and 1 parallel worker; the database is left with that index. Prints a
Markdown table; writes JSON (``--out``) and the Markdown beside it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from beir import load_dataset, pct  # noqa: E402
from embcache import CachedEmbedder  # noqa: E402
from scale import SCOPE, BackendCpu, connect, load1, log, write_report  # noqa: E402

LANE = ("SELECT t.name FROM dna.dna_search_docs_384 AS t WHERE t.scope = %(scope)s AND t.model_id = %(model)s "
        "AND t.embedding IS NOT NULL AND NOT (t.name LIKE 'x%%' AND t.name >= %(cut)s) "
        "ORDER BY t.embedding <=> %(q)s LIMIT 100")


def numpy_exact(conn, model_id: str, cut: str, qids: list[str], qmat) -> dict[str, list[tuple[str, float]]]:
    """Each query's exact top 10 by cosine over the scope's vectors (rows from ``cut`` on left out), by numpy."""
    import numpy as np
    from pgvector.psycopg import register_vector

    register_vector(conn)
    names, vecs = [], []
    with conn.cursor(binary=True) as cur:
        cur.execute("SELECT t.name, t.embedding FROM dna.dna_search_docs_384 AS t WHERE t.scope = %s AND t.model_id = %s "
                    "AND t.embedding IS NOT NULL AND NOT (t.name LIKE 'x%%' AND t.name >= %s)", (SCOPE, model_id, cut))
        for name, v in cur:
            names.append(name)
            vecs.append(v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v, dtype=np.float32))
    m = np.vstack(vecs).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = np.asarray(qmat, dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    out = {}
    for i0 in range(0, len(qids), 64):
        sims = q[i0:i0 + 64] @ m.T
        for j, row in enumerate(sims):
            top = np.argpartition(-row, 10)[:10]
            out[qids[i0 + j]] = sorted(((names[t], float(row[t])) for t in top), key=lambda x: -x[1])
    log(f"  exact top 10 of {len(qids)} queries over {len(names):,} vectors (numpy)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", default=None)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--runs", type=Path, default=None, help="bench/scale.py's per-query runs (the test split's reference)")
    ap.add_argument("--split", choices=("test", "train"), default="test")
    ap.add_argument("--size", default="1000000")
    ap.add_argument("--ef", default="100,400,600,800,1000")
    ap.add_argument("--exclude-from", default="x0994817")
    ap.add_argument("--build", default=None, help="rebuild the HNSW index WITH (these pgvector parameters) first")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "ef_sweep.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir
    from pgvector import Vector

    from pydna.embeddings import OnnxEmbeddingProvider
    _real, qtexts, _qrels, _ = load_dataset(Path(scifact_dir(args.dataset, ap)), args.split)
    embedder = CachedEmbedder(OnnxEmbeddingProvider())
    conn = connect(args.dsn)
    if args.split == "test":
        if args.runs is None:
            ap.error("--runs is needed for the test split (bench/scale.py's numpy-exact run)")
        exact = json.load(gzip.open(args.runs))[f"{args.size}/numpy-exact"]["run10"]
        qids = [q for q in qtexts if q in exact]
        qmat = embedder.embed([qtexts[q] for q in qids])
    else:
        qids = list(qtexts)
        qmat = embedder.embed([qtexts[q] for q in qids])
        exact = numpy_exact(conn, embedder.model_id, args.exclude_from, qids, qmat)
    built = None
    if args.build:
        import time
        with conn.transaction():
            conn.execute("SET LOCAL maintenance_work_mem = '4GB'")
            conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
            conn.execute("DROP INDEX dna.dna_search_docs_384_embedding_hnsw")
            t0 = time.perf_counter()
            conn.execute(f"CREATE INDEX dna_search_docs_384_embedding_hnsw ON dna.dna_search_docs_384 "
                         f"USING hnsw (embedding vector_cosine_ops) WITH ({args.build})")
            built = {"with": args.build, "seconds": round(time.perf_counter() - t0, 1), "load": load1()}
        log(f"  HNSW built WITH ({args.build}) in {built['seconds']} s")
    cpu = BackendCpu(conn)
    efs = [int(x) for x in args.ef.split(",")]
    got = {ef: {"recall": [], "cpu": []} for ef in efs}
    load0 = load1()
    for i, q in enumerate(qids):
        ref = {name for name, _s in exact[q][:10]}
        for ef in (efs if i % 2 == 0 else efs[::-1]):
            with conn.transaction():
                conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                             "set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true)", (str(ef),))
                c0 = cpu.read()
                rows = [r[0] for r in conn.execute(LANE, {"scope": SCOPE, "model": embedder.model_id, "cut": args.exclude_from,
                                                         "q": Vector(qmat[i])}).fetchall()]
                got[ef]["cpu"].append((cpu.read() - c0) / 1e6)
            got[ef]["recall"].append(len(ref & set(rows[:10])) / 10)
        if i % 50 == 0:
            log(f"  {i + 1}/{len(qids)} queries")
    out = {"size": args.size, "split": args.split, "queries": len(qids), "load_before": load0, "load_after": load1(), "build": built, "ef": {}}
    index_note = f"WITH ({args.build}) built in {built['seconds']} s" if built else "as found"
    lines = [f"{args.size} documents, {len(qids)} SciFact {args.split} claims, the lane's statement (LIMIT 100, first 10), recall@10 "
             f"against numpy-exact; index {index_note}; "
             f"load {out['load_before']} → {out['load_after']}", "",
             "| hnsw.ef_search | recall@10 | CPU p50 / p95 ms |", "|---:|---:|---:|"]
    for ef in efs:
        r = {"recall@10": round(statistics.fmean(got[ef]["recall"]), 4),
             "cpu_p50": round(statistics.median(got[ef]["cpu"]), 2), "cpu_p95": round(pct(got[ef]["cpu"], 95), 2)}
        out["ef"][ef] = r
        lines.append(f"| {ef} | {r['recall@10']:.4f} | {r['cpu_p50']:.2f} / {r['cpu_p95']:.2f} |")
    write_report(args.out, out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
