"""Concurrent writers on shared documents (bench/concurrency.py's workload, 20 seconds).

Eight threads, each with its own connection (autocommit off), write 40 documents they all share —
multi-document transactions (dna.index_document calls and dna.index_documents batches), random-order
batches, single writes and deletes — while a ninth runs dna.bm25_compact over the scope and a tenth
reads dna.bm25. No transaction may die of a deadlock (40P01) or a serialization failure (40001),
nothing else may fail, every document must hold the text of its last acknowledged write, and
dna.bm25 must answer as dna.bm25(..., exact => true).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_concurrency", Path(__file__).resolve().parents[1] / "bench" / "concurrency.py")
concurrency = sys.modules.setdefault("bench_concurrency", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(concurrency)

SECONDS = 20


def test_eight_writers_no_deadlock_no_lost_write(dna_dsn):
    result = concurrency.run(dna_dsn, seconds=SECONDS, writers=8, keys=40)
    assert result["errors"] == []
    assert result["deadlocks"] == 0
    assert result["serialization_failures"] == 0
    assert result["lost_writes"] == []
    assert result["bm25_mismatches"] == []
    # The run did what it says: many commits of each kind of transaction, compactions beside them.
    assert result["commits"] >= 100, result
    assert all(result["commits_by_kind"].get(kind, 0) >= 5 for kind in ("multi", "batch", "single", "delete")), result
    assert result["compactions"] >= 5 and result["reads"] >= 10, result
    assert result["lock_wait_samples"] >= 1, result  # the writers did wait on each other's rows


def test_lost_writes_sees_a_lost_or_resurrected_write():
    W = concurrency.Write
    log = [W("a", "one", 0.0, 1.0), W("a", "two", 2.0, 3.0), W("b", "x", 0.0, 1.0), W("b", None, 2.0, 3.0),
           W("c", "p", 0.0, 2.0), W("c", "q", 1.0, 3.0)]
    assert concurrency.lost_writes(log, {"a": "two", "c": "p"}) == []      # c: the two commits overlapped
    assert concurrency.lost_writes(log, {"c": "q", "a": "two"}) == []
    assert [x["name"] for x in concurrency.lost_writes(log, {"a": "one", "c": "q"})] == ["a"]   # lost update
    assert [x["name"] for x in concurrency.lost_writes(log, {"a": "two", "b": "x", "c": "q"})] == ["b"]  # resurrected
    assert [x["name"] for x in concurrency.lost_writes(log, {"a": "two", "c": "q", "z": "?"})] == ["z"]  # never written
    assert [x["name"] for x in concurrency.lost_writes(log, {"c": "q"})] == ["a"]   # acknowledged, then missing
