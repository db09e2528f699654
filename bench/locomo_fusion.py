"""LoCoMo dev split: ``dna.search`` with RRF (the default) beside the convex fusion at several dense weights.

The protocol, data and loading are bench/locomo.py's (README of ``../shared/data/locomo-dev/``): every
turn one Engram at its session time, the 231 scored questions searched with k = 10 over kind Engram
at the last session's time; R@5 / R@10 / any@10 per category, p50/p95 per call interleaved, the load
average. Only the systems differ: ``search`` (RRF defaults), ``search lexical``, ``search dense`` and
``search convex w=<dense_weight>`` (``fusion => 'convex'``). Used with bench/tune.py's ``fusion`` step
(SciFact train) to choose the default fusion (bench/RESULTS.md).

Usage (from the repository root)::

    python bench/locomo_fusion.py --data FILE [--weights 0.3,0.4,0.5,0.6] [--home /tmp/pydna-locomo-search]
                                  [--out bench/results/locomo-fusion.json]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import locomo  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", default="0.3,0.4,0.5,0.6", help="dense weights of the convex fusion")
    ap.add_argument("--home", default="/tmp/pydna-locomo-search", help="embedded server home")
    ap.add_argument("--out", default=str(BENCH / "results" / "locomo-fusion.json"))
    args, rest = ap.parse_known_args(argv)
    names = ["search", "search lexical", "search dense"]
    for w in (float(x) for x in args.weights.split(",")):
        name = f"search convex w={w:g}"
        locomo.SYSTEMS[name] = {"sql": locomo.SEARCH_SQL.format(
            vec="%(vec)s", weights=f", fusion => 'convex', dense_weight => {w!r}"), "kind": "search"}
        names.append(name)
    return locomo.main(["--systems", ",".join(names), "--home", args.home, "--out", args.out, *rest])


if __name__ == "__main__":
    raise SystemExit(main())
