"""Issue 27's open findings at the doors, through their real clients: REST (TestClient) names an unknown
body field and the field meant (item 2); a read (search, recall, list) of a scope that does not exist is
an error naming the nearest scope at REST (404) and MCP (a tool error) — a write into a new scope still
works (item 3); MCP's log of a refused argument names it (item 7). MCP runs in memory (the SDK's Client
on the server object)."""
from __future__ import annotations

import logging

import anyio
from fastapi.testclient import TestClient
from mcp import Client

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.doors.mcp_server import create_server
from pydna.doors.rest import create_app


def test_rest_names_an_unknown_body_field_and_the_one_meant(door_world):
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice = auth(door_world.keys["alice"])
        typo = client.post("/v1/search", headers=alice, json={"query": "deploys", "kk": 3})
        assert typo.status_code == 422, typo.text
        err = typo.json()["error"]
        assert err["status"] == 422 and err["sqlstate"] is None and err["field"] == "body.kk"
        assert "unknown field 'kk' (did you mean 'k'?)" in err["message"], err
        assert "POST /v1/search" in err["message"] and "query" in err["message"]
        synonym = client.post("/v1/memories", headers=alice, json={"text": "Deploys happen on Thursdays"})
        assert synonym.status_code == 422
        assert "unknown field 'text' (did you mean 'summary'?)" in synonym.json()["error"]["message"]
        two = client.post("/v1/memories", headers=alice, json={"summary": "x", "persnal": True, "bogus": 1})
        message = two.json()["error"]["message"]
        assert "unknown fields 'bogus', 'persnal' (did you mean 'personal'?)" in message, message
        nested = client.post("/v1/memories/batch", headers=alice, json={"items": [{"sumary": "a"}]})
        assert nested.status_code == 422
        message = nested.json()["error"]["message"]
        assert "unknown field 'sumary' (did you mean 'summary'?) in items[0]" in message, message
        assert nested.json()["error"]["field"] == "body.items[0].sumary"
        # nothing was written
        assert client.get("/v1/memories", headers=alice, params={"scope": "other"}).status_code == 404


def test_rest_refuses_reads_of_a_scope_that_does_not_exist(door_world):
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice = auth(door_world.keys["alice"])
        made = client.post("/v1/memories", headers=alice, json={"summary": "Deploys happen on Thursdays",
                                                                "scope": "deployments"})
        assert made.status_code == 200, made.text                 # a write creates its scope
        for response in (client.post("/v1/search", headers=alice, json={"query": "deploys", "scope": "deploymnets"}),
                         client.get("/v1/memories/search", headers=alice, params={"q": "deploys",
                                                                                   "scope": "deploymnets"}),
                         client.get("/v1/memories", headers=alice, params={"scope": "deploymnets"})):
            assert response.status_code == 404, response.text
            err = response.json()["error"]
            assert err["field"] == "scope" and "sqlstate" in err
            assert "scope 'deploymnets'" in err["message"] and "nearest scopes: 'deployments'" in err["message"]
        # the scope that exists reads as before, an empty answer in it included
        hits = client.post("/v1/search", headers=alice, json={"query": "deploys", "scope": "deployments"})
        assert hits.status_code == 200 and hits.json()["hits"]
        empty = client.get("/v1/memories", headers=alice, params={"scope": "deployments", "kind": "Research"})
        assert empty.status_code == 200 and empty.json()["memories"] == []


def test_mcp_refuses_reads_of_a_scope_that_does_not_exist(door_world):
    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with Client(server) as alice:
            made = await alice.call_tool("remember", {"summary": "Deploys happen on Thursdays",
                                                      "scope": "deployments"})
            assert not made.is_error, made.content
            for tool, args in (("search", {"query": "deploys"}), ("recall", {"query": "deploys"}),
                               ("list_memories", {})):
                refused = await alice.call_tool(tool, {**args, "scope": "deploymnets"})
                assert refused.is_error, (tool, refused)
                text = refused.content[0].text
                assert "scope 'deploymnets'" in text and "nearest scopes: 'deployments'" in text, text
                assert refused.structured_content["error"]["status"] == 404
                found = await alice.call_tool(tool, {**args, "scope": "deployments"})
                assert not found.is_error, (tool, found.content)
    try:
        anyio.run(main)
    finally:
        door.close()


def test_mcp_logs_the_name_of_a_refused_argument(door_world, caplog):
    """The SDK logs the locations of a refusal; the strict argument models put each unknown argument at its
    own (before: one error at the model, logged as ``rejected arguments: ['']``)."""
    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with Client(server) as alice:
            with caplog.at_level(logging.INFO):
                text = await alice.call_tool("remember", {"text": "Deploys happen on Thursdays"})
            assert text.is_error and "unknown argument 'text' (did you mean 'summary'?)" in text.content[0].text
            logged = [r.getMessage() for r in caplog.records if "rejected arguments" in r.getMessage()]
            assert logged and "['text']" in logged[-1], logged
            assert "Thursdays" not in text.content[0].text          # nor is the refused value echoed (it was)
    try:
        anyio.run(main)
    finally:
        door.close()


def test_mcp_names_the_argument_that_holds_a_nul_byte(door_world):
    """A NUL byte in an argument is refused at the door naming the argument, as REST names the field
    (before: the driver's "PostgreSQL text fields cannot contain NUL (0x00) bytes", naming nothing)."""
    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with Client(server) as alice:
            for tool, args, where in (("recall", {"query": "a\u0000b"}, "query"),
                                      ("remember", {"summary": "x", "metadata": {"k": "a\u0000"}}, "metadata.k"),
                                      ("remember_many", {"items": [{"summary": "a\u0000"}]}, "items[0].summary")):
                refused = await alice.call_tool(tool, args)
                assert refused.is_error, (tool, refused)
                text = refused.content[0].text
                assert text.startswith(f"argument {where!r} holds a NUL byte (U+0000)"), text
                assert "0x00" not in text, text
                err = refused.structured_content["error"]
                assert err["status"] == 422 and err["field"] == where, err
            assert (await alice.call_tool("list_memories", {})).structured_content["total"] == 0
    try:
        anyio.run(main)
    finally:
        door.close()


def test_mcp_unknown_argument_refusal_is_just_the_refusal(door_world):
    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with Client(server) as alice:
            refused = await alice.call_tool("remember", {"text": "Deploys happen on Thursdays"})
            assert refused.is_error
            text = refused.content[0].text
            assert text.startswith("unknown argument 'text' (did you mean 'summary'?)"), text
            assert "validation error" not in text and "type=" not in text and "Arguments" not in text, text
            assert refused.structured_content["error"]["field"] == "text"
    try:
        anyio.run(main)
    finally:
        door.close()


def test_batch_and_401_refusals_point_at_what_exists(door_world):
    """`memories` on the batch route means `items` (REST and MCP share the synonym table); the 401 for a
    missing key names the CLI's `dna keys create` beside the SQL."""
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice = auth(door_world.keys["alice"])
        batch = client.post("/v1/memories/batch", headers=alice, json={"memories": [{"summary": "a"}]})
        assert batch.status_code == 422, batch.text
        assert "unknown field 'memories' (did you mean 'items'?)" in batch.json()["error"]["message"], batch.json()
        anonymous = client.get("/v1/memories")
        assert anonymous.status_code == 401
        message = anonymous.json()["error"]["message"]
        assert "dna keys create <role>" in message and "dna.create_api_key" in message, message
    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with Client(server) as mcp:
            refused = await mcp.call_tool("remember_many", {"memories": [{"summary": "a"}]})
            assert refused.is_error
            assert refused.content[0].text.startswith("unknown argument 'memories' (did you mean 'items'?)")
    try:
        anyio.run(main)
    finally:
        door.close()
