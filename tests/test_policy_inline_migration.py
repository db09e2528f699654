"""Revision 0021_holds_in_use, topic policy_inline (issue 26 item 4): on one node the tenant policy of
every protected table writes dna.tenant_visible's test out inline (the list dna.visible_tenants() an
InitPlan, no SQL function call per row), admitting exactly the rows 0020's policy admitted.

A 0020_real_use database holding the seed of test_citus_migration (base, workspace 'acme' and personal
memories, documents whole and as passages) plus rows of a workspace 'other' and of a second identity's
personal partition is read by two real LOGIN roles (dna.grant_app_role, row-level security forced):
``app`` (mapped to the seed's identity, member of 'acme') and ``star`` (its own identity, member of every
workspace, '*'). What each sees — every protected table's rows by tenant, search, recall, list — is the
same after the upgrade and after the downgrade; WITH CHECK still refuses a write into another's
partition; the plan shows the function call at 0020 and not at head."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import NOW, S, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

APP, STAR = f"dna_pi_app_{os.getpid()}", f"dna_pi_star_{os.getpid()}"
PASSWORD = "dna-policy-inline-test"
OLD = ("((tenant = ''::text) OR dna.tenant_visible(tenant, ( SELECT dna.visible_tenants() AS visible_tenants)))")
NEW = ("((tenant = ''::text) OR (tenant = ANY (( SELECT dna.visible_tenants() AS visible_tenants)::text[])) OR "
       "((NOT starts_with(tenant, 'personal:'::text)) AND "
       "('*'::text = ANY (( SELECT dna.visible_tenants() AS visible_tenants)::text[]))))")


@pytest.fixture
def roles(pg_server, empty_dsn):
    """Two LOGIN roles (cluster-wide), dropped afterwards with what they hold in the test's database."""
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in (APP, STAR):
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    yield
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {APP}, {STAR}")                     # their grants in the test's database
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in (APP, STAR):
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def _as(dsn, role):
    params = conninfo_to_dict(dsn)
    params.update(user=role, password=PASSWORD)
    return psycopg.connect(make_conninfo(**params), autocommit=True)


def _policies(conn):
    rows = conn.execute("SELECT tablename, qual, with_check FROM pg_policies WHERE schemaname = 'dna' "
                        "AND policyname = 'dna_tenant_isolation' ORDER BY 1").fetchall()
    tables = [r[0] for r in conn.execute("SELECT c.relname FROM dna.protected_tables() AS t "
                                         "JOIN pg_class AS c ON c.oid = t ORDER BY 1")]
    assert [r[0] for r in rows] == tables and len(tables) >= 9
    assert conn.execute("SELECT bool_and(c.relrowsecurity AND c.relforcerowsecurity) FROM dna.protected_tables() AS t "
                        "JOIN pg_class AS c ON c.oid = t").fetchone()[0] is True
    return {qual for _t, qual, _c in rows} | {check for _t, _q, check in rows}


def _seen(conn, *, acme=True):
    """What a role sees: every protected table's rows by tenant, and the verbs' answers."""
    out = {}
    for (table,) in conn.execute("SELECT t::text FROM dna.protected_tables() AS t ORDER BY 1").fetchall():
        out[table] = conn.execute(f"SELECT tenant, count(*) FROM {table} GROUP BY 1 ORDER BY 1").fetchall()
    labels = [("base", "", False), ("personal", "", True)] + ([("acme", "acme", False)] if acme else [])
    for label, tenant, personal in labels:
        out[f"hybrid {label}"] = conn.execute(
            "SELECT kind, name, tenant, score FROM dna.search(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), "
            "tenant => %s, personal => %s, k => 20)", (S, tenant, personal)).fetchall()
        out[f"lexical {label}"] = conn.execute(
            "SELECT kind, name, tenant, score FROM dna.search(%s, 'alpha gamma', tenant => %s, personal => %s, "
            "k => 20)", (S, tenant, personal)).fetchall()
        out[f"recall {label}"] = [(h["name"], h["tenant"], h["score"]) for h in conn.execute(
            "SELECT dna.recall(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), tenant => %s, personal => %s, "
            "reconsolidate => false, now => %s, k => 10) -> 'hits'", (S, tenant, personal, NOW)).fetchone()[0]]
        out[f"list {label}"] = [(m["name"], m["tenant"]) for m in conn.execute(
            "SELECT dna.list_memories(%s, tenant => %s, personal => %s, include_invalid => true, now => %s) "
            "-> 'memories'", (S, tenant, personal, NOW)).fetchone()[0]]
    return out


def _refuses_foreign_writes(conn, foreign):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("UPDATE dna.dna_instances SET tenant = %s WHERE scope = %s AND tenant = ''", (foreign, S))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("INSERT INTO dna.dna_versions SELECT (jsonb_populate_record(NULL::dna.dna_versions, "
                     "to_jsonb(v) || jsonb_build_object('tenant', %s::text, 'name', 'forged'))).* "
                     "FROM dna.dna_versions AS v WHERE v.scope = %s LIMIT 1", (foreign, S))


def _plan(conn):
    return "\n".join(r[0] for r in conn.execute(
        "EXPLAIN (VERBOSE, COSTS OFF) SELECT name FROM dna.dna_instances WHERE scope = %s", (S,)).fetchall())


def test_upgrade_writes_the_policy_out_admits_the_same_rows_and_downgrades(empty_dsn, roles):
    migrate.upgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)                                                        # identity 'dba-oid' of the superuser
        for role in (APP, STAR):
            conn.execute("SELECT dna.grant_app_role(%s)", (role,))
        conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'dba-oid'), (%s, 'star-oid')",
                     (APP, STAR))
        conn.execute("INSERT INTO dna.dna_workspace_members (workspace, role_name) VALUES ('acme', %s), ('*', %s)",
                     (APP, STAR))
        conn.execute("SELECT dna.remember(%s, %s, name => 'elsewhere', tenant => 'other', "
                     "embedding => dna.fake_embed('alpha other'))", (S, Jsonb({"summary": "alpha gamma other"})))
        assert _policies(conn) == {OLD}
    with _as(empty_dsn, STAR) as star:
        star.execute("SELECT dna.remember(%s, %s, name => 'starpin', personal => true, "
                     "embedding => dna.fake_embed('alpha star'))", (S, Jsonb({"summary": "alpha gamma star pin"})))
    with _as(empty_dsn, APP) as app, _as(empty_dsn, STAR) as star:
        before = {"app": _seen(app), "star": _seen(star)}
        assert "tenant_visible" in _plan(app)                              # 0020: one call per non-base row
    tenants = {t for t, _n in before["app"]["dna.dna_instances"]}
    assert tenants == {"", "acme", "personal:dba-oid"}                      # not 'other', not star's partition
    assert {t for t, _n in before["star"]["dna.dna_instances"]} == {"", "acme", "other", "personal:star-oid"}
    assert ("starpin", "personal:star-oid") in before["star"]["list personal"]

    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _policies(conn) == {NEW}
        assert conn.execute("SELECT dna.tenant_policy() = dna.tenant_policy(false)").fetchone()[0] is True
    with _as(empty_dsn, APP) as app, _as(empty_dsn, STAR) as star:
        assert {"app": _seen(app), "star": _seen(star)} == before
        plan = _plan(app)
        assert "tenant_visible" not in plan and "InitPlan" in plan and "visible_tenants()" in plan
        _refuses_foreign_writes(app, "personal:star-oid")
        _refuses_foreign_writes(app, "other")
        _refuses_foreign_writes(star, "personal:dba-oid")                  # '*' is never a personal partition
        star.execute("SELECT dna.remember(%s, %s, name => 'starpin2', personal => true, "
                     "embedding => dna.fake_embed('alpha star 2'))", (S, Jsonb({"summary": "alpha star pin 2"})))
        after_writes = {"app": _seen(app), "star": _seen(star)}
    assert after_writes["app"] == before["app"]                             # star's new row stays star's
    assert ("starpin2", "personal:star-oid") in after_writes["star"]["list personal"]

    migrate.downgrade(empty_dsn, "0020_real_use")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _policies(conn) == {OLD}
        assert "'*'" not in conn.execute("SELECT dna.tenant_policy(false)").fetchone()[0]
        comments = conn.execute("SELECT DISTINCT obj_description(p.oid, 'pg_policy') FROM pg_policy AS p "
                                "WHERE p.polname = 'dna_tenant_isolation'").fetchall()
        assert len(comments) == 1 and comments[0][0].startswith("INV-PERSONAL")
    with _as(empty_dsn, APP) as app, _as(empty_dsn, STAR) as star:
        assert {"app": _seen(app), "star": _seen(star)} == after_writes
        assert "tenant_visible" in _plan(app)
        _refuses_foreign_writes(app, "personal:star-oid")
