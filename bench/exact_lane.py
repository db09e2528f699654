"""The dense lane's exact scan: this tree beside an older tree on the same rows, in one run (issue 26 items 5
and 7, revision 0024 topics vector_inline and exact_lane).

Usage (from the repository root)::

    python bench/exact_lane.py [DATASET_DIR] --old DIR [--sizes 1000,2000,5183] [--queries 100] [--passes 3]
                               [--dsn DSN] [--out bench/results/exact_lane.json]

Per size n: the first n SciFact abstracts (title + body, ``DATASET_DIR``) with ``dna.fake_embed`` vectors
(384 dims; the cost of a scan does not depend on what the vectors mean) written by ``dna.index_documents``
into this tree's database and ``--old DIR``'s (e.g. ``git archive <commit> | tar -x -C DIR``, migrated by its
own pydna.migrate), then ``VACUUM ANALYZE``. Calls, k = 10, the first ``--queries`` SciFact test claims as
query vectors and a query text no document holds (so the hits are the dense lane's): ``dna.search(...,
exact => true, diversity => 'off')``, and the exact statement alone (``ORDER BY embedding <=> q LIMIT 100``
with index scans off). Each query's calls alternate between the trees; per call the fastest of ``--passes``;
backend CPU (``/proc/<pid>/schedstat``) p50 / p95 over the queries, the hits compared, the TOAST table's
size and the 1-minute load average. Prints a Markdown table; writes JSON (``--out``) and the Markdown beside it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from beir import pct  # noqa: E402
from scale import BackendCpu, Server, connect, load1, log, write_report  # noqa: E402

FAKE = "dna-fake-hash-v1"
SEARCH = ("SELECT name FROM dna.search('exact', 'zzqqxx', dna.fake_embed(%s), %s, k => 10, exact => true, "
          "diversity => 'off') ORDER BY rank_dense")
STATEMENT = ("SELECT t.name FROM dna.dna_search_docs_384 AS t WHERE t.scope = 'exact' AND t.embedding IS NOT NULL "
             "ORDER BY t.embedding <=> dna.fake_embed(%s) LIMIT 100")


def load(conn, docs: list[dict]) -> None:
    for a in range(0, len(docs), 1000):
        part = docs[a:a + 1000]
        texts = [d["title"] + " " + d["text"] for d in part]
        conn.execute("SELECT count(*) FROM dna.index_documents('exact', array_fill('Doc'::text, ARRAY[%s]), %s, %s, "
                     "ARRAY(SELECT dna.fake_embed(x) FROM unnest(%s::text[]) AS x), %s, %s)",
                     (len(part), [d["_id"] for d in part], [d["text"] for d in part], texts, FAKE,
                      [d["title"] for d in part]))
    conn.execute("VACUUM ANALYZE dna.dna_search_docs_384")


def timed(conn, cpu, sql, arg, passes, prep=None):
    best, rows = None, None
    for _ in range(passes):
        with conn.transaction():
            if prep:
                conn.execute(prep)
            c0 = cpu.read()
            rows = [r[0] for r in conn.execute(sql, arg).fetchall()]
            c = (cpu.read() - c0) / 1e6
        best = c if best is None else min(best, c)
    return best, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--sizes", default="1000,2000,5183")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "exact_lane.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir
    root = Path(scifact_dir(args.dataset, ap))
    docs = [json.loads(line) for line in open(root / "corpus.jsonl", encoding="utf-8")]
    claims = [json.loads(line)["text"] for line in open(root / "queries.jsonl", encoding="utf-8")][:args.queries]
    srv = Server(args.dsn)
    trees = {"this tree": None, f"old ({args.old})": args.old.resolve()}
    labels = list(trees)
    out = {"settings": srv.settings, "queries": len(claims), "passes": args.passes, "sizes": []}
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            conns, cpus, res = {}, {}, {"size": n, "load_before": load1()}
            for i, (label, tree) in enumerate(trees.items()):
                conn = connect(srv.fresh(f"dna_bench_exact_lane_{i}", tree))
                load(conn, docs[:n])
                conns[label], cpus[label] = conn, BackendCpu(conn)
                res[label] = {"search": [], "statement": [], "toast_bytes": conn.execute(
                    "SELECT pg_relation_size(reltoastrelid) FROM pg_class "
                    "WHERE oid = 'dna.dna_search_docs_384'::regclass").fetchone()[0]}
            same = 0
            for j, q in enumerate(claims):
                hits = {}
                for label in (labels if j % 2 == 0 else labels[::-1]):
                    c, rows = timed(conns[label], cpus[label], SEARCH, (q, FAKE), args.passes)
                    res[label]["search"].append(c)
                    hits[label] = rows
                    c, _ = timed(conns[label], cpus[label], STATEMENT, (q,), args.passes,
                                 "SET LOCAL enable_indexscan = off")
                    res[label]["statement"].append(c)
                same += hits[labels[0]] == hits[labels[1]]
            res["identical_hits"] = same
            res["load_after"] = load1()
            for label in labels:
                r = res[label]
                r["search_cpu_ms"] = [statistics.median(r["search"]), round(pct(r["search"], 95), 2)]
                r["statement_cpu_ms"] = [statistics.median(r["statement"]), round(pct(r["statement"], 95), 2)]
                del r["search"], r["statement"]
                conns[label].close()
            out["sizes"].append(res)
            log(f"  {n:,} rows: " + json.dumps({lb: res[lb] for lb in labels}))
        for i in range(len(trees)):
            srv.drop(f"dna_bench_exact_lane_{i}")
    finally:
        srv.close()
    lines = ["| rows | tree | dna.search exact lane, CPU p50 / p95 ms | exact statement alone, CPU p50 / p95 ms "
             "| TOAST bytes | identical hits | load |", "|---|---|---:|---:|---:|---:|---|"]
    for s in out["sizes"]:
        for label in labels:
            r = s[label]
            lines.append(f"| {s['size']:,} | {label} | {r['search_cpu_ms'][0]:.2f} / {r['search_cpu_ms'][1]:.2f} "
                         f"| {r['statement_cpu_ms'][0]:.2f} / {r['statement_cpu_ms'][1]:.2f} | {r['toast_bytes']:,} "
                         f"| {s['identical_hits']} / {len(claims)} | {s['load_before']} → {s['load_after']} |")
    write_report(args.out, out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
