"""Single-node cost of revision 0018_citus_ready (issue 16): before (0017) / after (0018) / before again.

One database, migrated to 0017_recall_past_ingest and loaded once: scope ``base5k`` holds 5,000 base
memories (written by the superuser), scope ``pers10k`` 10,000 personal memories of one application
role (a real LOGIN role granted with dna.grant_app_role, mapped to an identity). Every timed call runs
as that role, so row-level security applies: the policy form is part of what is measured (0017: the
InitPlan ``(SELECT dna.visible_tenants())``; 0018: ``tenant = '' OR dna.tenant_visible(tenant,
dna.visible_tenants())``, no sublink). The hot paths: dna.search lexical and hybrid and dna.recall
(reconsolidate off, fixed now) on the base scope; recall and search of the personal scope as its owner.
Then it upgrades to 0018, times again, downgrades to 0017 and times a third time (drift control), and
checks that each answer is the same in all three rounds. Prints a table of medians (ms) with the load
average. Usage::

    python bench/citus_ready.py --dsn postgresql://postgres@/postgres?host=... [--reps 3] [--queries 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pydna import migrate  # noqa: E402

ROLE, PASSWORD = "dna_bench_citus", "dna-bench-citus"
NOW = "2026-12-01 12:00:00+00"
WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud "
         "garden engine signal harbor meadow lantern copper violet ember quartz falcon").split()


def memory_text(i: int) -> str:
    return " ".join(WORDS[(i * k + k * k) % len(WORDS)] for k in range(1, 9)) + f" note {i}"


CALLS = {
    "search lexical (base5k)": "SELECT array_agg(name || ':' || score ORDER BY score DESC, name) FROM dna.search('base5k', %(q)s)",
    "search hybrid (base5k)": "SELECT array_agg(name || ':' || score ORDER BY score DESC, name) FROM dna.search('base5k', %(q)s, dna.fake_embed(%(q)s))",
    "recall (base5k)": "SELECT dna.recall('base5k', %(q)s, dna.fake_embed(%(q)s), reconsolidate => false, "
                       "now => %(now)s) -> 'hits'",
    "search lexical personal (pers10k)": "SELECT array_agg(name || ':' || score ORDER BY score DESC, name) FROM dna.search('pers10k', %(q)s, personal => true)",
    "search hybrid personal (pers10k)": "SELECT array_agg(name || ':' || score ORDER BY score DESC, name) FROM dna.search('pers10k', %(q)s, dna.fake_embed(%(q)s), "
                                        "personal => true)",
    "recall personal (pers10k)": "SELECT dna.recall('pers10k', %(q)s, dna.fake_embed(%(q)s), personal => true, "
                                 "reconsolidate => false, now => %(now)s) -> 'hits'",
}


def load(admin_dsn: str, app_dsn: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))
        conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'bench-oid')", (ROLE,))
        conn.execute("SELECT count(dna.remember('base5k', jsonb_build_object('summary', t), name => 'b' || g, "
                     "embedding => dna.fake_embed(t), now => %s)) "
                     "FROM generate_series(1, 5000) AS g, LATERAL (SELECT %s::text[] AS w) AS x, "
                     "LATERAL (SELECT array_to_string(ARRAY(SELECT x.w[1 + (g * k + k * k) %% %s] "
                     "FROM generate_series(1, 8) AS k), ' ') || ' note ' || g AS t) AS y",
                     (NOW, list(WORDS), len(WORDS)))
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        conn.execute("SELECT count(dna.remember('pers10k', jsonb_build_object('summary', t), name => 'p' || g, "
                     "personal => true, embedding => dna.fake_embed(t), now => %s)) "
                     "FROM generate_series(1, 10000) AS g, LATERAL (SELECT %s::text[] AS w) AS x, "
                     "LATERAL (SELECT array_to_string(ARRAY(SELECT x.w[1 + (g * k + k * k) %% %s] "
                     "FROM generate_series(1, 8) AS k), ' ') || ' note ' || g AS t) AS y",
                     (NOW, list(WORDS), len(WORDS)))


def run_round(app_dsn: str, queries: list[str], reps: int, calls: dict) -> tuple[dict, dict]:
    times: dict[str, list[float]] = {name: [] for name in calls}
    answers: dict[tuple, object] = {}
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        for name, sql in calls.items():                                   # warm-up
            conn.execute(sql, {"q": queries[0], "now": NOW}).fetchone()
        for _ in range(reps):
            for name, sql in calls.items():
                for q in queries:
                    t0 = time.perf_counter()
                    row = conn.execute(sql, {"q": q, "now": NOW}).fetchone()[0]
                    times[name].append((time.perf_counter() - t0) * 1000)
                    answers[(name, q)] = row
    return {n: statistics.median(v) for n, v in times.items()}, answers


def revision(admin_dsn: str) -> str:
    with psycopg.connect(admin_dsn) as conn:
        return conn.execute("SELECT version_num FROM public.dna_alembic_version").fetchone()[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True, help="a superuser DSN; a database dna_bench_citus is (re)created")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--reuse", action="store_true", help="the database of an earlier run (kept with --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the database and the role for --reuse")
    ap.add_argument("--superuser", action="store_true",
                    help="time as the superuser (no row-level security: the statements' shapes alone)")
    args = ap.parse_args()
    params = conninfo_to_dict(args.dsn)
    admin = make_conninfo(**{**params, "dbname": "dna_bench_citus"})
    app = make_conninfo(**{**params, "dbname": "dna_bench_citus", "user": ROLE, "password": PASSWORD})
    if not args.reuse:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS dna_bench_citus")
            conn.execute("CREATE DATABASE dna_bench_citus")
            conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
            conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
        migrate.upgrade(admin, "0017_recall_past_ingest")
        t0 = time.perf_counter()
        load(admin, app)
        print(f"loaded 5,000 base + 10,000 personal memories in {time.perf_counter() - t0:.0f} s", flush=True)
    else:
        migrate.downgrade(admin, "0017_recall_past_ingest")
    queries = [memory_text(i * 37 + 5).split(" note ")[0].split()[i % 4:i % 4 + 3] for i in range(args.queries)]
    queries = [" ".join(q) for q in queries]
    # the superuser has no identity: the base scope's calls only
    calls = {n: q for n, q in CALLS.items() if not (args.superuser and "personal" in n)}
    rounds = []
    for step in ("before", "after", "before again"):
        if step == "after":
            migrate.upgrade(admin, "head")
        elif step == "before again":
            migrate.downgrade(admin, "0017_recall_past_ingest")
        load1 = os.getloadavg()[0]
        medians, answers = run_round(admin if args.superuser else app, queries, args.reps, calls)
        rounds.append((step, revision(admin), medians, answers, load1, os.getloadavg()[0]))
        print(f"round {step} ({rounds[-1][1]}) done", flush=True)
    same = all(r[3] == rounds[0][3] for r in rounds[1:])
    who = "the superuser (no RLS)" if args.superuser else "a non-superuser role (RLS on)"
    print(f"\n{args.queries} queries x {args.reps} reps, median ms per call, as {who}")
    print(f"| call | {' | '.join(f'{r[0]} ({r[1][:4]})' for r in rounds)} | after / before |")
    print("|---|" + "---|" * (len(rounds) + 1))
    for name in calls:
        base = (rounds[0][2][name] + rounds[2][2][name]) / 2
        print(f"| {name} | {' | '.join(f'{r[2][name]:.2f}' for r in rounds)} | {rounds[1][2][name] / base:.3f} |")
    print(f"| load average (1 min, start-end) | {' | '.join(f'{r[4]:.2f}-{r[5]:.2f}' for r in rounds)} | |")
    print(f"\nanswers identical in all rounds: {same}")
    if not args.keep:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS dna_bench_citus")
            conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


if __name__ == "__main__":
    main()
