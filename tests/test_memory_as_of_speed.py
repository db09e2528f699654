"""A fast as_of (issue 13 item 4): dna.as_of_past_texts finds the memories restated since as_of and
their text then (the tsvector only when it matches the query), dna.search(past => dna.past_text[])
takes them typed, and its lexical lane fetches only as many more rows as can leave (again with all
of them when too few were kept). These pin what the shortcuts could change: the lane's rows when the
leaving records fill its top, the typed and the JSON form answering alike, the refusals."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb


def _remember(sql, name, spec, scope="team"):
    return sql.execute("SELECT dna.remember(%s, %s, name => %s, model_id => 'dna-fake-hash-v1')",
                       (scope, Jsonb(spec), name)).fetchone()[0]


def _clock(sql):
    return sql.execute("SELECT clock_timestamp()").fetchone()[0]


def _past(sql, as_of, query, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    return sql.execute(f"SELECT p.kind, p.name, p.tenant, p.tsv::text FROM dna.as_of_past_texts('team', %(t)s, %(q)s{args}) AS p "
                       "ORDER BY p.name", {"t": as_of, "q": query, **kw}).fetchall()


def test_as_of_past_texts_lists_the_restated_with_their_text_then(sql):
    _remember(sql, "hq", {"summary": "the office is in lisbon"})
    _remember(sql, "cat", {"summary": "the cat is called miso"})
    _remember(sql, "kept", {"summary": "deploys happen on fridays"})
    _remember(sql, "quiet", {"summary": "nothing changes here"})
    t = _clock(sql)
    _remember(sql, "hq", {"summary": "we moved to porto"})
    _remember(sql, "cat", {"summary": "the cat is called tofu"})
    _remember(sql, "kept", {"summary": "deploys happen on fridays", "tags": ["ops"]})   # same text: not listed
    _remember(sql, "new", {"summary": "a memory written after t"})                     # no version at t
    got = _past(sql, t, "lisbon office")
    # every memory whose text at t is not today's; the text then only where it matches the query
    assert got == [("Engram", "cat", "", None), ("Engram", "hq", "", "'lisbon':5 'offic':2")]
    assert [r[3] for r in _past(sql, t, "miso")] == ["'call':4 'cat':2 'miso':5", None]
    assert [r[3] for r in _past(sql, t, "   ")] == [None, None]           # a blank query ranks nothing
    assert [r[1] for r in _past(sql, t, None)] == ["cat", "hq"]
    assert _past(sql, t, "lisbon", kinds=["Research"]) == []
    assert _past(sql, _clock(sql), "lisbon") == []                        # nothing restated since now


@pytest.mark.parametrize("call, state, msg", [
    ("dna.as_of_past_texts('team', NULL, 'x')", "22023", "as_of must be given"),
    ("dna.as_of_past_texts('team', 'infinity', 'x')", "22007", "as_of must be a finite timestamp"),
    ("dna.as_of_past_texts('team', now(), 'x', kinds => ARRAY['Document'])", "22023", "memory"),
    ("dna.as_of_past_texts('', now(), 'x')", "22023", "scope"),
])
def test_as_of_past_texts_refuses_bad_input(sql, call, state, msg):
    with pytest.raises(psycopg.Error, match=msg) as err:
        sql.execute(f"SELECT * FROM {call}")
    assert err.value.sqlstate == state


def _hits(sql, query, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    return sql.execute(f"SELECT s.name, s.score, s.lexical_score, s.rank_lexical, s.similarity FROM dna.search("
                       f"'team', %(q)s, dna.fake_embed(%(q)s), 'dna-fake-hash-v1'{args}) AS s", {"q": query, **kw}).fetchall()


def test_typed_past_answers_as_the_json_form(sql):
    _remember(sql, "trip", {"summary": "a lisbon trip"})
    _remember(sql, "hq", {"summary": "moved to porto"})
    _remember(sql, "cafe", {"summary": "coffee in porto and lisbon"})
    items = [{"kind": "Engram", "name": "hq", "tenant": "", "tsv": "'lisbon':1 'offic':2"},
             {"kind": "Engram", "name": "cafe", "tenant": "", "tsv": None}]
    typed = sql.execute("SELECT array_agg(ROW(p.kind, p.name, p.tenant, p.tsv)::dna.past_text) "
                        "FROM jsonb_to_recordset(%s) AS p(kind text, name text, tenant text, tsv tsvector)",
                        (Jsonb(items),)).fetchone()[0]
    json_form = _hits(sql, "porto lisbon office", past_texts=Jsonb(items))
    assert json_form == _hits(sql, "porto lisbon office", past=typed)
    names = {r[0]: r for r in json_form}
    assert "cafe" not in names and names["hq"][2] > 0 and names["hq"][4] is None


def test_past_texts_and_past_together_are_refused(sql):
    _remember(sql, "trip", {"summary": "a lisbon trip"})
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="give one of them"):
        sql.execute("SELECT * FROM dna.search('team', 'lisbon', NULL, 'dna-fake-hash-v1', past_texts => '[]', "
                    "past => ARRAY[]::dna.past_text[])")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="past: every element needs kind, name and tenant"):
        sql.execute("SELECT * FROM dna.search('team', 'lisbon', NULL, 'dna-fake-hash-v1', "
                    "past => ARRAY[ROW('Engram', NULL, '', NULL)::dna.past_text])")


def _lexical_reference(sql, query, leaving, depth):
    """The lane's rows as one run over every match gives them: each document's BM25 today (a search
    without past texts, every match a candidate), the leaving records taken out, the first depth."""
    rows = sql.execute("SELECT s.name, s.lexical_score FROM dna.search('team', %s, NULL, 'dna-fake-hash-v1', "
                       "k => 1000, candidates => 1000) AS s WHERE s.lexical_score IS NOT NULL", (query,)).fetchall()
    kept = sorted(((-score, name) for name, score in rows if name not in leaving))[:depth]
    return [name for _, name in kept]


@pytest.mark.parametrize("leaving, candidates", [
    # the leaving records fill the lane's top: its first run (cut 3 + 3 more) keeps one, so it runs
    # again with as many more as the records
    ({"m01", "m02", "m03", "m04", "m05"}, 3),
    # a few leave: the first run (cut 4 + 2 more) keeps enough
    ({"m02", "m05"}, 4),
    # more records leave than the lane's cut, spread out
    ({"m01", "m03", "m05", "m07", "m09", "m11"}, 2),
])
def test_lexical_lane_with_leaving_records_keeps_its_depth(sql, leaving, candidates):
    # 12 documents matching "lisbon", each a different BM25 score (fewer repetitions, longer text)
    for i in range(1, 13):
        _remember(sql, f"m{i:02d}", {"summary": " ".join(["lisbon"] * (13 - i)) + " note" * i})
    past = Jsonb([{"kind": "Engram", "name": n, "tenant": "", "tsv": None} for n in sorted(leaving)])
    got = sql.execute("SELECT s.name, s.rank_lexical FROM dna.search('team', 'lisbon', NULL, 'dna-fake-hash-v1', "
                      "k => 20, candidates => %s, past_texts => %s) AS s ORDER BY s.rank_lexical",
                      (candidates, past)).fetchall()
    assert [name for name, _ in got] == _lexical_reference(sql, "lisbon", leaving, candidates)
    assert [rank for _, rank in got] == list(range(1, candidates + 1))


def test_as_of_past_text_names_sorted_bytewise(sql):
    for name in ("beta", "Alpha", "gamma", "Zed"):
        _remember(sql, name, {"summary": f"{name} is in lisbon"})
    t = _clock(sql)
    for name in ("beta", "Alpha", "gamma", "Zed"):
        _remember(sql, name, {"summary": f"{name} moved to porto"})
    got = sql.execute("SELECT dna.recall('team', 'lisbon', NULL, 'dna-fake-hash-v1', as_of => %s, reconsolidate => false)",
                      (t,)).fetchone()[0]
    assert got["as_of_past_text"] == ["Alpha", "Zed", "beta", "gamma"]
    assert {h["name"] for h in got["hits"]} == {"beta", "Alpha", "gamma", "Zed"}
    assert all(h["ranked_by"] == "past_text" for h in got["hits"])
