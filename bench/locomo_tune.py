"""LoCoMo dev split: which conversation signals should ``dna.recall`` add to ``dna.search``'s ranking?

Reads the conversation path that ``bench/locomo.py`` loads (database ``dna_bench_locomo``, scopes
``locomo-conv<C>-<sample>``: every turn a memory of Kind Turn, every session an Episode), asks every
scored question once (recall's search pool, deep, read-only) and re-ranks that pool in Python for a
grid of signals, each a term added to a turn's search score (all scores divided by the pool's best):

- ``session`` (weight a): the session's mass in the pool — the sum of the scores of the session's
  *other* pool turns, divided by the largest such sum of the question — so a turn of a session that
  the question is about rises;
- ``episode`` (weight e): the session's Episode score from ``dna.search`` over Kind Episode, divided
  by the best episode's;
- ``neighbour`` (weight b): the best score of the turns right before and after it in its session;
- ``cap`` (c): at most c turns of one session in the top 10 (0: none), the rest taken in order after.

Prints the grid's best points and writes JSON; the rule that picks recall's defaults from it is in
bench/RESULTS.md ("Conversations"). Tune on the dev split only (its README).

Usage::

    .venv/bin/python bench/locomo_tune.py --data ../shared/data/locomo-dev/locomo-dev.json --dsn DSN
        [--context-turns 1] [--pool 50]
        [--out bench/results/locomo_tune.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from locomo import CATEGORIES, DATABASE, K, conv_scope, load_samples, provider  # noqa: E402

GRID = {"session": [0, 0.1, 0.2, 0.3, 0.5], "episode": [0, 0.1, 0.2, 0.3], "neighbour": [0, 0.1, 0.2, 0.3],
        "cap": [0, 3, 4, 5]}


def pools(dsn: str, samples: list[dict], emb, context_turns: int | None, pool: int) -> list[dict]:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector

    questions = [dict(q, sample=s["sample_id"]) for s in samples for q in s["questions"]]
    vecs = emb.embed([q["q"] for q in questions])
    emb.flush()
    out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        for q, v in zip(questions, vecs):
            scope = conv_scope({"sample_id": q["sample"]}, context_turns)
            vec = Vector([float(x) for x in v])
            hits = conn.execute("SELECT dna.recall(%s, %s, %s, %s, kinds => '{Turn}', k => %s, reconsolidate => false, "
                                "now => %s) -> 'hits'", (scope, q["q"], vec, emb.model_id, pool, q["now"])).fetchone()[0]
            eps = conn.execute("SELECT name, score FROM dna.search(%s, %s, %s, %s, k => 50, kinds => '{Episode}', "
                               "valid_time => %s)", (scope, q["q"], vec, emb.model_id, q["now"])).fetchall()
            out.append({"q": q, "hits": [(h["name"].rsplit("/", 1)[-1], float(h["score"]), h["metadata"]["session"],
                                          int(h["metadata"]["turn"])) for h in hits],
                        "episodes": {n.rsplit("/", 1)[-1]: float(s) for n, s in eps}})
    return out


def rerank(item: dict, a: float, e: float, b: float, cap: int) -> list[str]:
    hits = item["hits"]
    if not hits:
        return []
    top = max(h[1] for h in hits) or 1.0
    score = {h[0]: h[1] / top for h in hits}
    by_session: dict[str, list[tuple]] = {}
    for h in hits:
        by_session.setdefault(h[2], []).append(h)
    mass = {s: sum(score[x[0]] for x in hs) for s, hs in by_session.items()}
    other = {h[0]: mass[h[2]] - score[h[0]] for h in hits}
    most = max(other.values()) or 1.0
    ep_top = max(item["episodes"].values(), default=0.0) or 1.0
    place = {(h[2], h[3]): score[h[0]] for h in hits}
    fused = []
    for h in hits:
        s = score[h[0]]
        s += a * other[h[0]] / most
        s += e * item["episodes"].get(h[2], 0.0) / ep_top
        s += b * max(place.get((h[2], h[3] - 1), 0.0), place.get((h[2], h[3] + 1), 0.0))
        fused.append((-s, h[0], h[2]))
    fused.sort()
    if not cap:
        return [n for _, n, _ in fused[:K]]
    taken, count, rest = [], {}, []
    for _, n, sess in fused:
        if count.get(sess, 0) < cap:
            taken.append(n)
            count[sess] = count.get(sess, 0) + 1
        else:
            rest.append(n)
        if len(taken) == K:
            break
    return (taken + rest)[:K]


def score(items: list[dict], ranked: list[list[str]]) -> dict:
    rows = []
    for item, got in zip(items, ranked):
        ev = set(item["q"]["evidence"])
        rows.append({"category": item["q"]["category"], "r10": len(ev & set(got[:K])) / len(ev),
                     "r5": len(ev & set(got[:5])) / len(ev), "any10": float(bool(ev & set(got[:K])))})
    table = {}
    for cat in list(CATEGORIES) + [0]:
        sel = [x for x in rows if cat == 0 or x["category"] == cat]
        table["overall" if cat == 0 else CATEGORIES[cat]] = {
            m: round(statistics.fmean(x[m] for x in sel), 4) for m in ("r5", "r10", "any10")}
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DNA_DATABASE_URL"))
    ap.add_argument("--context-turns", type=int, default=None)
    ap.add_argument("--pool", type=int, default=50)
    ap.add_argument("--data", default=None, help="the dev split's locomo-dev.json (bench/data_sets.py)")
    ap.add_argument("--out", default=str(BENCH / "results" / "locomo_tune.json"))
    args = ap.parse_args(argv)
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(args.dsn)
    params["dbname"] = DATABASE
    from data_sets import locomo_file

    samples = load_samples(Path(locomo_file(args.data, ap)))
    items = pools(make_conninfo(**params), samples, provider(), args.context_turns, args.pool)
    base = score(items, [[h[0] for h in it["hits"]][:K] for it in items])
    grid = []
    for a, e, b, cap in itertools.product(GRID["session"], GRID["episode"], GRID["neighbour"], GRID["cap"]):
        table = score(items, [rerank(it, a, e, b, cap) for it in items])
        grid.append({"session": a, "episode": e, "neighbour": b, "cap": cap, "scores": table})
    grid.sort(key=lambda g: (-g["scores"]["overall"]["r10"], -g["scores"]["overall"]["any10"],
                             g["session"] + g["episode"] + g["neighbour"], g["cap"]))
    print(f"search pool order (recall's defaults): R@10 {base['overall']['r10']:.3f} any@10 {base['overall']['any10']:.3f}")
    for g in grid[:15]:
        o = g["scores"]
        print(f"session {g['session']:.1f} episode {g['episode']:.1f} neighbour {g['neighbour']:.1f} cap {g['cap']}: "
              f"R@10 {o['overall']['r10']:.3f} any@10 {o['overall']['any10']:.3f} R@5 {o['overall']['r5']:.3f} | "
              + " ".join(f"{c} {o[c]['r10']:.3f}" for c in CATEGORIES.values()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"context_turns": args.context_turns, "pool": args.pool, "base": base,
                                          "grid": grid, "questions": len(items)}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
