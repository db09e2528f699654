"""Batch writes: pre-embedded memories/s through ``dna.remember_many`` beside one ``dna.remember``
call per memory, in the same run and database.

A fresh database is migrated and N synthetic Engrams (bench/recall.py's generator; 384-d vectors of
the fake embedder, computed before the clock starts: pre-embedded) are written in rounds; each round
writes ``--round`` new memories by every path, in turn (the order alternates between rounds), each
path into its own scope, so that every path meets the same table and HNSW index sizes:

- ``one call per memory``: ``SELECT dna.remember(...)`` per memory, each its own transaction
  (autocommit), as an agent calling a door once per memory does;
- ``remember_many(B)``: ``SELECT dna.remember_many(...)`` with B memories per call (one transaction each);
- with ``--mcp``, the same through the MCP door (the real server, in-memory transport, the fake
  embedder embedding inside the door): the ``remember`` tool once per memory beside the
  ``remember_many`` tool with B memories per call.

Every write pays the HNSW insertion of its vector (pgvector inserts one vector at a time), which
bounds what any batch can save at the SQL level; the door adds its own per-call cost. Two more
measures of the same run say how much: ``--lexical`` adds both SQL paths without vectors (no HNSW
insertion: what batching saves of the rest), and ``--floor`` the search rows alone
(``dna.index_documents`` of B plain documents, with and without their vectors: the HNSW insertion's
own cost per vector).

Per path: wall seconds, memories/s, the server backend's CPU per memory (/proc/<pid>/schedstat, when
the server runs here) and the client's CPU; the speedup of each batch size over one call per memory
(target: >= 10x); the load average before and after.

Usage (from the repository root)::

    python bench/batch.py [--dsn DSN] [--memories 4000] [--round 500] [--batches 100,500] [--mcp]
                          [--lexical] [--floor] [--out bench/results/batch.json]

Without ``--dsn`` / ``DNA_DATABASE_URL`` the embedded server (``pydna.server``) is used. The database
``dna_bench_batch`` is dropped and recreated (the role needs CREATEDB).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall import fresh_database, synth_memories  # noqa: E402
from scale import BackendCpu  # noqa: E402

TARGET_SPEEDUP = 10.0
MODEL = "dna-fake-hash-v1"


def run(server_dsn: str, n: int, round_size: int, batches: list[int], mcp: bool = False, lexical: bool = False,
        floor: bool = False) -> dict:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from pydna.embeddings import FakeEmbeddingProvider

    emb = FakeEmbeddingProvider()
    dsn = fresh_database(server_dsn, "dna_bench_batch")
    paths = ["one call per memory"] + [f"remember_many({b})" for b in batches]
    if mcp:
        paths += ["MCP remember per memory"] + [f"MCP remember_many({b})" for b in batches]
    if lexical:
        paths += ["one call per memory, no vector", f"remember_many({batches[0]}), no vector"]
    if floor:
        paths += [f"index_documents({batches[0]}), vectors", f"index_documents({batches[0]}), no vector"]
    memories = {p: synth_memories(n, seed=17 + i) for i, p in enumerate(paths)}
    for i, p in enumerate(paths):   # distinct names per path (the seeds differ only in words)
        for m in memories[p]:
            m["name"] = f"{i}-{m['name']}"
    vectors = {p: [Vector([float(x) for x in v]) for v in emb.embed(
        [" ".join((m["spec"]["area"], m["spec"]["summary"], m["spec"]["body"])) for m in memories[p]])] for p in paths}
    totals = {p: {"seconds": 0.0, "backend_ns": 0, "client_ns": 0, "memories": 0} for p in paths}
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, %s)", (MODEL, emb.dims))
        cpu = BackendCpu(conn)
        for p in paths:   # warm-up: plans and caches of every path, outside the clock
            conn.execute("SELECT dna.remember(%s, %s, embedding => %s, model_id => %s)",
                         (f"warm-{len(p)}", Jsonb({"summary": "warm up"}), vectors[p][0], MODEL))
        conn.execute("SELECT dna.remember_many('warm-batch', %s, embeddings => %s, model_id => %s)",
                     (Jsonb([{"spec": {"summary": "warm up batch"}}]), [vectors[paths[0]][0]], MODEL))

        def one_per_call(p: str, lo: int, hi: int) -> None:
            bare = p.endswith("no vector")
            for m, v in zip(memories[p][lo:hi], vectors[p][lo:hi]):
                conn.execute("SELECT dna.remember(%s, %s, name => %s, embedding => %s, model_id => %s)",
                             ("one" + ("-bare" if bare else ""), Jsonb(m["spec"]), m["name"], None if bare else v,
                              MODEL)).fetchone()

        def batched(p: str, lo: int, hi: int, size: int) -> None:
            bare = p.endswith("no vector")
            for start in range(lo, hi, size):
                chunk = memories[p][start:min(hi, start + size)]
                out = conn.execute(
                    "SELECT dna.remember_many(%s, %s, embeddings => %s, model_id => %s) - 'results'",
                    (f"batch-{size}" + ("-bare" if bare else ""), Jsonb([{"spec": m["spec"], "name": m["name"]} for m in chunk]),
                     None if bare else vectors[p][start:start + len(chunk)], MODEL)).fetchone()[0]
                assert out["created"] == len(chunk), out

        def documents(p: str, lo: int, hi: int, size: int) -> None:
            bare = p.endswith("no vector")
            for start in range(lo, hi, size):
                chunk = memories[p][start:min(hi, start + size)]
                conn.execute("SELECT count(*) FROM dna.index_documents(%s, %s, %s, %s, %s, %s)",
                             ("docs" + ("-bare" if bare else ""), ["Doc"] * len(chunk), [m["name"] for m in chunk],
                              [" ".join((m["spec"]["area"], m["spec"]["summary"], m["spec"]["body"])) for m in chunk],
                              None if bare else vectors[p][start:start + len(chunk)], MODEL)).fetchone()

        door = door_cpu = None
        if mcp:
            door = McpDoor(dsn, emb)
            door_cpu = BackendCpu(door.door.connection())   # the door's own connection runs its SQL

        load_start = os.getloadavg()
        for r, lo in enumerate(range(0, n, round_size)):
            hi = min(n, lo + round_size)
            order = paths if r % 2 == 0 else list(reversed(paths))
            for p in order:
                backend = door_cpu if p.startswith("MCP ") else cpu
                c0, w0, p0 = backend.read(), time.perf_counter(), time.process_time_ns()
                if p == paths[0] or p == "one call per memory, no vector":
                    one_per_call(p, lo, hi)
                elif p.startswith("index_documents("):
                    documents(p, lo, hi, int(p.split("(")[1].split(")")[0]))
                elif p == "MCP remember per memory":
                    door.one_per_call(memories[p][lo:hi])
                elif p.startswith("MCP "):
                    door.batched(memories[p][lo:hi], int(p.split("(")[1].rstrip(")")))
                else:
                    batched(p, lo, hi, int(p.split("(")[1].split(")")[0]))
                t = totals[p]
                t["seconds"] += time.perf_counter() - w0
                t["client_ns"] += time.process_time_ns() - p0
                c1 = backend.read()
                t["backend_ns"] += (c1 - c0) if c0 is not None and c1 is not None else 0
                t["memories"] += hi - lo
            print(f"round {r + 1}: {hi} memories per path", file=sys.stderr)
        load_end = os.getloadavg()
        if door is not None:
            door.close()
        counts = dict(conn.execute("SELECT scope, count(*) FROM dna.dna_instances GROUP BY scope").fetchall())
    rows = []
    for p in paths:
        t = totals[p]
        rate = t["memories"] / t["seconds"]
        # each path beside its own one call per memory: the MCP door's, the lexical one's, the first (floor rows)
        peer = ("MCP remember per memory" if p.startswith("MCP ") else
                "one call per memory, no vector" if p.endswith("no vector") and not p.startswith("index_") else paths[0])
        base = totals[peer]["memories"] / totals[peer]["seconds"]
        rows.append({"path": p, "memories": t["memories"], "seconds": round(t["seconds"], 2),
                     "memories_per_s": round(rate, 1),
                     "backend_cpu_ms_per_memory": round(t["backend_ns"] / 1e6 / t["memories"], 3) if cpu.path else None,
                     "client_cpu_ms_per_memory": round(t["client_ns"] / 1e6 / t["memories"], 3),
                     "speedup": round(rate / base, 2)})
    return {"rows": rows, "counts": counts, "load_start": [round(x, 2) for x in load_start],
            "load_end": [round(x, 2) for x in load_end], "dims": emb.dims, "model_id": MODEL}


class McpDoor:
    """The MCP door in this process (``pydna.doors.mcp_server``, in-memory transport), driven by the
    SDK's client, one tool call at a time; each round opens a client session (a few ms, inside the
    clock: small beside the round's calls)."""

    def __init__(self, dsn: str, embedder):
        from pydna.doors.mcp_server import create_server

        self.server, self.door = create_server(dsn, embedder, scope="mcp")

    def _calls(self, calls: list[tuple[str, dict]]) -> list[dict]:
        import anyio
        from mcp import Client

        async def main():
            out = []
            async with Client(self.server) as client:
                for tool, args in calls:
                    result = await client.call_tool(tool, args)
                    if result.is_error:
                        raise RuntimeError(result.content[0].text)
                    out.append(result.structured_content)
            return out
        return anyio.run(main)

    def one_per_call(self, memories: list[dict]) -> None:
        self._calls([("remember", {**m["spec"], "name": "mcp-" + m["name"]}) for m in memories])

    def batched(self, memories: list[dict], size: int) -> None:
        chunks = [memories[i:i + size] for i in range(0, len(memories), size)]
        outs = self._calls([("remember_many", {"items": [{**m["spec"], "name": "mcp-" + m["name"]} for m in chunk]})
                            for chunk in chunks])
        assert all(o["created"] == len(c) for o, c in zip(outs, chunks)), outs

    def close(self) -> None:
        self.door.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--memories", type=int, default=4000)
    ap.add_argument("--round", type=int, default=500)
    ap.add_argument("--batches", default="100,500")
    ap.add_argument("--mcp", action="store_true", help="also through the MCP door (remember vs remember_many tools)")
    ap.add_argument("--lexical", action="store_true", help="also both SQL paths without vectors (no HNSW insertion)")
    ap.add_argument("--floor", action="store_true", help="also the search rows alone, with and without vectors")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "batch.json"))
    args = ap.parse_args(argv)
    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start()
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    result = run(server_dsn, args.memories, args.round, batches, mcp=args.mcp, lexical=args.lexical, floor=args.floor)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Pre-embedded memories/s, {args.memories:,} per path in rounds of {args.round} "
                        f"({result['dims']}-d; target: batch >= {TARGET_SPEEDUP:g}x one call per memory; MCP rows "
                        f"against the MCP remember tool)")
    for col in ("path", "memories", "seconds", "memories/s", "backend CPU ms/memory", "client CPU ms/memory", "speedup"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for r in result["rows"]:
        table.add_row(r["path"], f"{r['memories']:,}", f"{r['seconds']:.2f}", f"{r['memories_per_s']:,.1f}",
                      "–" if r["backend_cpu_ms_per_memory"] is None else f"{r['backend_cpu_ms_per_memory']:.3f}",
                      f"{r['client_cpu_ms_per_memory']:.3f}", f"{r['speedup']:.2f}x")
    console = Console()
    console.print(table)
    console.print(f"load average (1, 5, 15 min): start {', '.join(f'{x:.2f}' for x in result['load_start'])}; "
                  f"end {', '.join(f'{x:.2f}' for x in result['load_end'])} on {os.cpu_count()} CPUs")
    payload = {"benchmark": "batch", "target_speedup": TARGET_SPEEDUP, "memories": args.memories,
               "round": args.round, "batches": batches, **result,
               "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
               "command": "python bench/batch.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
