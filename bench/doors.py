"""The REST door's overhead: requests/s and p50/p95 of search and recall through ``dna serve`` with 8
concurrent clients, beside the same calls made directly through psycopg, in the same run.

Setup: a fresh database ``dna_bench_doors`` on the server, N synthetic Engrams (bench/recall.py's
generator) remembered in scope ``bench`` by an application role ``dna_bench_app`` (an identity),
and a door login role ``dna_bench_door`` (NOINHERIT, member of the app role, dna.grant_door_role)
with one API key mapped to the app role. ``dna serve`` runs as a subprocess on 127.0.0.1.

Each operation runs C client threads (default 8) issuing R requests each, after a warm-up:

- ``search``: REST ``POST /v1/search {query, k}`` vs. direct: embed the query with the same embedder
  and ``SELECT … FROM dna.search(scope, query, vector, model_id, k => …)`` on the client's own
  connection (as the app role);
- ``recall``: REST ``GET /v1/memories/search?q=…&k=…&reconsolidate=false`` vs. direct
  ``SELECT dna.recall(scope, query, vector, model_id, k => …, reconsolidate => false)``. A pure read:
  with reconsolidation every call also writes the surfaced memories (the same on both paths).

The REST path adds HTTP + JSON (httpx, uvicorn, FastAPI), the pool, the request's transaction, the
key lookup and ``SET LOCAL ROLE``. Overhead = REST p50 / direct p50 and direct rps / REST rps. Both
the door and the load generator share the machine's cores with PostgreSQL: the load average is
recorded before and after.

Usage (from the repository root)::

    python bench/doors.py [--dsn SUPERUSER_DSN] [--memories 2000] [--clients 8] [--requests 200] [--k 10]
                          [--embedder fake|onnx] [--out bench/results/doors.json]

Without ``--dsn`` / ``DNA_DATABASE_URL`` the embedded server is used. Needs the extras ``rest`` and
``dev`` (httpx). Prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (REPO, REPO / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from recall import fresh_database, synth_memories, synth_queries  # noqa: E402

SCOPE = "bench"
APP, DOOR, PASSWORD = "dna_bench_app", "dna_bench_door", "dna-bench-doors"


def _as(dsn: str, role: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params.update(user=role, password=PASSWORD)
    return make_conninfo(**params)


def setup(server_dsn: str, n: int, embedder) -> tuple[str, str]:
    """The database, roles, memories and key; returns (database DSN as superuser, API key)."""
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "dna_bench_doors" WITH (FORCE)')
        for role in (DOOR, APP):
            conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {APP} LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE ROLE {DOOR} LOGIN NOINHERIT PASSWORD '{PASSWORD}'")
        conn.execute(f"GRANT {APP} TO {DOOR}")
    dsn = fresh_database(server_dsn, "dna_bench_doors")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.grant_app_role(%s)", (APP,))
        conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'bench-oid')", (APP,))
        conn.execute("SELECT dna.grant_door_role(%s)", (DOOR,))
        key = conn.execute("SELECT dna.create_api_key(%s, 'bench')", (APP,)).fetchone()[0]
    memories = synth_memories(n)
    with psycopg.connect(_as(dsn, APP), autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, %s)", (embedder.model_id, embedder.dims))
        for start in range(0, n, 128):
            chunk = memories[start:start + 128]
            texts = [conn.execute("SELECT dna.memory_text('Engram', %s)", (Jsonb(m["spec"]),)).fetchone()[0]
                     for m in chunk]
            vectors = [Vector([float(x) for x in v]) for v in embedder.embed(texts)]
            with conn.transaction():
                conn.execute("SELECT dna.remember(%s, x.spec, name => x.name, embedding => x.emb, model_id => %s) "
                             "FROM unnest(%s::jsonb[], %s::text[], %s::vector[]) AS x(spec, name, emb)",
                             (SCOPE, embedder.model_id, [Jsonb(m["spec"]) for m in chunk], [m["name"] for m in chunk],
                              vectors))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return dsn, key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_door(dsn: str, embedder_name: str, clients: int) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pydna.cli", "--dsn", _as(dsn, DOOR), "serve", "--port", str(port),
                             "--embedder", embedder_name, "--scope", SCOPE, "--pool-size", str(clients),
                             "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"dna serve did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.2)


def _load(clients: int, requests: int, warmup: int, make_worker) -> dict:
    """C threads, each ``make_worker(i)`` → a callable(query_index) timed per call; wall rps, p50, p95."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    barrier = threading.Barrier(clients + 1)

    def run(i: int) -> None:
        call, close = make_worker(i)
        try:
            for j in range(warmup):
                call(i * 7919 + j)
            barrier.wait()
            for j in range(requests):
                t0 = time.perf_counter()
                call(i * 104729 + j)
                latencies[i].append(time.perf_counter() - t0)
        except Exception as exc:  # reported, and the run fails
            errors.append(f"{type(exc).__name__}: {exc}")
            try:
                barrier.abort()
            except Exception:
                pass
        finally:
            close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    flat = sorted(x for lat in latencies for x in lat)
    q = statistics.quantiles(flat, n=100)
    return {"requests": len(flat), "wall_s": round(wall, 3), "rps": round(len(flat) / wall, 1),
            "p50_ms": round(q[49] * 1000, 2), "p95_ms": round(q[94] * 1000, 2)}


def bench(dsn: str, key: str, base: str, embedder, queries: list[str], clients: int, requests: int, k: int) -> dict:
    import httpx
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    headers = {"Authorization": f"Bearer {key}"}
    warmup = max(5, requests // 10)

    def vector(text: str):
        return Vector([float(x) for x in embedder.embed([text])[0]])

    def rest(op: str):
        def make(i: int):
            http = httpx.Client(base_url=base, headers=headers, timeout=60)

            def call(j: int) -> None:
                query = queries[j % len(queries)]
                if op == "search":
                    r = http.post("/v1/search", json={"query": query, "k": k})
                else:
                    r = http.get("/v1/memories/search", params={"q": query, "k": k, "reconsolidate": "false"})
                if r.status_code != 200:
                    raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
                r.json()
            return call, http.close
        return make

    def direct(op: str):
        def make(i: int):
            conn = psycopg.connect(_as(dsn, APP), autocommit=True)
            register_vector(conn)

            def call(j: int) -> None:
                query = queries[j % len(queries)]
                if op == "search":
                    conn.execute("SELECT scope, kind, name, tenant, score, title, snippet, similarity, lexical_score, "
                                 "rank_dense, rank_lexical, personal FROM dna.search(%s, %s, %s, %s, k => %s)",
                                 (SCOPE, query, vector(query), embedder.model_id, k)).fetchall()
                else:
                    conn.execute("SELECT dna.recall(%s, %s, %s, %s, k => %s, reconsolidate => false)",
                                 (SCOPE, query, vector(query), embedder.model_id, k)).fetchone()
            return call, conn.close
        return make

    out: dict[str, dict] = {}
    for op in ("search", "recall"):
        out[op] = {"direct": _load(clients, requests, warmup, direct(op)),
                   "rest": _load(clients, requests, warmup, rest(op))}
        d, r = out[op]["direct"], out[op]["rest"]
        out[op]["overhead"] = {"p50_ratio": round(r["p50_ms"] / d["p50_ms"], 2),
                               "p95_ratio": round(r["p95_ms"] / d["p95_ms"], 2),
                               "rps_ratio": round(d["rps"] / r["rps"], 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"), help="a superuser DSN (default: embedded)")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200, help="timed requests per client and operation")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--embedder", choices=("fake", "onnx"), default="fake")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "doors.json"))
    args = ap.parse_args(argv)

    from pydna.embeddings import get_provider

    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start(database="postgres")
    embedder = get_provider(args.embedder)
    dsn, key = setup(server_dsn, args.memories, embedder)
    queries = [q for q, _ in synth_queries(synth_memories(args.memories), 500)]
    load_start = os.getloadavg()
    proc, base = start_door(dsn, args.embedder, args.clients)
    try:
        results = bench(dsn, key, base, embedder, queries, args.clients, args.requests, args.k)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    load_end = os.getloadavg()
    result = {"benchmark": "doors", "memories": args.memories, "clients": args.clients, "requests": args.requests,
              "k": args.k, "embedder": embedder.model_id, "results": results,
              "loadavg_start": [round(x, 2) for x in load_start], "loadavg_end": [round(x, 2) for x in load_end],
              "cpus": os.cpu_count(), "python": platform.python_version(),
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"doors: {args.memories} memories, {args.clients} clients x {args.requests} requests, k={args.k}, "
          f"{embedder.model_id}; load {load_start[0]:.2f} -> {load_end[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"| operation | path | requests/s | p50 ms | p95 ms | REST/direct p50 | direct/REST rps |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for op, r in results.items():
        for path in ("direct", "rest"):
            m = r[path]
            ratio = (f"{r['overhead']['p50_ratio']}x", f"{r['overhead']['rps_ratio']}x") if path == "rest" else ("", "")
            label = "psycopg (dna.%s)" % op if path == "direct" else (
                "REST POST /v1/search" if op == "search" else "REST GET /v1/memories/search")
            print(f"| {op} | {label} | {m['rps']} | {m['p50_ms']} | {m['p95_ms']} | {ratio[0]} | {ratio[1]} |")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
