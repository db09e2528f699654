"""Revision 0023_still_open, topic policy_bound (issue 26 item 4): a 0022_first_week database holding data
(the seed of test_citus_migration: documents whole and as passages, memories restated and forgotten, a
workspace overlay, a personal memory; plus memories valid only from a later time, base and personal)
upgrades with every answer the same, the superuser's and a real application role's; after it every width
table's valid_from is lower(valid_at) on every row and its index dna_search_docs_<w>_valid_from reads that
column; a row written after the upgrade keeps it; the downgrade drops the column and gives 0022's
expression index back, answering the same."""
from __future__ import annotations

import os
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from pydna import migrate
from test_citus_migration import NOW, S, _answers, _seed

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

ROLE = f"dna_pbm_app_{os.getpid()}"
PASSWORD = "dna-policy-bound-migration"
LATER = NOW + timedelta(days=30)


@pytest.fixture
def role(pg_server, empty_dsn):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
    params = conninfo_to_dict(empty_dsn)
    params.update(user=ROLE, password=PASSWORD)
    yield make_conninfo(**params)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {ROLE}")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def _widths(conn):
    return [r[0] for r in conn.execute("SELECT dna.search_widths()").fetchall()]


def _index_defs(conn):
    return {w: conn.execute("SELECT pg_get_indexdef(%s::regclass)", (f"dna.dna_search_docs_{w}_valid_from",)
                            ).fetchone()[0] for w in _widths(conn)}


def _has_column(conn):
    return {w: conn.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'valid_from' "
                            "AND NOT attisdropped", (f"dna.dna_search_docs_{w}",)).fetchone()[0] == 1
            for w in _widths(conn)}


def _role_answers(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        out = {}
        for personal in (False, True):
            for vt in (NOW + timedelta(days=1), LATER + timedelta(days=1)):
                out[f"search {personal} {vt}"] = conn.execute(
                    "SELECT kind, name, tenant, passage, score FROM dna.search(%s, 'alpha gamma', "
                    "dna.fake_embed('alpha gamma'), personal => %s, valid_time => %s, k => 30)",
                    (S, personal, vt)).fetchall()
                out[f"lexical {personal} {vt}"] = conn.execute(
                    "SELECT kind, name, tenant, passage, score FROM dna.search(%s, 'alpha gamma', personal => %s, "
                    "valid_time => %s, k => 30)", (S, personal, vt)).fetchall()
                out[f"later {personal} {vt}"] = [r[0] for r in conn.execute(
                    "SELECT name FROM dna.search(%s, 'later', personal => %s, valid_time => %s)",
                    (S, personal, vt)).fetchall()]
                out[f"recall {personal} {vt}"] = conn.execute(
                    "SELECT dna.recall(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), personal => %s, "
                    "reconsolidate => false, now => %s, k => 20) -> 'hits'", (S, personal, vt)).fetchone()[0]
        return out


def test_upgrade_adds_the_stored_lower_bound_answers_the_same_and_downgrades(empty_dsn, role):
    migrate.upgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)                                                        # identity 'dba-oid' of the superuser
        conn.execute("SELECT dna.grant_app_role(%s)", (ROLE,))
        conn.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'dba-oid')", (ROLE,))
        conn.execute("SELECT dna.remember(%s, %s, name => 'later', now => %s, embedding => dna.fake_embed('alpha later'))",
                     (S, Jsonb({"summary": "alpha gamma later", "valid_from": LATER.isoformat()}), NOW))
        conn.execute("SELECT dna.remember(%s, %s, name => 'later-pin', personal => true, now => %s, "
                     "embedding => dna.fake_embed('alpha later pin'))",
                     (S, Jsonb({"summary": "alpha gamma later pin", "valid_from": LATER.isoformat()}), NOW))
        old_defs = _index_defs(conn)
        assert all("lower(valid_at)" in d for d in old_defs.values()) and not any(_has_column(conn).values())
        before = _answers(conn)
    before_role = _role_answers(role)
    assert sorted(before_role[f"later True {LATER + timedelta(days=1)}"]) == ["later", "later-pin"]
    assert before_role[f"later False {LATER + timedelta(days=1)}"] == ["later"]
    assert before_role[f"later True {NOW + timedelta(days=1)}"] == []          # valid only from LATER

    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert all(_has_column(conn).values())
        assert all(d.endswith("(scope, model_id, valid_from) INCLUDE (doc_id)") for d in _index_defs(conn).values())
        for w in _widths(conn):
            assert conn.execute(f"SELECT count(*) FILTER (WHERE valid_from IS DISTINCT FROM lower(valid_at)), "
                                f"count(*) FILTER (WHERE valid_from IS NOT NULL) FROM dna.dna_search_docs_{w}"
                                ).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FILTER (WHERE valid_from = %s), count(*) FILTER (WHERE valid_from IS NOT NULL) "
                            "FROM dna.dna_search_docs_384 WHERE scope = %s", (LATER, S)).fetchone()[0] == 2
        assert _answers(conn) == before
    assert _role_answers(role) == before_role
    with psycopg.connect(empty_dsn, autocommit=True) as conn:            # a row written after the upgrade
        conn.execute("SELECT dna.remember('after', %s, name => 'after', now => %s, embedding => dna.fake_embed('after'))",
                     (Jsonb({"summary": "written after", "valid_from": LATER.isoformat()}), NOW))
        assert conn.execute("SELECT valid_from FROM dna.dna_search_docs_384 WHERE scope = 'after'").fetchone()[0] == LATER

    migrate.downgrade(empty_dsn, "0022_first_week")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert not any(_has_column(conn).values())
        assert _index_defs(conn) == old_defs
        assert _answers(conn) == before
    assert _role_answers(role) == before_role
