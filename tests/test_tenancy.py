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
ROLES = {who: f"dna_t_{who}_{SUFFIX}" for who in ("alice", "alice2", "bob", "carol", "owner", "svc", "nobody", "dbo")}
OIDS = {"alice": "alice-oid", "alice2": "alice-oid", "bob": "bob-oid", "carol": "carol-oid", "owner": "owner-oid"}
OTHERS = ("bob", "owner", "carol", "svc", "nobody")  # everyone who must never see alice's personal memory
WS_A, WS_B = "ws-a", "ws-b"
MEMBERS = [(WS_A, "alice", "member"), (WS_A, "bob", "member"), (WS_A, "owner", "owner"),
           (WS_B, "alice", "member"), (WS_B, "carol", "member"), (WS_B, "owner", "owner"),
           ("*", "svc", "member")]
SECRET = "zebraquartz"
ALICE = f"personal:{OIDS['alice']}"
LEAKS = f"dna_t_leaks_{SUFFIX}"


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
    sync_maps(sql)
    w = World(dna_dsn, sql)
    yield w
    w.close()


def sync_maps(sql):
    """On Citus the maps are plain tables on every node: after writing them the DBA copies them to
    the workers (dna.sync_tenancy_maps, docs/scale-out.md; tests/citus runs this module there). On one
    server there is nothing to copy."""
    if sql.execute("SELECT dna.citus_version() IS NOT NULL").fetchone()[0]:
        sql.execute("SELECT dna.sync_tenancy_maps()")


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def rows(conn, query, params=()):
    return conn.execute(query, params).fetchall()


def refused(conn, query, params=(), note=None):
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
        pytest.fail(f"not refused: {note or query} {params}")
    return info.value.sqlstate, str(info.value)


def seed_personal_raw(conn, name, text):
    """A personal memory written by its owner with plain INSERTs (no verb): the instance and its
    search document."""
    conn.execute("INSERT INTO dna.dna_instances (scope, kind, name, tenant, spec) VALUES (%s, 'Engram', %s, %s, %s)",
                 (S, name, ALICE, Jsonb({"summary": text, "valid_from": "2026-01-01T00:00:00+00:00"})))
    conn.execute("INSERT INTO dna.dna_search_docs_384 (scope, kind, name, tenant, model_id, text_hash, body, embedding) "
                 "VALUES (%s, 'Engram', %s, %s, %s, dna.text_hash(NULL, %s), %s, dna.fake_embed(%s))",
                 (S, name, ALICE, MODEL, text, text, text))
    # Where it was indexed from (dna_document_sources, 0012_first_day): private like the rest.
    conn.execute("SELECT dna.record_document_sources(%s, ARRAY['Engram'], ARRAY[%s], ARRAY[%s], ARRAY[%s])",
                 (S, name, ALICE, f"/home/alice/{SECRET}/{name}.md"))
    # A receipt of a question about it (dna_search_receipts, 0016_answers_and_bounds), its query kept.
    conn.execute("INSERT INTO dna.dna_search_receipts (verb, scope, tenant, args, settings, results, inputs_digest, "
                 "query_digest, query) VALUES ('search', %s, %s, '{}', '{}', %s, 'd', 'd', %s)",
                 (S, ALICE, Jsonb([{"kind": "Engram", "name": name, "tenant": ALICE}]), f"where is my {SECRET} {name}"))


def protected_tables(conn):
    return [r[0] for r in rows(conn, "SELECT t::text FROM dna.protected_tables() AS t")]


def assert_no_leak(*things):
    things = [_without_query(t) for t in things]
    for thing in things:
        text = str(thing)
        assert SECRET not in text, text
        assert ALICE not in text, text


def _without_query(thing):
    """The probe's own query text is echoed back in answers; it is not a leak."""
    if isinstance(thing, dict):
        return {k: v for k, v in thing.items() if k != "query"}
    if isinstance(thing, (list, tuple)):
        return [_without_query(t) for t in thing]
    return thing


# -- the model is installed ------------------------------------------------------------------


def test_rls_enabled_and_forced_on_every_data_table(sql):
    tables = protected_tables(sql)
    assert {"dna.dna_instances", "dna.dna_versions", "dna.dna_bm25_postings", "dna.dna_bm25_chunks",
            "dna.dna_bm25_segments", "dna.dna_bm25_docs", "dna.dna_bm25_forward", "dna.dna_bm25_tombstones",
            "dna.dna_bm25_tombstone_terms", "dna.dna_search_docs_384", "dna.dna_search_docs_3072"} <= set(tables)
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


# Filled by compaction and by removals of sealed documents only (test_compaction_stays_in_the_callers_partitions).
SEALED_ONLY = ("dna.dna_bm25_chunks", "dna.dna_bm25_segments", "dna.dna_bm25_tombstones", "dna.dna_bm25_tombstone_terms")


def test_bob_and_owner_select_nothing_of_alices_personal_rows(world):
    alice = world("alice")
    seed_personal_raw(alice, "alice-diary", f"my {SECRET} diary entry")
    # alice sees her own rows in every table
    for t in protected_tables(world.admin):
        if t.endswith(("_768", "_1024", "_1536", "_3072")) or t in SEALED_ONLY:
            continue
        assert one(alice, f"SELECT count(*) FROM {t} WHERE tenant = %s", (ALICE,)) >= 1, t
    for who in ("bob", "owner", "carol", "svc", "nobody"):
        conn = world(who)
        for t in protected_tables(world.admin):
            got = rows(conn, f"SELECT * FROM {t}")
            assert_no_leak(got)
            assert one(conn, f"SELECT count(*) FROM {t} WHERE tenant LIKE 'personal:%%' AND tenant <> %s",
                       (f"personal:{OIDS.get(who, '-')}",)) == 0


# -- verb helpers ----------------------------------------------------------------------------


def test_compaction_stays_in_the_callers_partitions(world):
    """Alice's compaction seals her personal partition; its segments, chunks and tombstones are as
    private as her documents, and another role's compaction neither sees nor touches them."""
    alice = world("alice")
    for i in range(3):
        seed_personal_raw(alice, f"alice-note-{i}", f"my {SECRET} note number {i}")
    out = one(alice, "SELECT dna.bm25_compact()")
    assert {p["tenant"] for p in out["partitions"]} == {ALICE} and out["partitions"][0]["status"] == "ok"
    alice.execute("UPDATE dna.dna_search_docs_384 SET body = 'rewritten zebra note' WHERE tenant = %s AND name = %s",
                  (ALICE, "alice-note-0"))
    for t in SEALED_ONLY:
        assert one(alice, f"SELECT count(*) FROM {t} WHERE tenant = %s", (ALICE,)) >= 1, t
    before = rows(alice, "SELECT name, score FROM dna.bm25(%s, %s, %s, personal => true, exact => true)",
                  (S, f"{SECRET} note zebra", MODEL))
    assert len(before) == 3
    for who in ("bob", "owner", "carol", "svc"):
        conn = world(who)
        for t in SEALED_ONLY + ("dna.dna_bm25_docs", "dna.dna_bm25_forward", "dna.dna_bm25_postings"):
            assert_no_leak(rows(conn, f"SELECT * FROM {t}"))
        got = one(conn, "SELECT dna.bm25_compact(full_merge => true)")
        assert_no_leak(got)
        assert_no_leak(one(conn, "SELECT dna.bm25_storage()"))
    assert one(alice, "SELECT count(*) FROM dna.dna_bm25_tombstones WHERE tenant = %s", (ALICE,)) == 1
    assert rows(alice, "SELECT name, score FROM dna.bm25(%s, %s, %s, personal => true, exact => true)",
                (S, f"{SECRET} note zebra", MODEL)) == before


def remember(conn, summary, *, personal=False, tenant="", name=None, now=NOW, scope=S):
    return one(conn, "SELECT dna.remember(%(scope)s, %(spec)s, name => %(name)s, tenant => %(tenant)s, now => %(now)s, "
                     "embedding => dna.fake_embed(%(summary)s), personal => %(personal)s)",
               {"scope": scope, "spec": Jsonb({"summary": summary}), "name": name, "tenant": tenant, "now": now,
                "summary": summary, "personal": personal})


def recall(conn, query, *, personal=False, tenant="", as_of=None, now=None, reconsolidate=False, k=20):
    return one(conn, "SELECT dna.recall(%(scope)s, %(q)s, dna.fake_embed(%(q)s), k => %(k)s, tenant => %(tenant)s, "
                     "reconsolidate => %(rec)s, now => %(now)s, as_of => %(as_of)s, personal => %(personal)s)",
               {"scope": S, "q": query, "k": k, "tenant": tenant, "rec": reconsolidate, "now": now, "as_of": as_of,
                "personal": personal})


def search(conn, query, *, tenant="", personal=False):
    return rows(conn, "SELECT * FROM dna.search(%s, %s, dna.fake_embed(%s), %s, k => 50, tenant => %s, personal => %s)",
                (S, query, query, MODEL, tenant, personal))


def names(result):
    return sorted(h["name"] for h in result["hits"])


@pytest.fixture
def seeded(world):
    """alice's personal secret, a shared base memory, one memory in each workspace."""
    admin = world.admin
    remember(admin, f"shared handbook about {SECRET[:5]} animals", name="base-handbook")
    remember(admin, "workspace a roadmap for zebra launches", name="ws-a-roadmap", tenant=WS_A)
    remember(admin, "workspace b budget for zebra feeding", name="ws-b-budget", tenant=WS_B)
    r = remember(world("alice"), f"my private {SECRET} zebra diary", name="alice-diary", personal=True)
    assert r["tenant"] == ALICE and r["personal"] is True and r["action"] == "created"
    return world


def leak_probe(conn, who):
    """Everything `who` can try without naming alice's partition; returns the answers."""
    out = []
    for personal in ((True,) if who in OIDS else ()) + (False,):
        out.append(recall(conn, f"{SECRET} zebra diary", personal=personal))
        out.append(recall(conn, f"{SECRET} zebra diary", personal=personal, as_of=NOW + timedelta(days=3650)))
        out.append(search(conn, f"{SECRET} zebra diary", personal=personal))
        out.append(one(conn, "SELECT dna.list_memories(%s, include_invalid => true, personal => %s)", (S, personal)))
        out.append(one(conn, "SELECT dna.consolidate(%s, dry_run => true, personal => %s)", (S, personal)))
    for ws, member, _ in MEMBERS:
        if member == who and ws != "*":
            out.append(recall(conn, f"{SECRET} zebra diary", tenant=ws))
            out.append(search(conn, f"{SECRET} zebra diary", tenant=ws))
            out.append(one(conn, "SELECT dna.consolidate(%s, tenant => %s, dry_run => true)", (S, ws)))
    for t in protected_tables(conn) if who != "nobody" else []:
        out.append(rows(conn, f"SELECT * FROM {t}"))
    return out


# -- personal memory -------------------------------------------------------------------------


def test_alice_reads_her_personal_partition_plus_the_shared_base_and_no_workspace(seeded):
    alice = seeded("alice")
    res = recall(alice, "zebra")
    assert res["personal"] is False and "alice-diary" not in names(res)
    res = recall(alice, "zebra", personal=True)
    assert res["personal"] is True and res["tenant"] == ALICE
    assert names(res) == ["alice-diary", "base-handbook"]          # nothing from ws-a or ws-b
    flags = {h["name"]: h["personal"] for h in res["hits"]}
    assert flags == {"alice-diary": True, "base-handbook": False}
    # A workspace read never selects a personal row, even for the identity that owns it.
    for ws in (WS_A, WS_B):
        res = recall(alice, "zebra diary", tenant=ws)
        assert "alice-diary" not in names(res) and all(not h["personal"] for h in res["hits"])
        assert all(r[3] in ("", ws) for r in search(alice, "zebra diary", tenant=ws))
    hits = search(alice, "zebra diary", personal=True)
    assert {(r[2], r[3], r[12]) for r in hits} == {("alice-diary", ALICE, True), ("base-handbook", "", False)}
    lexical = rows(alice, "SELECT name, tenant FROM dna.bm25(%s, 'zebra diary', %s, personal => true)", (S, MODEL))
    assert set(lexical) == {("alice-diary", ALICE), ("base-handbook", "")}
    stats = one(alice, "SELECT n_docs FROM dna.bm25_partition_stats(%s, %s, personal => true)", (S, MODEL))
    assert stats == 2
    listed = one(alice, "SELECT dna.list_memories(%s, personal => true)", (S,))
    assert {m["name"]: m["personal"] for m in listed["memories"]} == {"alice-diary": True, "base-handbook": False}


def test_personal_memory_follows_the_identity_across_workspaces_and_logins(seeded):
    alice = seeded("alice")
    # Written while working in ws-a, read while working in ws-b: one partition.
    remember(alice, "my note taken in workspace a about giraffes", name="alice-giraffe", tenant=WS_A, personal=True)
    from_b = recall(alice, "giraffes", tenant=WS_B, personal=True)
    from_a = recall(alice, "giraffes", tenant=WS_A, personal=True)
    assert from_a["tenant"] == from_b["tenant"] == ALICE
    assert "alice-giraffe" in names(from_b) and names(from_a) == names(from_b)
    # A second login of the same identity reads the same partition.
    laptop = seeded("alice2")
    assert names(recall(laptop, "giraffes", personal=True)) == names(from_b)
    assert one(seeded.admin, "SELECT count(DISTINCT tenant) FROM dna.dna_instances WHERE tenant LIKE 'personal:%%'") == 1


def test_nobody_else_reads_alices_personal_memory(seeded):
    for who in OTHERS:
        conn = seeded(who)
        answers = leak_probe(conn, who)
        assert answers, who
        assert_no_leak(*answers, conn.notices)


def test_superuser_is_outside_the_model_and_sees_it(seeded):
    # Documented: superusers bypass row-level security.
    assert one(seeded.admin, "SELECT count(*) FROM dna.dna_instances WHERE tenant = %s", (ALICE,)) == 1


def test_no_function_naming_alices_partition_reveals_it(seeded):
    secret_name = ["alice-diary"]
    for who in OTHERS:
        conn = seeded(who)
        # Doors that take a tenant refuse a personal:* tenant outright.
        for query, params in [
            ("SELECT dna.recall(%s, 'zebra', tenant => %s)", (S, ALICE)),
            ("SELECT dna.recall(%s, 'zebra', tenant => %s, as_of => now())", (S, ALICE)),
            ("SELECT * FROM dna.search(%s, 'zebra', NULL, %s, tenant => %s)", (S, MODEL, ALICE)),
            ("SELECT * FROM dna.bm25(%s, 'zebra', %s, tenant => %s)", (S, MODEL, ALICE)),
            ("SELECT * FROM dna.bm25_partition_stats(%s, %s, %s)", (S, MODEL, ALICE)),
            ("SELECT dna.list_memories(%s, tenant => %s)", (S, ALICE)),
            ("SELECT dna.consolidate(%s, tenant => %s, dry_run => true)", (S, ALICE)),
            ("SELECT dna.forget(%s, 'alice-diary', tenant => %s)", (S, ALICE)),
            ("SELECT dna.revive(%s, 'alice-diary', tenant => %s)", (S, ALICE)),
            ("SELECT dna.remember(%s, '{\"summary\": \"x\"}', tenant => %s)", (S, ALICE)),
            ("SELECT dna.index_document(%s, 'Engram', 'alice-diary', 'x', model_id => %s, tenant => %s)", (S, MODEL, ALICE)),
            ("SELECT dna.delete_document(%s, 'Engram', 'alice-diary', %s)", (S, ALICE)),
            ("SELECT * FROM dna.stale_documents(%s, %s, '{Engram}', '{alice-diary}', '{NULL}', '{x}', ARRAY[%s])",
             (S, MODEL, ALICE)),
            ("SELECT dna.recall(%s, 'zebra', tenant => %s)", (S, ALICE.upper())),
        ]:
            state, _ = refused(conn, query, params)
            assert state == "42501", (who, query)
        # Internal helpers without a door of their own return nothing of alice's (row-level security).
        assert one(conn, "SELECT dna.memory_specs(%s, 'Engram', %s, %s)", (S, ALICE, secret_name)) in ({}, None)
        assert_no_leak(one(conn, "SELECT dna.memory_recorded_at(%s, 'Engram', %s, %s)", (S, ALICE, secret_name)))
        terms = one(conn, "SELECT dna.bm25_terms(%s)", (f"{SECRET} zebra diary",))
        alice_docs = {r[0] for r in rows(seeded.admin, "SELECT doc_id FROM dna.dna_search_docs_384 WHERE tenant = %s", (ALICE,))}
        for exhaustive in (False, True):
            scored = {r[0] for r in rows(conn, "SELECT doc_id FROM dna.bm25_lane(%s, %s, %s, %s, 1.2, 0.4, 100, "
                                               "exhaustive => %s)", (S, MODEL, ALICE, terms, exhaustive))}
            assert alice_docs and not scored & alice_docs
        assert_no_leak(conn.notices)


@pytest.fixture
def leaks(seeded):
    """A schema where the other roles may create functions (dropped with them afterwards)."""
    seeded.admin.execute(f"DROP SCHEMA IF EXISTS {LEAKS} CASCADE")
    seeded.admin.execute(f"CREATE SCHEMA {LEAKS}")
    seeded.admin.execute(f"GRANT USAGE, CREATE ON SCHEMA {LEAKS} TO {', '.join(ROLES[w] for w in OTHERS)}")
    yield LEAKS
    seeded.admin.execute(f"DROP SCHEMA {LEAKS} CASCADE")


def test_raw_sql_cannot_touch_alices_rows(seeded, leaks):
    for who in OTHERS:
        conn = seeded(who)
        if who == "nobody":
            continue
        for t in protected_tables(conn):
            assert conn.execute(f"UPDATE {t} SET tenant = tenant WHERE tenant = %s", (ALICE,)).rowcount == 0
            assert conn.execute(f"DELETE FROM {t} WHERE tenant = %s", (ALICE,)).rowcount == 0
        # Writing into alice's partition is refused by the policy's WITH CHECK.
        state, msg = refused(conn, "INSERT INTO dna.dna_instances (scope, kind, name, tenant, spec) "
                                   "VALUES (%s, 'Research', 'planted', %s, '{}')", (S, ALICE))
        assert state == "42501" and "row-level security" in msg
        # Moving one's own row into alice's partition, too.
        state, _ = refused(conn, "UPDATE dna.dna_instances SET tenant = %s WHERE tenant = ''", (ALICE,))
        assert state == "42501"
        # Nobody maps themselves to alice's identity or joins her partition.
        state, _ = refused(conn, "INSERT INTO dna.dna_identities (role_name, oid) VALUES (current_user, 'alice-oid')")
        assert state == "42501"
        state, _ = refused(conn, "UPDATE dna.dna_identities SET oid = 'alice-oid'")
        assert state == "42501"
        state, _ = refused(conn, f"TRUNCATE dna.dna_instances")
        assert state == "42501"
        # A leaky function in a WHERE clause runs after the policy (security barrier), so it never sees the
        # row. It lives in a schema of the test's, not pg_temp: on Citus the WHERE clause runs on the
        # shards, and a session's pg_temp exists on the coordinator only.
        conn.execute(f"CREATE FUNCTION {LEAKS}.leak_{who}(jsonb) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS "
                     "$$ BEGIN RAISE NOTICE 'leak %', $1; RETURN true; END $$")
        conn.execute(f"SELECT * FROM dna.dna_instances WHERE {LEAKS}.leak_{who}(spec)").fetchall()
        conn.execute(f"SELECT * FROM dna.dna_versions WHERE {LEAKS}.leak_{who}(spec)").fetchall()
        assert_no_leak(conn.notices)
        # The mapping tables show each role its own rows only.
        assert {r[0] for r in rows(conn, "SELECT role_name FROM dna.dna_identities")} <= {ROLES[who]}
        assert {r[0] for r in rows(conn, "SELECT role_name FROM dna.dna_workspace_members")} <= {ROLES[who]}


def test_planner_statistics_do_not_leak(seeded):
    seeded.admin.execute("SELECT dna.bm25_compact()")
    seeded.admin.execute("ANALYZE dna.dna_instances, dna.dna_versions, dna.dna_search_docs_384, "
                         "dna.dna_bm25_postings, dna.dna_bm25_chunks, dna.dna_bm25_segments, dna.dna_bm25_docs, "
                         "dna.dna_bm25_forward")
    for who in OTHERS:
        conn = seeded(who)
        stats = rows(conn, "SELECT * FROM pg_stats WHERE schemaname = 'dna'")
        assert_no_leak(stats)


def test_alice_forgets_and_revives_her_personal_memory_and_bob_cannot(seeded):
    alice, bob, owner = seeded("alice"), seeded("bob"), seeded("owner")
    for conn in (bob, owner):
        state, _ = refused(conn, "SELECT dna.forget(%s, 'alice-diary', personal => true)", (S,))
        assert state == "P0002"                                       # not in his own partition
        state, _ = refused(conn, "SELECT dna.forget(%s, 'alice-diary', tenant => %s)", (S, ALICE))
        assert state == "42501"
    f = one(alice, "SELECT dna.forget(%s, 'alice-diary', personal => true, now => %s)", (S, NOW + timedelta(days=1)))
    assert f["written"] and f["tenant"] == ALICE
    assert "alice-diary" not in names(recall(alice, "zebra diary", personal=True, now=NOW + timedelta(days=2)))
    in_search = ("SELECT count(*) FROM dna.search(%s, 'zebra diary', model_id => 'dna-fake-hash-v1', personal => true, "
                 "valid_time => %s) WHERE name = 'alice-diary'")
    assert one(alice, in_search, (S, NOW + timedelta(days=2))) == 0   # her forget reached her search document
    assert one(alice, in_search, (S, NOW)) == 1
    for conn in (bob, owner):
        state, _ = refused(conn, "SELECT dna.revive(%s, 'alice-diary', personal => true)", (S,))
        assert state == "P0002"
        state, _ = refused(conn, "SELECT dna.revive(%s, 'alice-diary', tenant => %s)", (S, ALICE))
        assert state == "42501"
        assert conn.execute("UPDATE dna.dna_instances SET spec = spec - 'valid_to' WHERE name = 'alice-diary'").rowcount == 0
    r = one(alice, "SELECT dna.revive(%s, 'alice-diary', personal => true, now => %s)", (S, NOW + timedelta(days=3)))
    assert r["revived"] and r["tenant"] == ALICE
    assert "alice-diary" in names(recall(alice, "zebra diary", personal=True, now=NOW + timedelta(days=4)))
    assert one(alice, in_search, (S, NOW + timedelta(days=4))) == 1
    # The history is alice's alone.
    assert one(alice, "SELECT count(*) FROM dna.dna_versions WHERE name = 'alice-diary'") == 3
    for who in OTHERS:
        assert one(seeded(who), "SELECT count(*) FROM dna.dna_versions WHERE name = 'alice-diary'") == 0
        assert_no_leak(leak_probe(seeded(who), who))


def test_personal_without_identity_fails_closed(seeded):
    for who in ("nobody", "svc"):
        conn = seeded(who)
        for query in ("SELECT * FROM dna.bm25(%s, 'zebra', 'dna-fake-hash-v1', personal => true)",
                      "SELECT dna.index_document(%s, 'Research', 'x', 'x', model_id => 'dna-fake-hash-v1', personal => true)",
                      "SELECT dna.delete_document(%s, 'Research', 'x', personal => true)","SELECT dna.remember(%s, '{\"summary\": \"mine\"}', personal => true)",
                      "SELECT dna.recall(%s, 'zebra', personal => true)",
                      "SELECT dna.forget(%s, 'alice-diary', personal => true)",
                      "SELECT dna.revive(%s, 'alice-diary', personal => true)",
                      "SELECT dna.list_memories(%s, personal => true)",
                      "SELECT dna.consolidate(%s, personal => true, dry_run => true)",
                      "SELECT * FROM dna.search(%s, 'zebra', NULL, 'dna-fake-hash-v1', personal => true)"):
            state, msg = refused(conn, query, (S,))
            assert state == "42501" and "personal memory needs an identity" in msg, (who, query, msg)
            assert "dna.dna_identities" in msg


def test_reconsolidation_never_writes_a_cue_into_another_partition(seeded):
    alice, admin = seeded("alice"), seeded.admin
    base_before = one(admin, "SELECT spec FROM dna.dna_instances WHERE name = 'base-handbook'")
    res = recall(alice, "zebra animals diary", personal=True, reconsolidate=True)
    assert {"alice-diary", "base-handbook"} <= set(names(res))
    assert res["reconsolidated"] == ["alice-diary"]
    assert one(admin, "SELECT spec FROM dna.dna_instances WHERE name = 'base-handbook'") == base_before
    res = recall(alice, "zebra roadmap", tenant=WS_A, reconsolidate=True)
    assert res["reconsolidated"] == ["ws-a-roadmap"]
    assert one(admin, "SELECT spec FROM dna.dna_instances WHERE name = 'base-handbook'") == base_before


# -- workspaces ------------------------------------------------------------------------------


def test_members_of_workspace_a_never_see_workspace_b(seeded):
    bob, carol = seeded("bob"), seeded("carol")
    for conn, mine, other in ((bob, WS_A, WS_B), (carol, WS_B, WS_A)):
        res = recall(conn, "zebra", tenant=mine)
        assert all(h["tenant"] in ("", mine) for h in res["hits"]) and len(res["hits"]) == 2
        for t in protected_tables(conn):
            assert one(conn, f"SELECT count(*) FROM {t} WHERE tenant = %s", (other,)) == 0, t
            assert one(conn, f"SELECT count(*) FROM {t} WHERE tenant NOT IN ('', %s)", (mine,)) == 0, t
        for query in ("SELECT dna.recall(%s, 'zebra', tenant => %s)",
                      "SELECT * FROM dna.search(%s, 'zebra', NULL, 'dna-fake-hash-v1', tenant => %s)",
                      "SELECT dna.list_memories(%s, tenant => %s)",
                      "SELECT dna.remember(%s, '{\"summary\": \"planted\"}', tenant => %s)",
                      "SELECT dna.consolidate(%s, tenant => %s, dry_run => true)"):
            state, msg = refused(conn, query, (S, other), note=query)
            assert state == "42501" and "not a member" in msg, (query, msg)
        assert one(conn, "SELECT count(*) FROM dna.dna_instances WHERE name = %s", (f"{other}-{'budget' if other == WS_B else 'roadmap'}",)) == 0
        state, _ = refused(conn, "INSERT INTO dna.dna_instances (scope, kind, name, tenant, spec) "
                                 "VALUES (%s, 'Research', 'planted', %s, '{}')", (S, other))
        assert state == "42501"


def test_members_write_and_read_their_workspace(seeded):
    bob, alice, carol = seeded("bob"), seeded("alice"), seeded("carol")
    r = remember(bob, "bob shares the okapi migration plan", name="okapi", tenant=WS_A)
    assert r["tenant"] == WS_A and r["personal"] is False
    assert "okapi" in names(recall(alice, "okapi migration", tenant=WS_A))
    assert "okapi" not in names(recall(carol, "okapi migration", tenant=WS_B))
    assert "okapi" not in names(recall(alice, "okapi migration", personal=True))


def test_workspace_owner_and_wildcard_service_see_workspaces_but_no_personal_memory(seeded):
    for who in ("owner", "svc"):
        conn = seeded(who)
        for ws in (WS_A, WS_B):
            assert names(recall(conn, "zebra", tenant=ws)) == sorted(["base-handbook", f"{ws}-{'roadmap' if ws == WS_A else 'budget'}"])
        seen = {r[0] for r in rows(conn, "SELECT DISTINCT tenant FROM dna.dna_instances")}
        assert seen == {"", WS_A, WS_B}


def test_unmapped_application_role_sees_only_the_shared_base(seeded):
    nobody = seeded("nobody")
    assert {r[0] for r in rows(nobody, "SELECT DISTINCT tenant FROM dna.dna_instances")} == {""}
    assert names(recall(nobody, "zebra")) == ["base-handbook"]
    r = remember(nobody, "a shared default written by the application", name="shared-default")
    assert r["tenant"] == "" and r["action"] == "created"
    state, _ = refused(nobody, "SELECT dna.recall(%s, 'zebra', tenant => %s)", (S, WS_A))
    assert state == "42501"
    assert one(nobody, "SELECT dna.visible_tenants()") == [""]
    assert one(nobody, "SELECT dna.current_identity()") is None


def test_table_owner_is_subject_to_row_level_security(seeded):
    admin = seeded.admin
    dbo = ROLES["dbo"]
    for t in protected_tables(admin):
        admin.execute(f"ALTER TABLE {t} OWNER TO {dbo}")
    conn = seeded("dbo")
    for t in protected_tables(admin):
        assert one(conn, f"SELECT count(*) FROM {t} WHERE tenant LIKE 'personal:%%'") == 0, t
        assert one(conn, f"SELECT count(*) FROM {t} WHERE tenant IN (%s, %s)", (WS_A, WS_B)) == 0, t
    assert_no_leak(rows(conn, "SELECT * FROM dna.dna_instances"), rows(conn, "SELECT * FROM dna.dna_search_docs_384"))


# -- the thin client and the CLI pass the flag; the database decides -------------------------


def test_client_and_cli_personal_flag(seeded, monkeypatch, tmp_path):
    import json

    from typer.testing import CliRunner

    import pydna
    from pydna.cli import app

    with pydna.connect(seeded.dsn_of("alice"), embedder=pydna.FakeEmbeddingProvider()) as alice:
        r = alice.memory.remember(S, "alice keeps her okra recipe private", name="alice-okra", personal=True, now=NOW)
        assert r["tenant"] == ALICE and r["personal"] is True
        res = alice.memory.recall(S, "okra recipe", personal=True, reconsolidate=False)
        assert [h["name"] for h in res["hits"] if h["personal"]][0] == "alice-okra"
        assert alice.memory.forget(S, "alice-okra", personal=True)["written"] is True
        assert alice.memory.revive(S, "alice-okra", personal=True)["revived"] is True
        assert "alice-okra" in {m["name"] for m in alice.memory.list(S, personal=True)["memories"]}
        assert alice.memory.consolidate(S, personal=True, dry_run=True)["evaluated"] >= 2
        found = alice.search(S, "okra recipe", personal=True)
        assert [(h.name, h.personal) for h in found.hits][:1] == [("alice-okra", True)]
    with pydna.connect(seeded.dsn_of("bob"), embedder=pydna.FakeEmbeddingProvider()) as bob:
        res = bob.memory.recall(S, "okra recipe", personal=True, reconsolidate=False)
        assert "alice-okra" not in [h["name"] for h in res["hits"]]
        assert_no_leak(res, bob.memory.list(S, personal=True, include_invalid=True))
    with pydna.connect(seeded.dsn_of("nobody"), embedder=None) as nobody:
        with pytest.raises(psycopg.Error, match="personal memory needs an identity"):
            nobody.memory.recall(S, "okra", personal=True)

    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    runner = CliRunner()

    def run(who, *args):
        return runner.invoke(app, ["--dsn", seeded.dsn_of(who), "memory", *args])

    out = run("alice", "recall", "okra recipe", "--scope", S, "--personal", "--embedder", "fake", "--no-reconsolidate")
    assert out.exit_code == 0 and "alice-okra [personal]" in out.stdout, out.stdout
    out = run("bob", "recall", "okra recipe", "--scope", S, "--personal", "--embedder", "fake", "--json")
    assert out.exit_code == 0 and "alice-okra" not in out.stdout
    assert json.loads(out.stdout)["tenant"] == "personal:bob-oid"
    out = runner.invoke(app, ["--dsn", seeded.dsn_of("alice"), "search", "okra recipe", "--scope", S, "--personal",
                              "--embedder", "fake", "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["hits"][0]["personal"] is True, out.stdout
    out = run("nobody", "list", "--scope", S, "--personal")
    assert out.exit_code != 0 and "personal memory needs an identity" in (out.stdout + out.stderr)


# -- the revision ----------------------------------------------------------------------------


def _snapshot(dsn):
    with psycopg.connect(dsn) as conn:
        return (
            {r[0] for r in conn.execute("SELECT p.oid::regprocedure::text FROM pg_proc AS p "
                                        "WHERE p.pronamespace = 'dna'::regnamespace")},
            {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'dna'")},
            {r[0] for r in conn.execute("SELECT c.relname || ':' || c.relrowsecurity || c.relforcerowsecurity "
                                        "FROM pg_class AS c WHERE c.relnamespace = 'dna'::regnamespace AND c.relkind = 'r'")},
            {r[0] for r in conn.execute("SELECT polname || '@' || polrelid::regclass::text FROM pg_policy")},
        )


def test_downgrade_removes_exactly_the_tenancy_revision(empty_dsn):
    from pydna import migrate

    migrate.upgrade(empty_dsn)                     # head, then down through 0010_scale and 0009_tenancy
    full = _snapshot(empty_dsn)
    assert "dna.current_identity()" in full[0] and {"dna_identities", "dna_workspace_members"} <= full[1]
    assert "dna_instances:truetrue" in full[2] and "dna_tenant_isolation@dna.dna_instances" in full[3]
    migrate.downgrade(empty_dsn, "0002_memory")
    funcs, tables, rls, policies = _snapshot(empty_dsn)
    assert not any(f.startswith(("dna.current_identity", "dna.visible_tenants", "dna.protect_table")) for f in funcs)
    assert "dna_identities" not in tables and policies == set()
    assert all(r.endswith(":falsefalse") for r in rls)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # Without the identity map a personal call still fails closed; an explicit personal:* tenant is refused.
        for query in ("SELECT dna.recall('s', 'x', personal => true)",
                      "SELECT dna.remember('s', '{\"summary\": \"x\"}', personal => true)",
                      "SELECT dna.recall('s', 'x', tenant => 'personal:alice-oid')"):
            state, _ = refused(conn, query)
            assert state == "42501", query
        assert one(conn, "SELECT dna.recall('s', 'x', tenant => 'ws-a')")["hits"] == []
    migrate.upgrade(empty_dsn)
    assert _snapshot(empty_dsn) == full


def test_tenancy_prints_in_sql_mode():
    from pydna import migrate

    text = migrate.upgrade("postgresql://nobody@127.0.0.1:1/none", sql=True)
    for expected in ("CREATE TABLE dna.dna_identities", "CREATE TABLE dna.dna_workspace_members",
                     "CREATE OR REPLACE FUNCTION dna.visible_tenants(", "FORCE ROW LEVEL SECURITY",
                     "dna.protect_table(t)", "'personal:<oid>'"):
        assert expected in text, expected


def test_identity_is_the_current_role_so_a_pooler_switches_with_set_role(seeded):
    # A pooler that the DBA made a member of alice's role may SET ROLE alice: it then *is* alice,
    # and RESET ROLE makes it itself again (svc: no identity). A plain SET of a variable does nothing.
    seeded.admin.execute(f"GRANT {ROLES['alice']} TO {ROLES['svc']}")
    svc = seeded("svc")
    svc.execute("SET dna.identity = 'alice-oid'")                      # not an identity
    state, _ = refused(svc, "SELECT dna.recall(%s, 'zebra', personal => true)", (S,))
    assert state == "42501"
    svc.execute(f"SET ROLE {ROLES['alice']}")
    assert "alice-diary" in names(recall(svc, "zebra diary", personal=True))
    svc.execute("RESET ROLE")
    state, _ = refused(svc, "SELECT dna.recall(%s, 'zebra', personal => true)", (S,))
    assert state == "42501"
    assert one(svc, "SELECT count(*) FROM dna.dna_instances WHERE tenant = %s", (ALICE,)) == 0


def test_the_policys_list_is_planned_without_an_inlining_attempt(sql):
    """The one-node policy names (SELECT dna.visible_tenants()) twice per protected table of a statement.
    A LANGUAGE sql function there is parsed and analysed by the planner at every planning of such a
    statement (it tries to inline it, and gives up: the body has sub-selects); the role's verbs replan their
    statements at every call, so that parse was ~70 us of the ~160 us a role paid beyond the superuser on a
    statement of two protected tables (bench/policy_cost.py: up to x1.28 over a personal partition). A
    PL/pgSQL function is never inlined, and it keeps its statement's plan for the session. Stable, not
    SECURITY DEFINER: the caller's own rights."""
    lang, volatile, definer = sql.execute(
        "SELECT l.lanname, p.provolatile, p.prosecdef FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang "
        "WHERE p.oid = 'dna.visible_tenants()'::regprocedure").fetchone()
    assert (lang, volatile, definer) == ("plpgsql", "s", False)


def test_the_list_follows_set_role_within_a_session(seeded):
    """The list's statement plan is kept for the session, and row-level security on the maps depends on the
    role: after a SET ROLE (a pooler) and a RESET ROLE the list, and so the rows, are the current role's,
    whatever the session asked as another role before."""
    seeded.admin.execute(f"GRANT {ROLES['alice']} TO {ROLES['svc']}")
    svc = seeded("svc")
    for _ in range(3):                                   # the list's plan cached as svc
        assert one(svc, "SELECT dna.visible_tenants()") == ["", "*"]
        assert {r[0] for r in rows(svc, "SELECT DISTINCT tenant FROM dna.dna_instances")} == {"", WS_A, WS_B}
    svc.execute(f"SET ROLE {ROLES['alice']}")
    assert one(svc, "SELECT dna.visible_tenants()") == ["", ALICE, WS_A, WS_B]
    assert {r[0] for r in rows(svc, "SELECT DISTINCT tenant FROM dna.dna_instances")} == {"", ALICE, WS_A, WS_B}
    assert "alice-diary" in {hit[2] for hit in search(svc, "zebra diary", personal=True)}
    svc.execute("RESET ROLE")
    assert one(svc, "SELECT dna.visible_tenants()") == ["", "*"]
    assert {r[0] for r in rows(svc, "SELECT DISTINCT tenant FROM dna.dna_instances")} == {"", WS_A, WS_B}
    assert one(svc, "SELECT count(*) FROM dna.dna_search_docs_384 WHERE tenant = %s", (ALICE,)) == 0
    bob = seeded("bob")
    assert one(bob, "SELECT dna.visible_tenants()") == ["", "personal:bob-oid", WS_A]


def test_set_search_config_is_an_operator_function_with_a_clear_refusal(world, sql):
    """An application role reads a scope's settings (dna.search_config) but may not change them:
    42501 naming the function and a hint, not PostgreSQL's bare 'permission denied for table'."""
    app = world("alice")
    assert len(rows(app, "SELECT * FROM dna.search_config('acme')")) == 1
    with pytest.raises(psycopg.Error) as err:
        app.execute("SELECT dna.set_search_config('acme', fusion => 'rrf')")
    assert err.value.sqlstate == "42501"
    assert "operator function" in err.value.diag.message_primary and "GRANT" in err.value.diag.message_hint
    assert sql.execute("SELECT dna.set_search_config('acme', fusion => 'rrf')").fetchone()[0]["fusion"] == "rrf"


def test_revoke_app_role_offboards_so_the_role_can_be_dropped(sql, dna_dsn):
    """dna.revoke_app_role, the inverse of dna.grant_app_role: afterwards the role reads nothing,
    its map rows are gone (copied to the workers on Citus) and DROP ROLE succeeds while the database
    lives (on Citus the REVOKEs reach every shard: D10 of ../shared/research/citus-probe-3.md). The
    rows it wrote stay."""
    role = f"dna_t_leaver_{SUFFIX}"
    sql.execute(f"DROP ROLE IF EXISTS {role}")
    sql.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    try:
        sql.execute("SELECT dna.grant_app_role(%s)", (role,))
        sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'leaver-oid')", (role,))
        sql.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name) VALUES (%s, %s)", (WS_A, role))
        sync_maps(sql)
        params = conninfo_to_dict(dna_dsn)
        params.update(user=role, password=PASSWORD)
        with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
            conn.execute("SELECT dna.remember(%s, %s, name => 'leaver-note', personal => true)",
                         (S, Jsonb({"summary": "a note to self"})))
            conn.execute("SELECT dna.remember(%s, %s, name => 'leaver-shared', tenant => %s)",
                         (S, Jsonb({"summary": "a shared note"}), WS_A))
        report = sql.execute("SELECT dna.revoke_app_role(%s)", (role,)).fetchone()[0]
        assert report == {"role": role, "identities_removed": 1, "memberships_removed": 1}
        with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT count(*) FROM dna.dna_instances")
        sql.execute(f"DROP ROLE {role}")
        assert one(sql, "SELECT count(*) FROM dna.dna_instances WHERE name LIKE 'leaver-%%'") == 2
        assert one(sql, "SELECT count(*) FROM dna.dna_identities WHERE oid = 'leaver-oid'") == 0
    finally:
        sql.execute(f"DROP OWNED BY {role}" if one(sql, "SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,))
                    else "SELECT 1")
        sql.execute(f"DROP ROLE IF EXISTS {role}")
    with pytest.raises(psycopg.Error) as err:
        sql.execute("SELECT dna.revoke_app_role('dna_no_such_role')")
    assert err.value.sqlstate == "22023"
