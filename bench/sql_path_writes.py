"""The write side of bench/sql_path.py: the same one-document-at-a-time writes into this tree's database and
an older tree's, interleaved transaction by transaction, in one run (issue 26 item 1: what bounding the
memtable and merging in the write path cost the writer).

Usage (from the repository root)::

    python bench/sql_path_writes.py [DATASET_DIR] --old DIR [--docs 30000] [--chunk 250] [--dsn DSN] [--keep]
                                    [--out bench/results/sql_path_writes.json]

``--old DIR``: a second source tree (e.g. ``git archive main | tar -x -C DIR``), migrated by its own
``pydna.migrate`` (a subprocess with ``PYTHONPATH=DIR``) into a database of the same server. Corpus and
statements as bench/sql_path.py (``dna.index_document`` one call per document, ``--chunk`` calls per
transaction, no vector, a lexical-only model); chunk i goes to both databases, the order swapped every
chunk. Recorded per tree: docs/s (wall of its own transactions), backend CPU per document
(``/proc/<pid>/schedstat``), the slowest transaction (wall and CPU: where a seal's merges land), the
segments and memtable documents at the end, and the 1-minute load average. Prints a Markdown table;
writes JSON (``--out``) and the Markdown beside it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from scale import BackendCpu, Server, connect, load1, log  # noqa: E402
from sql_path import BOUNDED, INDEX_SQL, MODEL, corpus, state  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=30_000)
    ap.add_argument("--chunk", type=int, default=250)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--keep", action="store_true", help="keep both databases and the server; print their DSNs")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "sql_path_writes.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir
    docs = corpus(Path(scifact_dir(args.dataset, ap)), args.docs)
    srv = Server(args.dsn)
    trees = {"this tree": None, f"old ({args.old})": args.old.resolve()}
    results = {"settings": srv.settings, "docs": args.docs, "chunk": args.chunk, "load_before": load1(), "trees": {}}
    try:
        conns, cpus, acc = {}, {}, {}
        for i, (label, tree) in enumerate(trees.items()):
            conn = connect(srv.fresh(f"dna_bench_sql_path_writes_{i}", tree))
            conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
            conns[label], cpus[label] = conn, BackendCpu(conn)
            acc[label] = {"wall": 0.0, "cpu": 0.0, "max_wall": 0.0, "max_cpu": 0.0,
                          "limit": conn.execute("SELECT dna.bm25_memtable_limit()").fetchone()[0]}
        labels = list(trees)
        for n, a in enumerate(range(0, len(docs), args.chunk)):
            part = docs[a:a + args.chunk]
            for label in (labels if n % 2 == 0 else labels[::-1]):
                conn, cpu = conns[label], cpus[label]
                c0, t0 = cpu.read(), time.perf_counter()
                with conn.transaction():
                    conn.execute(INDEX_SQL, (BOUNDED, MODEL, [d["name"] for d in part], [d["body"] for d in part],
                                             [d["title"] for d in part]))
                w, c = time.perf_counter() - t0, (cpu.read() - c0) / 1e9
                s = acc[label]
                s["wall"] += w
                s["cpu"] += c
                s["max_wall"], s["max_cpu"] = max(s["max_wall"], w), max(s["max_cpu"], c)
            if n % 20 == 0:
                log(f"  {a + len(part):,} written to each")
        for label in labels:
            s, st = acc[label], state(conns[label], BOUNDED)
            results["trees"][label] = {
                "memtable_limit": s["limit"], "docs_per_s": round(len(docs) / s["wall"], 1),
                "cpu_ms_per_doc": round(s["cpu"] * 1000 / len(docs), 3),
                "slowest_txn_wall_s": round(s["max_wall"], 2), "slowest_txn_cpu_s": round(s["max_cpu"], 2), **st}
            conns[label].close()
        for i in range(len(trees)):
            if args.keep:
                print(f"kept: {srv.dsn_for(f'dna_bench_sql_path_writes_{i}')}", file=sys.stderr)
            else:
                srv.drop(f"dna_bench_sql_path_writes_{i}")
    finally:
        if not args.keep:
            srv.close()
    results["load_after"] = load1()
    base = results["trees"][labels[1]]
    lines = [f"{args.docs:,} documents, dna.index_document one call each, {args.chunk} per transaction, the two trees "
             f"interleaved; load {results['load_before']} → {results['load_after']}", "",
             "| tree | memtable limit | docs/s | CPU ms/doc | × old CPU | slowest txn wall / CPU s | segments at end | memtable docs |",
             "|" + "---|" * 8]
    for label, r in results["trees"].items():
        lines.append(f"| {label} | {r['memtable_limit']:,} | {r['docs_per_s']} | {r['cpu_ms_per_doc']} "
                     f"| × {r['cpu_ms_per_doc'] / base['cpu_ms_per_doc']:.2f} | {r['slowest_txn_wall_s']} / {r['slowest_txn_cpu_s']} "
                     f"| {r['segments']} | {r['memtable_docs']:,} |")
    md = "\n".join(lines)
    print(md)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    out.with_suffix(".md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
