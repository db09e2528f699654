"""Honest concurrency on a name (issue 13): two dna.remember of the same new name from two connections
are answered created and updated (the second waits for the first), never two created; a restated
memory's encoding context follows its own created_at."""
from __future__ import annotations

import threading

import psycopg
from psycopg.types.json import Jsonb

ROUNDS = 12


def _remember(dsn, barrier, name, summary, out, i):
    with psycopg.connect(dsn, autocommit=True) as conn:
        barrier.wait()
        out[i] = conn.execute("SELECT dna.remember('race', %s, name => %s)", (Jsonb({"summary": summary}), name)).fetchone()[0]


def test_two_writers_of_a_new_name_get_created_and_updated(dna_dsn, sql):
    for r in range(ROUNDS):
        name = f"n{r}"
        barrier = threading.Barrier(2)
        out = [None, None]
        threads = [threading.Thread(target=_remember, args=(dna_dsn, barrier, name, f"writer {w} of {name}", out, w))
                   for w in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(o["action"] for o in out) == ["created", "updated"], (r, out)
        assert sorted(o["version"] for o in out) == [1, 2]
        last = max(out, key=lambda o: o["version"])
        assert sql.execute("SELECT spec ->> 'summary' FROM dna.dna_instances WHERE name = %s",
                           (name,)).fetchone()[0] == last["spec"]["summary"]
        assert sql.execute("SELECT count(*) FROM dna.dna_versions WHERE name = %s", (name,)).fetchone()[0] == 2


def test_the_second_writer_waits_for_the_first(dna_dsn):
    first = psycopg.connect(dna_dsn)
    try:
        got = first.execute("SELECT dna.remember('race', %s, name => 'w')", (Jsonb({"summary": "first"}),)).fetchone()[0]
        assert got["action"] == "created"
        out = [None]
        barrier = threading.Barrier(2)
        t = threading.Thread(target=_remember, args=(dna_dsn, barrier, "w", "second", out, 0))
        t.start()
        barrier.wait()
        t.join(1.0)
        assert t.is_alive() and out[0] is None               # queued behind the open transaction
        first.commit()
        t.join(30)
        assert out[0]["action"] == "updated" and out[0]["version"] == 2
    finally:
        first.close()


def test_a_restated_memory_keeps_the_time_of_day_of_its_created_at(sql):
    first = sql.execute("SELECT dna.remember('race', %s, name => 'night', now => '2026-06-01T23:30:00Z')",
                        (Jsonb({"summary": "wrote the report"}),)).fetchone()[0]
    assert first["spec"]["encoding_context"]["time_of_day"] == "night"
    again = sql.execute("SELECT dna.remember('race', %s, name => 'night', now => '2026-06-02T09:00:00Z')",
                        (Jsonb({"summary": "wrote the report, then sent it", "tags": ["report"]}),)).fetchone()[0]
    assert again["action"] == "updated"
    assert again["spec"]["created_at"] == first["spec"]["created_at"]
    assert again["spec"]["encoding_context"]["time_of_day"] == "night"
    assert again["spec"]["encoding_context"]["co_topics"] == ["report"]
    # An encoding context the caller gives is kept as given.
    given = {"area": "x", "affect": "neutral", "time_of_day": "morning", "co_topics": [], "source_refs": []}
    kept = sql.execute("SELECT dna.remember('race', %s, name => 'night')",
                       (Jsonb({"summary": "wrote the report", "encoding_context": given}),)).fetchone()[0]
    assert kept["spec"]["encoding_context"] == given
