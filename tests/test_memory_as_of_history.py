"""as_of speed (issue 13 item 4): an as_of recall reads the text digest and tsvector the history keeps
of each version (dna.dna_versions.text_digest / text_tsv, set by the append-only trigger) instead of
recomputing every moved memory's text. These pin the answers the shortcut could break: the lane's
first `depth` chosen after re-scoring (not by text rank), a restatement that keeps the text (or
comes back to it), a version pruned past as_of, a scope whose ts_config changed after the versions
were written, versions written before revision 0016 (filled by its backfill), and a writer that
tries to set the derived columns itself."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pydna import migrate


def _remember(sql, name, spec, scope="team"):
    return sql.execute("SELECT dna.remember(%s, %s, name => %s, model_id => 'dna-fake-hash-v1')",
                       (scope, Jsonb(spec), name)).fetchone()[0]


def _recall(sql, query, as_of, k=5, embed=False, scope="team"):
    return sql.execute("SELECT dna.recall(%s, %s, CASE WHEN %s THEN dna.fake_embed(%s) END, 'dna-fake-hash-v1', "
                       "k => %s, as_of => %s, reconsolidate => false)",
                       (scope, query, embed, query, k, as_of)).fetchone()[0]


def _clock(sql):
    return sql.execute("SELECT clock_timestamp()").fetchone()[0]


def test_past_lane_keeps_its_best_after_rescoring_beyond_depth(sql):
    # 14 memories believed "the office is in lisbon" (equal text rank: ties in name order), all
    # restated later; m12 carries affect surprise (x1.5), so it comes first though it is 12th by
    # name among the equal past texts.
    for i in range(1, 15):
        spec = {"summary": "the office is in lisbon", "area": "place"}
        if i == 12:
            spec["affect"] = "surprise"
        _remember(sql, f"m{i:02d}", spec)
    before = _clock(sql)
    for i in range(1, 15):
        _remember(sql, f"m{i:02d}", {"summary": f"the office moved to porto ({i})", "area": "place"})
    # The past texts are candidates of dna.search's pool like any other (issue 13 item 4): at k = 1
    # the pool is dna.search's first max(3k, 10) = 10 (equal scores: by name), m12 is not in it, as
    # for a recall now; at k = 5 (pool 15) the factor lifts it to the top.
    got = _recall(sql, "lisbon", before, k=1)
    assert [h["name"] for h in got["hits"]] == ["m01"], got
    assert got["hits"][0]["ranked_by"] == "past_text" and got["hits"][0]["summary"] == "the office is in lisbon"
    assert got["as_of_past_text"] == [f"m{i:02d}" for i in range(1, 15)]
    got = _recall(sql, "lisbon", before, k=5)
    assert [h["name"] for h in got["hits"]][:3] == ["m12", "m01", "m02"]
    got["hits"] = got["hits"][:3]
    # score = dna.search's fused score x the memory factors (dna.memory_factors, issue 15): the past
    # texts are in the lexical lane (equal BM25: z-score 1), default convex fusion, dense_weight 0.5:
    # (1 - 0.5) x 1 each; equal factors but for m12's affect
    assert [round(h["search_score"], 12) for h in got["hits"]] == [0.5, 0.5, 0.5]
    factor = got["hits"][1]["memory_factor"]
    assert [round(h["score"], 12) for h in got["hits"]] == [round(1.5 * factor * 0.5, 12), round(factor * 0.5, 12),
                                                          round(factor * 0.5, 12)]
    # With a query embedding: the same answers (a past text has no dense lane, and recall ranks no
    # second time by cosine since issue 15)
    for k, want in ((1, ["m01"]), (5, ["m12", "m01", "m02", "m03", "m04"])):
        got = _recall(sql, "lisbon", before, k=k, embed=True)
        assert [h["name"] for h in got["hits"]] == want, got
        assert all(h["ranked_by"] == "past_text" for h in got["hits"])
    # Today's text is porto: not found by lisbon.
    assert _recall(sql, "lisbon", None)["hits"] == []


def test_same_text_restated_is_not_past_text(sql):
    _remember(sql, "tags", {"summary": "deploys happen on fridays", "tags": ["ops"]})
    _remember(sql, "back", {"summary": "the cat is called miso"})
    before = _clock(sql)
    _remember(sql, "tags", {"summary": "deploys happen on fridays", "tags": ["ops", "release"]})  # text kept
    _remember(sql, "back", {"summary": "the cat is called tofu"})
    _remember(sql, "back", {"summary": "the cat is called miso"})                                # text back
    got = _recall(sql, "fridays miso", before)
    assert got["as_of_past_text"] == []
    hits = {h["name"]: h for h in got["hits"]}
    assert set(hits) == {"tags", "back"} and not any("ranked_by" in h for h in hits.values())
    assert hits["tags"]["tags"] == ["ops"] and hits["tags"]["as_of_version"] == 1


def test_version_pruned_past_as_of_is_truncated_not_past_text(sql):
    # An Engram keeps 3 versions: three restatements after as_of prune the version believed then.
    _remember(sql, "old", {"summary": "the office is in lisbon"})
    before = _clock(sql)
    for town in ("porto", "faro", "braga"):
        _remember(sql, "old", {"summary": f"the office is in {town}"})
    got = _recall(sql, "lisbon braga", before)
    assert got["as_of_past_text"] == [] and got["as_of_truncated"] == ["old"] and got["hits"] == []


def test_a_memory_created_after_as_of_is_not_a_blind_spot_once_its_versions_are_pruned(sql):
    """Recalls reconsolidate (each appends a version; an Engram keeps 3): a memory written after
    as_of soon has no version 1. It did not exist at as_of (dna_instances.created_at says so), so it
    is absent from the answer, not named in as_of_truncated; one that existed then still is."""
    _remember(sql, "old", {"summary": "the office is in lisbon"})
    before = _clock(sql)
    _remember(sql, "new", {"summary": "the office kitchen has lisbon coffee"})
    for _ in range(3):
        sql.execute("SELECT dna.recall('team', 'coffee kitchen')")                 # reconsolidates "new" only
    first = sql.execute("SELECT min(version) FROM dna.dna_versions WHERE name = 'new'").fetchone()[0]
    assert first > 1                                                             # its first versions pruned
    got = _recall(sql, "lisbon coffee kitchen", before)
    assert got["as_of_truncated"] == [] and "new" not in [h["name"] for h in got["hits"]]
    for town in ("porto", "faro", "braga"):                                      # "old" loses its version at as_of
        _remember(sql, "old", {"summary": f"the office is in {town}"})
    assert _recall(sql, "coffee kitchen braga", before)["as_of_truncated"] == ["old"]


def test_scope_ts_config_changed_after_the_versions_recomputes(sql):
    # Versions stored under english (running -> run); the scope then reads with simple (running).
    _remember(sql, "run", {"summary": "running the office in lisbon"})
    before = _clock(sql)
    _remember(sql, "run", {"summary": "walking the office in porto"})
    assert sql.execute("SELECT ts_config::text FROM dna.dna_versions WHERE name = 'run' AND version = 1").fetchone()[0] == "english"
    sql.execute("SELECT dna.set_search_config('team', ts_config => 'simple')")
    got = _recall(sql, "running", before)
    assert [h["name"] for h in got["hits"]] == ["run"] and got["hits"][0]["ranked_by"] == "past_text"


def test_derived_text_columns_come_from_the_row_itself(sql):
    _remember(sql, "d", {"summary": "the office is in lisbon"})
    row = sql.execute("SELECT text_digest, text_tsv::text, ts_config::text, md5(dna.memory_text(kind, spec)) "
                      "FROM dna.dna_versions WHERE name = 'd'").fetchone()
    assert row[0] == row[3] and row[1] == "'lisbon':5 'offic':2" and row[2] == "english"
    # A write that carries its own digest cannot land one (UPDATE refused; INSERT recomputed).
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        sql.execute("UPDATE dna.dna_versions SET text_digest = 'forged' WHERE name = 'd'")


def _rounded(value):
    """Scores to 9 places (revision 0016 rounds search scores to 12 significant digits)."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _as_of_view(answer):
    """What an as_of recall read from the history: each hit's name, version, text and lane, the names reported."""
    return {"hits": sorted((h["name"], h.get("as_of_version"), h.get("summary"), h.get("ranked_by")) for h in answer["hits"]),
            **{key: answer[key] for key in ("as_of_past_text", "as_of_truncated", "as_of_redacted")}}


SEED = [("office", "the office is in lisbon"), ("cat", "the cat is called miso and lives in lisbon"),
        ("deploy", "deploys happen on fridays")]


def test_versions_written_at_0015_answer_the_same_after_upgrade(empty_dsn):
    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for name, text in SEED:
            _remember(conn, name, {"summary": text})
        before = _clock(conn)
        _remember(conn, "office", {"summary": "the office moved to porto"})
        _remember(conn, "deploy", {"summary": "deploys happen on fridays", "tags": ["ops"]})
        want = {q: _recall(conn, q, before) for q in ("lisbon", "porto", "fridays office")}
        assert {h["name"]: h.get("ranked_by") for h in want["lisbon"]["hits"]}["office"] == "past_text"
    migrate.upgrade(empty_dsn, "head")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_versions WHERE text_digest IS NULL OR text_tsv IS NULL "
                            "OR ts_config IS NULL").fetchone()[0] == 0
        # the same history read (issue 15 multiplies scores by the memory factors: compared without scores)
        assert {q: _as_of_view(_recall(conn, q, before)) for q in want} == {q: _as_of_view(a) for q, a in want.items()}
    migrate.downgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'dna' "
                            "AND table_name = 'dna_versions' AND column_name = 'text_digest'").fetchone()[0] == 0
        assert _rounded({q: _recall(conn, q, before) for q in want}) == _rounded(want)
        _remember(conn, "cat", {"summary": "the cat moved to porto"})          # 0015's trigger writes again
