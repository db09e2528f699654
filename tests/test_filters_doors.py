"""The metadata filter from every door: Python (Client.search, Client.memory), the CLI (--filter JSON,
--where key=value, --metadata/--meta, JSONL fields kept as metadata), MCP (in-memory client of the real
server) and REST (the ASGI app), each calling the same SQL verb; a malformed filter comes back with
SQLSTATE 22023 and its hint."""
from __future__ import annotations

import json

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient
from mcp import Client as McpClient
from typer.testing import CliRunner

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.cli import app


def test_client_index_keeps_record_fields_as_metadata_and_search_filters(client):
    report = client.index("docs", [
        {"name": "a", "body": "rank fusion of two lanes", "user": "u1", "year": 2024, "tags": ["ir"]},
        {"name": "b", "body": "rank fusion for memories", "user": "u2", "year": 2025,
         "metadata": {"tags": ["ir", "memory"], "year": 2026}},
        {"name": "c", "body": "rank fusion again", "kind": "Note"},
    ], kind="Doc")
    assert report.inserted == 3
    hits = client.search("docs", "rank fusion", filter={"year": {"gte": 2025}})
    assert [(h.name, h.metadata) for h in hits] == [("b", {"user": "u2", "year": 2026, "tags": ["ir", "memory"]})]
    assert {h.name for h in client.search("docs", "rank fusion", filter={"tags": {"contains": "ir"}})} == {"a", "b"}
    assert client.search("docs", "rank fusion", filter={"user": "u1"}).names == ["a"]
    # re-indexing a record replaces its metadata (a record without extra fields has none)
    client.index("docs", [{"name": "a", "body": "rank fusion of two lanes"}], kind="Doc")
    assert client.search("docs", "rank fusion", filter={"user": "u1"}).names == []
    # the receipt path takes the filter too
    assert client.search("docs", "rank fusion", filter={"user": "u2"}, receipt=True).names == ["b"]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown operator 'gtx'"):
        client.search("docs", "rank fusion", filter={"year": {"gtx": 1}})


def test_memory_metadata_and_filters_in_python(client):
    mem = client.memory
    mem.remember("team", "Deploys happen on Thursdays", tags=["ops"], metadata={"user": "u1"})
    mem.remember("team", "The office is in Lisbon", tags=["place"], metadata={"user": "u2"})
    hits = mem.recall("team", "deploys office", k=5, filter={"user": "u1"}, reconsolidate=False)["hits"]
    assert [h["metadata"]["user"] for h in hits] == ["u1"]
    assert mem.list("team", filter={"tags": {"contains": "place"}})["total"] == 1
    receipt = mem.recall("team", "deploys office", filter={"user": "u2"}, receipt=True)
    assert [h["summary"] for h in receipt["hits"]] == ["The office is in Lisbon"]


def _cli(dna_dsn, *args, code=0):
    result = CliRunner().invoke(app, ["--dsn", dna_dsn, *[str(a) for a in args]])
    assert result.exit_code == code, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def test_cli_filter_where_metadata_and_jsonl(dna_dsn, tmp_path, monkeypatch):
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "home"))
    notes = tmp_path / "notes.jsonl"
    notes.write_text("\n".join(json.dumps(r) for r in [
        {"name": "n1", "text": "rank fusion notes", "user": "u1", "year": 2024},
        {"name": "n2", "text": "rank fusion more notes", "user": "u2", "year": 2025}]) + "\n")
    _cli(dna_dsn, "index", notes, "--scope", "cli", "--embedder", "fake")
    out = json.loads(_cli(dna_dsn, "search", "rank fusion", "--scope", "cli", "--embedder", "fake", "--json",
                          "--where", "user=u2").stdout)
    assert [h["name"] for h in out["hits"]] == ["n2"] and out["hits"][0]["metadata"] == {"user": "u2", "year": 2025}
    out = json.loads(_cli(dna_dsn, "search", "rank fusion", "--scope", "cli", "--embedder", "fake", "--json",
                          "--filter", '{"year": {"lt": 2025}}', "--where", "user=u1").stdout)
    assert [h["name"] for h in out["hits"]] == ["n1"]
    # numbers read as numbers: year=2025 matches the JSON number
    out = json.loads(_cli(dna_dsn, "search", "rank fusion", "--scope", "cli", "--embedder", "fake", "--json",
                          "--where", "year=2025").stdout)
    assert [h["name"] for h in out["hits"]] == ["n2"]
    _cli(dna_dsn, "memory", "remember", "deploys are on thursdays", "--scope", "team", "--embedder", "fake",
         "--meta", "user=u1", "--metadata", '{"project": "kernel"}', "--tag", "ops")
    out = json.loads(_cli(dna_dsn, "memory", "recall", "deploys", "--scope", "team", "--embedder", "fake", "--json",
                          "--where", "project=kernel", "--filter", '{"tags": {"contains": "ops"}}').stdout)
    assert [h["metadata"]["user"] for h in out["hits"]] == ["u1"]
    out = json.loads(_cli(dna_dsn, "memory", "list", "--scope", "team", "--json", "--where", "user=u9").stdout)
    assert out["total"] == 0
    bad = _cli(dna_dsn, "search", "x", "--scope", "cli", "--embedder", "fake", "--filter", '{"year": {"gt": "soon"}}',
               code=1)
    assert "22023" in bad.stderr and "ISO-8601" in bad.stderr
    assert "is not KEY=VALUE" in _cli(dna_dsn, "search", "x", "--scope", "cli", "--where", "user", code=1).stderr
    assert "must be a JSON object" in _cli(dna_dsn, "search", "x", "--scope", "cli", "--filter", "[1]", code=1).stderr


def test_mcp_tools_take_filter_and_metadata(door_world):
    from pydna.doors.mcp_server import create_server

    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with McpClient(server) as mcp:
            tools = {t.name: t for t in (await mcp.list_tools()).tools}
            for tool in ("search", "recall", "list_memories"):
                assert "filter" in tools[tool].input_schema["properties"], tool
            assert "metadata" in tools["remember"].input_schema["properties"]
            for user, text in (("u1", "Deploys happen on Thursdays"), ("u2", "The office is in Lisbon")):
                made = await mcp.call_tool("remember", {"summary": text, "metadata": {"user": user}, "tags": ["t"]})
                assert not made.is_error, made.content
            got = await mcp.call_tool("recall", {"query": "deploys office", "filter": {"user": "u2"}})
            assert [h["metadata"]["user"] for h in got.structured_content["hits"]] == ["u2"]
            got = await mcp.call_tool("search", {"query": "deploys office", "filter": {"user": "u1"}})
            assert [h["metadata"]["user"] for h in got.structured_content["hits"]] == ["u1"]
            got = await mcp.call_tool("list_memories", {"filter": {"tags": {"contains": "t"}}})
            assert got.structured_content["total"] == 2
            bad = await mcp.call_tool("recall", {"query": "x", "filter": {"user": {"is": "u1"}}})
            assert bad.is_error and bad.content[0].text.startswith("SQLSTATE 22023: filter.user.is: unknown operator")
            assert "hint" in bad.structured_content["error"]

    try:
        anyio.run(main)
    finally:
        door.close()


def test_rest_takes_filter_and_metadata(door_world):
    from pydna.doors.rest import create_app

    with TestClient(create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)) as http:
        h = auth(door_world.keys["alice"])
        for user, text in (("u1", "Deploys happen on Thursdays"), ("u2", "The office is in Lisbon")):
            r = http.post("/v1/memories", headers=h, json={"summary": text, "metadata": {"user": user}})
            assert r.status_code == 200, r.text
        r = http.get("/v1/memories/search", headers=h, params={"q": "deploys office", "filter": '{"user": "u2"}'})
        assert [x["metadata"]["user"] for x in r.json()["hits"]] == ["u2"]
        r = http.post("/v1/search", headers=h, json={"query": "deploys office", "filter": {"user": "u1"}})
        assert [x["metadata"]["user"] for x in r.json()["hits"]] == ["u1"]
        r = http.get("/v1/memories", headers=h, params={"filter": '{"user": "u1"}'})
        assert r.json()["total"] == 1
        r = http.get("/v1/memories/search", headers=h, params={"q": "x", "filter": '{"user": {"in": "u1"}}'})
        assert r.status_code == 422 and r.json()["error"]["sqlstate"] == "22023" and r.json()["error"]["hint"]
        r = http.get("/v1/memories", headers=h, params={"filter": "[1"})
        assert r.status_code == 422 and "not valid JSON" in r.json()["error"]["message"]
