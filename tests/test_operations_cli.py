"""Operations a first week meets (issue 27 item 7): a typo'd scope exits non-zero naming the nearest
scopes (search, recall, memory recall, memory list), the unknown-option suggestion names the one option
meant, `dna db status` of a stopped server says "stopped" (embedded, a DSN pointing at it, an external
one), and `dna db upgrade --sql` prints the delta from the database's revision. Through the CLI's runner."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pydna import migrate
from pydna.cli import app

FAKE = ["--embedder", "fake"]


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def _invoke(runner, *args, code=0, env=None):
    result = runner.invoke(app, [str(a) for a in args], env=env)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


@pytest.fixture
def indexed(runner, dna_dsn, tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "cache.md").write_text("# The per-view cache\n\nCache the output of an entire view.\n", encoding="utf-8")
    _invoke(runner, "--dsn", dna_dsn, "index", d, "--scope", "real", *FAKE)
    _invoke(runner, "--dsn", dna_dsn, "memory", "remember", "the cache lives in redis", "--scope", "real", *FAKE)
    return dna_dsn


@pytest.mark.parametrize("command", [["search", "cache", *FAKE], ["recall", "cache", *FAKE],
                                     ["memory", "recall", "cache", *FAKE], ["memory", "list"],
                                     ["search", "cache", *FAKE, "--json"], ["memory", "list", "--json"]])
def test_a_typod_scope_exits_1_naming_the_nearest(runner, indexed, command):
    typo = _invoke(runner, "--dsn", indexed, *command, "--scope", "rael", code=1)
    said = " ".join(typo.stderr.split())
    assert "scope 'rael' has no documents or memories you can see; nearest scopes: 'real'" in said
    assert "hits" not in typo.stdout and "memories in" not in typo.stdout


def test_an_existing_scope_with_no_match_still_exits_0(runner, indexed):
    listed = _invoke(runner, "--dsn", indexed, "memory", "list", "--scope", "real", "--kind", "Episode")
    assert "0 memories in real" in listed.stdout
    found = json.loads(_invoke(runner, "--dsn", indexed, "search", "cache", "--scope", "real", *FAKE, "--json").stdout)
    assert found["hits"]


@pytest.mark.parametrize("typed, meant, not_meant", [
    (["search", "x", "--scop", "s"], "--scope", "--scores"),
    (["search", "x", "--top", "3"], "--top-k", "--scope"),
    (["memory", "recall", "x", "--scpoe", "s"], "--scope", "--personal"),
    (["db", "status", "--jsn"], "--json", "--dsn"),
])
def test_the_unknown_option_suggestion_names_the_option_meant(runner, typed, meant, not_meant):
    result = _invoke(runner, *typed, code=2)
    said = " ".join(result.output.replace("│", " ").split())
    assert f"No such option: {typed[-2] if typed[-1] != '--jsn' else '--jsn'}" in said
    hint = said.split("No such option:", 1)[1]
    assert meant in hint and not_meant not in hint.replace(meant, "")


def test_db_status_of_a_stopped_embedded_server_says_stopped(runner, tmp_path):
    result = _invoke(runner, "db", "status", code=1)
    assert "server: stopped" in result.stderr and "dna db up" in result.stderr
    # A DSN naming the embedded server's socket (the README's `export DNA_DATABASE_URL=$(dna db up)`).
    socket_dsn = f"user=dna_root dbname=dna host={tmp_path / 'dna-home' / 'pgdata'}"
    (tmp_path / "dna-home" / "pgdata").mkdir(parents=True, exist_ok=True)
    by_dsn = _invoke(runner, "--dsn", socket_dsn, "db", "status", code=1)
    assert "server: stopped" in by_dsn.stderr and "embedded PostgreSQL" in by_dsn.stderr
    as_json = _invoke(runner, "--dsn", socket_dsn, "db", "status", "--json", code=1)
    assert json.loads(as_json.stdout)["server"] == {"kind": "embedded", "data_dir": str(tmp_path / "dna-home"),
                                                    "running": False, "dsn": socket_dsn}


def test_db_status_of_an_unreachable_external_server_says_stopped(runner):
    dsn = "host=127.0.0.1 port=1 dbname=nowhere user=nobody"
    result = _invoke(runner, "--dsn", dsn, "db", "status", code=1)
    assert "server: stopped" in result.stderr and "unreachable" in result.stderr
    assert json.loads(_invoke(runner, "--dsn", dsn, "db", "status", "--json", code=1).stdout)["server"]["running"] is False


def test_db_upgrade_sql_prints_the_delta_from_the_databases_revision(runner, empty_dsn):
    migrate.upgrade(empty_dsn, "0019_where_users_run")
    delta = _invoke(runner, "--dsn", empty_dsn, "db", "upgrade", "--sql")
    assert "the database is at revision 0019_where_users_run" in " ".join(delta.stderr.split())
    assert "CREATE TABLE dna.dna_search_docs_384" not in delta.stdout      # 0001's DDL is not repeated
    assert "-- Running upgrade 0019_where_users_run -> 0020_real_use" in delta.stdout
    assert "Running upgrade 0018" not in delta.stdout
    assert f"version_num='{migrate.head()}'" in delta.stdout
    whole = _invoke(runner, "db", "upgrade", "--sql").stdout                # no database: from empty
    assert "CREATE TABLE dna.dna_search_docs_384" in whole
    step = "-- Running upgrade 0019_where_users_run -> 0020_real_use"           # the delta is the whole's tail
    assert delta.stdout[delta.stdout.index(step):] == whole[whole.index(step):]
    named = _invoke(runner, "db", "upgrade", "--sql", "--from", "0019_where_users_run").stdout
    assert named == delta.stdout
    migrate.upgrade(empty_dsn, "head")
    done = _invoke(runner, "--dsn", empty_dsn, "db", "upgrade", "--sql")
    assert f"schema dna is at revision {migrate.head()}: nothing to upgrade" in done.stdout
    bad = _invoke(runner, "db", "upgrade", "--sql", "--from", "0099_nothing", code=1)
    assert "0099_nothing" in bad.stderr
