"""Re-indexing a doc folder: a no-op run and a run after one edited file, beside the same runs without
the recorded digests (every input split again before it can tell nothing changed: the path before
revision 0021), in one run (issue 26 item 8).

Usage (a server with the folder indexed once, or it is indexed first and that run is reported too):

    python bench/reindex.py /tmp/dj/Django-5.1/docs --dsn "host=$DNA_HOME/pgdata dbname=dna user=postgres" \
        --scope django-onnx --embedder onnx --edit topics/cache.txt --out bench/results/reindex.json

Each step is one ``dna index DIR --scope S --embedder E --json`` subprocess (the CLI a user runs), timed
by wall clock and by the child's CPU (``resource.getrusage(RUSAGE_CHILDREN)``: the client; the server's
work is in the wall time), with the 1-minute load average before and after:

- ``no-op``: nothing changed since the last run;
- ``no-op, digests cleared``: the same after ``UPDATE dna.dna_document_sources SET digests = '{}'`` for the
  scope (every input split and sent, as before 0021; the run records the digests again);
- ``one edited file``: ``--edit`` (a path relative to DIR) with a line appended;
- ``one edited file, digests cleared``: the line removed again (the file back as it was) with the digests
  cleared first.

The folder is left as it was. Prints a table, writes JSON (``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
MARK = "\n\nA line appended by bench/reindex.py to measure a one-file re-index.\n"


def run_index(args, app_dsn: str) -> dict:
    """One ``dna index`` run: its JSON summary with wall seconds, client CPU seconds and the load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pydna.cli", "--dsn", app_dsn, "index", str(args.folder),
                           "--scope", args.scope, "--embedder", args.embedder, "--json", *args.extra],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"dna index failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    return {"wall_s": round(wall, 2), "client_cpu_s": round((after.ru_utime - before.ru_utime)
                                                             + (after.ru_stime - before.ru_stime), 2),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
            "inserted": summary["inserted"], "updated": summary["updated"], "unchanged": summary["unchanged"],
            "embedded_texts": summary["embedded_texts"], "passages": summary["passages"]}


def clear_digests(dsn: str, scope: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE dna.dna_document_sources SET digests = '{}'::jsonb WHERE scope = %s", (scope,))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--dsn", required=True, help="A superuser's DSN (the digests are cleared with it).")
    ap.add_argument("--app-dsn", help="The DSN `dna index` runs with (default --dsn).")
    ap.add_argument("--scope", default="reindex")
    ap.add_argument("--embedder", default="onnx")
    ap.add_argument("--edit", required=True, help="The file (relative to the folder) to edit.")
    ap.add_argument("--out", type=Path)
    ap.add_argument("extra", nargs="*", help="More `dna index` arguments (after --).")
    args = ap.parse_args()
    app = args.app_dsn or args.dsn
    edited = args.folder / args.edit
    original = edited.read_text(encoding="utf-8")
    rows: dict[str, dict] = {}
    with psycopg.connect(args.dsn) as conn:
        have = conn.execute("SELECT count(*) FROM dna.dna_document_sources WHERE scope = %s",
                            (args.scope,)).fetchone()[0]
    if not have:
        rows["first index"] = run_index(args, app)
    run_index(args, app)                                           # settle: digests recorded
    try:
        rows["no-op"] = run_index(args, app)
        clear_digests(args.dsn, args.scope)
        rows["no-op, digests cleared"] = run_index(args, app)
        edited.write_text(original + MARK, encoding="utf-8")
        rows["one edited file"] = run_index(args, app)
    finally:
        edited.write_text(original, encoding="utf-8")
    clear_digests(args.dsn, args.scope)
    rows["one edited file, digests cleared"] = run_index(args, app)
    print(f"{args.folder} · scope {args.scope} · embedder {args.embedder} · 2 CPUs ({os.cpu_count()})")
    print(f"{'run':<34} {'wall s':>8} {'client CPU s':>13} {'load':>11} {'upd':>4} {'unch':>5} {'embedded':>9}")
    for name, r in rows.items():
        print(f"{name:<34} {r['wall_s']:>8.2f} {r['client_cpu_s']:>13.2f} "
              f"{r['load_before']:>5.2f}→{r['load_after']:<5.2f} {r['updated']:>4} {r['unchanged']:>5} "
              f"{r['embedded_texts']:>9}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"folder": str(args.folder), "scope": args.scope, "embedder": args.embedder,
                                        "edit": args.edit, "runs": rows, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                               time.gmtime())},
                                       indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
