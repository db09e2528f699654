"""The global options of `dna` (``--dsn``) are accepted where a user types them: before the command
(``dna --dsn URL db upgrade``) and after it, on every command and group (``dna db upgrade --dsn URL``,
issue 23: "No such option" before). Given in both places, the one after the command wins; the
environment variable ``DNA_DATABASE_URL`` is read by the top-level option only."""
from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from pydna import migrate
from pydna.cli import GLOBAL_OPTIONS, app
from pydna.cli_common import CliState

NOWHERE = "postgresql://nobody@127.0.0.1:1/nowhere"
FAKE = ["--embedder", "fake"]


def _commands():
    """(path, click command) of every command and group under `dna`, hidden ones too."""
    root = typer.main.get_command(app)
    todo = [((), root)]
    while todo:
        path, command = todo.pop()
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            todo.append(((*path, name), sub))
            yield (*path, name), sub


COMMANDS = list(_commands())


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def _ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def test_the_walk_finds_every_command():
    paths = {" ".join(p) for p, _ in COMMANDS}
    assert {"index", "recall", "search", "scopes", "replay", "reindex", "mcp", "serve", "db", "db upgrade",
            "db status", "db vector-index build", "memory", "memory remember", "memory list"} <= paths
    assert GLOBAL_OPTIONS == ("dsn",)


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_accepts_dsn_after_it(runner, path):
    # The parser refuses an unknown option before --help is acted on: exit 2 "No such option".
    result = _ok(runner.invoke(app, [*path, "--dsn", NOWHERE, "--help"]))
    assert "--dsn" in result.stdout


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_puts_its_dsn_in_the_cli_state(path, command):
    """Parsing ``--dsn`` after the command sets the state the command reads (``CliState.dsn``),
    replacing the top-level value. Click processes the options given first, in the order given, so
    the state is set even where a required argument is then missing."""
    root = typer.main.get_command(app)
    state = CliState(dsn="postgresql://top-level/option")
    parent = typer.Context(root, obj=state, info_name="dna")
    try:
        command.make_context(path[-1], ["--dsn", "postgresql://after/the-command"], parent=parent)
    except typer.BadParameter.__mro__[1]:  # UsageError of typer's click: a required argument not given
        pass
    assert state.dsn == "postgresql://after/the-command"


def test_db_upgrade_and_status_take_dsn_after_the_command(runner, dna_dsn, monkeypatch):
    monkeypatch.setenv("DNA_DATABASE_URL", NOWHERE)   # the environment and the top-level option lose
    again = _ok(runner.invoke(app, ["--dsn", NOWHERE, "db", "upgrade", "--dsn", dna_dsn]))
    assert f"already at revision {migrate.head()}" in " ".join(again.stdout.split())
    status = json.loads(_ok(runner.invoke(app, ["db", "status", "--json", "--dsn", dna_dsn])).stdout)
    assert status["server"]["kind"] == "external" and status["revision"]["up_to_date"] is True
    # Before the command it works as it always did; with no --dsn the environment is used.
    _ok(runner.invoke(app, ["--dsn", dna_dsn, "db", "status", "--json"]))
    failed = runner.invoke(app, ["db", "status", "--json"])
    assert failed.exit_code == 1 and "127.0.0.1" in failed.stderr and "port 1" in failed.stderr


def test_db_group_takes_dsn_before_its_command(runner, dna_dsn):
    status = json.loads(_ok(runner.invoke(app, ["db", "--dsn", dna_dsn, "status", "--json"])).stdout)
    assert status["revision"]["up_to_date"] is True


def test_index_recall_and_memory_take_dsn_after_the_command(runner, dna_dsn, tmp_path):
    doc = tmp_path / "fusion.md"
    doc.write_text("# Fusion\n\nreciprocal rank fusion joins the lexical and dense lanes\n", encoding="utf-8")
    summary = json.loads(_ok(runner.invoke(app, ["index", str(doc), "--scope", "g", *FAKE, "--json",
                                                 "--dsn", dna_dsn])).stdout)
    assert summary["inserted"] == 1
    hits = json.loads(_ok(runner.invoke(app, ["recall", "reciprocal rank fusion", "--scope", "g", *FAKE, "--json",
                                              "--dsn", dna_dsn])).stdout)
    assert [h["name"] for h in hits["hits"]] == ["fusion.md"]
    _ok(runner.invoke(app, ["memory", "remember", "the deploy key rotates on Mondays", "--scope", "m", *FAKE,
                            "--dsn", dna_dsn]))
    listed = _ok(runner.invoke(app, ["memory", "list", "--scope", "m", "--json", "--dsn", dna_dsn]))
    assert "the deploy key rotates on Mondays" in listed.stdout


@pytest.mark.parametrize("command,module,function", [("mcp", "pydna.doors.mcp_server", "run"),
                                                      ("serve", "pydna.doors.rest", "serve")])
def test_the_doors_take_dsn_after_the_command(runner, monkeypatch, command, module, function):
    import importlib

    seen = []
    monkeypatch.setattr(importlib.import_module(module), function, lambda dsn, *a, **k: seen.append(dsn))
    _ok(runner.invoke(app, ["--dsn", NOWHERE, command, "--embedder", "none", "--dsn", "postgresql://door@db/app"]))
    assert seen == ["postgresql://door@db/app"]
