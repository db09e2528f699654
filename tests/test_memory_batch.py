"""Batch writes (dna.remember_many): many memories in one call and one transaction, a result per item;
all or nothing by default with the bad item named by its position, or the good items written and the
bad ones reported; the same rows, versions and search answers as one dna.remember per item. From SQL,
Python, MCP and REST."""
from __future__ import annotations

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient
from mcp import Client as McpClient
from psycopg.types.json import Jsonb

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider

NOW = "2026-06-01T12:00:00Z"
TEXTS = ["deploys happen on thursdays", "the office is in lisbon", "standups are at nine",
         "the api runs on port 8080", "reviews need two approvals"]


def _items(texts=TEXTS, **extra):
    return [{"spec": {"summary": t, "tags": [f"t{i % 2}"], **extra}} for i, t in enumerate(texts)]


def _many(sql, scope, items, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    return sql.execute(f"SELECT dna.remember_many(%(scope)s, %(items)s, now => %(now)s, "
                       f"embeddings => ARRAY(SELECT dna.fake_embed(e ->> 'summary') FROM jsonb_array_elements(%(items)s) "
                       f"WITH ORDINALITY AS x(i, o), LATERAL (SELECT x.i -> 'spec' AS e) AS y ORDER BY x.o){args})",
                       {"scope": scope, "items": Jsonb(items), "now": NOW, **kw}).fetchone()[0]


def _state(sql, scope):
    return {
        "rows": sql.execute("SELECT name, spec - 'encoding_context', metadata FROM dna.dna_instances WHERE scope = %s "
                            "ORDER BY name", (scope,)).fetchall(),
        "versions": sql.execute("SELECT name, version, op FROM dna.dna_versions WHERE scope = %s ORDER BY name, version",
                                (scope,)).fetchall(),
        "search": sql.execute("SELECT name, kind, text_hash, embedding::text, metadata, valid_at FROM dna.dna_search_docs_384 "
                              "WHERE scope = %s ORDER BY name", (scope,)).fetchall(),
        "recall": [(h["name"], h["score"]) for h in sql.execute(
            "SELECT dna.recall(%s, 'office deploys', dna.fake_embed('office deploys'), now => %s, "
            "reconsolidate => false) -> 'hits'", (scope, NOW)).fetchone()[0]],
    }


def test_a_batch_writes_what_one_remember_per_item_writes(sql):
    out = _many(sql, "batch", _items())
    assert (out["count"], out["created"], out["failed"]) == (5, 5, 0)
    assert [r["ord"] for r in out["results"]] == [1, 2, 3, 4, 5]
    assert all(r["action"] == "created" and r["version"] == 1 and r["index"]["embedded"] for r in out["results"])
    for item in _items():
        sql.execute("SELECT dna.remember('single', %s, now => %s, embedding => dna.fake_embed(%s))",
                    (Jsonb(item["spec"]), NOW, item["spec"]["summary"]))
    assert _state(sql, "batch") == _state(sql, "single")
    names = {r["name"] for r in out["results"]}
    # the same batch again changes nothing; a restated item is updated and keeps its life history
    again = _many(sql, "batch", _items())
    assert again["unchanged"] == 5 and sql.execute(
        "SELECT count(*) FROM dna.dna_versions WHERE scope = 'batch'").fetchone()[0] == 5
    sql.execute("SELECT dna.forget('batch', %s, now => '2026-06-02T00:00:00Z')", (out["results"][0]["name"],))
    restated = _many(sql, "batch", [{"spec": {"summary": TEXTS[0], "tags": ["new"]}}])
    assert restated["results"][0]["action"] == "updated"
    spec = sql.execute("SELECT spec FROM dna.dna_instances WHERE scope = 'batch' AND name = %s",
                       (out["results"][0]["name"],)).fetchone()[0]
    assert spec["valid_to"] == "2026-06-02T00:00:00+00:00" and spec["tags"] == ["new"]
    assert names == {n for (n,) in sql.execute("SELECT name FROM dna.dna_instances WHERE scope = 'batch'")}


def test_items_carry_names_kinds_times_and_metadata(sql):
    out = _many(sql, "mixed", [
        {"spec": {"summary": "first"}, "name": "m1", "now": "2026-01-01T00:00:00Z"},
        {"spec": {"title": "a research note", "body": "longer text"}, "kind": "Research", "name": "r1"},
        {"spec": {"summary": "third", "metadata": {"user": "u1"}}}])
    assert [(r["kind"], r["name"]) for r in out["results"]][:2] == [("Engram", "m1"), ("Research", "r1")]
    assert sql.execute("SELECT spec ->> 'created_at' FROM dna.dna_instances WHERE name = 'm1'").fetchone()[0] == \
        "2026-01-01T00:00:00+00:00"
    hits = sql.execute("SELECT dna.recall('mixed', 'third first note', filter => '{\"user\": \"u1\"}', "
                       "reconsolidate => false) -> 'hits'").fetchone()[0]
    assert [h["summary"] for h in hits] == ["third"]


@pytest.mark.parametrize("items,position,code,text", [
    ([{"spec": {"summary": "ok"}}, {"spec": {"summary": "x", "affect": "joy"}}], 2, "22023", "is not an affect"),
    ([{"spec": {"summary": "ok"}}, {"spec": {}}], 2, "22023", "an Engram needs spec.summary"),
    ([{"spec": {"summary": "ok"}}, {"spec": {"summary": "y" * 281}}], 2, "22001", "the limit is 280"),
    ([{"spec": {"summary": "ok"}}, {"spec": {"summary": "z"}, "text": "?"}], 2, "22023", "unknown key 'text'"),
    ([{"spec": {"summary": "ok"}}, 7], 2, "22023", "an item is a JSON object"),
    ([{"spec": {"summary": "ok"}}, {"spec": {"summary": "w"}, "now": "soon"}], 2, "22007", "ISO-8601"),
    ([{"spec": {"summary": "ok"}}, {"spec": {"summary": "v"}, "kind": "Doc"}], 2, "22023", "Doc"),
])
def test_a_bad_item_fails_the_batch_naming_its_position_and_nothing_is_written(sql, items, position, code, text):
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT dna.remember_many('bad', %s)", (Jsonb(items),))
    assert err.value.sqlstate == code, err.value
    assert err.value.diag.message_primary.startswith(f"item {position}: ") and text in str(err.value)
    assert "Nothing was written" in err.value.diag.message_hint
    assert sql.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = 'bad'").fetchone()[0] == 0


def test_non_atomic_writes_the_good_items_and_reports_the_bad(sql):
    out = sql.execute("SELECT dna.remember_many('part', %s, atomic => false)", (Jsonb([
        {"spec": {"summary": "one"}}, {"spec": {"summary": "two", "affect": "joy"}}, {"spec": {"summary": "one"}},
        {"spec": {"summary": "three"}}]),)).fetchone()[0]
    assert (out["created"], out["failed"]) == (2, 2)
    assert [(r["ord"], r.get("action"), r.get("sqlstate")) for r in out["results"]] == [
        (1, "created", None), (2, None, "22023"), (3, None, "22023"), (4, "created", None)]
    assert "names one memory with item 1" in out["results"][2]["error"]
    assert sql.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = 'part'").fetchone()[0] == 2


def test_two_items_of_one_memory_and_bad_arguments_are_refused(sql):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="items 1 and 3 name one memory"):
        sql.execute("SELECT dna.remember_many('d', %s)", (Jsonb(_items(["a", "b", "a"])),))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="items must be a JSON array"):
        sql.execute("SELECT dna.remember_many('d', '{}')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="one element per indexed text"):
        sql.execute("SELECT dna.remember_many('d', %s, embeddings => ARRAY[dna.fake_embed('a')])", (Jsonb(_items(["a", "b"])),))
    with pytest.raises(psycopg.errors.ProgramLimitExceeded):
        sql.execute("SELECT dna.remember_many('d', (SELECT jsonb_agg(jsonb_build_object('spec', "
                    "jsonb_build_object('summary', 'm' || g))) FROM generate_series(1, 10001) AS g))")
    assert sql.execute("SELECT dna.remember_many('d', '[]')").fetchone()[0]["count"] == 0


def test_passages_are_further_texts_a_memory_is_found_by(sql):
    out = sql.execute("SELECT dna.remember_many('views', %s, embeddings => ARRAY[dna.fake_embed('standups'), "
                      "dna.fake_embed('daily meeting at nine'), NULL, dna.fake_embed('lunch')])",
                      (Jsonb([{"spec": {"summary": "standups"}, "name": "s", "passages": ["daily meeting at nine", "scrum"]},
                              {"spec": {"summary": "lunch"}, "name": "l"}]),)).fetchone()[0]
    assert out["created"] == 2
    rows = sql.execute("SELECT name, passage, body, embedding IS NOT NULL FROM dna.dna_search_docs_384 "
                       "WHERE scope = 'views' ORDER BY 1, 2").fetchall()
    assert rows == [("l", 0, "lunch", True), ("s", 0, "standups", True), ("s", 1, "daily meeting at nine", True),
                    ("s", 2, "scrum", False)]
    hits = sql.execute("SELECT dna.recall('views', 'scrum', reconsolidate => false) -> 'hits'").fetchone()[0]
    assert [(h["name"], h["summary"]) for h in hits] == [("s", "standups")]          # found by a passage, shown as itself
    # fewer passages next time: the others go (a memory's passage 0 never does)
    sql.execute("SELECT dna.remember_many('views', %s)", (Jsonb([{"spec": {"summary": "standups"}, "name": "s"}]),))
    assert sql.execute("SELECT array_agg(passage) FROM dna.dna_search_docs_384 WHERE name = 's'").fetchone()[0] == [0]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="item 1: passages must be a list"):
        sql.execute("SELECT dna.remember_many('views', %s)", (Jsonb([{"spec": {"summary": "x"}, "passages": "y"}]),))
    with pytest.raises(psycopg.errors.RestrictViolation):
        sql.execute("DELETE FROM dna.dna_search_docs_384 WHERE name = 's' AND passage = 0")


def test_a_personal_batch_lands_in_the_callers_partition(sql):
    import os

    role = f"dna_batch_{os.getpid()}"
    sql.execute(f"DROP ROLE IF EXISTS {role}")
    sql.execute(f"CREATE ROLE {role}")
    sql.execute("SELECT dna.grant_app_role(%s)", (role,))
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'batch-oid')", (role,))
    try:
        sql.execute(f"SET ROLE {role}")
        out = sql.execute("SELECT dna.remember_many('team', %s, personal => true)", (Jsonb(_items(["mine"])),)).fetchone()[0]
        assert out["tenant"] == "personal:batch-oid" and out["created"] == 1
        sql.execute("RESET ROLE")
        assert sql.execute("SELECT tenant FROM dna.dna_search_docs_384 WHERE scope = 'team'").fetchall() == [
            ("personal:batch-oid",)]
    finally:
        sql.execute("RESET ROLE")
        sql.execute(f"DROP OWNED BY {role}")
        sql.execute(f"DROP ROLE {role}")


def test_python_embeds_the_batch_in_one_call(client):
    calls = []
    embedder = client.embedder
    original = embedder.embed
    embedder.embed = lambda texts: calls.append(list(texts)) or original(texts)
    out = client.memory.remember_many("py", [{"summary": t, "tags": ["x"]} for t in TEXTS[:3]] +
                                      [{"spec": {"summary": "with spec"}, "metadata": {"user": "u1"}, "name": "n4"}])
    assert out["created"] == 4 and len(calls) == 1 and len(calls[0]) == 4
    assert out["results"][3]["name"] == "n4"
    hits = client.memory.recall("py", "with spec", filter={"user": "u1"}, reconsolidate=False)["hits"]
    assert [h["name"] for h in hits] == ["n4"]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="item 2: "):
        client.memory.remember_many("py", [{"summary": "fine"}, {"summary": "bad", "affect": "joy"}])


def test_mcp_and_rest_take_a_batch(door_world):
    from pydna.doors.mcp_server import create_server
    from pydna.doors.rest import create_app

    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with McpClient(server) as mcp:
            got = await mcp.call_tool("remember_many", {"items": [{"summary": t} for t in TEXTS[:2]]})
            assert not got.is_error and got.structured_content["created"] == 2
            bad = await mcp.call_tool("remember_many", {"items": [{"summary": "ok"}, {"summary": "x", "text": "y"}]})
            assert bad.is_error and "text" in bad.content[0].text
            bad = await mcp.call_tool("remember_many", {"items": [{"summary": "ok"}, {"kind": "Engram"}]})
            assert bad.is_error and bad.content[0].text.startswith("SQLSTATE 22023: item 2: ")
    try:
        anyio.run(main)
    finally:
        door.close()
    with TestClient(create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)) as http:
        h = auth(door_world.keys["bob"])
        r = http.post("/v1/memories/batch", headers=h, json={"items": [{"summary": t} for t in TEXTS[2:]],
                                                             "atomic": False})
        assert r.status_code == 200, r.text
        assert r.json()["created"] == 3 and [x["ord"] for x in r.json()["results"]] == [1, 2, 3]
        r = http.post("/v1/memories/batch", headers=h, json={"items": [{"summary": "ok"}, {"summary": "z" * 281}]})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("item 2: ")
        r = http.post("/v1/memories/batch", headers=h, json={"items": [{"summary": "ok"}], "role": "alice"})
        assert r.status_code == 422
