"""as_of reads the past's text on the same scale (issue 13 item 4): a memory ranked by its text
believed at as_of is a candidate of dna.search's own lanes and fusion (dna.search(past_texts => ...):
its search row leaves both lanes, its past tsvector is BM25-scored in the lexical lane), so it is
scored like every other candidate and wins when its past text is the best match."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb


def _remember(sql, name, spec, scope="team"):
    return sql.execute("SELECT dna.remember(%s, %s, name => %s, model_id => 'dna-fake-hash-v1')",
                       (scope, Jsonb(spec), name)).fetchone()[0]


def _recall(sql, query, as_of, k=5, embed=False, scope="team"):
    return sql.execute("SELECT dna.recall(%s, %s, CASE WHEN %s THEN dna.fake_embed(%s) END, 'dna-fake-hash-v1', "
                       "k => %s, as_of => %s, reconsolidate => false)",
                       (scope, query, embed, query, k, as_of)).fetchone()[0]


def _seed(sql):
    # Today's texts that match "lisbon office" too, each less well than the past text did.
    _remember(sql, "trip", {"summary": "a lisbon trip", "body": "we may travel to lisbon next spring with the whole family"})
    _remember(sql, "desk", {"summary": "desk booking", "body": "book an office desk before you come in on mondays"})
    _remember(sql, "cafe", {"summary": "coffee place", "body": "the coffee near the old office is good and cheap"})
    _remember(sql, "hq", {"summary": "the office is in lisbon", "body": "our office: lisbon, the lisbon office"})
    t = sql.execute("SELECT clock_timestamp()").fetchone()[0]
    _remember(sql, "hq", {"summary": "we moved to porto", "body": "headquarters now in porto"})
    return t


@pytest.mark.parametrize("embed", [False, True])
def test_past_text_that_matches_best_is_hit_one(sql, embed):
    t = _seed(sql)
    got = _recall(sql, "lisbon office", t, embed=embed)
    names = [h["name"] for h in got["hits"]]
    assert names[0] == "hq", got
    hq = got["hits"][0]
    assert hq["ranked_by"] == "past_text" and hq["summary"] == "the office is in lisbon"
    assert "lisbon" in hq["snippet"] and "porto" not in hq["snippet"]
    assert hq["as_of_version"] == 1
    # the same scale as every other hit: dna.search's fused score (convex over z-scores, >= 0) in its lanes
    assert all(h["search_score"] >= 0 for h in got["hits"])
    assert hq["search_score"] >= max(h["search_score"] for h in got["hits"][1:])
    assert hq["rank_lexical"] == 1 and hq.get("similarity") is None
    assert set(names) >= {"hq", "trip", "desk", "cafe"}
    assert got["as_of_past_text"] == ["hq"]
    # now: today's text (porto) does not match; hq is not among the hits
    now = _recall(sql, "lisbon office", None, embed=embed)
    assert "hq" not in [h["name"] for h in now["hits"]]


def test_past_text_scored_as_the_lane_scores_it(sql):
    # The past text's BM25 equals the lane's score of the same text indexed today (same N, df, avglen):
    # two scopes, one where hq was restated after t, one where it never was but another memory holds
    # the restated text (so both partitions hold the same texts today).
    t = _seed(sql)
    for name, spec in (("trip", {"summary": "a lisbon trip", "body": "we may travel to lisbon next spring with the whole family"}),
                       ("desk", {"summary": "desk booking", "body": "book an office desk before you come in on mondays"}),
                       ("cafe", {"summary": "coffee place", "body": "the coffee near the old office is good and cheap"}),
                       ("hq", {"summary": "the office is in lisbon", "body": "our office: lisbon, the lisbon office"})):
        _remember(sql, name, spec, scope="control")
    past = _recall(sql, "porto", t)["hits"]
    assert past == []                                        # the past text holds no porto
    got = _recall(sql, "lisbon office", t)
    ctl = sql.execute("SELECT jsonb_agg(jsonb_build_object('name', s.name, 'lexical_score', s.lexical_score) ORDER BY s.score DESC) "
                      "FROM dna.search('control', 'lisbon office', NULL, 'dna-fake-hash-v1', kinds => ARRAY['Engram'])"
                      " AS s").fetchone()[0]
    hq_ctl = next(h for h in ctl if h["name"] == "hq")
    hq = next(h for h in got["hits"] if h["name"] == "hq")
    # control's partition has "lisbon" in two documents, team's today in one (trip) plus hq's past:
    # df differs by design (N and df are today's) — the ranking and the score scale agree
    assert hq["lexical_score"] > 0 and hq_ctl["lexical_score"] > 0
    assert [h["name"] for h in ctl][0] == "hq"


@pytest.mark.parametrize("bad, msg", [('{"kind": "Engram"}', "JSON array"),
                                      ('[{"kind": "Engram", "name": "x"}]', "kind, name and tenant")])
def test_past_texts_refuses_bad_input(sql, bad, msg):
    _remember(sql, "trip", {"summary": "a lisbon trip"})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
        sql.execute("SELECT * FROM dna.search('team', 'lisbon', NULL, 'dna-fake-hash-v1', past_texts => %s::jsonb)", (bad,))


def test_past_texts_leave_both_lanes_and_rank_the_given_text(sql):
    _remember(sql, "trip", {"summary": "a lisbon trip"})
    _remember(sql, "hq", {"summary": "moved to porto"})
    key = [{"kind": "Engram", "name": "hq", "tenant": "", "tsv": "'lisbon':1"}]
    rows = sql.execute("SELECT s.name, s.score, s.lexical_score, s.similarity FROM dna.search('team', 'porto lisbon', "
                       "dna.fake_embed('porto lisbon'), 'dna-fake-hash-v1', past_texts => %s) AS s ORDER BY s.score DESC, s.name",
                       (Jsonb(key),)).fetchall()
    by = {r[0]: r for r in rows}
    assert by["hq"][3] is None                               # not in the dense lane (its vector is today's text)
    assert by["hq"][2] > 0                                   # its given text is in the lexical lane
    # without a tsv: left out of both lanes
    key[0]["tsv"] = None
    rows = sql.execute("SELECT s.name FROM dna.search('team', 'porto', dna.fake_embed('porto'), 'dna-fake-hash-v1', "
                       "past_texts => %s) AS s", (Jsonb(key),)).fetchall()
    assert "hq" not in [r[0] for r in rows]


def test_past_texts_signature_up_and_down(empty_dsn):
    from pydna import migrate

    def signatures(conn):
        return conn.execute("SELECT count(*), count(*) FILTER (WHERE 'past_texts' = ANY (p.proargnames)) "
                            "FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace AND p.proname = 'search'"
                            ).fetchone()

    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _remember(conn, "hq", {"summary": "the office is in lisbon"})
        t = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        _remember(conn, "hq", {"summary": "we moved to porto"})
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert signatures(conn) == (1, 1)                     # one dna.search, with past_texts
        hit = _recall(conn, "lisbon", t)["hits"][0]            # written at 0015, read on the search scale
        assert hit["name"] == "hq" and hit["ranked_by"] == "past_text" and 0 < hit["search_score"] <= 1
    migrate.downgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert signatures(conn) == (1, 0)                     # 0013's dna.search back, alone
        assert _recall(conn, "lisbon", t)["hits"][0]["ranked_by"] == "past_text"
