"""diversity / duplicate_similarity / mmr_lambda at the doors (issue 27 item 2): the MCP tools search and
recall (in-memory client of the real server) and REST (POST /v1/search, GET /v1/memories/search), each
calling dna.search / dna.recall: a memory remembered twice answers once by default and twice with
diversity off; a bad value or an unknown argument is refused."""
from __future__ import annotations

import anyio
from fastapi.testclient import TestClient
from mcp import Client as McpClient

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider

TWICE = "Deploys to production happen on Thursdays after the standup"


def test_mcp_search_and_recall_collapse_a_memory_remembered_twice(door_world):
    from pydna.doors.mcp_server import create_server

    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with McpClient(server) as mcp:
            tools = {t.name: t for t in (await mcp.list_tools()).tools}
            for name in ("diversity", "duplicate_similarity", "mmr_lambda"):
                assert name in tools["search"].input_schema["properties"], name
            assert "diversity" in tools["recall"].input_schema["properties"]
            for text in (TWICE, TWICE + ".", "The staging database is restored every Monday"):
                made = await mcp.call_tool("remember", {"summary": text})
                assert not made.is_error, made.content
            query = {"query": "when do deploys to production happen"}
            names = lambda got: [h["name"] for h in got.structured_content["hits"]]  # noqa: E731
            default = await mcp.call_tool("search", query)
            off = await mcp.call_tool("search", {**query, "diversity": "off"})
            assert len(names(off)) == len(names(default)) + 1
            mmr = await mcp.call_tool("search", {**query, "diversity": "mmr", "mmr_lambda": 0.5})
            assert not mmr.is_error and len(names(mmr)) == len(names(default))
            recalled = await mcp.call_tool("recall", {**query, "reconsolidate": False})
            recalled_off = await mcp.call_tool("recall", {**query, "reconsolidate": False, "diversity": "off"})
            assert len(names(recalled_off)) == len(names(recalled)) + 1
            bad = await mcp.call_tool("search", {**query, "diversity": "collapse", "mmr_lambda": 0.5})
            assert bad.is_error and "SQLSTATE 22023" in bad.content[0].text and "mmr_lambda is MMR's" in bad.content[0].text
            bad = await mcp.call_tool("recall", {**query, "diversity": "mmr"})
            assert bad.is_error

    try:
        anyio.run(main)
    finally:
        door.close()


def test_rest_search_and_recall_take_diversity_and_refuse_bad_values(door_world):
    from pydna.doors.rest import create_app

    with TestClient(create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)) as http:
        h = auth(door_world.keys["alice"])
        for text in (TWICE, TWICE + ".", "The staging database is restored every Monday"):
            r = http.post("/v1/memories", headers=h, json={"summary": text})
            assert r.status_code == 200, r.text
        query = {"query": "when do deploys to production happen"}
        names = lambda r: [x["name"] for x in r.json()["hits"]]  # noqa: E731
        default = http.post("/v1/search", headers=h, json=query)
        off = http.post("/v1/search", headers=h, json={**query, "diversity": "off"})
        assert default.status_code == off.status_code == 200 and len(names(off)) == len(names(default)) + 1
        r = http.post("/v1/search", headers=h, json={**query, "mmr_lambda": 0.5, "duplicate_similarity": 0.9})
        assert r.status_code == 200 and len(names(r)) == len(names(default))
        params = {"q": query["query"], "reconsolidate": "false"}
        recalled = http.get("/v1/memories/search", headers=h, params=params)
        recalled_off = http.get("/v1/memories/search", headers=h, params={**params, "diversity": "off"})
        assert len(names(recalled_off)) == len(names(recalled)) + 1
        for body in ({**query, "diversity": "dedupe"}, {**query, "duplicate_similarity": 1.5},
                     {**query, "mmr_lambda": -0.1}, {**query, "diversty": "off"}):
            r = http.post("/v1/search", headers=h, json=body)
            assert r.status_code == 422, (body, r.text)
        assert "diversty" in http.post("/v1/search", headers=h, json={**query, "diversty": "off"}).text
        r = http.post("/v1/search", headers=h, json={**query, "diversity": "off", "duplicate_similarity": 0.9})
        assert r.status_code == 422 and r.json()["error"]["sqlstate"] == "22023" and r.json()["error"]["hint"]
        r = http.get("/v1/memories/search", headers=h, params={**params, "diversity": "mmr"})
        assert r.status_code == 422
