"""Revision 0016 (topic recall) upgrades a 0015_governed_history database holding memories: the
same memories are recalled with the same hybrid scores, now multiplied by the memory factors
(the intended change of issue 15), dna.recall gains decay; the downgrade gives 0015's recall back,
answering exactly as before."""
from __future__ import annotations

import json

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

NOW = "2026-06-01T12:00:00Z"
LATER = "2026-06-20T12:00:00Z"
OLD = ("dna.recall(text,text,vector,text,text[],integer,text,boolean,text,timestamp with time zone,"
       "timestamp with time zone,boolean)")
NEW = OLD[:-1] + ",text,boolean,double precision,double precision,jsonb,integer,integer,text,double precision)"
# 0016 decay, explain; 0017 the floors; 0019 filter, context; 0022 offset, diversity, duplicate_similarity


def _seed(conn):
    for i, (text, extra) in enumerate([("the office is in lisbon", {"affect": "surprise"}),
                                       ("deploys happen on fridays", {}),
                                       ("the office cat is called miso", {"confidence_score": "faint"}),
                                       ("coffee at nine in the office kitchen", {"area": "Feature/office"})]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                     (Jsonb({"summary": text, **extra}), f"m{i}", NOW, text))
    # one recall that reconsolidates (last_surfaced, cues_history): decay has something to count from
    conn.execute("SELECT dna.recall('team', 'miso', now => %s)", (NOW,))


def _answers(conn):
    out = {}
    for q in ("office", "office kitchen coffee", "fridays deploys", "miso"):
        for embed in (False, True):
            r = conn.execute("SELECT dna.recall('team', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, "
                             "reconsolidate => false, now => %s)", (q, embed, q, LATER)).fetchone()[0]
            out[f"{q} {embed}"] = [{"name": h["name"], "score": h["score"], "search_score": h["search_score"],
                                    "retention": h.get("retention")} for h in r["hits"]]
    return json.loads(json.dumps(out))


def _signatures(conn):
    return {r[0] for r in conn.execute("SELECT p.oid::regprocedure::text FROM pg_proc AS p "
                                       "WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = 'recall'")}


def test_upgrade_from_0015_recalls_the_same_memories_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        assert _signatures(conn) == {OLD}
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn) == {NEW}
        after = _answers(conn)
        for key, hits in before.items():
            # the same memories with the same retention, each with dna.search's own score at head ...
            got = {h["name"]: h for h in after[key]}
            want = {h["name"]: h for h in hits}
            assert got.keys() == want.keys(), key
            query, embed = key.rsplit(" ", 1)
            scores = dict(conn.execute(
                "SELECT name, score FROM dna.search('team', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, "
                "'dna-fake-hash-v1', k => 15, kinds => dna.recallable_kinds(), candidates => 100, valid_time => %s)",
                (query, embed == "True", query, LATER)).fetchall())
            for name, h in want.items():
                assert got[name]["retention"] == h["retention"], (key, name)
                assert got[name]["search_score"] == scores[name], (key, name)
        # ... times the memory factors: score = search_score x memory_factor, in that order
        r = conn.execute("SELECT dna.recall('team', 'office', reconsolidate => false, now => %s)", (LATER,)).fetchone()[0]
        for h in r["hits"]:
            assert abs(h["score"] - h["search_score"] * h["memory_factor"]) < 1e-12
        assert [h["score"] for h in r["hits"]] == sorted((h["score"] for h in r["hits"]), reverse=True)
        off = conn.execute("SELECT dna.recall('team', 'miso', reconsolidate => false, now => %s, decay => 'off')",
                           (LATER,)).fetchone()[0]
        assert off["decay"] == "off" and {h["retention"] for h in off["hits"]} == {1.0}
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = 'memory_factors'").fetchone()[0] == 1
    migrate.downgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn) == {OLD}
        assert _answers(conn) == before
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = 'memory_factors' "
                            "OR (proname = 'memory_retention' AND pronargs = 3)").fetchone()[0] == 0
