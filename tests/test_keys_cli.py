"""`dna keys create|list|revoke` (issue 27 item 6): one command instead of the eight statements of an API
key — the role, its grants and identity, the door's membership and lookup, the key — checked through the
CLI's runner and then through the REST door's real client: the key works (a shared and a personal memory),
is listed without its secret, and once revoked is refused (401). A refused create keeps nothing."""
from __future__ import annotations

import json
import os

import psycopg
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from doors_world import ROLES, auth, dsn_as, door_roles  # noqa: F401  (fixtures)
from pydna import FakeEmbeddingProvider
from pydna.cli import app
from pydna.doors.rest import create_app

NEW = f"dna_k_app_{os.getpid()}"


@pytest.fixture
def new_role(pg_server, dna_dsn):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {NEW}")
    yield NEW
    with psycopg.connect(dna_dsn, autocommit=True) as conn:           # its grants live in the test database
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (NEW,)).fetchone():
            conn.execute(f"DROP OWNED BY {NEW}")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {NEW}")


def _dna(dsn, *args, code=0):
    result = CliRunner().invoke(app, ["--dsn", dsn, *args])
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def test_create_list_revoke_and_the_door_accepts_then_refuses(dna_dsn, sql, door_roles, new_role, monkeypatch):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    created = _dna(dna_dsn, "keys", "create", new_role, "--door", door_roles["door"], "--label", "laptop")
    key = created.stdout.strip()
    assert key.startswith("dna_") and len(key) == 68 and "\n" not in key   # only the key on stdout
    said = " ".join(created.stderr.split())
    assert f"created role {new_role} (NOLOGIN)" in said and f"identity of {new_role}: {new_role}" in said
    assert sql.execute("SELECT oid FROM dna.dna_identities WHERE role_name = %s", (new_role,)).fetchone() == (new_role,)
    listed = json.loads(_dna(dna_dsn, "keys", "list", "--json").stdout)
    mine = [k for k in listed if k["role"] == new_role]
    assert [(k["key_id"], k["label"], k["revoked_at"]) for k in mine] == [(key[:16], "laptop", None)]
    assert key not in _dna(dna_dsn, "keys", "list", "--json").stdout             # never the secret
    rest = create_app(dsn_as(dna_dsn, "door"), FakeEmbeddingProvider(), scope="team", max_size=2)
    with TestClient(rest) as client:
        shared = client.post("/v1/memories", headers=auth(key), json={"name": "deploy-day",
                                                                       "summary": "Deploys happen on Thursdays"})
        assert shared.status_code == 200, shared.text
        private = client.post("/v1/memories", headers=auth(key), json={"name": "mine", "summary": "my private note",
                                                                        "personal": True})
        assert private.status_code == 200, private.text                      # the identity was mapped
        assert _dna(dna_dsn, "keys", "revoke", key[:16]).stdout.strip() == f"revoked {key[:16]}"
        refused = client.get("/v1/memories", headers=auth(key))
        assert refused.status_code == 401, refused.text
    assert _dna(dna_dsn, "keys", "revoke", key[:16]).stdout.strip() == f"{key[:16]} was already revoked"
    assert not [k for k in json.loads(_dna(dna_dsn, "keys", "list", "--json").stdout) if k["role"] == new_role]
    revoked = [k for k in json.loads(_dna(dna_dsn, "keys", "list", "--all", "--json").stdout) if k["role"] == new_role]
    assert revoked and revoked[0]["revoked_at"] is not None
    again = _dna(dna_dsn, "keys", "create", new_role, "--json")                # the role exists now: kept as it is
    assert "created role" not in " ".join(json.loads(again.stdout)["done"])


def test_refused_creates_keep_nothing(dna_dsn, sql, door_roles, new_role):
    before = sql.execute("SELECT count(*) FROM dna.dna_api_keys").fetchone()[0]
    superuser = sql.execute("SELECT current_user").fetchone()[0]
    privileged = _dna(dna_dsn, "keys", "create", superuser, code=1)
    assert "superuser or has BYPASSRLS" in privileged.stderr
    long_label = _dna(dna_dsn, "keys", "create", new_role, "--label", "x" * 201, code=1)
    assert "22001" in long_label.stderr
    no_door = _dna(dna_dsn, "keys", "create", new_role, "--door", "no_such_door_role", code=1)
    assert "create the door's login role first" in no_door.stderr
    assert sql.execute("SELECT count(*) FROM dna.dna_api_keys").fetchone()[0] == before
    assert sql.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (new_role,)).fetchone() is None   # rolled back
    unknown = _dna(dna_dsn, "keys", "revoke", "dna_000000000000", code=1)
    assert "no API key" in unknown.stderr
