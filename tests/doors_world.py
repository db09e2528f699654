"""Shared fixtures of the door tests (tests/test_doors_*.py): real roles, identities and API keys.

Roles (cluster-wide, unique per test process, dropped at the end), as a DBA would set them up:
alice and bob are application login roles mapped to identities (the MCP door connects as them);
nobody is a role granted nothing; carol is an application role the door may not switch to; door is
the REST door's login role (NOINHERIT, a member of alice, bob and nobody, granted dna.grant_door_role).
Each test gets a fresh database, with the grants, identities and one API key per role.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

SUFFIX = f"{os.getpid()}"
ROLES = {who: f"dna_d_{who}_{SUFFIX}" for who in ("alice", "bob", "nobody", "carol", "door")}
OIDS = {"alice": "alice-oid", "bob": "bob-oid", "carol": "carol-oid"}
PASSWORD = "dna-doors-test"
SCOPE = "team"
SECRET = "zebraquartz"  # the word of alice's personal memory: looked for in everything bob gets back


def dsn_as(dsn: str, who: str) -> str:
    params = conninfo_to_dict(dsn)
    params.update(user=ROLES[who], password=PASSWORD)
    return make_conninfo(**params)


@pytest.fixture(scope="module")
def door_roles(pg_server):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")
        for who, role in ROLES.items():
            inherit = " NOINHERIT" if who == "door" else ""
            conn.execute(f"CREATE ROLE {role} LOGIN{inherit} PASSWORD '{PASSWORD}'")
        for who in ("alice", "bob", "nobody"):
            conn.execute(f"GRANT {ROLES[who]} TO {ROLES['door']}")
    yield ROLES
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")


@dataclass
class DoorWorld:
    dsn: str                 # the superuser's (the DBA) DSN of the test database
    admin: psycopg.Connection
    keys: dict[str, str]     # who → API key

    def dsn_of(self, who: str) -> str:
        return dsn_as(self.dsn, who)


@pytest.fixture
def door_world(sql, dna_dsn, door_roles):
    for who in ("alice", "bob", "carol"):
        sql.execute("SELECT dna.grant_app_role(%s)", (door_roles[who],))
    for who, oid in OIDS.items():
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s)", (door_roles[who], oid))
    sql.execute("SELECT dna.grant_door_role(%s)", (door_roles["door"],))
    keys = {who: sql.execute("SELECT dna.create_api_key(%s, %s)", (door_roles[who], f"{who}'s test key")).fetchone()[0]
            for who in ("alice", "bob", "nobody", "carol")}
    return DoorWorld(dna_dsn, sql, keys)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
