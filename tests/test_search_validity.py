"""dna.search filters validity inside each lane: a forgotten memory (or one valid only from a later
time) is not a search hit at that valid time, in either lane, and cannot starve the valid ones.
Plain SQL, as any language would call it."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from psycopg.types.json import Jsonb

S = "validity"
FAKE = "dna-fake-hash-v1"
NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)


def one(sql, query, params=()):
    return sql.execute(query, params).fetchone()[0]


def remember(sql, summary, *, spec=None, now=NOW):
    spec = {"summary": summary, **(spec or {})}
    return one(sql, "SELECT dna.remember(%s, %s, now => %s, embedding => dna.fake_embed(dna.memory_text('Engram', %s)))",
               (S, Jsonb(spec), now, Jsonb(spec)))["name"]


def hits(sql, query, *, valid_time="default", embed=True, **kw):
    args = {"q": query, "k": kw.get("k", 10), "cand": kw.get("candidates"), "vt": valid_time}
    vt = "" if valid_time == "default" else ", valid_time => %(vt)s"
    emb = "dna.fake_embed(%(q)s)" if embed else "NULL"
    rows = sql.execute(f"SELECT name, rank_dense, rank_lexical FROM dna.search('{S}', %(q)s, {emb}, '{FAKE}', "
                       f"k => %(k)s, candidates => %(cand)s{vt})", args).fetchall()
    return rows


def names(rows):
    return [r[0] for r in rows]


def test_forgotten_memory_leaves_search_and_revive_brings_it_back(sql):
    name = remember(sql, "the zebra crossing near the office floods in spring")
    sql.execute("SELECT dna.index_document(%s, 'Doc', 'zebra-doc', 'zebra crossing guide', dna.fake_embed('zebra crossing guide'), %s)",
                (S, FAKE))
    assert set(names(hits(sql, "zebra crossing"))) == {name, "zebra-doc"}
    one(sql, "SELECT dna.forget(%s, %s, now => %s)", (S, name, NOW + timedelta(days=1)))
    assert names(hits(sql, "zebra crossing")) == ["zebra-doc"]                   # now(): after the forget
    assert names(hits(sql, "zebra crossing", embed=False)) == ["zebra-doc"]      # lexical lane alone too
    # valid time is a parameter: before the forget it was in force; NULL turns the filter off
    assert set(names(hits(sql, "zebra crossing", valid_time=NOW + timedelta(hours=1)))) == {name, "zebra-doc"}
    assert set(names(hits(sql, "zebra crossing", valid_time=None))) == {name, "zebra-doc"}
    assert names(hits(sql, "zebra crossing", valid_time=NOW - timedelta(days=1))) == ["zebra-doc"]  # not yet valid
    one(sql, "SELECT dna.revive(%s, %s, now => %s)", (S, name, NOW + timedelta(days=2)))
    assert set(names(hits(sql, "zebra crossing"))) == {name, "zebra-doc"}


def test_memory_valid_from_a_later_time_is_not_found_before(sql):
    later = NOW + timedelta(days=30)
    name = remember(sql, "the quokka exhibit opens", spec={"valid_from": later.isoformat()})
    assert names(hits(sql, "quokka exhibit", valid_time=NOW + timedelta(days=1))) == []
    assert names(hits(sql, "quokka exhibit", valid_time=later + timedelta(days=1))) == [name]


def test_every_model_of_a_memory_follows_its_validity(sql):
    """A memory indexed with two models: the forget reaches both documents."""
    name = remember(sql, "the heron nests by the river")
    sql.execute("SELECT dna.register_model('other-384', 384)")
    sql.execute("SELECT dna.index_document(%s, 'Engram', %s, 'the heron nests by the river', "
                "dna.fake_embed('heron river'), 'other-384')", (S, name))
    one(sql, "SELECT dna.forget(%s, %s, now => %s)", (S, name, NOW + timedelta(days=1)))
    rows = sql.execute("SELECT d.model_id, d.valid_at = i.valid_at FROM dna.dna_search_docs_384 AS d "
                       "JOIN dna.dna_instances AS i USING (scope, kind, name, tenant) "
                       "WHERE d.scope = %s AND d.name = %s ORDER BY d.model_id", (S, name)).fetchall()
    assert rows == [(FAKE, True), ("other-384", True)]
    assert one(sql, "SELECT count(*) FROM dna.search(%s, 'heron river', model_id => 'other-384')", (S,)) == 0


def test_forgotten_memories_do_not_starve_either_lane(sql):
    """Thirty forgotten memories match the query better than the one in force; with 5 candidates per
    lane the valid one must still come from both lanes (the filter runs before each lane's cut)."""
    for i in range(30):
        name = remember(sql, f"okapi okapi okapi stripes number {i}")
        one(sql, "SELECT dna.forget(%s, %s, now => %s)", (S, name, NOW + timedelta(hours=1)))
    keep = remember(sql, "an okapi grazing quietly in the forest clearing at dawn")
    rows = hits(sql, "okapi okapi stripes", k=1, candidates=5)
    assert rows == [(keep, 1, 1)]
    assert hits(sql, "okapi okapi stripes", k=1, candidates=5, embed=False) == [(keep, None, 1)]
    # without the filter the forgotten ones win
    assert names(hits(sql, "okapi okapi stripes", k=1, candidates=5, valid_time=None)) != [keep]


def test_recall_is_unchanged_for_the_past(sql):
    """dna.recall filters validity at its world time in the lanes, and a transaction-time read (as_of)
    still sees what was believed then."""
    name = remember(sql, "the pelican pier closes at dusk")
    one(sql, "SELECT dna.forget(%s, %s, now => %s)", (S, name, NOW + timedelta(days=1)))
    now_hits = one(sql, "SELECT dna.recall(%s, 'pelican pier', now => %s)", (S, NOW + timedelta(days=2)))
    assert now_hits["hits"] == []
    then = one(sql, "SELECT dna.recall(%s, 'pelican pier', now => %s, reconsolidate => false)",
               (S, NOW + timedelta(hours=12)))
    assert [h["name"] for h in then["hits"]] == [name]


def test_client_search_follows_validity(client):
    mem = client.memory
    name = mem.remember(S, "the ibis colony moved to the lagoon", now=NOW)["name"]
    mem.forget(S, name, now=NOW + timedelta(days=1))
    assert [h.name for h in client.search(S, "ibis lagoon").hits] == []
    assert [h.name for h in client.search(S, "ibis lagoon", valid_time=NOW + timedelta(hours=1)).hits] == [name]
    assert [h.name for h in client.search(S, "ibis lagoon", include_retired=True).hits] == [name]


def test_cli_recall_valid_time_and_include_retired(client, dna_dsn, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from pydna.cli import app

    name = client.memory.remember(S, "the stork nest on the chimney", now=NOW)["name"]
    client.memory.forget(S, name, now=NOW + timedelta(days=1))
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def recall(*extra):
        result = runner.invoke(app, ["--dsn", dna_dsn, "recall", "stork chimney", "--scope", S, "--embedder", "fake",
                                     "--json", *extra])
        assert result.exit_code == 0, result.stdout + result.stderr
        import json
        return [h["name"] for h in json.loads(result.stdout)["hits"]]

    assert recall() == []
    assert recall("--include-retired") == [name]
    assert recall("--valid-time", (NOW + timedelta(hours=2)).isoformat()) == [name]
    bad = runner.invoke(app, ["--dsn", dna_dsn, "recall", "x", "--scope", S, "--valid-time", "yesterday"])
    assert bad.exit_code == 1 and "ISO-8601" in bad.stderr
