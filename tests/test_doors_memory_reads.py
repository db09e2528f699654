"""A memory by name and its history at both doors (issue 27 item 6), through their real clients: REST
`GET /v1/memories/{name}` and `/history` (TestClient), MCP `get_memory` and `memory_history` (the official
SDK over stdio). The history names the role that forgot a shared memory; another role's personal memory is
not found (404 / P0002), as psql would answer."""
from __future__ import annotations

import anyio
from fastapi.testclient import TestClient
from mcp import Client

from doors_world import ROLES, SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.doors.rest import create_app
from test_doors_mcp import _call, _data, _error, _server


def test_rest_get_and_history_name_who_forgot(door_world):
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice, bob = auth(door_world.keys["alice"]), auth(door_world.keys["bob"])
        assert client.post("/v1/memories", headers=alice, json={"name": "deploy-day",
                                                                 "summary": "Deploys happen on Thursdays"}).status_code == 200
        assert client.post("/v1/memories/deploy-day/forget", headers=bob).status_code == 200
        got = client.get("/v1/memories/deploy-day", headers=alice)
        assert got.status_code == 200, got.text
        body = got.json()
        assert body["spec"]["summary"] == "Deploys happen on Thursdays" and body["in_force"] is False
        assert body["last_op"] == "forget" and body["last_recorded_by"] == ROLES["bob"]
        history = client.get("/v1/memories/deploy-day/history", headers=alice).json()["versions"]
        assert [(v["op"], v["recorded_by"]) for v in history] == [("remember", ROLES["alice"]), ("forget", ROLES["bob"])]
        assert client.post("/v1/memories", headers=alice, json={"name": "diary", "summary": "a private note",
                                                                 "personal": True}).status_code == 200
        mine = client.get("/v1/memories/diary", headers=alice, params={"personal": "true"})
        assert mine.status_code == 200 and mine.json()["spec"]["summary"] == "a private note"
        hidden = client.get("/v1/memories/diary", headers=bob, params={"personal": "true"})
        assert hidden.status_code == 404 and hidden.json()["error"]["sqlstate"] == "P0002"
        typo = client.get("/v1/memories/deploy-dya", headers=alice)
        assert typo.status_code == 404 and "deploy-day" in typo.json()["error"]["hint"]


def test_mcp_get_memory_and_history(door_world):
    async def main():
        async with Client(_server(door_world.dsn_of("alice"))) as alice:
            made = _data(await _call(alice, "remember", summary="The cache lives in redis", name="cache-home"))
            assert made["name"] == "cache-home"
            got = _data(await _call(alice, "get_memory", name="cache-home"))
            assert got["spec"]["summary"] == "The cache lives in redis" and got["in_force"] is True
            history = _data(await _call(alice, "memory_history", name="cache-home"))
            assert [v["recorded_by"] for v in history["versions"]] == [ROLES["alice"]]
            _error(await _call(alice, "get_memory", name="cache-hom"), "P0002")
            refused = await _call(alice, "get_memory", name="cache-home", identity="bob")
            assert refused.is_error and "identity" in refused.content[0].text
    anyio.run(main)


def test_rest_refuses_unknown_query_parameters_by_name(door_world):
    """A query parameter a route does not take is refused (422, in the error shape, naming the one meant),
    as an unknown body field is; nothing runs."""
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice = auth(door_world.keys["alice"])
        listed = client.get("/v1/memories", headers=alice, params={"kinds": "Engram"})
        assert listed.status_code == 422, listed.text
        err = listed.json()["error"]
        assert "unknown query parameter 'kinds' (did you mean 'kind'?)" in err["message"] and err["field"] == "query"
        recalled = client.get("/v1/memories/search", headers=alice, params={"q": "x", "bogus": "1", "kk": "3"})
        assert recalled.status_code == 422 and "'bogus', 'kk' (did you mean 'k'?)" in recalled.json()["error"]["message"]
        got = client.get("/v1/memories/deploy-day", headers=alice, params={"persnal": "true"})
        assert got.status_code == 422 and "did you mean 'personal'?" in got.json()["error"]["message"]
        assert client.get("/v1/memories", headers=alice, params={"kind": "Engram"}).status_code == 200
        assert client.get("/healthz", params={"x": "1"}).status_code == 422
