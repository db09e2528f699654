"""SciFact: what each step of ``dna.search`` costs above its lanes, as the superuser and as the
application role, all interleaved in one run (issue 26 item 7).

Usage (from the repository root)::

    python bench/beir_steps.py [DATASET_DIR] [--embedder onnx|fake] [--passes 5]
                               [--out bench/results/beir-steps.json]

The database is built as ``bench/beir.py`` builds it (an embedded PostgreSQL in a temporary folder,
migrated, the 5,183 abstracts indexed through ``Client.index`` whole, ``VACUUM ANALYZE``); then a real
LOGIN role (``dna.grant_app_role``, mapped to an identity; row-level security forced) is the application
role. Calls, k = 10, the 300 test claims, each once per query and pass in an order rotated per query
(so load changes hit every call alike), one warm-up pass unmeasured:

- ``dna.bm25`` (k = 10): the lexical lane as a caller asks for it;
- ``lexical lane at dna.search's depth``: ``dna.bm25_lane(..., top => 100)`` with the query's terms
  (``dna.bm25_terms``, computed beforehand): the very call ``dna.search`` makes;
- ``dense lane``: the HNSW statement ``dna.search`` runs (``ef_search`` = ``dna.hnsw_ef_search(10,
  100)``, iterative scan, sequential scans, sorts and bitmap scans off, cosine rounded, cut with ties);
- ``dna.search`` lexical (no embedding), hybrid (defaults), hybrid ``passages => true``, hybrid
  ``explain => true``, hybrid ``fusion => 'rrf'``;
- ``dna.search`` hybrid ``highlight => true`` (ts_headline through ``dna.identifier_headline`` on the 10
  hits), lexical and hybrid ``diversity => 'off'`` (the ranking as it is; collapse is the default since 0022);
- the collapse's parts alone, on each query's first 2 x (offset + k) + 8 = 28 fused candidates (diversity
  off, by key): reading their vectors and texts, that read plus ``dna.diversify`` over them (the walk
  ``dna.search`` runs, collapse, duplicate_similarity 1, want 10), that read plus ``dna.text_key`` of each;
- as the application role: ``dna.bm25``, ``dna.search`` lexical and hybrid.

Backend CPU from ``/proc/<backend pid>/schedstat`` (each session's own backend) and client wall time;
per call the p50/p95 over the queries of each query's median over ``--passes``; the steps above the
lanes as per-query differences (hybrid − its two lanes; lexical − its lane; a variant − the default
hybrid; the role − the superuser), p50/p95 over queries. Answers of the role and the superuser are
compared. 1-minute load average before and after. Prints a table, writes JSON.
"""
from __future__ import annotations

import argparse
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

from beir import SCOPE, evaluate, load_corpus, load_dataset, make_provider, pct, setup_database  # noqa: E402
from embcache import CachedEmbedder  # noqa: E402
from scale import BackendCpu  # noqa: E402

ROLE, PASSWORD, IDENTITY = "dna_bench_steps_app", "dna-bench-steps", "bench-steps-oid"
SEARCH = "SELECT name, score FROM dna.search(%(scope)s, %(q)s, {vec}, %(model)s, k => 10{extra})"
DENSE = ("SELECT c.name, c.similarity FROM (SELECT t.name, dna.score_round(1 - (t.embedding <=> %(v)s)) AS similarity "
         "FROM dna.dna_search_docs_384 AS t WHERE t.embedding IS NOT NULL AND t.scope = %(scope)s "
         "AND t.model_id = %(model)s AND t.tenant = '' ORDER BY t.embedding <=> %(v)s FETCH FIRST 100 ROWS WITH TIES) AS c")
# The collapse's pool: the first 2 x (offset + k) + 8 = 28 candidates of the fused ranking (diversity off),
# by key; read as dna.search's collapse reads them (one probe each of the documents' unique key).
POOL = ("SELECT p.ord, doc.embedding, doc.body, p.score FROM unnest(%(pk)s::text[], %(pn)s::text[], %(ps)s::float8[]) "
        "WITH ORDINALITY AS p(kind, name, score, ord) JOIN dna.dna_search_docs_384 AS doc ON doc.scope = %(scope)s "
        "AND doc.model_id = %(model)s AND doc.kind = p.kind AND doc.name = p.name AND doc.tenant = '' AND doc.passage = 0")
POOL_READ = f"SELECT count(*), sum(length(q.body)), sum(vector_dims(q.embedding)) FROM ({POOL}) AS q"
POOL_WALK = (f"WITH q AS MATERIALIZED ({POOL}) SELECT count(*) FROM dna.diversify(ARRAY(SELECT embedding FROM q ORDER BY ord), "
             "ARRAY(SELECT body FROM q ORDER BY ord), ARRAY(SELECT score FROM q ORDER BY ord), 'collapse', 1, NULL, 10)")
POOL_KEYS = f"SELECT count(dna.text_key(q.body)) FROM ({POOL}) AS q"
CALLS = {   # name: (session, sql)
    "dna.bm25 (k = 10)": ("su", "SELECT name, score FROM dna.bm25(%(scope)s, %(q)s, %(model)s, k => 10)"),
    "lexical lane at dna.search's depth (bm25_lane, top 100)":
        ("su", "SELECT count(*) FROM dna.bm25_lane(%(scope)s, %(model)s, '', %(terms)s, %(k1)s, %(b)s, 100, NULL)"),
    "dense lane (dna.search's HNSW statement, depth 100)": ("su", DENSE),
    "dna.search lexical": ("su", SEARCH.format(vec="NULL", extra="")),
    "dna.search hybrid": ("su", SEARCH.format(vec="%(v)s", extra="")),
    "dna.search hybrid, passages => true": ("su", SEARCH.format(vec="%(v)s", extra=", passages => true")),
    "dna.search hybrid, explain => true": ("su", SEARCH.format(vec="%(v)s", extra=", explain => true")),
    "dna.search hybrid, fusion => 'rrf'": ("su", SEARCH.format(vec="%(v)s", extra=", fusion => 'rrf'")),
    "dna.search hybrid, highlight => true": ("su", SEARCH.format(vec="%(v)s", extra=", highlight => true")),
    "dna.search lexical, diversity => 'off'": ("su", SEARCH.format(vec="NULL", extra=", diversity => 'off'")),
    "dna.search hybrid, diversity => 'off'": ("su", SEARCH.format(vec="%(v)s", extra=", diversity => 'off'")),
    "collapse's read alone: the pool's vectors and texts (28 rows by key)": ("su", POOL_READ),
    "collapse's walk alone: dna.diversify over the pool (28 rows, read included)": ("su", POOL_WALK),
    "dna.text_key of the pool's 28 texts (read included)": ("su", POOL_KEYS),
    "app role: dna.bm25 (k = 10)": ("app", "SELECT name, score FROM dna.bm25(%(scope)s, %(q)s, %(model)s, k => 10)"),
    "app role: dna.search lexical": ("app", SEARCH.format(vec="NULL", extra="")),
    "app role: dna.search hybrid": ("app", SEARCH.format(vec="%(v)s", extra="")),
}
STEPS = {   # label: (call, minus these calls)
    "fusion + rows + bookkeeping above the lanes (hybrid − lane@100 − dense lane)":
        ("dna.search hybrid", ("lexical lane at dna.search's depth (bm25_lane, top 100)",
                               "dense lane (dna.search's HNSW statement, depth 100)")),
    "above the lexical lane (dna.search lexical − lane@100)":
        ("dna.search lexical", ("lexical lane at dna.search's depth (bm25_lane, top 100)",)),
    "the dense lane inside dna.search (hybrid − lexical)": ("dna.search hybrid", ("dna.search lexical",)),
    "depth 100 instead of 10 (lane@100 − dna.bm25)":
        ("lexical lane at dna.search's depth (bm25_lane, top 100)", ("dna.bm25 (k = 10)",)),
    "passages => true (− hybrid)": ("dna.search hybrid, passages => true", ("dna.search hybrid",)),
    "explain => true (− hybrid)": ("dna.search hybrid, explain => true", ("dna.search hybrid",)),
    "fusion rrf instead of convex (− hybrid)": ("dna.search hybrid, fusion => 'rrf'", ("dna.search hybrid",)),
    "highlight => true on the 10 hits (− hybrid)": ("dna.search hybrid, highlight => true", ("dna.search hybrid",)),
    "collapse (the default) in the hybrid (hybrid − diversity off)":
        ("dna.search hybrid", ("dna.search hybrid, diversity => 'off'",)),
    "collapse (the default) in the lexical (lexical − diversity off)":
        ("dna.search lexical", ("dna.search lexical, diversity => 'off'",)),
    "the collapse's walk over 28 given rows (walk − read)":
        ("collapse's walk alone: dna.diversify over the pool (28 rows, read included)",
         ("collapse's read alone: the pool's vectors and texts (28 rows by key)",)),
    "28 dna.text_key calls (text_key − read)":
        ("dna.text_key of the pool's 28 texts (read included)",
         ("collapse's read alone: the pool's vectors and texts (28 rows by key)",)),
    "above the lanes in the hybrid without collapse (hybrid off − lane@100 − dense lane)":
        ("dna.search hybrid, diversity => 'off'", ("lexical lane at dna.search's depth (bm25_lane, top 100)",
                                                  "dense lane (dna.search's HNSW statement, depth 100)")),
    "policies: app role − superuser, dna.bm25": ("app role: dna.bm25 (k = 10)", ("dna.bm25 (k = 10)",)),
    "policies: app role − superuser, lexical": ("app role: dna.search lexical", ("dna.search lexical",)),
    "policies: app role − superuser, hybrid": ("app role: dna.search hybrid", ("dna.search hybrid",)),
}


def app_role(admin_dsn: str) -> str:
    """(Re)create the LOGIN role, grant it the application's rights, map it to an identity; its DSN."""
    import psycopg
    from psycopg import sql as pgsql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            conn.execute(pgsql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(pgsql.Identifier(ROLE), pgsql.Literal(PASSWORD)))
        conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))
        conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s) ON CONFLICT DO NOTHING", (ROLE, IDENTITY))
        forced = conn.execute("SELECT bool_and(c.relforcerowsecurity AND c.relrowsecurity) FROM dna.protected_tables() AS t "
                              "JOIN pg_class AS c ON c.oid = t").fetchone()[0]
        if not forced:
            raise SystemExit("row-level security is not forced on every protected table")
    return make_conninfo(**{**conninfo_to_dict(admin_dsn), "user": ROLE, "password": PASSWORD})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--embedder", choices=("onnx", "fake"), default="onnx")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "beir-steps.json")
    args = ap.parse_args(argv)
    args.dsn = None
    from data_sets import scifact_dir
    args.dataset = scifact_dir(args.dataset, ap)

    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from rich.console import Console

    import pydna

    console = Console()
    corpus, queries, qrels, _ = load_dataset(Path(args.dataset).resolve(), "test")
    embedder = CachedEmbedder(make_provider(args.embedder))
    dsn, cleanup = setup_database(args, console)
    try:
        client = pydna.connect(dsn, embedder=embedder)
        load_corpus(client, corpus, console)
        model = embedder.model_id
        qids = list(queries)
        qmat = embedder.embed([queries[q] for q in qids])
        embedder.flush()
        client.close()
        app = app_role(dsn)
        with psycopg.connect(dsn, autocommit=True) as su, psycopg.connect(app, autocommit=True) as role:
            for c in (su, role):
                register_vector(c)
                c.execute("SET jit = off")
            sessions = {"su": (su, BackendCpu(su)), "app": (role, BackendCpu(role))}
            k1, b, tsc = su.execute("SELECT bm25_k1, bm25_b, ts_config::text FROM dna.search_config(%s)", (SCOPE,)).fetchone()
            ef = su.execute("SELECT dna.hnsw_ef_search(10, 100)").fetchone()[0]
            params = {q: {"scope": SCOPE, "q": queries[q], "model": model, "v": Vector(qmat[i]), "k1": k1, "b": b,
                          "terms": su.execute("SELECT dna.bm25_terms(%s, %s::regconfig)", (queries[q], tsc)).fetchone()[0]}
                      for i, q in enumerate(qids)}
            for q, p in params.items():           # the collapse's pool: the first 28 of the fused ranking
                pool = su.execute("SELECT kind, name, score FROM dna.search(%(scope)s, %(q)s, %(v)s, %(model)s, k => 28, "
                                  "diversity => 'off')", p).fetchall()
                p.update(pk=[r[0] for r in pool], pn=[r[1] for r in pool], ps=[r[2] for r in pool])

            def call(name, q):
                who, sql = CALLS[name]
                conn, _ = sessions[who]
                if name.startswith("dense lane"):
                    with conn.transaction():
                        conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                                     "set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true), "
                                     "set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)",
                                     (str(ef),))
                        return conn.execute(sql, params[q]).fetchall()
                return conn.execute(sql, params[q]).fetchall()

            names = list(CALLS)
            for q in qids:                       # warm-up
                for n in names:
                    call(n, q)
            cpu = {n: {q: [] for q in qids} for n in names}
            wall = {n: {q: [] for q in qids} for n in names}
            answers: dict[str, dict] = {n: {} for n in names}
            load0 = os.getloadavg()
            for _ in range(args.passes):
                for i, q in enumerate(qids):
                    for n in names[i % len(names):] + names[:i % len(names)]:
                        clock = sessions[CALLS[n][0]][1]
                        c0, t0 = clock.read(), time.perf_counter()
                        rows = call(n, q)
                        wall[n][q].append((time.perf_counter() - t0) * 1000)
                        cpu[n][q].append((clock.read() - c0) / 1e6)
                        answers[n][q] = [(r[0], round(float(r[1]), 9)) for r in rows] if len(rows[0] if rows else ()) > 1 else rows
            load1 = os.getloadavg()
    finally:
        cleanup()
    med = {n: {q: statistics.median(v) for q, v in cpu[n].items()} for n in names}
    out: dict = {"documents": len(corpus), "queries": len(qids), "passes": args.passes, "k": 10, "model_id": model,
                 "bm25": {"k1": k1, "b": b}, "ef_search": ef, "load1_5_15_before": load0, "load1_5_15_after": load1,
                 "command": "python bench/beir_steps.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                 "calls": {}, "steps": {}}
    for n in names:
        w = [statistics.median(v) for v in wall[n].values()]
        c = list(med[n].values())
        out["calls"][n] = {"cpu_p50_ms": round(pct(c, 50), 2), "cpu_p95_ms": round(pct(c, 95), 2),
                           "p50_ms": round(pct(w, 50), 2), "p95_ms": round(pct(w, 95), 2)}
    for label, (a, minus) in STEPS.items():
        d = [med[a][q] - sum(med[m][q] for m in minus) for q in qids]
        out["steps"][label] = {"cpu_p50_ms": round(pct(d, 50), 2), "cpu_p95_ms": round(pct(d, 95), 2),
                               "cpu_mean_ms": round(statistics.fmean(d), 2)}
    for who in ("dna.bm25 (k = 10)", "dna.search lexical", "dna.search hybrid"):
        out["calls"][f"app role: {who}"]["same answers as the superuser"] = sum(
            answers[f"app role: {who}"][q] == answers[who][q] for q in qids)
        r = out["calls"][f"app role: {who}"]
        s = out["calls"][who]
        r["role / superuser CPU p50, p95"] = [round(r["cpu_p50_ms"] / s["cpu_p50_ms"], 2),
                                              round(r["cpu_p95_ms"] / s["cpu_p95_ms"], 2)]
    agg, _ = evaluate({q: answers["dna.search hybrid"][q] for q in qids}, qrels)
    out["nDCG@10 of the k = 10 hybrid call"] = round(agg["nDCG@10"], 4)
    agg, _ = evaluate({q: answers["dna.search lexical"][q] for q in qids}, qrels)
    out["nDCG@10 of the k = 10 lexical call"] = round(agg["nDCG@10"], 4)
    out["queries whose collapse answer equals diversity off's"] = {
        lane: sum(answers[f"dna.search {lane}"][q] == answers[f"dna.search {lane}, diversity => 'off'"][q] for q in qids)
        for lane in ("lexical", "hybrid")}

    lines = [f"SciFact test, {len(corpus):,} documents, {len(qids)} claims × {args.passes} passes, k = 10, {model}; "
             f"load {load0[0]:.2f} → {load1[0]:.2f}", "",
             "| call | CPU p50 / p95 ms | wall p50 / p95 ms |", "|---|---:|---:|"]
    for n, r in out["calls"].items():
        extra = (f" (same answers {r['same answers as the superuser']}/{len(qids)}; role / su ×{r['role / superuser CPU p50, p95'][0]}"
                 f" / ×{r['role / superuser CPU p50, p95'][1]})" if "same answers as the superuser" in r else "")
        lines.append(f"| {n}{extra} | {r['cpu_p50_ms']} / {r['cpu_p95_ms']} | {r['p50_ms']} / {r['p95_ms']} |")
    lines += ["", "| step (per-query difference of CPU medians) | p50 ms | p95 ms | mean ms |", "|---|---:|---:|---:|"]
    for label, r in out["steps"].items():
        lines.append(f"| {label} | {r['cpu_p50_ms']} | {r['cpu_p95_ms']} | {r['cpu_mean_ms']} |")
    lines.append(f"\nnDCG@10 of the k = 10 calls: lexical {out['nDCG@10 of the k = 10 lexical call']}, "
                 f"hybrid {out['nDCG@10 of the k = 10 hybrid call']}")
    same = out["queries whose collapse answer equals diversity off's"]
    lines.append(f"collapse's answer equal to diversity off's: lexical {same['lexical']}/{len(qids)}, "
                 f"hybrid {same['hybrid']}/{len(qids)}")
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
