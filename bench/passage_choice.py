"""Passage choice: is the passage a hit shows the one that answers? (issue 27 item 3)

Usage (a server with a Django docs folder indexed into a scope, e.g. by ``dna index``)::

    DNA_HOME=/tmp/dnapc dna index /tmp/dj/Django-5.1/docs --scope django --embedder onnx
    python bench/passage_choice.py --dsn "host=/tmp/dnapc/pgdata dbname=dna user=dna_root" --scope django \
        [--questions bench/data/django-passages.json] [--embedder onnx] [--out bench/results/passage-choice.json]

The docs are Django 5.1's ``docs/`` folder (the ``Django-5.1`` sdist on PyPI: ``pip download django==5.1
--no-binary :all: --no-deps``). The questions (bench/data/django-passages.json, 25, written by reading the
docs' headings, nothing tuned on them) each name the file that answers and the section (a heading of
that file) whose text answers. For each question and mode (``hybrid``: ``dna.search`` at its defaults,
``lexical``, ``dense``), k = 10, one hit per document:

- ``file@1`` / ``file@10``: the answering file is the first hit / among the first 10;
- ``passage ok``: of the questions whose file is among the 10, the share whose shown passage lies in the
  answering section (the section's title is one of the hit's heading path, ``A > B``);
- ``best in section``: the share whose answering section holds the file's best passage when that file
  alone is searched (``name_prefix``, ``passages => true``, depth 200): where it differs from
  ``passage ok``, the other files' passages changed the choice (the lanes' depths).

Peer in the same run: bm25s (k1 1.5, b 0.75, the stemmer of bench/beir.py) over the very passages the
database stores, choosing the file's best-scoring passage (MaxP). Wall time per query is the client's,
with the load average and the process CPU time. One table on stdout, JSON to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from beir import make_provider  # noqa: E402

QUESTIONS = HERE / "data" / "django-passages.json"
MODES = {"hybrid": None, "lexical": (0.0, 1.0), "dense": (1.0, 0.0)}
K = 10


def in_section(heading: str | None, section: str) -> bool:
    """Whether a heading path (``A > B > C``) lies inside ``section`` (one of its titles), markup aside."""
    def plain(s: str) -> str:
        return s.replace("``", "").replace("\\s", "s").strip().lower()
    return heading is not None and plain(section) in [plain(part) for part in heading.split(" > ")]


def run_mode(client, scope: str, questions: list[dict], weights) -> dict:
    rows, times = [], []
    for q in questions:
        t0 = time.perf_counter()
        hits = client.search(scope, q["q"], k=K, weights=weights).hits
        times.append((time.perf_counter() - t0) * 1000)
        names = [h.name for h in hits]
        rank = names.index(q["file"]) + 1 if q["file"] in names else None
        shown = hits[rank - 1].heading if rank else None
        every = client.search(scope, q["q"], k=200, weights=weights, passages=True,
                              name_prefix=q["file"]).hits
        best = next((h.heading for h in every if h.name == q["file"]), None)
        rows.append({"q": q["q"], "rank": rank, "shown": shown, "ok": bool(rank) and in_section(shown, q["section"]),
                     "best_passage": best, "best_ok": in_section(best, q["section"])})
    found = [r for r in rows if r["rank"]]
    return {"file@1": sum(r["rank"] == 1 for r in rows), "file@10": len(found),
            "passage_ok": sum(r["ok"] for r in found), "best_ok": sum(r["best_ok"] for r in rows),
            "n": len(rows), "p50_ms": round(statistics.median(times), 2), "rows": rows}


def bm25s_peer(dsn: str, scope: str, questions: list[dict]) -> dict:
    """bm25s over the stored passages, a file's best passage (MaxP) its hit."""
    import bm25s
    import Stemmer

    with psycopg.connect(dsn) as conn:
        stored = conn.execute(
            "SELECT name, heading, coalesce(title, '') || ' ' || body FROM dna.dna_search_docs_384 "
            "WHERE scope = %s ORDER BY name, passage", (scope,)).fetchall()
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=1.5, b=0.75)
    retriever.index(bm25s.tokenize([s[2] for s in stored], stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    rows = []
    for q in questions:
        ids, scores = retriever.retrieve(bm25s.tokenize([q["q"]], stopwords="en", stemmer=stemmer,
                                                        show_progress=False),
                                         k=min(len(stored), 2000), show_progress=False)
        seen: list[tuple[str, str | None]] = []
        for i in ids[0]:
            name, heading, _ = stored[int(i)]
            if name not in [s[0] for s in seen]:
                seen.append((name, heading))
        names = [s[0] for s in seen[:K]]
        rank = names.index(q["file"]) + 1 if q["file"] in names else None
        shown = seen[rank - 1][1] if rank else None
        best = next((h for n, h in seen if n == q["file"]), None)
        rows.append({"q": q["q"], "rank": rank, "shown": shown, "ok": bool(rank) and in_section(shown, q["section"]),
                     "best_passage": best, "best_ok": in_section(best, q["section"])})
    found = [r for r in rows if r["rank"]]
    return {"file@1": sum(r["rank"] == 1 for r in rows), "file@10": len(found),
            "passage_ok": sum(r["ok"] for r in found), "best_ok": sum(r["best_ok"] for r in rows),
            "n": len(rows), "p50_ms": None, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--scope", default="django")
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--embedder", default="onnx", choices=("onnx", "fake"))
    ap.add_argument("--no-peer", action="store_true", help="Leave bm25s out.")
    ap.add_argument("--verbose", action="store_true", help="Print each question's shown and best passage.")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import pydna

    questions = json.loads(args.questions.read_text(encoding="utf-8"))["questions"]
    client = pydna.connect(args.dsn, embedder=make_provider(args.embedder))
    load0, cpu0 = os.getloadavg()[0], time.process_time()
    results = {mode: run_mode(client, args.scope, questions, w) for mode, w in MODES.items()}
    if not args.no_peer:
        results["bm25s (passages, MaxP)"] = bm25s_peer(args.dsn, args.scope, questions)
    load1, cpu = os.getloadavg()[0], time.process_time() - cpu0
    n = len(questions)
    print(f"passage choice · scope {args.scope} · {n} questions ({args.questions.name}) · k = {K} · "
          f"load {load0:.2f}→{load1:.2f} · client CPU {cpu:.1f} s")
    print(f"{'mode':<24} {'file@1':>7} {'file@10':>8} {'passage ok':>11} {'best in section':>16} {'p50 ms':>7}")
    for mode, r in results.items():
        print(f"{mode:<24} {r['file@1']:>4}/{n} {r['file@10']:>5}/{n} {r['passage_ok']:>7}/{r['file@10']:<3} "
              f"{r['best_ok']:>12}/{n} {'' if r['p50_ms'] is None else r['p50_ms']:>7}")
    if args.verbose:
        for mode, r in results.items():
            for row in r["rows"]:
                if not row["ok"]:
                    print(f"  {mode:<10} {row['q'][:44]:<44} rank {row['rank']} shown: {row['shown']} | best: "
                          f"{row['best_passage']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"scope": args.scope, "k": K, "load": [load0, load1], "client_cpu_s": cpu,
                                        "results": results,
                                        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2),
                            encoding="utf-8")


if __name__ == "__main__":
    main()
