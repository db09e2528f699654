"""Revision 0016 (topic receipts) upgrades a 0015_governed_history database holding documents, memories
and an application role: the answers keep their hits, dna_search_receipts is created under the tenant
policy, the role granted at 0015 can take and replay receipts; the downgrade removes the table and the
receipt functions and gives 0015's functions back (dna.protected_tables as it was), with the data."""
from __future__ import annotations

import os

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from pydna import migrate

MODEL = "dna-fake-hash-v1"
ROLE = f"dna_rcm_app_{os.getpid()}"
PASSWORD = "dna-receipts-migration"


def _seed(conn):
    for name, body in (("a", "alpha beta gamma"), ("b", "beta delta"), ("c", "gamma delta epsilon beta")):
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays"]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                     (Jsonb({"summary": text}), f"m{i}", text, MODEL))


def _hits(conn):
    out = [[r[0] for r in conn.execute("SELECT name FROM dna.search('docs', %s, dna.fake_embed(%s), %s)", (q, q, MODEL))]
           for q in ("beta delta", "gamma")]
    r = conn.execute("SELECT dna.recall('team', 'office lisbon', dna.fake_embed('office lisbon'), %s, "
                     "reconsolidate => false)", (MODEL,)).fetchone()[0]
    return out + [[h["name"] for h in r["hits"]]]


def _functions(conn):
    return {r[0]: r[1] for r in conn.execute(
        "SELECT p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)) FROM pg_proc AS p "
        "WHERE p.pronamespace = 'dna'::regnamespace AND p.prokind = 'f'")}


def _as_role(dsn):
    params = conninfo_to_dict(dsn)
    return psycopg.connect(make_conninfo(**{**params, "user": ROLE, "password": PASSWORD}), autocommit=True)


def test_upgrade_from_0015_adds_receipts_and_downgrades(empty_dsn, pg_server):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
    try:
        migrate.upgrade(empty_dsn, "0015_governed_history")
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            _seed(conn)
            conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))      # granted at 0015
            before = _hits(conn)
            functions = _functions(conn)
            protected = [r[0] for r in conn.execute("SELECT t::text FROM dna.protected_tables() AS t")]
        migrate.upgrade(empty_dsn)
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            assert _hits(conn) == before
            assert [r[0] for r in conn.execute("SELECT t::text FROM dna.protected_tables() AS t")] \
                == sorted(protected + ["dna.dna_search_receipts"])
            assert conn.execute("SELECT relrowsecurity AND relforcerowsecurity FROM pg_class "
                                "WHERE oid = 'dna.dna_search_receipts'::regclass").fetchone()[0] is True
        with _as_role(empty_dsn) as app:                                 # the role granted before the upgrade
            r = app.execute("SELECT dna.take_receipt('search', jsonb_build_object('scope', 'docs', 'query', 'beta', "
                            "'query_embedding', dna.fake_embed('beta')::text, 'model_id', %s::text), keep_query => true)",
                            (MODEL,)).fetchone()[0]
            assert [h["name"] for h in r["hits"]][:1] == ["b"]
            assert app.execute("SELECT dna.replay(%s::uuid)", (r["receipt_id"],)).fetchone()[0]["match"] is True
        migrate.downgrade(empty_dsn, "0015_governed_history")
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('dna.dna_search_receipts')").fetchone()[0] is None
            assert _functions(conn) == functions                          # tenancy.sql and the rest as at 0015
            assert _hits(conn) == before
        migrate.upgrade(empty_dsn)
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))      # a role granted at head gets the table
            grants = {r[0] for r in conn.execute(
                "SELECT privilege_type FROM information_schema.role_table_grants "
                "WHERE table_schema = 'dna' AND table_name = 'dna_search_receipts' AND grantee = %s", (ROLE,))}
            assert {"SELECT", "INSERT", "DELETE"} <= grants and "TRUNCATE" not in grants
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {ROLE}")                     # its grants, so that the role can go
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
