"""API keys of the REST door in plain SQL (sql/doors.sql, revision 0014_doors): created once, stored
hashed, unreadable by application roles, revocable; the migration goes down and up again."""
from __future__ import annotations

import hashlib
import re

import psycopg
import pytest

from doors_world import ROLES, door_roles, door_world  # noqa: F401  (fixtures)
from pydna import migrate


def _one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def test_a_key_is_shown_once_and_stored_as_its_sha256(door_world):
    admin, key = door_world.admin, door_world.keys["alice"]
    assert re.fullmatch(r"dna_[0-9a-f]{64}", key)
    row = admin.execute("SELECT key_id, key_hash, role_name, label FROM dna.dna_api_keys WHERE key_id = %s",
                        (key[:16],)).fetchone()
    assert row[0] == key[:16] and bytes(row[1]) == hashlib.sha256(key.encode()).digest()
    assert bytes(_one(admin, "SELECT dna.api_key_hash(%s)", (key,))) == bytes(row[1])
    assert row[2] == ROLES["alice"] and row[3] == "alice's test key"
    # The key itself is nowhere in the table.
    dump = str(admin.execute("SELECT to_jsonb(k) FROM dna.dna_api_keys AS k").fetchall())
    assert key not in dump and key[16:] not in dump
    # Two keys never repeat.
    assert len(set(door_world.keys.values())) == len(door_world.keys)


def test_application_roles_cannot_read_the_keys(door_world, door_roles):
    for who in ("alice", "bob", "nobody"):
        with psycopg.connect(door_world.dsn_of(who), autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT key_hash FROM dna.dna_api_keys")
    with psycopg.connect(door_world.dsn_of("door"), autocommit=True) as door:
        # The door's login reads the columns of its lookup, nothing else (no label, no creator).
        assert _one(door, "SELECT count(*) FROM dna.dna_api_keys") == 4
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            door.execute("SELECT label FROM dna.dna_api_keys")
        # Switched to a key's role (as each request is), the hashes are out of reach again.
        with door.transaction():
            door.execute("SELECT set_config('role', %s, true)", (door_roles["alice"],))
            assert _one(door, "SELECT current_user::text") == door_roles["alice"]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                door.execute("SELECT key_hash FROM dna.dna_api_keys")
            raise psycopg.Rollback()
        # and it cannot write them
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            door.execute("SELECT dna.create_api_key(%s)", (door_roles["alice"],))


def test_create_refuses_unknown_and_privileged_roles(door_world):
    admin = door_world.admin
    with pytest.raises(psycopg.Error) as info:
        admin.execute("SELECT dna.create_api_key('no_such_role_anywhere')")
    assert info.value.sqlstate == "22023" and "no role" in str(info.value)
    with pytest.raises(psycopg.Error) as info:
        admin.execute("SELECT dna.create_api_key(current_user::text)")  # the superuser
    assert info.value.sqlstate == "42501" and "privacy model" in str(info.value)
    with pytest.raises(psycopg.Error) as info:
        admin.execute("SELECT dna.create_api_key(%s, repeat('x', 201))", (ROLES["alice"],))
    assert info.value.sqlstate == "22001"
    assert _one(admin, "SELECT count(*) FROM dna.dna_api_keys") == 4  # nothing written by the refusals


def test_revoke_by_key_id_or_key(door_world):
    admin, keys = door_world.admin, door_world.keys
    assert _one(admin, "SELECT dna.revoke_api_key(%s)", (keys["alice"][:16],)) == 1
    assert _one(admin, "SELECT dna.revoke_api_key(%s)", (keys["alice"],)) == 0  # already revoked
    assert _one(admin, "SELECT dna.revoke_api_key(%s)", (keys["bob"],)) == 1
    assert _one(admin, "SELECT count(*) FROM dna.dna_api_keys WHERE revoked_at IS NOT NULL") == 2
    with pytest.raises(psycopg.Error) as info:
        admin.execute("SELECT dna.revoke_api_key('dna_000000000000')")
    assert info.value.sqlstate == "P0002"


def test_grant_door_role_names_the_missing_memberships(door_world, door_roles):
    report = _one(door_world.admin, "SELECT dna.grant_door_role(%s)", (door_roles["door"],))
    assert report["not_a_member_of"] == [door_roles["carol"]]


def test_migration_down_and_up(empty_dsn):
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _one(conn, "SELECT to_regclass('dna.dna_api_keys') IS NOT NULL")
    migrate.downgrade(empty_dsn, "0013_passages")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _one(conn, "SELECT to_regclass('dna.dna_api_keys') IS NULL")
        assert _one(conn, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'dna'::regnamespace "
                          "AND proname IN ('create_api_key', 'revoke_api_key', 'api_key_hash', 'grant_door_role')") == 0
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _one(conn, "SELECT count(*) FROM dna.dna_api_keys") == 0
