"""Tenancy and INV-PERSONAL through plain SQL, as real login roles (the any-language contract).

Roles (cluster-wide, unique per test process, dropped at the end): alice and bob (mapped
identities), carol (member of workspace B only), owner (owner of both workspaces), svc (member of
every workspace, '*', no identity) and nobody (granted the application privileges, mapped to
nothing). Each test gets a fresh database: the roles are granted access with dna.grant_app_role,
mapped in dna.dna_identities and dna.dna_workspace_members by the superuser (the DBA).

The secret word of alice's personal memory is SECRET; every leak check looks for it (and for
alice's partition name) in everything a query returns, including error messages and notices.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

S = "mem"
NOW = datetime(2026, 7, 9, 15, 0, tzinfo=timezone.utc)
MODEL = "dna-fake-hash-v1"
PASSWORD = "dna-tenancy-test"
SUFFIX = f"{os.getpid()}"
ROLES = {who: f"dna_t_{who}_{SUFFIX}" for who in ("alice", "bob", "carol", "owner", "svc", "nobody")}
OIDS = {"alice": "alice-oid", "bob": "bob-oid", "carol": "carol-oid", "owner": "owner-oid"}
WS_A, WS_B = "ws-a", "ws-b"
MEMBERS = [(WS_A, "alice", "member"), (WS_A, "bob", "member"), (WS_A, "owner", "owner"),
           (WS_B, "alice", "member"), (WS_B, "carol", "member"), (WS_B, "owner", "owner"),
           ("*", "svc", "member")]
SECRET = "zebraquartz"
ALICE = f"personal:{OIDS['alice']}"


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def roles(pg_server):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    yield ROLES
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES.values():
            conn.execute(f"DROP ROLE IF EXISTS {role}")


class World:
    def __init__(self, dsn: str, admin):
        self.dsn = dsn
        self.admin = admin
        self._conns: dict[str, psycopg.Connection] = {}

    def dsn_of(self, who: str) -> str:
        params = conninfo_to_dict(self.dsn)
        params.update(user=ROLES[who], password=PASSWORD)
        return make_conninfo(**params)

    def __call__(self, who: str) -> psycopg.Connection:
        if who not in self._conns:
            conn = psycopg.connect(self.dsn_of(who), autocommit=True)
            conn.notices = []
            conn.add_notice_handler(lambda d, c=conn: c.notices.append(d.message_primary or ""))
            self._conns[who] = conn
        return self._conns[who]

    def close(self):
        for conn in self._conns.values():
            conn.close()


@pytest.fixture
def world(sql, dna_dsn, roles):
    for who, role in roles.items():
        sql.execute("SELECT dna.grant_app_role(%s)", (role,))
    for who, oid in OIDS.items():
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, %s)", (roles[who], oid))
    for ws, who, member_role in MEMBERS:
        sql.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name, member_role) VALUES (%s, %s, %s)",
                    (ws, roles[who], member_role))
    w = World(dna_dsn, sql)
    yield w
    w.close()


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def rows(conn, query, params=()):
    return conn.execute(query, params).fetchall()


def refused(conn, query, params=()):
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate, str(info.value)


def seed_personal_raw(conn, name, text):
    """A personal memory written by its owner with plain INSERTs (no verb): the instance and its
    search document."""
    conn.execute("INSERT INTO dna.dna_instances (scope, kind, name, tenant, spec) VALUES (%s, 'Engram', %s, %s, %s)",
                 (S, name, ALICE, Jsonb({"summary": text, "valid_from": "2026-01-01T00:00:00+00:00"})))
    conn.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, tenant, model_id, text_hash, body, embedding) "
                 "VALUES (%s, 'Engram', %s, %s, %s, dna.text_hash(NULL, %s), %s, dna.fake_embed(%s))",
                 (S, name, ALICE, MODEL, text, text, text))


def protected_tables(conn):
    return [r[0] for r in rows(conn, "SELECT t::text FROM dna.protected_tables() AS t")]


def assert_no_leak(*things):
    for thing in things:
        text = str(thing)
        assert SECRET not in text, text
        assert ALICE not in text, text


# -- the model is installed ------------------------------------------------------------------


def test_rls_enabled_and_forced_on_every_data_table(sql):
    tables = protected_tables(sql)
    assert {"dna.dna_instances", "dna.dna_versions", "dna.dna_bm25_postings", "dna.dna_bm25_stats",
            "dna.dna_search_docs_384", "dna.dna_search_docs_3072"} <= set(tables)
    for t in tables:
        enabled, forced = sql.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass",
                                      (t,)).fetchone()
        assert enabled and forced, t
        assert one(sql, "SELECT count(*) FROM pg_policy WHERE polrelid = %s::regclass", (t,)) == 1, t
    # Every table with a tenant column holds row data and is protected.
    with_tenant = {r[0] for r in rows(sql, "SELECT c.oid::regclass::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                                          "WHERE c.relnamespace = 'dna'::regnamespace AND c.relkind = 'r' "
                                          "AND a.attname = 'tenant' AND NOT a.attisdropped")}
    assert with_tenant <= set(tables)
    assert one(sql, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'dna'::regnamespace AND prosecdef") == 0


# -- raw SELECTs -----------------------------------------------------------------------------


def test_bob_and_owner_select_nothing_of_alices_personal_rows(world):
    alice = world("alice")
    seed_personal_raw(alice, "alice-diary", f"my {SECRET} diary entry")
    # alice sees her own rows in every table
    for t in protected_tables(world.admin):
        if t.endswith(("_768", "_1024", "_1536", "_3072")):
            continue
        assert one(alice, f"SELECT count(*) FROM {t} WHERE tenant = %s", (ALICE,)) >= 1, t
    for who in ("bob", "owner", "carol", "svc", "nobody"):
        conn = world(who)
        for t in protected_tables(world.admin):
            got = rows(conn, f"SELECT * FROM {t}")
            assert_no_leak(got)
            assert one(conn, f"SELECT count(*) FROM {t} WHERE tenant LIKE 'personal:%%' AND tenant <> %s",
                       (f"personal:{OIDS.get(who, '-')}",)) == 0
