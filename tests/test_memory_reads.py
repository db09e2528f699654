"""A memory by name and its history (issue 27 item 6), through plain SQL: dna.get_memory gives the record as
it stands (validity, in force, latest version and who wrote it); dna.memory_history every version oldest
first with its op, transaction time and the role that wrote it — who retired a shared memory — which the
INSERT cannot forge; a missing name is P0002 naming the nearest; row-level security decides what is seen."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb


def _remember(sql, name, summary, now):
    sql.execute("SELECT dna.remember('reads', %s, name => %s, now => %s)", (Jsonb({"summary": summary}), name, now))


def test_get_memory_and_its_history(sql):
    who = sql.execute("SELECT current_user").fetchone()[0]
    _remember(sql, "deploy-day", "Deploys happen on Thursdays", "2026-01-01T00:00:00Z")
    _remember(sql, "deploy-day", "Deploys happen on Fridays", "2026-02-01T00:00:00Z")
    sql.execute("SELECT dna.forget('reads', 'deploy-day', now => '2026-03-01T00:00:00Z')")
    got = sql.execute("SELECT dna.get_memory('reads', 'deploy-day')").fetchone()[0]
    assert got["spec"]["summary"] == "Deploys happen on Fridays" and got["in_force"] is False
    assert got["valid_to"].startswith("2026-03-01") and got["last_op"] == "forget"
    assert got["last_recorded_by"] == who and got["version"] == 3
    was = sql.execute("SELECT dna.get_memory('reads', 'deploy-day', now => '2026-02-15T00:00:00Z')").fetchone()[0]
    assert was["in_force"] is True
    history = sql.execute("SELECT dna.memory_history('reads', 'deploy-day')").fetchone()[0]
    assert [(v["version"], v["summary"], v["recorded_by"]) for v in history["versions"]] == [
        (1, "Deploys happen on Thursdays", who), (2, "Deploys happen on Fridays", who),
        (3, "Deploys happen on Fridays", who)]
    assert history["versions"][-1]["op"] == "forget" and history["versions"][-1]["valid_to"].startswith("2026-03-01")
    with pytest.raises(psycopg.errors.NoDataFound, match="get_memory: no Engram/deploy-dya") as err:
        sql.execute("SELECT dna.get_memory('reads', 'deploy-dya')")
    assert "deploy-day" in err.value.diag.message_hint
    with pytest.raises(psycopg.errors.NoDataFound, match="memory_history: no Engram/nothing"):
        sql.execute("SELECT dna.memory_history('reads', 'nothing')")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        sql.execute("SELECT dna.get_memory('reads', 'deploy-day', kind => 'Doc')")


def test_recorded_by_cannot_be_forged(sql):
    _remember(sql, "a", "alpha", "2026-01-01T00:00:00Z")
    rows = sql.execute("SELECT recorded_by FROM dna.dna_versions WHERE scope = 'reads' AND name = 'a'").fetchall()
    assert rows == [(sql.execute("SELECT current_user").fetchone()[0],)]
    # An INSERT that passes the append-only rules (the record's next version, a copy of it, stamped
    # now) but names someone else: the version names the role that wrote it.
    sql.execute("INSERT INTO dna.dna_versions (scope, kind, api_version, name, tenant, version, id, spec, valid_at, "
                "op, created_at, recorded_by) SELECT scope, kind, api_version, name, tenant, 2, id, spec, valid_at, "
                "'remember', clock_timestamp(), 'mallory' FROM dna.dna_instances WHERE scope = 'reads' AND name = 'a'")
    rows = sql.execute("SELECT version, recorded_by FROM dna.dna_versions WHERE scope = 'reads' AND name = 'a' "
                       "ORDER BY version").fetchall()
    me = sql.execute("SELECT current_user").fetchone()[0]
    assert rows == [(1, me), (2, me)]


def test_dna_memory_get_and_history_cli(dna_dsn, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from pydna.cli import app

    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))

    def dna(*args, code=0):
        result = CliRunner().invoke(app, ["--dsn", dna_dsn, *args])
        assert result.exit_code == code, result.output
        return result

    dna("memory", "remember", "Deploys happen on Thursdays", "--name", "deploy-day", "--scope", "team",
        "--embedder", "fake")
    dna("memory", "forget", "deploy-day", "--scope", "team")
    got = dna("memory", "get", "deploy-day", "--scope", "team").stdout
    assert "Engram/deploy-day · not in force" in got and "Deploys happen on Thursdays" in got and "(forget)" in got
    lines = dna("memory", "history", "deploy-day", "--scope", "team").stdout.splitlines()
    assert lines[0] == "Engram/deploy-day: 2 versions" and "remember" in lines[1] and "forget" in lines[2]
    missing = dna("memory", "get", "deploy-dya", "--scope", "team", code=1)
    assert "P0002" in missing.stderr and "deploy-day" in missing.stderr
