"""Concurrent writers on shared documents: deadlocks, serialization failures, lost writes.

Usage (from the repository root)::

    python bench/concurrency.py [--seconds 300] [--writers 8] [--keys 40] [--dsn DSN]
                                [--out bench/results/concurrency.json]

``--writers`` threads, each with its own psycopg connection (autocommit off, READ COMMITTED), write
``--keys`` documents of one scope that they all share, so their rows collide, for ``--seconds``:

- **multi**: one transaction of 2-6 documents in (kind, name) order, split into 1-3 statements, each
  either several ``dna.index_document`` calls or one ``dna.index_documents`` batch;
- **batch**: one ``dna.index_documents`` call of 3-12 documents in random order (the server picks the
  order it locks rows in);
- **single**: one ``dna.index_document``;
- **delete**: one ``dna.delete_document``.

Every write carries a body no other write has (the writer, a counter and words of a small
vocabulary), embedded by ``dna.fake_embed``. Besides them one thread runs ``dna.bm25_compact`` over
the scope again and again (each call its own transaction) and one reads ``dna.bm25``.

Afterwards every document must hold the text of its last acknowledged write (gone if that was a
delete): per document, writes are ordered by the row lock, so a write whose COMMIT started after
another's COMMIT returned is the later one; the stored text must be one of the acknowledged writes
that no other acknowledged write of that document certainly followed ("lost writes" counts the
documents where it is not), and ``dna.bm25`` must answer as ``dna.bm25(..., exact => true)`` for
every word of the vocabulary. Without ``--dsn`` an embedded PostgreSQL is started in a temporary
folder (bench/beir.py) and removed afterwards.

Prints a table (commits/s, deadlocks 40P01, serialization failures 40001, other errors, lost writes,
compactions, load average) and writes the same as JSON to ``--out``. ``tests/test_concurrent_writers.py``
runs :func:`run` for 20 seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
SCOPE = "concurrency"
KIND = "Doc"
MODEL = "dna-fake-hash-v1"
VOCABULARY = ("lattice", "harbor", "quartz", "meadow", "cobalt", "ember", "glacier", "orchid", "signal",
              "tundra", "velvet", "willow", "zephyr", "anchor", "basalt", "canyon")
#: SQLSTATE → what the run counts it as; anything else is an error the run reports in full.
COUNTED = {"40P01": "deadlocks", "40001": "serialization_failures"}

_INDEX_ONE = ("SELECT dna.index_document(%s, %s, %s, %s, dna.fake_embed(%s), %s)")
_INDEX_MANY = ("SELECT ord, action FROM dna.index_documents(%s, %s, %s, %s, "
               "ARRAY(SELECT dna.fake_embed(b) FROM unnest(%s::text[]) WITH ORDINALITY AS u(b, o) ORDER BY o), %s)")
_DELETE = "SELECT dna.delete_document(%s, %s, %s)"


@dataclass
class Write:
    """One acknowledged write of one document: its body (None: a delete that removed the row) and
    the ``time.monotonic()`` span of its COMMIT."""

    name: str
    body: str | None
    commit_start: float
    commit_end: float


@dataclass
class ThreadStats:
    commits: int = 0
    writes: int = 0  # documents written by committed transactions
    ops: Counter = field(default_factory=Counter)  # committed transactions by kind (multi, batch, single, delete)
    rollbacks: Counter = field(default_factory=Counter)  # counted SQLSTATE name → count
    errors: list[str] = field(default_factory=list)  # anything else, in full
    log: list[Write] = field(default_factory=list)
    busy: int = 0  # compactor: partitions reported busy (their lock stayed taken)
    lock_waits: int = 0  # reader: samples in which some backend of the database waited for a lock


def key_names(keys: int) -> list[str]:
    return [f"doc-{i:03d}" for i in range(keys)]


def _body(rng: random.Random, tag: str) -> str:
    words = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(3, 12)))
    return f"{words} token{tag}"


def _describe(exc: psycopg.Error) -> str:
    return f"{exc.sqlstate} {type(exc).__name__}: {str(exc).strip()}"


def _writer(dsn: str, wid: int, names: list[str], stop_at: float, seed: int, stats: ThreadStats) -> None:
    rng = random.Random(seed)
    counter = 0
    with psycopg.connect(dsn, autocommit=False) as conn:
        while time.monotonic() < stop_at:
            op = rng.choices(("multi", "batch", "single", "delete"), weights=(3, 3, 3, 1))[0]
            pending: list[tuple[str, str | None]] = []

            def body() -> str:
                nonlocal counter
                counter += 1
                return _body(rng, f"w{wid}n{counter}")

            try:
                if op == "multi":
                    chosen = sorted(rng.sample(names, rng.randint(2, 6)))
                    cuts = sorted(rng.sample(range(1, len(chosen)), min(len(chosen) - 1, rng.randint(0, 2))))
                    for part in (chosen[a:b] for a, b in zip([0, *cuts], [*cuts, len(chosen)])):
                        bodies = [body() for _ in part]
                        if rng.random() < 0.5:
                            for name, text in zip(part, bodies):
                                conn.execute(_INDEX_ONE, (SCOPE, KIND, name, text, text, MODEL))
                        else:
                            conn.execute(_INDEX_MANY, (SCOPE, [KIND] * len(part), part, bodies, bodies, MODEL))
                        pending += zip(part, bodies)
                elif op == "batch":
                    chosen = rng.sample(names, rng.randint(3, 12))  # random order
                    bodies = [body() for _ in chosen]
                    conn.execute(_INDEX_MANY, (SCOPE, [KIND] * len(chosen), chosen, bodies, bodies, MODEL))
                    pending += zip(chosen, bodies)
                elif op == "single":
                    name, text = rng.choice(names), body()
                    conn.execute(_INDEX_ONE, (SCOPE, KIND, name, text, text, MODEL))
                    pending.append((name, text))
                else:
                    name = rng.choice(names)
                    if conn.execute(_DELETE, (SCOPE, KIND, name)).fetchone()[0] > 0:
                        pending.append((name, None))  # a delete of nothing took no lock: it orders nothing
                t0 = time.monotonic()
                conn.commit()
                t1 = time.monotonic()
            except psycopg.Error as exc:
                conn.rollback()
                if exc.sqlstate in COUNTED:
                    stats.rollbacks[COUNTED[exc.sqlstate]] += 1
                else:
                    stats.errors.append(_describe(exc))
                continue
            stats.commits += 1
            stats.ops[op] += 1
            stats.writes += len(pending)
            stats.log += [Write(name, text, t0, t1) for name, text in pending]


def _compactor(dsn: str, stop_at: float, stats: ThreadStats) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < stop_at:
            try:
                report = conn.execute("SELECT dna.bm25_compact(%s)", (SCOPE,)).fetchone()[0]
                stats.commits += 1
                stats.busy += sum(p["status"] == "busy" for p in report["partitions"])
            except psycopg.Error as exc:
                if exc.sqlstate in COUNTED:
                    stats.rollbacks[COUNTED[exc.sqlstate]] += 1
                else:
                    stats.errors.append(_describe(exc))
            time.sleep(0.2)


def _reader(dsn: str, stop_at: float, seed: int, stats: ThreadStats) -> None:
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < stop_at:
            query = " ".join(rng.sample(VOCABULARY, 2))
            try:
                conn.execute("SELECT count(*) FROM dna.bm25(%s, %s, %s, k => 10)", (SCOPE, query, MODEL)).fetchone()
                stats.commits += 1
                waiting = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                       "AND wait_event_type = 'Lock'").fetchone()[0]
                stats.lock_waits += waiting > 0
            except psycopg.Error as exc:
                stats.errors.append(_describe(exc))
            time.sleep(0.05)


def lost_writes(log: list[Write], final: dict[str, str]) -> list[dict]:
    """The documents whose stored body (``final``: name → body; absent = deleted) is not one their
    last acknowledged write could have left. ``log`` holds every acknowledged write, seeding included."""
    by_name: dict[str, list[Write]] = {}
    for w in log:
        by_name.setdefault(w.name, []).append(w)
    lost = []
    for name in sorted(set(by_name) | set(final)):
        writes = by_name.get(name, [])
        latest_start = max((w.commit_start for w in writes), default=float("-inf"))
        allowed = {w.body for w in writes if w.commit_end >= latest_start} if writes else {None}
        if final.get(name) not in allowed:
            lost.append({"name": name, "stored": final.get(name), "allowed": sorted(allowed, key=str)})
    return lost


def bm25_mismatches(conn, k: int = 50) -> list[dict]:
    """The vocabulary words for which dna.bm25 and dna.bm25(..., exact => true) answer differently."""
    sql = ("SELECT kind, name, tenant, round(score::numeric, 9) FROM dna.bm25(%s, %s, %s, k => %s, exact => %s)")
    bad = []
    for word in VOCABULARY:
        fast = conn.execute(sql, (SCOPE, word, MODEL, k, False)).fetchall()
        exact = conn.execute(sql, (SCOPE, word, MODEL, k, True)).fetchall()
        if fast != exact:
            bad.append({"query": word, "bm25": fast[:5], "exact": exact[:5]})
    return bad


def run(dsn: str, seconds: float = 300, writers: int = 8, keys: int = 40, seed: int = 7) -> dict:
    """Run the workload on the migrated database ``dsn`` for ``seconds`` and check it. Returns a dict:
    ``commits``, ``commits_per_s``, ``commits_by_kind`` (multi, batch, single, delete), ``documents_written``, ``deadlocks``, ``serialization_failures``,
    ``errors`` (list of "SQLSTATE class: message"), ``lost_writes`` (list, see ``lost_writes``),
    ``bm25_mismatches`` (list), ``compactions``, ``compactions_busy`` (partitions reported busy),
    ``reads``, ``lock_wait_samples`` (reads after which some backend was waiting for a lock: the
    writers did collide), ``load_average`` (1-minute, start/end)."""
    names = key_names(keys)
    log: list[Write] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        rng = random.Random(seed)
        bodies = [_body(rng, f"seed{i}") for i in range(keys)]
        t0 = time.monotonic()
        conn.execute(_INDEX_MANY, (SCOPE, [KIND] * keys, names, bodies, bodies, MODEL))
        log += [Write(n, b, t0, time.monotonic()) for n, b in zip(names, bodies)]
    load_start = os.getloadavg()[0]
    start = time.monotonic()
    stop_at = start + seconds
    writer_stats = [ThreadStats() for _ in range(writers)]
    compactor, reader = ThreadStats(), ThreadStats()
    threads = [threading.Thread(target=_writer, args=(dsn, i, names, stop_at, seed * 1000 + i, s), daemon=True)
               for i, s in enumerate(writer_stats)]
    threads += [threading.Thread(target=_compactor, args=(dsn, stop_at, compactor), daemon=True),
                threading.Thread(target=_reader, args=(dsn, stop_at, seed, reader), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    load_end = os.getloadavg()[0]
    for s in writer_stats:
        log += s.log
    with psycopg.connect(dsn, autocommit=True) as conn:
        final = dict(conn.execute("SELECT name, body FROM dna.dna_search_docs_384 WHERE scope = %s AND model_id = %s",
                                  (SCOPE, MODEL)).fetchall())
        mismatches = bm25_mismatches(conn)
    rollbacks = sum((s.rollbacks for s in [*writer_stats, compactor]), Counter())
    commits = sum(s.commits for s in writer_stats)
    return {
        "seconds": round(elapsed, 1), "writers": writers, "keys": keys,
        "commits": commits, "commits_per_s": round(commits / elapsed, 1),
        "commits_by_kind": dict(sum((s.ops for s in writer_stats), Counter())),
        "documents_written": sum(s.writes for s in writer_stats),
        "deadlocks": rollbacks["deadlocks"], "serialization_failures": rollbacks["serialization_failures"],
        "errors": [e for s in [*writer_stats, compactor, reader] for e in s.errors],
        "lost_writes": lost_writes(log, final), "bm25_mismatches": mismatches,
        "compactions": compactor.commits, "compactions_busy": compactor.busy, "reads": reader.commits,
        "lock_wait_samples": reader.lock_waits,
        "load_average": {"start": round(load_start, 2), "end": round(load_end, 2)},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--keys", type=int, default=40, help="documents shared by all writers")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "concurrency.json"))
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    sys.path.insert(0, str(REPO / "bench"))
    import beir  # setup_database: an embedded server in a temporary folder unless --dsn

    console = Console(highlight=False)
    dsn, cleanup = beir.setup_database(args, console)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]
        console.print(f"{args.writers} writers + compactor + reader on {args.keys} shared documents, "
                      f"{args.seconds:g} s, {os.cpu_count()} CPUs")
        result = run(dsn, args.seconds, args.writers, args.keys, args.seed)
    finally:
        cleanup()
    result["environment"] = {"postgresql": server, "python": platform.python_version(), "cpus": os.cpu_count(),
                             "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    table = Table(title="concurrent writers", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    by_kind = result["commits_by_kind"]
    for metric, value in (
            ("seconds", result["seconds"]), ("writers / shared documents", f"{args.writers} / {args.keys}"),
            ("commits/s", result["commits_per_s"]),
            ("commits (multi · batch · single · delete)",
             f"{result['commits']} ({' · '.join(str(by_kind.get(k, 0)) for k in ('multi', 'batch', 'single', 'delete'))})"),
            ("documents written", result["documents_written"]), ("deadlocks (40P01)", result["deadlocks"]),
            ("serialization failures (40001)", result["serialization_failures"]),
            ("other errors", len(result["errors"])), ("lost writes", len(result["lost_writes"])),
            ("dna.bm25 ≠ exact", len(result["bm25_mismatches"])), ("compactions (partitions busy)", f"{result['compactions']} ({result['compactions_busy']})"),
            ("bm25 reads (of them, lock waits seen)", f"{result['reads']} ({result['lock_wait_samples']})"),
            ("load average, 1 min (start → end)", f"{result['load_average']['start']} → {result['load_average']['end']}")):
        table.add_row(metric, str(value))
    console.print(table)
    for error in result["errors"][:10]:
        console.print(f"[red]error[/]: {error}", soft_wrap=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("lost_writes", "bm25_mismatches", "errors")}
                     | {"errors": len(result["errors"]), "lost_writes": len(result["lost_writes"]),
                        "bm25_mismatches": len(result["bm25_mismatches"])}))
    console.print(f"wrote {out}")
    ok = not (result["deadlocks"] or result["errors"] or result["lost_writes"] or result["bm25_mismatches"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
