"""The MCP door (``dna mcp``): the real server as a subprocess, driven by the SDK's own client over
stdio (and once over streamable HTTP). Identity = the role of the server's DSN: alice's server and
bob's server are two identities (doors_world)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone

import anyio
import pytest
from mcp import Client, StdioServerParameters

from doors_world import SCOPE, SECRET, door_roles, door_world  # noqa: F401  (fixtures)

TOOLS = {"search", "recall", "remember", "remember_many", "remember_conversation", "forget", "revive", "list_memories",
         "get_memory", "memory_history", "consolidate",
         "delete_memory"}


def _server(dsn: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "pydna.cli", "--dsn", dsn, "mcp", "--embedder", "fake", "--scope", SCOPE,
                                       *extra],
                                 env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})


async def _call(client: Client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    return result


def _data(result) -> dict:
    assert not result.is_error, result.content
    data = result.structured_content
    return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data


def _error(result, sqlstate: str | None = None) -> str:
    assert result.is_error, result
    text = result.content[0].text
    if sqlstate is not None:
        assert text.startswith(f"SQLSTATE {sqlstate}: "), text
        assert result.structured_content["error"]["sqlstate"] == sqlstate
    return text


def test_tools_schemas_and_the_memory_cycle_over_stdio(door_world):
    async def main():
        async with Client(_server(door_world.dsn_of("alice"))) as alice:
            tools = {t.name: t for t in (await alice.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert tool.description, tool.name
                props = tool.input_schema["properties"]
                for arg, schema in props.items():
                    assert schema.get("description"), (tool.name, arg)
                # identity is never an argument
                assert not {"role", "identity", "oid", "user"} & set(props), tool.name
            recall = tools["recall"].input_schema["properties"]
            assert "Transaction time" in recall["as_of"]["description"] and "World" in recall["now"]["description"]
            assert recall["k"]["maximum"] == 1000 and recall["personal"]["type"] == "boolean"
            assert tools["consolidate"].input_schema["properties"]["apply"]["default"] is False

            made = _data(await _call(alice, "remember", summary="Deploys happen on Thursdays after the release review",
                                     area="ops/deploys", tags=["release"]))
            name = made["name"]
            assert made["action"] == "created"
            hits = _data(await _call(alice, "recall", query="when do we deploy", k=3))["hits"]
            assert [h["name"] for h in hits] == [name]
            before = datetime.now(timezone.utc).isoformat()
            await anyio.sleep(0.01)
            assert _data(await _call(alice, "forget", name=name))["already_forgotten"] is False
            assert _data(await _call(alice, "recall", query="when do we deploy"))["hits"] == []
            past = _data(await _call(alice, "recall", query="when do we deploy", as_of=before))["hits"]
            assert [h["name"] for h in past] == [name]
            refused = _error(await _call(alice, "delete_memory", name=name))
            assert "never deleted" in refused and "forget" in refused
            assert _data(await _call(alice, "revive", name=name))["already_in_force"] is False
            assert [h["name"] for h in _data(await _call(alice, "recall", query="when do we deploy"))["hits"]] == [name]
            listed = _data(await _call(alice, "list_memories"))
            assert listed["total"] == 1
            dry = _data(await _call(alice, "consolidate"))
            assert dry["dry_run"] is True and dry["applied"] is False
            found = _data(await _call(alice, "search", query="release review deploys", k=3))
            assert [h["name"] for h in found["hits"]] == [name]
            # errors: tool errors with the SQLSTATE and the database's message
            text = _error(await _call(alice, "forget", name="rem-nope"), "P0002")
            assert "rem-nope" in text
            _error(await _call(alice, "remember", summary="x" * 281), "22001")
            _error(await _call(alice, "recall", query="x", tenant="Not A Slug"), "22023")
            bad = await _call(alice, "recall", query="x", k=5000)  # the schema's own bound
            assert bad.is_error and "k" in bad.content[0].text

    anyio.run(main)


def test_personal_memory_is_private_across_identities(door_world):
    async def main():
        async with Client(_server(door_world.dsn_of("alice"))) as alice, \
                Client(_server(door_world.dsn_of("bob"))) as bob:
            mine = _data(await _call(alice, "remember", summary=f"My locker code is {SECRET} 4471", personal=True))
            seen = _data(await _call(alice, "recall", query=f"locker code {SECRET}", personal=True))["hits"]
            assert seen[0]["name"] == mine["name"] and seen[0]["personal"] is True
            for tool, args in (("recall", {"query": f"locker code {SECRET}", "personal": True}),
                               ("recall", {"query": f"locker code {SECRET}"}),
                               ("list_memories", {"personal": True, "include_forgotten": True}),
                               ("list_memories", {}),
                               ("search", {"query": f"locker code {SECRET}", "personal": True, "include_retired": True}),
                               ("consolidate", {"personal": True})):
                got = _data(await _call(bob, tool, **args))
                text = str(got).replace(f"locker code {SECRET}", "")
                assert SECRET not in text and "alice-oid" not in text, (tool, got)
            text = _error(await _call(bob, "recall", query="locker", tenant="personal:alice-oid"), "42501")
            assert "reserved" in text
            _error(await _call(bob, "remember", summary="planted", tenant="personal:alice-oid"), "42501")
            _error(await _call(bob, "forget", name=mine["name"], personal=True), "P0002")
            # an identity is not an argument: one passed anyway is refused by name, and nothing runs
            refused = await _call(bob, "recall", query=f"locker {SECRET}", personal=True, identity="alice-oid")
            assert refused.is_error and "unknown argument 'identity'" in refused.content[0].text
            assert SECRET not in refused.content[0].text
            still = _data(await _call(alice, "list_memories", personal=True))["memories"]
            assert [(m["name"], m["valid"]) for m in still if m["personal"]] == [(mine["name"], True)]

    anyio.run(main)


def test_unknown_arguments_are_refused_by_name_and_nothing_is_written(door_world):
    """A tool refuses an argument it does not take (as REST does), naming it and the one meant: ``text``
    for ``summary`` used to fail as "an Engram needs spec.summary", and a misspelt ``personal`` wrote a
    private memory into the shared scope."""
    async def main():
        async with Client(_server(door_world.dsn_of("alice"))) as alice:
            tools = {t.name: t for t in (await alice.list_tools()).tools}
            assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
            text = (await _call(alice, "remember", text="Deploys happen on Thursdays")).content[0].text
            assert "unknown argument 'text' (did you mean 'summary'?)" in text, text
            typo = await _call(alice, "remember", summary=f"My locker code is {SECRET}", persnal=True)
            assert typo.is_error and "'persnal' (did you mean 'personal'?)" in typo.content[0].text
            bogus = await _call(alice, "search", query="x", bogus=1)
            assert bogus.is_error and "unknown argument 'bogus'" in bogus.content[0].text
            assert _data(await _call(alice, "list_memories", include_forgotten=True))["total"] == 0
            assert _data(await _call(alice, "list_memories", personal=True))["total"] == 0

    anyio.run(main)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http(door_world, tmp_path):
    port = _free_port()
    log = open(tmp_path / "mcp.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "pydna.cli", "--dsn", door_world.dsn_of("bob"), "mcp", "--http",
                             "--port", str(port), "--embedder", "fake", "--scope", SCOPE],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    async def main():
        async with Client(f"http://127.0.0.1:{port}/mcp") as bob:
            made = _data(await _call(bob, "remember", summary="Bob prefers tea to coffee", personal=True))
            hits = _data(await _call(bob, "recall", query="tea or coffee", personal=True))["hits"]
            assert hits[0]["name"] == made["name"] and hits[0]["personal"] is True

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"dna mcp --http did not start: {log.read()}")
                time.sleep(0.2)
        anyio.run(main)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_the_cli_starts_without_the_extras(monkeypatch):
    """`dna --help` imports neither SDK, and a missing extra is one line naming its pip install."""
    probe = ("import sys, pydna.cli\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'fastapi', 'uvicorn', 'psycopg_pool', "
             "'starlette'}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    from typer.testing import CliRunner

    import pydna.doors.cli as doors_cli
    from pydna.cli import app

    real = doors_cli.importlib.util.find_spec
    monkeypatch.setattr(doors_cli.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("mcp", "fastapi") else real(name, *a))
    for command, extra in (("mcp", "mcp"), ("serve", "rest")):
        result = CliRunner().invoke(app, ["--dsn", "postgresql://nowhere/none", command])
        assert result.exit_code == 1
        assert f"pip install 'pydna[{extra}]'" in result.output, result.output
