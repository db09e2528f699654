"""The embedded default server (issue 12): it runs inside the privacy model (an ordinary login role
mapped to the local user's identity; the superuser runs migrations only), it comes back after a stop
or a crash for a long-lived client, `dna db up` waits for a dying postmaster, and as root it never
widens the permissions of folders that are not its own without saying so.

Each test starts its own embedded server under a temporary DNA_HOME (the session's test server is
the superuser's on purpose: it creates and drops databases)."""
from __future__ import annotations

import functools
import json
import os
import signal
import stat
import time

import psycopg
import pytest
from typer.testing import CliRunner

from pydna import server
from pydna.cli import app


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "dna-home"
    monkeypatch.setenv("DNA_HOME", str(h))
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    yield h
    server.stop(h)


def _cli(*args, code=0):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def test_db_up_makes_the_client_an_ordinary_role_with_an_identity(home):
    up = _cli("db", "up")
    dsn = up.stdout.strip()
    assert f"user={server.app_role()}" in dsn or f"{server.app_role()}@" in dsn
    assert f"clients connect as role {server.app_role()}, identity {server.local_identity()}" in " ".join(up.stderr.split())
    with psycopg.connect(dsn) as conn:
        who, superuser, bypass = conn.execute(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()
        assert (who, superuser, bypass) == (server.app_role(), False, False)
        assert conn.execute("SELECT dna.current_identity()").fetchone()[0] == server.local_identity()
        assert conn.execute("SELECT dna.privileged()").fetchone()[0] is False
    # The default client is that role, and --personal works out of the box.
    import pydna

    with pydna.connect(embedder="fake") as client:
        assert client.conn.execute("SELECT current_user").fetchone()[0] == server.app_role()
        mine = client.memory.remember("team", "my own note about the deploy", personal=True)
        assert mine["tenant"] == f"personal:{server.local_identity()}"
    _cli("memory", "remember", "shared note about the deploy", "--scope", "team", "--embedder", "fake")
    listed = json.loads(_cli("memory", "list", "--scope", "team", "--personal", "--json").stdout)
    assert {m["personal"] for m in listed["memories"]} == {True, False}
    # Row-level security is exercised: another role sees neither the personal row nor... only the base.
    admin = server.start(home)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE ROLE other_user LOGIN")
        conn.execute("SELECT dna.grant_app_role('other_user')")
    other = server._with_user(admin, "other_user")
    with psycopg.connect(other) as conn:
        tenants = {r[0] for r in conn.execute("SELECT tenant FROM dna.dna_instances")}
        assert tenants == {""}
    # Migrations stay the superuser's: `dna db upgrade` with the exported client DSN still works.
    result = CliRunner().invoke(app, ["db", "upgrade"], env={"DNA_DATABASE_URL": dsn})
    assert result.exit_code == 0 and "already at revision" in result.stdout, result.output
    status = json.loads(_cli("db", "status", "--json").stdout)
    assert status["user"] == server.app_role()


def test_a_long_lived_client_comes_back_after_a_stop_and_a_crash(home):
    _cli("db", "up")
    import pydna

    client = pydna.connect(embedder="fake")
    client.index("s", [{"kind": "Doc", "name": "a", "body": "reciprocal rank fusion"}])
    assert client.search("s", "rank fusion").names == ["a"]
    _cli("db", "stop")
    assert not server.is_running(home)
    assert client.search("s", "rank fusion").names == ["a"]            # started again on the next call
    assert server.is_running(home)
    os.kill(server.running_pid(home), signal.SIGKILL)                   # a crash: postmaster.pid stays
    deadline = time.monotonic() + 10
    while server.running_pid(home) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (home / "pgdata" / "postmaster.pid").exists() and server.running_pid(home) is None
    assert client.memory.remember("mem", "after the crash")["action"] == "created"
    assert client.search("s", "rank fusion").names == ["a"]
    client.close()


def test_db_up_waits_for_a_dying_postmaster(home):
    _cli("db", "up")
    os.kill(server.running_pid(home), signal.SIGKILL)
    up = _cli("db", "up")                                               # right after the crash: no failure
    assert "up to date" in up.stderr
    assert server.is_running(home)


def test_db_up_failure_names_the_log_and_does_not_loop(home, monkeypatch):
    home.mkdir(parents=True)
    (home / "pgdata").write_text("not a directory")                    # the server cannot start here
    # It retries for a server going away (START_WAIT, 30 s), then gives up: 2 s here.
    monkeypatch.setattr(server, "start", functools.partial(server.start, wait=2.0))
    result = _cli("db", "up", code=1)
    message = " ".join(result.stderr.split())
    assert "could not start the embedded PostgreSQL" in message and "server log:" in message
    assert "within 2 s" in message
    assert "dna db up" not in message


def test_open_for_server_makes_only_traversal_and_says_so(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    target = private / "inner" / "dna-home"
    target.mkdir(parents=True)
    (private / "inner").chmod(0o750)
    said = []
    changed = server.open_for_server(target, say=said.append)
    assert [(p, before, after) for p, before, after in changed if p in (private, private / "inner")] == [
        (private / "inner", 0o750, 0o751), (private, 0o700, 0o711)]
    assert stat.S_IMODE(private.stat().st_mode) == 0o711                # not 0755: nothing made readable
    assert len(said) == 1 and str(private) in said[0] and "0700 → 0711" in said[0] and "embedded_postgres" in said[0]
    assert server.open_for_server(target, say=said.append) == [] and len(said) == 1   # said once


@pytest.mark.skipif(os.geteuid() != 0, reason="the server's system user exists only when started as root")
def test_as_root_a_private_parent_is_not_opened_beyond_traversal(tmp_path, monkeypatch):
    private = tmp_path / "home-of-someone"
    private.mkdir()
    private.chmod(0o700)
    h = private / "checkout" / "dna-home"
    monkeypatch.setenv("DNA_HOME", str(h))
    try:
        dsn = server.start(h, database="postgres")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT 1").fetchone()[0] == 1
        assert stat.S_IMODE(private.stat().st_mode) == 0o711            # was 0700; embedded-postgres makes 0755
        assert (h / "pg" / "embedded_postgres" / "pginstall" / "bin" / "postgres").exists()   # beside the data
        shipped = server._embedded().__file__
        assert not str(shipped).startswith(str(h))
    finally:
        server.stop(h)
