"""Claims in the CLI's text form at both doors (issue 27 item 6): `"User/me::prod_db=postgres17"` is read
as the claim the CLI's `--claim` writes, through REST (TestClient) and MCP (the SDK over stdio); a
malformed one is refused naming the form, not with a raw validation dump."""
from __future__ import annotations

import anyio
from fastapi.testclient import TestClient
from mcp import Client

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.claims import parse_claim
from pydna.doors.rest import create_app
from test_doors_mcp import _call, _data, _server

CLAIM = {"subject": "User/me", "predicate": "prod_db", "object": "postgres17", "polarity": "asserts"}


def test_parse_claim():
    assert parse_claim("User/me::prod_db=postgres17") == CLAIM
    assert parse_claim("deploy_day=!friday") == {"predicate": "deploy_day", "object": "friday", "polarity": "denies"}
    for bad in ("::x=1", "no equals sign", "User/me::=x"):
        try:
            parse_claim(bad)
        except ValueError as exc:
            assert "[SUBJECT::]PREDICATE=[!]OBJECT" in str(exc)
        else:
            raise AssertionError(bad)


def test_rest_takes_claims_as_text(door_world):
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice = auth(door_world.keys["alice"])
        made = client.post("/v1/memories", headers=alice, json={
            "name": "prod17", "summary": "prod was upgraded to PostgreSQL 17",
            "claims": ["User/me::prod_db=postgres17", {"predicate": "region", "object": "eu"}]})
        assert made.status_code == 200, made.text
        spec = client.get("/v1/memories/prod17", headers=alice).json()["spec"]
        assert spec["claims"][0] == CLAIM and spec["claims"][1]["predicate"] == "region"
        bad = client.post("/v1/memories", headers=alice, json={"summary": "x", "claims": ["prod_db postgres17"]})
        assert bad.status_code == 422
        assert "[SUBJECT::]PREDICATE=[!]OBJECT" in bad.text and "claims" in bad.text


def test_mcp_takes_claims_as_text(door_world):
    async def main():
        async with Client(_server(door_world.dsn_of("alice"))) as alice:
            _data(await _call(alice, "remember", summary="prod was upgraded to PostgreSQL 17", name="prod17",
                              claims=["User/me::prod_db=postgres17"]))
            got = _data(await _call(alice, "get_memory", name="prod17"))
            assert got["spec"]["claims"] == [CLAIM]
            bad = await _call(alice, "remember", summary="x", claims=["prod_db postgres17"])
            assert bad.is_error and "[SUBJECT::]PREDICATE=[!]OBJECT" in bad.content[0].text
    anyio.run(main)
