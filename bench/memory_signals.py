"""Restated facts: does ``dna.recall`` beat ``dna.search`` where the memory signals carry information?

LoCoMo (``bench/locomo.py``) is a conversation's record: every turn is as likely to be asked about,
none was recalled before, none carries an affect — the memory signals say nothing there, and
recall must answer as well as ``dna.search``. This probe is the other case: an agent's notebook in
which facts change. Construction (fixed before the first run; nothing here is tuned on):

- 8 people × 6 attributes = 48 slots; each slot has a stale and a current value (two distinct
  values of the attribute's list, seeded ``random.Random(15)``), each remembered as one Engram
  ``"<person>: <template with attribute and value>"``, the template drawn independently for the
  stale and the current statement from one pool (so neither wording favours either);
- world time, days after 2026-03-01: the stale statement is written on day U(0, 10), the current
  one on day U(30, 40); every question ``"What is <person>'s <attribute>?"`` is asked read-only
  with k = 10 on day 50 (default stability 15 days: ages of 10–50 days are where the forgetting
  curve discriminates, before the 0.05 floor);
- three scopes, the same statements and vectors, differing only in how the agent used them:
  ``never recalled`` (no recall before the questions), ``used, then restated`` (one reconsolidating
  ``dna.recall`` of the slot's question, k = 5, on stale + U(3, 10) days — before the current value
  existed) and ``used after restating`` (that recall, and a second one on current + U(2, 6) days);
- systems, called once per question, interleaved: ``search`` (``dna.search`` over the Engrams,
  valid_time = day 50), ``recall`` (default decay ``surfaced``), ``recall decay=written`` and
  ``recall decay=off``;
- scores per scope and system: current@1 (the current statement is the first hit), stale above
  current (the stale statement ranks above the current one, or the current one is not in the top
  10), MRR@10 of the current statement.

ONNX all-MiniLM-L6-v2 int8 (``w8a8``) through ``bench/embcache.py``. Usage (repository root)::

    .venv/bin/python bench/memory_signals.py [--dsn DSN] [--home /tmp/pydna-signals]
        [--out bench/results/memory_signals.json]

Prints a table per scope (systems side by side), p50/p95 per call and the load average; writes JSON.
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

DATABASE = "dna_bench_memory_signals"
K = 10
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
ASKED = T0 + timedelta(days=50)
PEOPLE = ["Maria", "Tom", "Aisha", "Kenji", "Lucia", "Omar", "Greta", "Ravi"]
ATTRIBUTES = {
    "gym": ["Iron Temple", "FitHub", "Riverside Fitness", "Pulse Studio", "Core Club", "Summit Gym"],
    "favourite coffee shop": ["Blue Door", "Copper Kettle", "Bean There", "Morning Ritual", "The Daily Grind",
                              "Little Owl"],
    "car": ["a red Honda Civic", "a grey Tesla Model 3", "a blue Volvo estate", "a white Fiat 500",
            "a green Subaru Outback", "a black Ford Focus"],
    "dentist": ["Dr. Alvarez", "Dr. Brennan", "Dr. Chowdhury", "Dr. Dubois", "Dr. Eriksen", "Dr. Fujita"],
    "team at work": ["the payments team", "the search team", "the mobile team", "the data platform team",
                     "the security team", "the billing team"],
    "street": ["Elm Street", "Harbour Road", "Linden Avenue", "Mill Lane", "Station Street", "Chestnut Close"],
}
TEMPLATES = ["My {a} is {v}.", "Just so you know, my {a} is {v}.", "For the record, my {a} is {v}.",
             "Quick note: my {a} is {v}.", "By the way, my {a} is {v}."]
SCOPES = {"never recalled": "signals-never", "used, then restated": "signals-used-stale",
          "used after restating": "signals-used-both"}
SYSTEMS = {
    "search": ("SELECT coalesce(jsonb_agg(s.name ORDER BY s.score DESC, s.kind, s.name, s.tenant), '[]') "
               "FROM dna.search(%(scope)s, %(q)s, %(vec)s, %(model)s, k => 10, kinds => '{Engram}', "
               "valid_time => %(now)s) AS s"),
    "recall": ("SELECT jsonb_path_query_array(dna.recall(%(scope)s, %(q)s, %(vec)s, %(model)s, kinds => '{Engram}', "
               "k => 10, reconsolidate => false, now => %(now)s), '$.hits[*].name')"),
    "recall decay=written": ("SELECT jsonb_path_query_array(dna.recall(%(scope)s, %(q)s, %(vec)s, %(model)s, "
                             "kinds => '{Engram}', k => 10, reconsolidate => false, now => %(now)s, "
                             "decay => 'written'), '$.hits[*].name')"),
    "recall decay=off": ("SELECT jsonb_path_query_array(dna.recall(%(scope)s, %(q)s, %(vec)s, %(model)s, "
                         "kinds => '{Engram}', k => 10, reconsolidate => false, now => %(now)s, decay => 'off'), "
                         "'$.hits[*].name')"),
}


def build(seed: int = 15) -> list[dict]:
    """The 48 slots: stale and current statements with their write days, the agent's recall days."""
    rng = random.Random(seed)
    slots = []
    for p in PEOPLE:
        for a, values in ATTRIBUTES.items():
            stale, current = rng.sample(values, 2)
            key = f"{p.lower()}-{a.replace(' ', '-')}"
            d_stale = rng.uniform(0, 10)
            d_current = rng.uniform(30, 40)
            slots.append({
                "slot": key, "question": f"What is {p}'s {a}?",
                "stale": {"name": f"{key}-stale", "text": f"{p}: " + rng.choice(TEMPLATES).format(a=a, v=stale),
                          "at": T0 + timedelta(days=d_stale)},
                "current": {"name": f"{key}-current", "text": f"{p}: " + rng.choice(TEMPLATES).format(a=a, v=current),
                            "at": T0 + timedelta(days=d_current)},
                "used_stale_at": T0 + timedelta(days=d_stale + rng.uniform(3, 10)),
                "used_current_at": T0 + timedelta(days=d_current + rng.uniform(2, 6)),
            })
    return slots


def load(dsn: str, slots: list[dict], emb) -> None:
    """Every scope's statements in world-time order, with the agent's reconsolidating recalls."""
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    texts = [s[w]["text"] for s in slots for w in ("stale", "current")]
    vecs = dict(zip(texts, (Vector([float(x) for x in v]) for v in emb.embed(texts))))
    qvecs = dict(zip([s["question"] for s in slots],
                     (Vector([float(x) for x in v]) for v in emb.embed([s["question"] for s in slots]))))
    emb.flush()
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, %s)", (emb.model_id, emb.dims))
        for label, scope in SCOPES.items():
            events = []
            for s in slots:
                for w in ("stale", "current"):
                    events.append((s[w]["at"], "write", s[w], None))
                if label != "never recalled":
                    events.append((s["used_stale_at"], "recall", s, None))
                if label == "used after restating":
                    events.append((s["used_current_at"], "recall", s, None))
            for at, what, item, _ in sorted(events, key=lambda e: e[0]):
                if what == "write":
                    conn.execute("SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => %s, model_id => %s)",
                                 (scope, Jsonb({"summary": item["text"]}), item["name"], at, vecs[item["text"]],
                                  emb.model_id))
                else:                                    # the agent's own recall: reconsolidates what it surfaced
                    conn.execute("SELECT dna.recall(%s, %s, %s, %s, kinds => '{Engram}', k => 5, now => %s, "
                                 "actor => 'agent')", (scope, item["question"], qvecs[item["question"]],
                                                       emb.model_id, at))
        conn.execute(f"VACUUM ANALYZE dna.dna_search_docs_{emb.dims}")
        conn.execute("VACUUM ANALYZE dna.dna_instances")


def run(dsn: str, slots: list[dict], emb) -> dict:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    qv = [Vector([float(x) for x in v]) for v in emb.embed([s["question"] for s in slots])]
    ranks: dict[str, dict[str, list[tuple[int | None, int | None]]]] = {lab: {n: [] for n in SYSTEMS} for lab in SCOPES}
    times: dict[str, list[float]] = {n: [] for n in SYSTEMS}
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        for i, (s, vec) in enumerate(zip(slots, qv)):
            for j, (label, scope) in enumerate(SCOPES.items()):
                params = {"scope": scope, "q": s["question"], "vec": vec, "model": emb.model_id, "now": ASKED}
                order = list(SYSTEMS.items())
                if (i + j) % 2:
                    order.reverse()                       # no system always runs first
                for name, sql in order:
                    t0 = time.perf_counter()
                    got = conn.execute(sql, params).fetchone()[0]
                    times[name].append((time.perf_counter() - t0) * 1000)
                    pos = {n: r for r, n in enumerate(got, start=1)}
                    ranks[label][name].append((pos.get(s["current"]["name"]), pos.get(s["stale"]["name"])))
    load_after = os.getloadavg()
    table = {}
    for label in SCOPES:
        table[label] = {}
        for name in SYSTEMS:
            rows = ranks[label][name]
            table[label][name] = {
                "current_at_1": round(statistics.fmean(c == 1 for c, _ in rows), 4),
                "stale_above_current": round(statistics.fmean(c is None or (st is not None and st < c)
                                                              for c, st in rows), 4),
                "mrr_current": round(statistics.fmean(1 / c if c else 0.0 for c, _ in rows), 4),
                "current_in_top_10": round(statistics.fmean(c is not None for c, _ in rows), 4)}
    timing = {n: {"p50_ms": round(statistics.median(t), 2),
                  "p95_ms": round(sorted(t)[min(len(t) - 1, int(0.95 * len(t)))], 2), "calls": len(t)}
              for n, t in times.items()}
    return {"slots": len(slots), "scores": table, "timing": timing,
            "load_average_after": [round(x, 2) for x in load_after]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"), help="server DSN (a role with CREATEDB)")
    ap.add_argument("--home", default="/tmp/pydna-signals", help="embedded server home when no --dsn")
    ap.add_argument("--compute", default="w8a8", choices=("w8a8", "float32"), help="ONNX compute (docs/embeddings.md)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "memory_signals.json"))
    args = ap.parse_args(argv)

    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from embcache import CachedEmbedder
    from pydna import migrate
    from pydna.embeddings import OnnxEmbeddingProvider

    emb = CachedEmbedder(OnnxEmbeddingProvider(compute=args.compute))
    server_dsn = args.dsn
    if not server_dsn:
        from pydna import server

        server_dsn = server.start(Path(args.home))
    load_before = os.getloadavg()
    params = conninfo_to_dict(server_dsn)
    params["dbname"] = DATABASE
    dsn = make_conninfo(**params)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    migrate.upgrade(dsn)
    slots = build()
    t0 = time.perf_counter()
    load(dsn, slots, emb)
    load_s = time.perf_counter() - t0
    out = run(dsn, slots, emb)

    from rich.console import Console
    from rich.table import Table

    console = Console()
    for label in SCOPES:
        table = Table(title=f"restated facts, {label} ({out['slots']} slots, k = {K}, asked on day 50)")
        for col in ("system", "current@1", "stale above current", "MRR@10 current", "current in top 10"):
            table.add_column(col, justify="left" if col == "system" else "right")
        for name, r in out["scores"][label].items():
            table.add_row(name, f"{r['current_at_1']:.3f}", f"{r['stale_above_current']:.3f}",
                          f"{r['mrr_current']:.3f}", f"{r['current_in_top_10']:.3f}")
        console.print(table)
    table = Table(title="per call (interleaved, same run)")
    for col in ("system", "p50 ms", "p95 ms", "calls"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for name, t in out["timing"].items():
        table.add_row(name, f"{t['p50_ms']:.2f}", f"{t['p95_ms']:.2f}", str(t["calls"]))
    console.print(table)
    console.print(f"load average (1, 5, 15 min) before {', '.join(f'{x:.2f}' for x in load_before)}, after "
                  f"{', '.join(f'{x:.2f}' for x in out['load_average_after'])} on {os.cpu_count()} CPUs; "
                  f"loaded in {load_s:.1f} s")
    payload = {"benchmark": "memory-signals-restated-facts", "k": K, "model_id": emb.model_id, **out,
               "systems": SYSTEMS, "scopes": SCOPES,
               "machine": {"python": platform.python_version(), "platform": platform.platform(),
                           "cpus": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before]},
               "command": "python bench/memory_signals.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    console.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
