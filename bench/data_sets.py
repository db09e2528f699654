"""The data sets of the benchmarks and where to get them. Each benchmark reads its data set from a
path given on its command line: nothing outside the repository is read by default (the tests use
only tests/data). ``make bench SCIFACT=DIR`` passes one."""
from __future__ import annotations

import argparse
from pathlib import Path

SCIFACT = ("the BEIR SciFact folder (corpus.jsonl, queries.jsonl, qrels/test.tsv, qrels/train.tsv): "
           "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip unzipped, or "
           "../shared/data/scifact on the project's machines (SciFact, Wadden et al. 2020, CC BY-NC 2.0)")
LOCOMO = ("LoCoMo's development split, a JSON list of samples: conversations conv-26 and conv-30 of "
          "data/locomo10.json of github.com/snap-research/LoCoMo (commit 3eb6f2c; CC BY-NC 4.0), or "
          "../shared/data/locomo-dev/locomo-dev.json on the project's machines")


def scifact_dir(value: str | None, ap: argparse.ArgumentParser) -> str:
    """``value``, a folder holding ``corpus.jsonl``; else the parser's error (exit 2) saying where
    to get SciFact."""
    if not value:
        ap.error(f"give the data set's folder (DATASET_DIR / --dataset): {SCIFACT}")
    if not (Path(value) / "corpus.jsonl").is_file():
        ap.error(f"{value}: no corpus.jsonl there; the data set is {SCIFACT}")
    return value


def locomo_file(value: str | None, ap: argparse.ArgumentParser) -> str:
    """``value``, an existing file; else the parser's error (exit 2) saying where to get LoCoMo."""
    if not value:
        ap.error(f"give the data set's file (--data): {LOCOMO}")
    if not Path(value).is_file():
        ap.error(f"{value}: no such file; the data set is {LOCOMO}")
    return value
