"""Recall latency of the memory plane (``dna.recall``) at 10,000 memories.

For each embedder (the deterministic fake ``dna-fake-hash-v1`` and, when installed, the ONNX
all-MiniLM-L6-v2 provider) a fresh database is created on the server, migrated, and filled with N
synthetic Engrams through ``dna.remember`` (each embedded by the provider). Then Q queries (a few
words of a random memory, plus a stray word) are recalled and timed:

- ``recall (read)``: ``dna.recall(..., reconsolidate => false)`` — the SQL statement round trip;
- ``recall (default)``: ``dna.recall`` as clients call it, reconsolidating the surfaced Engrams;
- ``recall (lexical)``: no query embedding (the honest degraded path);
- ``embed query``: the provider embedding one query (client side, for context).

Usage (from the repository root)::

    python bench/recall.py [--dsn DSN] [--memories 10000] [--queries 300] [--k 5] [--docs 0]
                           [--embedders fake,onnx] [--out bench/results/recall.json]

``--docs N`` also indexes N plain documents (Kind ``Doc``, text drawn from the same vocabulary) into
the same scope, so that recall's Kind filter has documents to leave out (a scope shared by a
team's documents and its memories).

Without ``--dsn`` / ``DNA_DATABASE_URL`` the embedded server (``pydna.server``) is used. The
databases ``dna_bench_recall_<embedder>`` are dropped and recreated (the role needs CREATEDB).
Target: p95 <= 20 ms for recall at 10,000 memories. Prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGET_P95_MS = 20.0
SCOPE = "bench"

WORDS = """
cache index query vector kernel memory tenant scope schema migration backup replica shard cluster
latency throughput budget invoice payment customer order refund shipment warehouse inventory
release deploy rollback canary feature flag experiment metric alert incident outage pager
login password token session oauth permission role audit policy compliance privacy consent
search ranking fusion lexical dense embedding model tokenizer batch queue worker scheduler
document snapshot version history branch merge review commit pipeline build test coverage lint
python postgres pgvector alembic psycopg typer onnx numpy docker kubernetes terraform nginx
design api endpoint client server timeout retry backoff circuit breaker limit quota throttle
meeting roadmap milestone sprint estimate priority backlog ticket story epic owner stakeholder
report dashboard chart export import csv json parquet archive retention decay consolidate
banana coffee lunch office travel lisbon berlin tokyo weekend holiday birthday family garden
""".split()
VERBS = "always never should must prefer avoid ensure check fix broke moved shipped learned noticed".split()
AFFECTS = ["neutral"] * 6 + ["triumph", "regret", "surprise", "wistful", "ominous"]


def synth_memories(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.sample(WORDS, 7)
        summary = f"{rng.choice(VERBS)} {words[0]} the {words[1]} {words[2]} before {words[3]} {words[4]} ({i})"
        spec = {"summary": summary, "area": f"Feature/{words[5]}", "affect": rng.choice(AFFECTS),
                "tags": [words[1], words[6]], "body": f"{words[2]} {words[3]} notes on {words[4]} and {words[6]}"}
        out.append({"name": f"m{i:06d}", "spec": spec, "words": words})
    return out


def synth_queries(memories: list[dict], q: int, seed: int = 11) -> list[tuple[str, str]]:
    """``(query, name of the memory it was drawn from)`` pairs."""
    rng = random.Random(seed)
    queries = []
    for _ in range(q):
        m = rng.choice(memories)
        words = rng.sample(m["words"][:5], 3) + [rng.choice(WORDS)]
        queries.append((" ".join(words), m["name"]))
    return queries


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    i = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[i]


def summarize(samples_ms: list[float]) -> dict:
    return {"n": len(samples_ms), "p50_ms": round(statistics.median(samples_ms), 3),
            "p95_ms": round(pct(samples_ms, 95), 3), "p99_ms": round(pct(samples_ms, 99), 3),
            "mean_ms": round(statistics.fmean(samples_ms), 3), "max_ms": round(max(samples_ms), 3)}


def provider(name: str):
    if name == "fake":
        from pydna.embeddings import FakeEmbeddingProvider

        return FakeEmbeddingProvider()
    from pydna.embeddings import OnnxEmbeddingProvider  # raises ImportError when the extra is missing

    return OnnxEmbeddingProvider()


def fresh_database(server_dsn: str, name: str) -> str:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from pydna import migrate

    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(server_dsn)
    params["dbname"] = name
    dsn = make_conninfo(**params)
    migrate.upgrade(dsn)
    return dsn


def run_one(server_dsn: str, embedder_name: str, n: int, q: int, k: int, docs: int = 0) -> dict:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    emb = provider(embedder_name)
    dsn = fresh_database(server_dsn, f"dna_bench_recall_{embedder_name}")
    memories = synth_memories(n)
    pairs = synth_queries(memories, q)
    queries = [text for text, _ in pairs]
    sources = [src for _, src in pairs]
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, %s)", (emb.model_id, emb.dims))
        t0 = time.perf_counter()
        embed_s = 0.0
        batch = 128
        for start in range(0, n, batch):
            chunk = memories[start:start + batch]
            texts = [conn.execute("SELECT dna.memory_text('Engram', %s)", (Jsonb(m["spec"]),)).fetchone()[0]
                     for m in chunk] if start == 0 else [
                " ".join(x for x in (m["spec"]["area"], m["spec"]["summary"], m["spec"]["body"]) if x) for m in chunk]
            e0 = time.perf_counter()
            vectors = [Vector([float(x) for x in v]) for v in emb.embed(texts)]
            embed_s += time.perf_counter() - e0
            with conn.transaction():
                conn.execute(
                    "SELECT dna.remember(%s, x.spec, name => x.name, embedding => x.emb, model_id => %s, "
                    "now => now() - (x.age || ' days')::interval) "
                    "FROM unnest(%s::jsonb[], %s::text[], %s::vector[], %s::int[]) AS x(spec, name, emb, age)",
                    (SCOPE, emb.model_id, [Jsonb(m["spec"]) for m in chunk], [m["name"] for m in chunk], vectors,
                     [int(m["name"][1:]) % 60 for m in chunk]))
        seed_s = time.perf_counter() - t0
        for start in range(0, docs, batch):  # plain documents beside the memories (--docs)
            chunk = synth_memories(min(batch, docs - start), seed=1000 + start)
            texts = [f"{m['spec']['summary']} {m['spec']['body']}" for m in chunk]
            vectors = [Vector([float(x) for x in v]) for v in emb.embed(texts)]
            with conn.transaction():
                conn.execute(
                    "SELECT dna.index_document(%s, 'Doc', x.name, x.body, x.emb, %s) "
                    "FROM unnest(%s::text[], %s::text[], %s::vector[]) AS x(name, body, emb)",
                    (SCOPE, emb.model_id, [f"d{start + i:07d}" for i in range(len(chunk))], texts, vectors))
        conn.execute("VACUUM ANALYZE dna.dna_instances")
        conn.execute("VACUUM ANALYZE dna.dna_versions")
        conn.execute(f"VACUUM ANALYZE dna.dna_search_docs_{emb.dims}")
        count = conn.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = %s", (SCOPE,)).fetchone()[0]

        qvecs, embed_ms = [], []
        for text in queries:
            e0 = time.perf_counter()
            qvecs.append(Vector([float(x) for x in emb.embed([text])[0]]))
            embed_ms.append((time.perf_counter() - e0) * 1000)

        sql = ("SELECT dna.recall(%s, %s, %s, %s, k => %s, reconsolidate => %s, actor => 'bench')")

        def timed(use_vec: bool, reconsolidate: bool) -> tuple[list[float], list[dict]]:
            for text, vec in list(zip(queries, qvecs))[:20]:  # warm-up
                conn.execute(sql, (SCOPE, text, vec if use_vec else None, emb.model_id, k, False)).fetchone()
            out, results = [], []
            for text, vec in zip(queries, qvecs):
                s0 = time.perf_counter()
                res = conn.execute(sql, (SCOPE, text, vec if use_vec else None, emb.model_id, k,
                                         reconsolidate)).fetchone()[0]
                out.append((time.perf_counter() - s0) * 1000)
                results.append(res)
            return out, results

        read_ms, read_res = timed(True, False)
        default_ms, _ = timed(True, True)
        lexical_ms, lex_res = timed(False, False)
        # Quality sanity: the memory the query was drawn from is among the hits.
        found = sum(1 for src, res in zip(sources, read_res) if src in [h["name"] for h in res["hits"]])
        found_lex = sum(1 for src, res in zip(sources, lex_res) if src in [h["name"] for h in res["hits"]])
        versions = conn.execute("SELECT count(*) FROM dna.dna_versions").fetchone()[0]
    return {
        "embedder": embedder_name, "model_id": emb.model_id, "dims": emb.dims, "memories": count,
        "docs": docs,
        "queries": q, "k": k, "seed_s": round(seed_s, 2), "seed_embed_s": round(embed_s, 2),
        "recall_read": summarize(read_ms), "recall_default": summarize(default_ms),
        "recall_lexical": summarize(lexical_ms), "embed_query": summarize(embed_ms),
        "source_in_top_k": round(found / q, 3), "source_in_top_k_lexical": round(found_lex / q, 3),
        "versions_after": versions,
        "semantic": bool(read_res and read_res[0]["semantic"]),
        "meets_target": summarize(default_ms)["p95_ms"] <= TARGET_P95_MS,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--docs", type=int, default=0, help="plain documents in the same scope")
    ap.add_argument("--embedders", default="fake,onnx")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "recall.json"))
    args = ap.parse_args(argv)

    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start()
    runs, skipped = [], {}
    for name in [e.strip() for e in args.embedders.split(",") if e.strip()]:
        try:
            provider(name)
        except Exception as exc:  # the ONNX extra is optional
            skipped[name] = f"{type(exc).__name__}: {exc}"
            continue
        print(f"[{name}] seeding {args.memories} memories and timing {args.queries} recalls…", file=sys.stderr)
        runs.append(run_one(server_dsn, name, args.memories, args.queries, args.k, args.docs))

    from rich.console import Console
    from rich.table import Table

    beside = f" + {args.docs:,} documents" if args.docs else ""
    table = Table(title=f"dna.recall at {args.memories:,} memories{beside} (k={args.k}; target p95 <= {TARGET_P95_MS:g} ms)")
    for col in ("embedder", "what", "p50 ms", "p95 ms", "p99 ms", "mean ms"):
        table.add_column(col, justify="right" if "ms" in col else "left")
    for r in runs:
        for key, label in (("recall_read", "recall, no reconsolidation"), ("recall_default", "recall (default)"),
                           ("recall_lexical", "recall, lexical only"), ("embed_query", "embed query (client)")):
            s = r[key]
            table.add_row(r["model_id"], label, f"{s['p50_ms']:.2f}", f"{s['p95_ms']:.2f}", f"{s['p99_ms']:.2f}",
                          f"{s['mean_ms']:.2f}")
    console = Console()
    console.print(table)
    for r in runs:
        console.print(f"{r['model_id']}: seeded in {r['seed_s']} s (embedding {r['seed_embed_s']} s); source memory "
                      f"in top-{r['k']}: {r['source_in_top_k']:.1%} (lexical {r['source_in_top_k_lexical']:.1%}); "
                      f"target met: {r['meets_target']}")
    console.print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    for name, why in skipped.items():
        console.print(f"skipped {name}: {why}")

    payload = {"benchmark": "recall", "target_p95_ms": TARGET_P95_MS, "memories": args.memories, "docs": args.docs,
               "queries": args.queries, "k": args.k, "runs": runs, "skipped": skipped,
               "machine": {"python": platform.python_version(), "platform": platform.platform(),
                           "cpus": os.cpu_count(), "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]},
               "command": "python bench/recall.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
