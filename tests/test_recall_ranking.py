"""How dna.recall ranks (issue 15 item 1): the hybrid (dna.search) ranking is the base, the memory's
standing (retention x affect, dna.memory_factors) multiplies its score, ecphory (the reference's cue
match and its adjustments relative to now) breaks ties only (revision 0017); decay is switchable.

Measured on LoCoMo dev by bench/locomo.py; here the properties that make recall >= search hold by
construction: uniform standing leaves search's order, recency or a cue match never reorders hits of
equal standing, a memory signal moves a memory, the dense lane is not counted twice, and the decay
rules count what they say."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

S = "rank"
NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)
TEXTS = ["deep-copy before mutating documents", "safely archive old reports nightly",
         "banana tropical smoothie recipe", "documents are archived after review",
         "mutating shared state needs a lock", "the nightly report lists old documents",
         "review the smoothie budget", "copy the archive before the review",
         "state of the documents after mutation", "old reports are safely archived"]


def one(sql, query, params=()):
    return sql.execute(query, params).fetchone()[0]


def remember(sql, summary, name, *, now=NOW - timedelta(days=8), embed=True, **spec):
    spec = {"summary": summary, **spec}
    return one(sql, "SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => CASE WHEN %s THEN "
                    "dna.fake_embed(dna.memory_text('Engram', %s)) END)",
               (S, Jsonb(spec), name, now, embed, Jsonb(spec)))


def recall(sql, query, *, embed=True, k=10, decay=None, now=NOW, diversity=None):
    return one(sql, "SELECT dna.recall(%s, %s, CASE WHEN %s THEN dna.fake_embed(%s) END, k => %s, "
                    "reconsolidate => false, now => %s, decay => %s, diversity => %s)",
               (S, query, embed, query, k, now, decay, diversity))


def search(sql, query, *, embed=True, k=10, diversity=None):
    return [tuple(r) for r in sql.execute(
        "SELECT name, score FROM dna.search(%s, %s, CASE WHEN %s THEN dna.fake_embed(%s) END, 'dna-fake-hash-v1', "
        "k => %s, kinds => '{Engram}', valid_time => %s, diversity => %s)", (S, query, embed, query, k, NOW, diversity))]


def seed(sql):
    for i, text in enumerate(TEXTS):
        remember(sql, text, f"m{i:02d}")


@pytest.mark.parametrize("embed", [True, False])
def test_uniform_memory_factors_keep_the_search_order(sql, embed):
    """Never surfaced, neutral, written days ago, no query phrase in any text: every factor is the
    same, so recall answers dna.search's ranking (same lanes and depth) with every score x factor."""
    seed(sql)
    for query in ("mutating documents safely", "old nightly reports archive zebra", "smoothie review zebra"):
        for k in (3, 5, 10):
            got = recall(sql, query, embed=embed, k=k)
            want = search(sql, query, embed=embed, k=k)
            assert [h["name"] for h in got["hits"]] == [n for n, _ in want], (query, k)
            factors = {h["memory_factor"] for h in got["hits"]}
            assert factors == {1.0}, factors                    # retention 1 x affect 1
            for h, (_, score) in zip(got["hits"], want):
                assert h["search_score"] == score and h["score"] == score
                assert h["rank_search"] == got["hits"].index(h) + 1
            assert got["semantic"] is embed and got["degraded"] is (not embed)


def test_the_dense_lane_is_not_counted_twice(sql):
    """A memory the lexical lane puts first but whose cosine is low keeps search's place: no second
    ranking by cosine (the old semantic fusion) pushes it out."""
    seed(sql)
    query = "lock shared mutating state"
    want = search(sql, query)
    got = recall(sql, query)
    assert [h["name"] for h in got["hits"]] == [n for n, _ in want]
    assert all("rank_ecphory" not in h and "semantic" not in h for h in got["hits"])


def test_memory_signals_move_a_memory(sql):
    """Three memories with the same text (the lanes tie them; RRF then orders them by name): affect
    lifts one, an old faint recall lowers another, and the order follows the factors."""
    text = "quarterly invoice reconciliation steps"
    remember(sql, text, "plain")
    remember(sql, text, "surprising", affect="surprise")
    remember(sql, text, "faded", last_surfaced="2026-01-01T00:00:00+00:00", confidence_score="faint")
    res = recall(sql, "invoice reconciliation", diversity="off")
    by = {h["name"]: h for h in res["hits"]}
    assert [h["name"] for h in res["hits"]] == ["surprising", "plain", "faded"]
    assert [n for n, _ in search(sql, "invoice reconciliation", diversity="off")] == ["faded", "plain", "surprising"]
    assert by["surprising"]["memory_factor"] == pytest.approx(1.5 * by["plain"]["memory_factor"], abs=1e-12)
    assert by["faded"]["retention"] == 0.0 and by["faded"]["memory_factor"] == 0.05
    assert by["plain"]["memory_factor"] == 1.0
    for h in res["hits"]:
        assert h["score"] == pytest.approx(h["search_score"] * h["memory_factor"], abs=1e-15)


def test_an_area_cue_breaks_the_tie_of_two_equal_memories(sql):
    """The ecphory cue match (area tokens against the query) breaks ties: of two memories the lanes
    score equally, the one whose area the query names ranks first."""
    text = "rotate the signing keys every quarter"
    remember(sql, text, "a-other", area="Feature/billing")
    remember(sql, text, "b-kernel", area="Feature/kernel")
    res = recall(sql, "kernel signing keys", embed=False)
    assert [h["name"] for h in res["hits"]][:2] == ["b-kernel", "a-other"]
    assert res["hits"][0]["score"] == res["hits"][1]["score"]      # the lexical lane ties them
    assert [n for n, _ in search(sql, "kernel signing keys", embed=False)] == ["a-other", "b-kernel"]
    assert res["hits"][0]["ecphory"] > res["hits"][1]["ecphory"]


def test_recency_and_cue_match_never_reorder_hits_of_equal_standing(sql):
    """Memories written within 24 h of now (the reference's + 0.10 recency) and memories whose text
    holds all the query's tokens (cue match + 0.28) beside memories of the same standing: recall
    keeps dna.search's order for every query. Under revision 0016's factor (1 + ecphory) x standing
    some of these orders flip (checked here on the same hits, so the fixture can tell the two apart)."""
    seed(sql)
    for i, text in enumerate(["copy the documents before the nightly review", "old reports need a review lock",
                              "archive the smoothie recipe reports", "the review of mutating documents"]):
        remember(sql, text, f"new{i}", now=NOW - timedelta(hours=2 + i))
    flipped = 0
    for query in ("review documents", "old reports", "nightly archive", "mutating documents review",
                  "copy documents", "smoothie reports"):
        for embed in (True, False):
            want = search(sql, query, embed=embed, k=20)          # every memory: no tie at the cut
            got = recall(sql, query, embed=embed, k=20)
            assert {h["name"] for h in got["hits"]} == {n for n, _ in want}, (query, embed)
            # in dna.search's order (scores non-increasing); only exactly equal scores are reordered
            assert [h["search_score"] for h in got["hits"]] == [sc for _, sc in want], (query, embed)
            assert {h["memory_factor"] for h in got["hits"]} == {1.0}
            assert any(h["ecphory"] >= 0.15 for h in got["hits"])          # recency or a cue match is present
            old = sorted(got["hits"], key=lambda h: (-h["search_score"] * (1 + h["ecphory"]), h["name"]))
            flipped += any(a["search_score"] < b["search_score"] for i, a in enumerate(old) for b in old[i + 1:])
    assert flipped > 0


def test_ecphory_breaks_exact_ties_only(sql):
    """Three memories the lanes score equally (same text): the one written within 24 h (recency) and
    then the never-cued ones rank by ecphory, not by name; a memory with a better search score stays
    above all of them whatever its ecphory."""
    text = "the invoice archive moves to the new bucket"
    remember(sql, text, "a-cued", cues_history=[{"at": "2026-07-01T00:00:00+00:00", "cue": "x"}])
    remember(sql, text, "b-old")
    remember(sql, text, "c-recent", now=NOW - timedelta(hours=1))
    remember(sql, "the invoice archive moves to the new bucket on friday", "d-longer",
             cues_history=[{"at": "2026-07-01T00:00:00+00:00", "cue": "x"}])
    res = recall(sql, "invoice archive bucket friday zebra", diversity="off")
    names = [h["name"] for h in res["hits"]]
    assert names == ["d-longer", "c-recent", "b-old", "a-cued"], res["hits"]
    by = {h["name"]: h for h in res["hits"]}
    assert by["c-recent"]["score"] == by["b-old"]["score"] == by["a-cued"]["score"] < by["d-longer"]["score"]
    assert by["c-recent"]["ecphory"] > by["b-old"]["ecphory"] > by["a-cued"]["ecphory"]
    assert by["d-longer"]["ecphory"] < by["c-recent"]["ecphory"]
    assert [n for n, _ in search(sql, "invoice archive bucket friday zebra", diversity="off")] == ["d-longer", "a-cued", "b-old", "c-recent"]


def test_a_fact_used_then_restated_loses_to_the_new_statement(sql):
    """bench/memory_signals.py's case in small: the stale statement was recalled (surfaced) a month
    ago, the new one never; dna.search ranks the stale one first (its wording), recall the new one
    (the stale one decays from its last use, default decay), and with decay off they tie back to
    search's order."""
    seed(sql)
    remember(sql, "Maria: my gym is Iron Temple", "stale", now=NOW - timedelta(days=45),
             last_surfaced=(NOW - timedelta(days=35)).isoformat())
    remember(sql, "Maria: these days my gym is FitHub", "current", now=NOW - timedelta(days=10))
    query = "Maria gym"
    assert [n for n, _ in search(sql, query)][:2] == ["stale", "current"]
    res = recall(sql, query)
    assert [h["name"] for h in res["hits"]][:2] == ["current", "stale"]
    by = {h["name"]: h for h in res["hits"]}
    assert by["current"]["memory_factor"] == 1.0
    assert by["stale"]["memory_factor"] == max(0.05, math.exp(-35 / 15))
    assert [h["name"] for h in recall(sql, query, decay="off")["hits"]][:2] == ["stale", "current"]


def test_decay_rules(sql):
    """surfaced (default): from last_surfaced, a never-surfaced memory keeps 1; written: from when it
    was written when never surfaced; off: 1 for every memory."""
    remember(sql, "the staging database password rotates", "old", now=NOW - timedelta(days=30))
    remember(sql, "the staging database password rotates weekly", "recent", now=NOW - timedelta(days=1))
    sql.execute("UPDATE dna.dna_instances SET spec = spec || '{\"last_surfaced\": \"2026-07-04T15:00:00+00:00\"}' "
                "WHERE scope = %s AND name = 'recent'", (S,))
    by = lambda res: {h["name"]: h for h in res["hits"]}  # noqa: E731
    default = by(recall(sql, "staging database password"))
    assert default["old"]["retention"] == 1.0
    assert default["recent"]["retention"] == round(math.exp(-5 / 15), 4)
    written = by(recall(sql, "staging database password", decay="written"))
    assert written["old"]["retention"] == round(math.exp(-30 / 15), 4)
    assert written["recent"]["retention"] == round(math.exp(-5 / 15), 4)     # last_surfaced wins
    off = recall(sql, "staging database password", decay="off")
    assert {h["retention"] for h in off["hits"]} == {1.0} and off["decay"] == "off"
    assert recall(sql, "staging database password")["decay"] == "surfaced"
    assert one(sql, "SELECT dna.memory_retention(%s, %s, 'surfaced') = dna.memory_retention(%s, %s)",
               (Jsonb({"last_surfaced": "2026-07-01T00:00:00Z"}), NOW, Jsonb({"last_surfaced": "2026-07-01T00:00:00Z"}), NOW))


@pytest.mark.parametrize("bad", ["sometimes", "", "OFF "])
def test_decay_refuses_unknown_rules(sql, bad):
    remember(sql, "anything at all", "x")
    if bad == "OFF ":                                       # case and blanks are forgiven
        assert recall(sql, "anything", decay=bad)["decay"] == "off"
        return
    with pytest.raises(psycopg.Error) as info:
        recall(sql, "anything", decay=bad)
    assert info.value.sqlstate == "22023" and "decay" in str(info.value)


def test_memory_factors_is_the_documented_product(sql):
    spec = {"summary": "alpha beta", "affect": "ominous", "last_surfaced": "2026-07-01T15:00:00+00:00",
            "engram_stability_days": 10, "cues_history": [{"at": "2026-07-01T15:00:00+00:00", "cue": "x"}]}
    factor, retention, affect, ecphory = sql.execute(
        "SELECT * FROM dna.memory_factors('Engram', %s, 'alpha beta', %s)", (Jsonb(spec), NOW)).fetchone()
    assert retention == pytest.approx(math.exp(-8 / 10), abs=1e-12) and affect == 1.4
    assert ecphory == pytest.approx(0.55, abs=1e-12)          # the phrase in the summary, cued before: no novelty
    assert factor == max(0.05, retention) * 1.4                # the standing; ecphory breaks ties only
    factor, retention, affect, ecphory = sql.execute(
        "SELECT * FROM dna.memory_factors('Research', %s, 'gamma', %s)", (Jsonb({"title": "alpha"}), NOW)).fetchone()
    assert retention is None and affect is None and factor == 1.0 and ecphory == pytest.approx(0.05)


def test_explain_gives_the_memory_part(sql):
    """explain => true: each hit's memory factors and their terms, and for the answer the pool, the
    filters and the degradations (the lanes and the fusion are the hit's own rank_*/score fields)."""
    seed(sql)
    remember(sql, "archive the nightly reports safely", "surfaced", affect="regret",
             last_surfaced="2026-07-01T15:00:00+00:00")
    query = "archive nightly reports"
    plain = recall(sql, query)
    assert "explain" not in plain and all("explain" not in h for h in plain["hits"])
    res = one(sql, "SELECT dna.recall(%s, %s, dna.fake_embed(%s), k => 5, reconsolidate => false, now => %s, "
                   "explain => true)", (S, query, query, NOW))
    assert [h["name"] for h in res["hits"]] == [h["name"] for h in recall(sql, query, k=5)["hits"]]
    for h in res["hits"]:
        m = h["explain"]["memory"]
        t = m["tie_break"]
        assert m["factor"] == h["memory_factor"] and t["ecphory"] == h["ecphory"] and "ecphory" not in m
        assert t["ecphory"] == pytest.approx(t["cue_match"] + t["adjustment"], abs=1e-12)
        assert m["decay"] == "surfaced" and m["stability_days"] == 15
        assert m["factor"] == max(0.05, m["retention"]) * m["affect"]
        assert h["score"] == h["search_score"] * m["factor"]
    by = {h["name"]: h["explain"]["memory"] for h in res["hits"]}
    assert by["surfaced"]["affect"] == 1.3 and by["surfaced"]["decays_from"] == "2026-07-01T15:00:00+00:00"
    assert by["surfaced"]["days_since"] == pytest.approx(8.0)
    assert by["surfaced"]["tie_break"]["matched"] == ["summary-tokens"]
    assert res["explain"]["ranking"].startswith("search_score × memory_factor")
    assert "ecphory desc" in res["explain"]["ranking"]
    assert "decays_from" not in by["m01"] and by["m01"]["retention"] == 1.0
    e = res["explain"]
    assert e["pool"] == {"asked": 15, "returned": e["pool"]["returned"], "in_force": e["pool"]["returned"],
                         "dropped": 0, "lane_candidates": 100}
    assert e["filters"]["kinds"] == ["Engram", "Episode", "Evidence", "Research", "Turn"] and e["filters"]["valid_time"] == "2026-07-09T15:00:00+00:00"
    assert e["degradations"] == [] and e["decay"] == "surfaced"
    lexical = one(sql, "SELECT dna.recall(%s, %s, k => 5, reconsolidate => false, now => %s, explain => true)",
                  (S, query, NOW))
    assert lexical["explain"]["degradations"] == ["no query embedding: lexical lane only"]
    zero = one(sql, "SELECT dna.recall(%s, %s, array_fill(0, ARRAY[384])::vector, k => 5, reconsolidate => false, "
                    "now => %s, explain => true)", (S, query, NOW))
    assert zero["explain"]["degradations"] == ["zero query embedding: lexical lane only"] and zero["degraded"] is True


def test_explain_counts_what_validity_dropped(sql):
    """A read of the past (as_of) judges validity from the versions, after the lanes: the pool then
    holds the forgotten memory and explain says one candidate was dropped."""
    seed(sql)
    one(sql, "SELECT dna.forget(%s, 'm01', now => %s)", (S, NOW - timedelta(days=1)))
    res = one(sql, "SELECT dna.recall(%s, 'safely archive old reports', k => 5, now => %s, as_of => clock_timestamp(), "
                   "explain => true)", (S, NOW))
    assert "m01" not in [h["name"] for h in res["hits"]]
    pool = res["explain"]["pool"]
    assert pool["dropped"] == 1 and pool["returned"] - pool["in_force"] == 1
    assert "valid_time" not in res["explain"]["filters"]    # the lanes did not filter validity; the versions did


def test_the_client_passes_decay_and_explain(client):
    mem = client.memory
    mem.remember("team", "the release train leaves on tuesdays", now=NOW - timedelta(days=30))
    res = mem.recall("team", "release train", now=NOW, reconsolidate=False, decay="written", explain=True)
    assert res["decay"] == "written" and res["hits"][0]["retention"] == round(math.exp(-30 / 15), 4)
    assert res["hits"][0]["explain"]["memory"]["days_since"] == pytest.approx(30.0)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        mem.recall("team", "release train", decay="sometimes")
