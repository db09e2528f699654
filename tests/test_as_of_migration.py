"""Revision 0017 (topic asof) upgrades a 0016_answers_and_bounds database holding memories restated
after an instant T: every as_of recall answers exactly as at 0016 (lexical and with a query
embedding, k small and large, a kind filter, a blank query), now through dna.as_of_past_texts and
dna.search(past => dna.past_text[]); the downgrade gives 0016's functions back (dna.search without
past, no dna.past_text, no new index) answering the same again."""
from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

SEED = [("hq", "the office is in lisbon", "we moved the office to porto"),
        ("cat", "the office cat is called miso", "the cat is called tofu now"),
        ("deploy", "deploys happen on fridays in lisbon", None),
        ("coffee", "coffee at nine in the lisbon office kitchen", "coffee at ten in the porto kitchen"),
        ("kept", "standup at nine every monday", "standup at nine every monday"),     # same text restated
        ("trip", "a lisbon trip next spring", None)]
QUERIES = [("lisbon office", 5, False, None), ("lisbon office", 5, True, None), ("porto kitchen", 3, True, None),
           ("miso cat", 10, False, None), ("nine monday", 5, False, ["Engram"]), ("", 5, False, None),
           ("lisbon", 1, True, None)]


def _seed(conn):
    for name, then, _ in SEED:
        conn.execute("SELECT dna.remember('team', %s, name => %s, model_id => 'dna-fake-hash-v1', "
                     "embedding => dna.fake_embed(%s))", (Jsonb({"summary": then}), name, then))
    t = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    for name, _, now in SEED:
        if now is not None:
            conn.execute("SELECT dna.remember('team', %s, name => %s, model_id => 'dna-fake-hash-v1', "
                         "embedding => dna.fake_embed(%s))", (Jsonb({"summary": now}), name, now))
    conn.execute("SELECT dna.remember('team', %s, name => 'late', model_id => 'dna-fake-hash-v1', "
                 "embedding => dna.fake_embed('lisbon office written later'))",
                 (Jsonb({"summary": "lisbon office written later"}),))
    return t


def _answers(conn, t):
    return [conn.execute("SELECT dna.recall('team', %s, CASE WHEN %s THEN dna.fake_embed(%s) END, 'dna-fake-hash-v1', "
                         "kinds => %s, k => %s, as_of => %s, reconsolidate => false)",
                         (q, embed, q, kinds, k, t)).fetchone()[0] for q, k, embed, kinds in QUERIES]


# Revision 0017's recall topic changes how the memory factors enter the score (the standing
# multiplies, ecphory only breaks ties: tests/test_recall_standing_migration.py); what the asof topic
# keeps is everything else of each answer: the hits (by name) with their search scores, how each was
# ranked, retention, and the as_of lists.
RECALL_TOPIC = {"score", "ecphory", "memory_factor", "rank", "metadata"}  # metadata: 0019 topic metadata adds it to hits


# Keys of the answer later topics add: 0022 topic pagination says where the page starts and the next would.
PAGES = {"offset", "next_offset"}


def _as_of_view(answers):
    return [{**{key: value for key, value in a.items() if key != "hits" and key not in PAGES},
             "hits": sorted(({key: value for key, value in h.items() if key not in RECALL_TOPIC} for h in a["hits"]),
                            key=lambda h: h["name"])} for a in answers]


def _state(conn):
    return conn.execute(
        "SELECT (SELECT count(*) FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = 'search'),"
        " (SELECT count(*) FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = 'search'"
        "   AND 'past' = ANY (p.proargnames)),"
        " to_regtype('dna.past_text') IS NOT NULL, to_regclass('dna.dna_versions_scope_id_version') IS NOT NULL,"
        " to_regproc('dna.as_of_past_texts') IS NOT NULL, to_regproc('dna.as_of_report') IS NOT NULL").fetchone()


def test_upgrade_from_0016_answers_every_as_of_recall_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        t = _seed(conn)
        before = _answers(conn, t)
        assert _state(conn) == (1, 0, False, False, False, False)
    # the answers exercise what changed: past texts ranked (hit 1 for "lisbon office"), names
    # reported, a restatement that kept its text, a memory written after t
    first = before[0]
    assert first["hits"][0]["name"] == "hq" and first["hits"][0]["ranked_by"] == "past_text"
    assert first["as_of_past_text"] == ["cat", "coffee", "hq"]
    assert "late" not in [h["name"] for h in first["hits"]]
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == (1, 1, True, True, True, True)
        assert _as_of_view(_answers(conn, t)) == _as_of_view(before)
    migrate.downgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == (1, 0, False, False, False, False)
        assert _answers(conn, t) == before
        # 0016's text writes again
        conn.execute("SELECT dna.remember('team', %s, name => 'hq', model_id => 'dna-fake-hash-v1')",
                     (Jsonb({"summary": "the office is back in lisbon"}),))
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _state(conn) == (1, 1, True, True, True, True)
