"""Set-based writes after an ANALYZE of the empty tables: this tree's write path beside an older tree's, batch
by batch, in one run (issue 26 item 3, revision 0024 topic write_statistics).

Usage (from the repository root)::

    python bench/bulk_states.py [DATASET_DIR] --old DIR [--docs 20000] [--batch 5000] [--dsn DSN]
                                [--out bench/results/bulk_states.json]

The state: a fresh database migrated to head, ``ANALYZE`` run while its tables are empty (as after an
install, or an operator's ``VACUUM ANALYZE`` before a load), then autovacuum off on the 384 table so that
only the write path can bring its statistics up to date (the moment before autovacuum comes by). Then
``--docs`` documents (bench/sql_path.py's corpus: SciFact then bench/scale.py's distractors, no vector, a
lexical-only model) written by ``dna.index_documents`` in statements of ``--batch``, one transaction each,
into this tree's database and ``--old DIR``'s (e.g. ``git archive <commit> | tar -x -C DIR``, migrated by
its own pydna.migrate), batch i to both, the order swapped every batch. Per batch and tree: wall seconds,
backend CPU seconds (``/proc/<pid>/schedstat``) and ``reltuples`` of the 384 table after it; the 1-minute
load average. Prints a Markdown table; writes JSON (``--out``) and the Markdown beside it.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from scale import BackendCpu, Server, connect, load1, log, write_report  # noqa: E402
from sql_path import MODEL, corpus  # noqa: E402

WRITE_SQL = ("SELECT count(*) FROM dna.index_documents('bulk', array_fill('Doc'::text, ARRAY[cardinality(%s::text[])]), "
             "%s, %s, NULL, %s, %s)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bulk_states.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir
    docs = corpus(Path(scifact_dir(args.dataset, ap)), args.docs)
    srv = Server(args.dsn)
    trees = {"this tree": None, f"old ({args.old})": args.old.resolve()}
    labels = list(trees)
    out = {"settings": srv.settings, "docs": args.docs, "batch": args.batch, "load_before": load1(), "batches": []}
    try:
        conns, cpus = {}, {}
        for i, (label, tree) in enumerate(trees.items()):
            conn = connect(srv.fresh(f"dna_bench_bulk_states_{i}", tree))
            conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
            conn.execute("ANALYZE")
            conn.execute("ALTER TABLE dna.dna_search_docs_384 SET (autovacuum_enabled = off)")
            conns[label], cpus[label] = conn, BackendCpu(conn)
        for n, a in enumerate(range(0, len(docs), args.batch)):
            part = docs[a:a + args.batch]
            row = {"batch": n + 1, "written_before": a, "load": load1()}
            for label in (labels if n % 2 == 0 else labels[::-1]):
                conn, cpu = conns[label], cpus[label]
                c0, t0 = cpu.read(), time.perf_counter()
                with conn.transaction():
                    conn.execute(WRITE_SQL, ([d["name"] for d in part], [d["name"] for d in part],
                                             [d["body"] for d in part], MODEL, [d["title"] for d in part]))
                row[label] = {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round((cpu.read() - c0) / 1e9, 2),
                              "reltuples": conn.execute("SELECT reltuples FROM pg_class "
                                                        "WHERE oid = 'dna.dna_search_docs_384'::regclass").fetchone()[0]}
            out["batches"].append(row)
            log(f"  batch {n + 1}: " + ", ".join(f"{lb} {row[lb]['wall_s']} s" for lb in labels))
        for i in range(len(trees)):
            srv.drop(f"dna_bench_bulk_states_{i}")
    finally:
        srv.close()
    out["load_after"] = load1()
    lines = [f"{args.docs:,} documents by dna.index_documents in statements of {args.batch:,}, after ANALYZE of the empty "
             f"tables (autovacuum off on the 384 table); load {out['load_before']} → {out['load_after']}", "",
             "| batch | rows before | " + " | ".join(f"{lb}: wall / CPU s, reltuples after" for lb in labels) + " |",
             "|" + "---|" * (2 + len(labels))]
    for r in out["batches"]:
        lines.append(f"| {r['batch']} | {r['written_before']:,} | " + " | ".join(
            f"{r[lb]['wall_s']} / {r[lb]['cpu_s']}, {r[lb]['reltuples']:,.0f}" for lb in labels) + " |")
    tot = {lb: sum(r[lb]["cpu_s"] for r in out["batches"]) for lb in labels}
    lines.append(f"| all | | " + " | ".join(f"CPU {tot[lb]:.2f} s" for lb in labels) + " |")
    write_report(args.out, out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
