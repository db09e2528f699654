"""Revision 0017 (topic recall) upgrades a 0016_answers_and_bounds database holding memories: the
same memories are recalled with the same hybrid scores, now multiplied by their standing only
(retention × affect; 0016 multiplied by 1 + ecphory too), ecphory breaking ties; the downgrade gives
0016's recall back, answering exactly as before."""
from __future__ import annotations

import json

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

WRITTEN = "2026-06-01T12:00:00Z"
LATER = "2026-06-20T12:00:00Z"
RECENT = "2026-06-20T09:00:00Z"          # within 24 h of LATER: the reference's + 0.10 recency
SIGNATURE = ("dna.recall(text,text,vector,text,text[],integer,text,boolean,text,timestamp with time zone,"
             "timestamp with time zone,boolean,text,boolean)")
QUERIES = ("office", "office kitchen coffee", "fridays deploys", "miso", "the office cat")


def _seed(conn):
    for i, (text, extra, at) in enumerate([
            ("the office is in lisbon", {"affect": "surprise"}, WRITTEN),
            ("deploys happen on fridays", {}, WRITTEN),
            ("the office cat is called miso", {"confidence_score": "faint"}, WRITTEN),
            ("coffee at nine in the office kitchen", {"area": "Feature/office"}, WRITTEN),
            ("the office moved to a new kitchen floor", {}, RECENT),
            ("the office cat sleeps in the kitchen", {}, RECENT)]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, now => %s, embedding => dna.fake_embed(%s))",
                     (Jsonb({"summary": text, **extra}), f"m{i}", at, text))
    # one recall that reconsolidates (last_surfaced, cues_history): decay has something to count from
    conn.execute("SELECT dna.recall('team', 'miso', now => %s)", (WRITTEN,))


def _answers(conn):
    out = {}
    for q in QUERIES:
        for embed in (False, True):
            r = conn.execute("SELECT dna.recall('team', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, k => 10, "
                             "reconsolidate => false, now => %s, explain => true)", (q, embed, q, LATER)).fetchone()[0]
            out[f"{q} {embed}"] = [{"name": h["name"], "score": h["score"], "search_score": h["search_score"],
                                    "memory_factor": h["memory_factor"], "ecphory": h["ecphory"],
                                    "retention": h.get("retention"), "explain": h["explain"]["memory"]}
                                   for h in r["hits"]]
    return json.loads(json.dumps(out))


def _signatures(conn, name):
    return {r[0] for r in conn.execute("SELECT p.oid::regprocedure::text FROM pg_proc AS p "
                                       "WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = %s", (name,))}


def test_upgrade_from_0016_ranks_by_standing_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        before = _answers(conn)
        assert _signatures(conn, "recall") == {SIGNATURE}
        factors_before = _signatures(conn, "memory_factors")
    migrate.upgrade(empty_dsn, HELD_TO)
    moved = 0
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # one overload: 0016's, with the relevance floors of the floors topic after it
        assert _signatures(conn, "recall") == {SIGNATURE[:-1] + ",double precision,double precision,jsonb,integer,integer,text,double precision)"}
        # 0017 the floors; 0019 filter, context; 0022 offset, diversity, duplicate_similarity
        assert _signatures(conn, "memory_factors") == factors_before       # same signature, one overload
        after = _answers(conn)
        for key, hits in before.items():
            got = {h["name"]: h for h in after[key]}
            want = {h["name"]: h for h in hits}
            # the same memories, with the same hybrid score, retention and ecphory as at 0016 ...
            assert got.keys() == want.keys(), key
            for name, h in want.items():
                g = got[name]
                assert (g["search_score"], g["retention"], g["ecphory"]) == (h["search_score"], h["retention"],
                                                                             h["ecphory"]), (key, name)
                # ... and 0016's factor was (1 + ecphory) x the standing that is the factor now
                assert abs(h["memory_factor"] - (1 + h["ecphory"]) * g["memory_factor"]) < 1e-12, (key, name)
                assert g["score"] == g["search_score"] * g["memory_factor"]
                assert g["explain"]["tie_break"]["ecphory"] == h["explain"]["ecphory"]
                assert g["explain"]["factor"] == g["memory_factor"] and "ecphory" not in g["explain"]
            # ordered by (score desc, ecphory desc, name)
            order = [h["name"] for h in after[key]]
            assert order == [h["name"] for h in sorted(after[key], key=lambda h: (-h["score"], -h["ecphory"],
                                                                                    h["name"]))], key
            moved += order != [h["name"] for h in hits]
        # the data reaches the change: at least one answer's order is not 0016's (the + 0.10 recency
        # of m4/m5 no longer lifts them over better-scored memories)
        assert moved > 0
    migrate.downgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _signatures(conn, "recall") == {SIGNATURE}
        assert _signatures(conn, "memory_factors") == factors_before
        assert _answers(conn) == before
