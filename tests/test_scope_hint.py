"""A misspelt scope on a read or write of one memory (get_memory, memory_history, forget) names the
nearest scopes, as search / recall / list do (revision 0023_still_open, topic scope_hint): before, the
hint said "Nearest Engram names here: none". Through plain SQL, REST (TestClient), MCP (the SDK's
in-memory client) and the CLI."""
from __future__ import annotations

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from psycopg.types.json import Jsonb
from typer.testing import CliRunner

from doors_world import SCOPE, auth, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.cli import app
from pydna.doors.mcp_server import create_server
from pydna.doors.rest import create_app

NEAR = "nearest scopes: 'trialmem'"


def _seed(conn):
    conn.execute("SELECT dna.remember('trialmem', %s, name => 'deploys')",
                 (Jsonb({"summary": "Deploys happen on Thursdays"}),))


@pytest.mark.parametrize("call", [
    "SELECT dna.get_memory('trialmme', 'deploys')",
    "SELECT * FROM dna.memory_history('trialmme', 'deploys')",
    "SELECT dna.forget('trialmme', 'deploys')",
])
def test_sql_names_the_nearest_scopes(sql, call):
    _seed(sql)
    with pytest.raises(psycopg.errors.NoDataFound) as info:
        sql.execute(call)
    hint = info.value.diag.message_hint
    assert "Scope 'trialmme' has no documents or memories you can see" in hint and NEAR in hint, hint


def test_sql_a_scope_with_rows_keeps_the_nearest_names(sql):
    _seed(sql)
    with pytest.raises(psycopg.errors.NoDataFound) as info:
        sql.execute("SELECT dna.get_memory('trialmem', 'deploy')")
    assert "Nearest Engram names here: 'deploys'" in info.value.diag.message_hint


def test_rest_and_mcp_name_the_nearest_scopes(door_world):
    app_ = create_app(door_world.dsn_of("door"), FakeEmbeddingProvider(), scope=SCOPE, max_size=2)
    with TestClient(app_) as client:
        alice = auth(door_world.keys["alice"])
        made = client.post("/v1/memories", headers=alice, json={"summary": "Deploys happen on Thursdays",
                                                                "name": "deploys", "scope": "trialmem"})
        assert made.status_code == 200, made.text
        for response in (client.get("/v1/memories/deploys", headers=alice, params={"scope": "trialmme"}),
                         client.get("/v1/memories/deploys/history", headers=alice, params={"scope": "trialmme"})):
            assert response.status_code == 404, response.text
            assert NEAR in response.json()["error"]["hint"], response.json()
    server, door = create_server(door_world.dsn_of("alice"), FakeEmbeddingProvider(), scope=SCOPE)

    async def main():
        async with Client(server) as mcp:
            for tool in ("get_memory", "memory_history", "forget"):
                refused = await mcp.call_tool(tool, {"name": "deploys", "scope": "trialmme"})
                assert refused.is_error and NEAR in refused.content[0].text, (tool, refused.content)
    try:
        anyio.run(main)
    finally:
        door.close()


def test_cli_memory_get_names_the_nearest_scopes(sql, dna_dsn, monkeypatch, tmp_path):
    _seed(sql)
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    result = CliRunner().invoke(app, ["--dsn", dna_dsn, "memory", "get", "deploys", "--scope", "trialmme"])
    assert result.exit_code != 0
    assert NEAR in result.stdout + result.stderr, result.stdout + result.stderr
