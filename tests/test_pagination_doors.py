"""Pages at both doors and in the CLI (issue 27 item 6), through their real clients: REST (TestClient)
`POST /v1/search {"offset"}`, `GET /v1/memories?offset=`, `GET /v1/memories/search?offset=`; MCP (the
official SDK over stdio) search / recall / list_memories with `offset`; `dna memory recall|list --offset`
(CliRunner). Each walks one ranking by next_offset, no name twice, none left out; a bad offset is refused
by the door's schema (422 / a tool error) or by the database (22023 with its hint)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

import pydna
from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.doors.rest import create_app
from test_doors_mcp import _call, _data, _error, _server

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
TEXT = "deploy window rollback notes"
DOCS = [f"d{i:02d}" for i in range(24)]
MEMORIES = [f"m{i:02d}" for i in range(23)]


def _seed(dsn: str, scope: str = SCOPE) -> None:
    """24 tied documents and 23 tied memories (one text, one time): the order is the names' (the pages ask
    diversity off: one text is what duplicate collapse answers once)."""
    client = pydna.connect(dsn, embedder=FakeEmbeddingProvider())
    try:
        for name in DOCS:
            client.conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                                (scope, name, f"{TEXT} document", f"{TEXT} document", "dna-fake-hash-v1"))
        client.memory.remember_many(scope, [{"name": n, "summary": f"{TEXT} memory"} for n in MEMORIES], now=NOW)
    finally:
        client.close()


def _walk(page) -> list[str]:
    """Follow next_offset from 0; every page's offset is the one asked."""
    names, offset, pages = [], 0, 0
    while offset is not None:
        body = page(offset)
        assert body["offset"] == offset, body
        names += [h["name"] for h in body.get("hits", body.get("memories", []))]
        offset, pages = body["next_offset"], pages + 1
        assert pages < 20
    return names


def test_rest_pages_search_recall_and_list(door_world):
    _seed(door_world.dsn)
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        alice = auth(door_world.keys["alice"])

        def ok(response):
            assert response.status_code == 200, response.text
            return response.json()

        docs = _walk(lambda o: ok(client.post("/v1/search", headers=alice,
                                               json={"query": TEXT, "k": 5, "kinds": ["Doc"], "offset": o,
                                                     "diversity": "off"})))
        assert docs == DOCS
        recalled = _walk(lambda o: ok(client.get("/v1/memories/search", headers=alice, params={
            "q": TEXT, "k": 5, "offset": o, "reconsolidate": "false", "now": NOW.isoformat(), "diversity": "off"})))
        assert recalled == MEMORIES
        listed = _walk(lambda o: ok(client.get("/v1/memories", headers=alice, params={"limit": 5, "offset": o})))
        assert sorted(listed) == MEMORIES and len(listed) == 23
        assert ok(client.get("/v1/memories", headers=alice, params={"limit": 5, "offset": 20}))["next_offset"] is None

        schema = client.get("/v1/memories", headers=alice, params={"offset": -1})
        assert schema.status_code == 422 and "offset" in schema.text
        too_far = client.get("/v1/memories/search", headers=alice, params={"q": TEXT, "k": 5, "offset": 999})
        assert too_far.status_code == 422, too_far.text
        err = too_far.json()["error"]
        assert err["sqlstate"] == "22023" and "offset" in err["message"] and "next_offset" in err["hint"]
        body = client.post("/v1/search", headers=alice, json={"query": TEXT, "offset": 9001})
        assert body.status_code == 422 and "offset" in body.text
        typo = client.get("/v1/memories", headers=alice, params={"ofset": 5})
        assert typo.status_code == 422 and "did you mean 'offset'?" in typo.json()["error"]["message"]


def test_mcp_pages_search_recall_and_list(door_world):
    _seed(door_world.dsn)

    async def main():
        async with Client(_server(door_world.dsn_of("alice"))) as alice:
            tools = {t.name: t.input_schema["properties"] for t in (await alice.list_tools()).tools}
            for tool in ("search", "recall", "list_memories"):
                assert tools[tool]["offset"]["minimum"] == 0 and "next_offset" in tools[tool]["offset"]["description"]

            async def page(tool, **args):
                return _data(await _call(alice, tool, **args))

            names, offset = [], 0
            while offset is not None:
                body = await page("search", query=TEXT, k=7, kinds=["Doc"], offset=offset, diversity="off")
                names += [h["name"] for h in body["hits"]]
                offset = body["next_offset"]
            assert names == DOCS
            names, offset = [], 0
            while offset is not None:
                body = await page("recall", query=TEXT, k=6, offset=offset, reconsolidate=False, now=NOW.isoformat(),
                                  diversity="off")
                names += [h["name"] for h in body["hits"]]
                offset = body["next_offset"]
            assert names == MEMORIES
            first = await page("list_memories", limit=20)
            rest = await page("list_memories", limit=20, offset=first["next_offset"])
            assert len(first["memories"]) == 20 and rest["next_offset"] is None
            assert sorted(m["name"] for m in first["memories"] + rest["memories"]) == MEMORIES
            _error(await _call(alice, "recall", query=TEXT, k=5, offset=998), "22023")
            refused = await _call(alice, "list_memories", offset=-2)
            assert refused.is_error and "offset" in refused.content[0].text
            synonym = await _call(alice, "list_memories", skip=5)
            assert synonym.is_error and "did you mean 'offset'?" in synonym.content[0].text
    anyio.run(main)


def test_cli_pages_recall_and_list(dna, dna_dsn):
    _seed(dna_dsn, "cli")
    first = json.loads(dna("recall", TEXT, "--scope", "cli", "--embedder", "fake", "-k", "10", "--no-reconsolidate", "--diversity", "off",
                           "--now", NOW.isoformat(), "--json").stdout)
    second = json.loads(dna("recall", TEXT, "--scope", "cli", "--embedder", "fake", "-k", "10", "--no-reconsolidate", "--diversity", "off",
                            "--now", NOW.isoformat(), "--offset", first["next_offset"], "--json").stdout)
    assert [h["name"] for h in first["hits"] + second["hits"]] == MEMORIES[:20] and second["offset"] == 10
    text = dna("recall", TEXT, "--scope", "cli", "--embedder", "fake", "-k", "10", "--no-reconsolidate", "--diversity", "off",
               "--now", NOW.isoformat(), "--offset", "20").stdout
    assert "3 memories (ranks 21-23)" in text and "21. " in text and "next page" not in text
    text = dna("recall", TEXT, "--scope", "cli", "--embedder", "fake", "-k", "10", "--no-reconsolidate",
               "--diversity", "off").stdout
    assert "next page: --offset 10" in text
    listed = dna("list", "--scope", "cli", "--limit", "10", "--offset", "10").stdout
    assert "shown 11-20 of 23; next page: --offset 20" in listed
    assert "none past 50 of 23" in dna("list", "--scope", "cli", "--limit", "10", "--offset", "50").stdout
    page = json.loads(dna("list", "--scope", "cli", "--limit", "10", "--offset", "20", "--json").stdout)
    assert len(page["memories"]) == 3 and page["next_offset"] is None
    bad = dna("list", "--scope", "cli", "--offset", "-1", code=1)
    assert "22023" in bad.stdout + bad.stderr and "offset" in bad.stdout + bad.stderr


@pytest.mark.parametrize("k, offset", [(5, 995), (1, 999)])
def test_rest_last_recall_page_within_the_bound_answers(door_world, k, offset):
    """offset + k = 1000 is the deepest page there is: it answers (empty here), with no next page."""
    _seed(door_world.dsn)
    app = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app) as client:
        got = client.get("/v1/memories/search", headers=auth(door_world.keys["alice"]),
                         params={"q": TEXT, "k": k, "offset": offset, "reconsolidate": "false"})
        assert got.status_code == 200, got.text
        assert got.json()["hits"] == [] and got.json()["next_offset"] is None
