"""Erasure (issue 13): dna.redact removes a memory's text and vectors from the record, every version,
the search rows and the lexical index, leaving a tombstone that list and as_of report; afterwards no
table of schema dna holds a trace of the text. Who may redact: members of dna_redactor, and the owner
of a personal memory — nobody else, by the verb or by raw SQL."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

PASSWORD = "redact-pass"
ROLES = {who: f"dna_redact_{who}_{os.getpid()}" for who in ("app", "redactor", "owner")}
S = "team"
SECRET = "zebraquartz"
T = ["2026-06-01T10:00:00Z", "2026-06-02T10:00:00Z", "2026-06-03T10:00:00Z", "2026-06-04T10:00:00Z"]
MODEL = "dna-fake-hash-v1"


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


@pytest.fixture
def conns(sql, dna_dsn, roles):
    for who, role in roles.items():
        sql.execute("SELECT dna.grant_app_role(%s)", (role,))
    sql.execute(f"GRANT dna_redactor TO {roles['redactor']}")
    sql.execute("INSERT INTO dna.dna_identities (role_name, oid) VALUES (%s, 'owner-oid')", (roles["owner"],))
    opened = {}
    for who, role in roles.items():
        params = conninfo_to_dict(dna_dsn)
        params.update(user=role, password=PASSWORD)
        opened[who] = psycopg.connect(make_conninfo(**params), autocommit=True)
    yield opened
    for conn in opened.values():
        conn.close()
    sql.execute(f"REVOKE dna_redactor FROM {roles['redactor']}")
    for role in roles.values():
        sql.execute(f"DROP OWNED BY {role}")


def remember(conn, summary, name, now, personal=False, body=None):
    spec = {"summary": summary, "tags": ["office"]}
    if body:
        spec["body"] = body
        spec["claims"] = [{"subject": "office", "predicate": "city", "object": SECRET}]
    return conn.execute(
        "SELECT dna.remember(%s, %s, name => %s, now => %s, embedding => dna.fake_embed(%s), model_id => %s, personal => %s)",
        (S, Jsonb(spec), name, now, summary, MODEL, personal)).fetchone()[0]


def traces(sql, needle):
    """Every table of schema dna (superuser: row-level security does not hide rows) whose rows, as
    text, hold the needle: {table: count}."""
    found = {}
    tables = [r[0] for r in sql.execute(
        "SELECT c.oid::regclass::text FROM pg_class AS c WHERE c.relnamespace = 'dna'::regnamespace AND c.relkind IN ('r', 'p')")]
    assert {"dna.dna_bm25_forward", "dna.dna_bm25_postings", "dna.dna_bm25_chunks", "dna.dna_versions",
            "dna.dna_search_docs_384"} <= set(tables)
    for t in tables:
        n = sql.execute(f"SELECT count(*) FROM {t} AS x WHERE strpos(lower(x::text), %s) > 0", (needle,)).fetchone()[0]
        if n:
            found[t] = n
    return found


def _history(conn, name, personal=False):
    remember(conn, f"the office is in {SECRET} lisbon", name, T[0], personal, body=f"{SECRET} body text")
    conn.execute("SELECT dna.recall(%s, %s, now => %s, personal => %s)", (S, f"{SECRET} office", T[1], personal))
    conn.execute("SELECT dna.bm25_compact(%s)", (S,))                   # seal it into a segment
    conn.execute("SELECT dna.forget(%s, %s, now => %s, personal => %s)", (S, name, T[1], personal))
    conn.execute("SELECT dna.revive(%s, %s, revived_by => %s, now => %s, personal => %s)", (S, name, SECRET, T[2], personal))
    remember(conn, f"the office moved from {SECRET} to porto", name, T[2], personal)   # in the memtable now


def test_redact_leaves_no_trace_of_the_text(sql, conns):
    _history(conns["app"], "m1")
    remember(conns["app"], "an unrelated memory about porto", "other", T[0])
    assert traces(sql, SECRET)                                          # the text is everywhere before
    got = conns["redactor"].execute("SELECT dna.redact(%s, 'm1', 'data subject request 42')", (S,)).fetchone()[0]
    assert got["already_redacted"] is False and got["versions_erased"] >= 1 and got["search_rows_erased"] == 1
    assert traces(sql, SECRET) == {}
    assert traces(sql, "lisbon") == {}
    # The tombstone: one version, the instance, no search row.
    spec = sql.execute("SELECT spec FROM dna.dna_instances WHERE name = 'm1'").fetchone()[0]
    assert set(spec) <= {"redacted", "created_at", "valid_from", "valid_to"}
    assert spec["redacted"]["reason"] == "data subject request 42" and spec["redacted"]["digest"].startswith("sha256:")
    assert sql.execute("SELECT count(*), min(op) FROM dna.dna_versions WHERE name = 'm1'").fetchone() == (1, "redact")
    # list and as_of report it; search and recall no longer find it; the other memory is intact.
    listed = conns["app"].execute("SELECT dna.list_memories(%s, include_invalid => true)", (S,)).fetchone()[0]
    by_name = {m["name"]: m for m in listed["memories"]}
    assert by_name["m1"]["redacted"]["reason"] == "data subject request 42" and by_name["m1"]["valid"] is False
    past = conns["app"].execute("SELECT dna.recall(%s, 'office porto', as_of => now())", (S,)).fetchone()[0]
    assert past["as_of_redacted"] == ["m1"] and "m1" not in {h["name"] for h in past["hits"]}
    now = conns["app"].execute("SELECT dna.recall(%s, 'office porto', reconsolidate => false)", (S,)).fetchone()[0]
    assert [h["name"] for h in now["hits"]] == ["other"]
    again = conns["redactor"].execute("SELECT dna.redact(%s, 'm1', 'twice')", (S,)).fetchone()[0]
    assert again["already_redacted"] is True


def test_a_tombstone_is_never_written_again(sql, conns):
    remember(conns["app"], "the office is in lisbon", "m1", T[0])
    conns["redactor"].execute("SELECT dna.redact(%s, 'm1', 'request')", (S,))
    for query in (f"SELECT dna.remember('{S}', '{{\"summary\": \"back\"}}', name => 'm1')",
                  f"SELECT dna.revive('{S}', 'm1')",
                  "UPDATE dna.dna_instances SET spec = '{\"summary\": \"back\"}' WHERE name = 'm1'"):
        with pytest.raises(psycopg.Error) as info:
            conns["app"].execute(query)
        assert info.value.sqlstate == "55000", query


def test_only_a_redactor_or_the_owner_may_redact(sql, conns):
    remember(conns["app"], "the office is in lisbon", "m1", T[0])
    with pytest.raises(psycopg.Error) as info:
        conns["app"].execute("SELECT dna.redact(%s, 'm1', 'because')", (S,))
    assert info.value.sqlstate == "42501" and "dna_redactor" in (info.value.diag.message_hint or "")
    # Raw SQL: a tombstone written by hand, then the versions deleted, both refused.
    with pytest.raises(psycopg.Error) as info:
        conns["app"].execute("UPDATE dna.dna_instances SET spec = '{\"redacted\": {\"reason\": \"x\"}}' WHERE name = 'm1'")
    assert info.value.sqlstate == "42501"
    with pytest.raises(psycopg.Error) as info:
        conns["app"].execute("DELETE FROM dna.dna_versions WHERE name = 'm1'")
    assert info.value.sqlstate == "42501"
    assert "lisbon" in sql.execute("SELECT spec ->> 'summary' FROM dna.dna_instances WHERE name = 'm1'").fetchone()[0]
    # The owner of a personal memory redacts their own.
    _history(conns["owner"], "mine", personal=True)
    got = conns["owner"].execute("SELECT dna.redact(%s, 'mine', 'my data', personal => true)", (S,)).fetchone()[0]
    assert got["tenant"] == "personal:owner-oid" and got["already_redacted"] is False
    assert traces(sql, SECRET) == {}
