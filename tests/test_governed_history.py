"""Governed history (issue 13): an adversarial suite run as an ordinary application role (granted by
dna.grant_app_role, no superuser). Each test is one bypass the issue measured on main; each is now
refused (SQLSTATE) or has no effect on the record."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

ROLE = f"dna_hist_app_{os.getpid()}"
PASSWORD = "hist-pass"
S = "team"
T0, T1, T2, T3 = ("2026-06-01T10:00:00Z", "2026-06-02T10:00:00Z", "2026-06-03T10:00:00Z", "2026-06-04T10:00:00Z")


@pytest.fixture(scope="module")
def app_role(pg_server):
    admin = pg_server.dsn(pg_server.maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
    yield ROLE
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


@pytest.fixture
def app(sql, dna_dsn, app_role):
    """A connection as the application role (autocommit), notices collected in .notices."""
    sql.execute("SELECT dna.grant_app_role(%s)", (app_role,))
    params = conninfo_to_dict(dna_dsn)
    params.update(user=app_role, password=PASSWORD)
    with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0] is False
        conn.notices = []
        conn.add_notice_handler(lambda d, c=conn: c.notices.append(d.message_primary or ""))
        yield conn
    sql.execute(f"DROP OWNED BY {app_role}")


def refused(conn, query, params=()):
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate, str(info.value), info.value.diag.message_hint or ""


def remember(conn, spec, name="m1", now=T0, kind="Engram"):
    return conn.execute("SELECT dna.remember(%s, %s, kind => %s, name => %s, now => %s)",
                        (S, Jsonb(spec), kind, name, now)).fetchone()[0]


def stored(conn, name="m1", kind="Engram"):
    return conn.execute("SELECT spec FROM dna.dna_instances WHERE scope = %s AND kind = %s AND name = %s",
                        (S, kind, name)).fetchone()[0]


def versions(conn, name="m1"):
    return conn.execute("SELECT version, spec, created_at, op FROM dna.dna_versions WHERE scope = %s AND name = %s "
                        "ORDER BY version", (S, name)).fetchall()


# -- dna_versions is append-only ---------------------------------------------------------------


def test_update_of_a_version_is_refused(app):
    remember(app, {"summary": "the office is in lisbon"})
    remember(app, {"summary": "the office moved to porto"}, now=T1)
    before = versions(app)
    for query in ("UPDATE dna.dna_versions SET spec = '{\"summary\": \"rewritten\"}' WHERE name = 'm1' AND version = 1",
                  "UPDATE dna.dna_versions SET created_at = '2020-01-01' WHERE name = 'm1' AND version = 1"):
        state, message, hint = refused(app, query)
        assert state == "42501" and "append-only" in message and "dna.remember" in hint
    assert versions(app) == before


def test_delete_of_a_version_is_refused_even_with_the_path_setting(app):
    remember(app, {"summary": "the office is in lisbon"})
    remember(app, {"summary": "the office moved to porto"}, now=T1)
    before = versions(app)
    state, message, hint = refused(app, "DELETE FROM dna.dna_versions WHERE name = 'm1' AND version = 2")
    assert state == "42501" and "version_retention" in hint
    with app.transaction():
        app.execute("SELECT set_config('dna.history_path', 'prune', true)")
        assert refused(app, "DELETE FROM dna.dna_versions WHERE name = 'm1'")[0] == "42501"
    assert versions(app) == before


def test_a_forged_version_cannot_be_inserted(app):
    remember(app, {"summary": "the office is in lisbon"})
    state, _, hint = refused(app, """
        INSERT INTO dna.dna_versions (scope, kind, api_version, name, tenant, version, id, spec, valid_at, op, created_at)
        SELECT scope, kind, api_version, name, tenant, 99, id, '{"summary": "forged"}', valid_at, 'remember', '2020-01-01'
        FROM dna.dna_instances WHERE name = 'm1'""")
    assert state == "42501" and "dna.remember" in hint
    # Not even a faithful copy of the record, backdated (it would game the as_of election).
    state, _, _ = refused(app, """
        INSERT INTO dna.dna_versions (scope, kind, api_version, name, tenant, version, id, spec, valid_at, op, created_at)
        SELECT scope, kind, api_version, name, tenant, 2, id, spec, valid_at, 'remember', '2020-01-01'
        FROM dna.dna_instances WHERE name = 'm1'""")
    assert state == "42501"
    assert [v[0] for v in versions(app)] == [1]


def test_retention_pruning_still_works_through_the_write_path(app):
    for i in range(6):
        remember(app, {"summary": f"restatement {i}"}, now=T0)
    assert [v[0] for v in versions(app)] == [4, 5, 6]         # Engram keeps 3


# -- revivals, cues_history and counters only grow ---------------------------------------------


def _forgotten_and_revived(app):
    remember(app, {"summary": "the office is in lisbon"})
    app.execute("SELECT dna.forget(%s, 'm1', now => %s)", (S, T1))
    app.execute("SELECT dna.revive(%s, 'm1', now => %s)", (S, T2))
    spec = stored(app)
    assert len(spec["revivals"]) == 1 and "valid_to" not in spec
    return spec


def test_remember_cannot_erase_revivals(app):
    spec = _forgotten_and_revived(app)
    remember(app, {"summary": "the office is in lisbon", "revivals": []}, now=T3)
    assert stored(app)["revivals"] == spec["revivals"]
    assert any("history guard" in n for n in app.notices)


def test_raw_update_cannot_erase_or_forge_revivals(app):
    spec = _forgotten_and_revived(app)
    app.execute("UPDATE dna.dna_instances SET spec = spec || '{\"revivals\": []}' WHERE name = 'm1'")
    assert stored(app)["revivals"] == spec["revivals"]
    app.execute("""UPDATE dna.dna_instances SET spec = jsonb_set(spec, '{revivals}', spec -> 'revivals' ||
                   '[{"valid_to": "2020-01-01T00:00:00Z", "revived_at": "2020-01-02T00:00:00Z"}]') WHERE name = 'm1'""")
    assert stored(app)["revivals"] == spec["revivals"]       # no revival without a forget to lift


def test_cues_history_and_surface_count_never_go_back(app):
    remember(app, {"summary": "the office is in lisbon"})
    for _ in range(3):
        hits = app.execute("SELECT dna.recall(%s, 'office lisbon', now => %s)", (S, T1)).fetchone()[0]
        assert hits["reconsolidated"] == ["m1"]
    spec = stored(app)
    assert spec["surface_count"] == 3 and len(spec["cues_history"]) == 3
    remember(app, {"summary": "the office is in lisbon", "cues_history": [], "surface_count": 0}, now=T2)
    app.execute("UPDATE dna.dna_instances SET spec = spec - 'cues_history' || '{\"surface_count\": 1}' WHERE name = 'm1'")
    app.execute("UPDATE dna.dna_instances SET spec = jsonb_set(spec, '{cues_history}', '[{\"cue\": \"forged\"}]') "
                "WHERE name = 'm1'")
    after = stored(app)
    assert after["surface_count"] == 3 and after["cues_history"] == spec["cues_history"]
    # A higher count and appended cues are growth: accepted.
    app.execute("SELECT dna.recall(%s, 'office lisbon', now => %s)", (S, T3))
    assert stored(app)["surface_count"] == 4 and stored(app)["cues_history"][:3] == spec["cues_history"]


def test_the_cue_window_of_50_still_slides(app):
    remember(app, {"summary": "the office is in lisbon"})
    cues = [{"at": T0, "cue": f"c{i}", "actor": "x"} for i in range(50)]
    remember(app, {"summary": "the office is in lisbon", "cues_history": cues})
    app.execute("SELECT dna.recall(%s, 'office lisbon', now => %s)", (S, T1))
    got = stored(app)["cues_history"]
    assert len(got) == 50 and got[:49] == cues[1:] and got[49]["cue"] == "office lisbon"


# -- a stored valid_to is lifted or moved only by dna.revive ---------------------------------


def test_remember_cannot_move_a_forget(app):
    remember(app, {"summary": "the office is in lisbon"})
    app.execute("SELECT dna.forget(%s, 'm1', now => %s)", (S, T1))
    state, message, hint = refused(app, "SELECT dna.remember(%s, %s, name => 'm1', now => %s)",
                                   (S, Jsonb({"summary": "the office is in lisbon", "valid_to": "2100-01-01T00:00:00Z"}), T2))
    assert state == "55000" and "dna.revive" in message and "dna.revive" in hint
    state, _, _ = refused(app, "UPDATE dna.dna_instances SET spec = spec || '{\"valid_to\": \"2100-01-01T00:00:00Z\"}' "
                               "WHERE name = 'm1'")
    assert state == "55000"
    app.execute("UPDATE dna.dna_instances SET spec = spec - 'valid_to' WHERE name = 'm1'")   # restored, NOTICE
    assert stored(app)["valid_to"] == "2026-06-02T10:00:00+00:00"
    listed = app.execute("SELECT dna.list_memories(%s, now => %s)", (S, T3)).fetchone()[0]
    assert listed["total"] == 0
    revived = app.execute("SELECT dna.revive(%s, 'm1', now => %s)", (S, T3)).fetchone()[0]
    assert revived["revived"] is True and "valid_to" not in stored(app)


def test_a_memory_keeps_its_key(app):
    remember(app, {"summary": "the office is in lisbon"})
    state, _, hint = refused(app, "UPDATE dna.dna_instances SET name = 'm2' WHERE name = 'm1'")
    assert state == "42501" and "superseded_by" in hint


# -- hard deletes of every memory Kind ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["Engram", "Research", "Evidence"])
def test_delete_of_every_memory_kind_is_refused(app, kind):
    remember(app, {"title": "a note", "summary": "rents rose in porto"}, kind=kind)
    state, message, hint = refused(app, "DELETE FROM dna.dna_instances WHERE kind = %s AND name = 'm1'", (kind,))
    assert state == "23001" and "dna.forget" in message and "dna.forget" in hint
    state, _, _ = refused(app, "DELETE FROM dna.dna_search_docs_384 WHERE kind = %s AND name = 'm1'", (kind,))
    assert state == "23001"
    state, _, _ = refused(app, "SELECT dna.delete_document(%s, %s, 'm1')", (S, kind))
    assert state == "23001"
    assert stored(app, kind=kind)["summary"] == "rents rose in porto"
