"""Revision 0023, topic policy_bound (issue 26 item 4): beneath the row-level-security policy the
application role's statements keep the superuser's index conditions, with the same answers.

- Every width table keeps valid_from = lower(valid_at) (a generated, stored column) through every write
  (remember, a later valid_from, forget, revive, index_document, a plain UPDATE), and the index
  dna_search_docs_<w>_valid_from reads it.
- A real LOGIN role (dna.grant_app_role, row-level security FORCEd) mapped to the superuser's identity
  gets the superuser's answers from dna.search (lexical and hybrid, base and personal rows, at valid
  times before and after a memory's later valid_from), dna.recall and dna.list_memories.
- The role's plans (auto_explain, nested statements): dna.search's validity probe compares valid_from in
  the index condition, and dna.recall's collapse step finds each hit's search row by its key in the index
  condition. Neither can be an index condition when written with a function that is not leakproof
  (lower(valid_at), h.hit ->> 'kind'): the role then filtered every row of the table or of the scope.

Plain SQL through psycopg, as any language would call it."""
from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg.types.json import Jsonb

from citus_plans import Plans, _walk
from login_role import mapped_login_role

S = "policy-bound"
FAKE = "dna-fake-hash-v1"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(days=30)
ROLE = f"dna_pb_app_{os.getpid()}"
PASSWORD = "dna-policy-bound-test"


@pytest.fixture
def app(pg_server, dna_dsn, sql):
    """A LOGIN role with the application grants, mapped (like the superuser) to identity 'pb-oid'."""
    with mapped_login_role(pg_server, dna_dsn, sql, ROLE, PASSWORD, "pb-oid") as conn:
        yield conn


def remember(conn, name, summary, *, personal=False, spec=None, now=NOW):
    spec = {"summary": summary, **(spec or {})}
    conn.execute("SELECT dna.remember(%s, %s, name => %s, personal => %s, now => %s, "
                 "embedding => dna.fake_embed(%s))", (S, Jsonb(spec), name, personal, now, summary))


def seed(sql, app):
    """Base and personal memories (one of each valid only from LATER, one of each forgotten) and documents
    (whole and as passages), enough rows that each step has something to leave out."""
    for i in range(12):
        remember(sql, f"b{i}", f"alpha gamma base memory {i} about river stones")
        remember(app, f"p{i}", f"alpha gamma personal memory {i} about river clouds", personal=True)
        sql.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                    (S, f"d{i}", f"gamma document {i} with alpha words", f"gamma document {i}", FAKE))
    remember(sql, "b-later", "alpha gamma base memory valid later", spec={"valid_from": LATER.isoformat()})
    remember(app, "p-later", "alpha gamma personal memory valid later", personal=True,
             spec={"valid_from": LATER.isoformat()})
    sql.execute("SELECT dna.forget(%s, 'b3', now => %s)", (S, NOW + timedelta(hours=1)))
    app.execute("SELECT dna.forget(%s, 'p3', personal => true, now => %s)", (S, NOW + timedelta(hours=1)))
    sql.execute("SELECT count(*) FROM dna.index_documents(%s, ARRAY['Doc','Doc','Doc'], ARRAY['p','p','p'], "
                "ARRAY['alpha first part','gamma second part','alpha gamma third part'], NULL, %s, "
                "passages => ARRAY[0,1,2])", (S, FAKE))


def widths(sql):
    return [r[0] for r in sql.execute("SELECT dna.search_widths()").fetchall()]


def mismatched(sql):
    """Rows of every width table whose valid_from is not lower(valid_at)."""
    return sum(sql.execute(f"SELECT count(*) FROM dna.dna_search_docs_{w} "
                           "WHERE valid_from IS DISTINCT FROM lower(valid_at)").fetchone()[0] for w in widths(sql))


def test_valid_from_is_the_lower_bound_of_valid_at_through_every_write(sql, app):
    for w in widths(sql):
        assert sql.execute("SELECT a.attgenerated, format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a "
                           "WHERE a.attrelid = %s::regclass AND a.attname = 'valid_from'",
                           (f"dna.dna_search_docs_{w}",)).fetchone() == ("s", "timestamp with time zone")
        assert sql.execute("SELECT pg_get_indexdef(%s::regclass)", (f"dna.dna_search_docs_{w}_valid_from",)
                           ).fetchone()[0].endswith("(scope, model_id, valid_from) INCLUDE (doc_id)")
    seed(sql, app)
    rows = dict(sql.execute("SELECT name || '/' || (tenant <> '')::text, valid_from FROM dna.dna_search_docs_384 "
                            "WHERE scope = %s AND passage = 0", (S,)).fetchall())
    assert rows["b1/false"] == NOW and rows["p1/true"] == NOW
    assert rows["b-later/false"] == LATER and rows["p-later/true"] == LATER
    assert rows["b3/false"] == NOW                                         # forget closes the range, not its start
    assert rows["d1/false"] is None and rows["p/false"] is None            # documents: no validity
    sql.execute("SELECT dna.revive(%s, 'b3', now => %s)", (S, NOW + timedelta(days=2)))
    remember(sql, "b5", "alpha gamma base memory 5 restated", spec={"valid_from": (NOW - timedelta(days=3)).isoformat()})
    sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = tstzrange(%s, NULL) WHERE scope = %s AND name = 'd2'",
                (LATER, S))
    sql.execute("UPDATE dna.dna_search_docs_384 SET valid_at = tstzrange(NULL, %s) WHERE scope = %s AND name = 'd4'",
                (LATER, S))
    assert sql.execute("SELECT name, valid_from FROM dna.dna_search_docs_384 WHERE scope = %s "
                       "AND name IN ('b5', 'd2', 'd4') ORDER BY name", (S,)).fetchall() == [
        ("b5", NOW - timedelta(days=3)), ("d2", LATER), ("d4", None)]  # unbounded below: NULL, as lower() gives
    assert mismatched(sql) == 0
    with pytest.raises(psycopg.errors.GeneratedAlways):                    # nobody writes it but the table
        sql.execute("UPDATE dna.dna_search_docs_384 SET valid_from = now() WHERE scope = %s", (S,))


def answers(conn):
    out = {}
    for personal in (False, True):
        for vt in (NOW + timedelta(days=1), LATER + timedelta(days=1)):
            for emb in ("NULL", "dna.fake_embed('alpha gamma')"):
                out[f"search {personal} {vt} {emb}"] = conn.execute(
                    f"SELECT kind, name, tenant, passage, round(score::numeric, 9) FROM dna.search(%s, 'alpha gamma', "
                    f"{emb}, personal => %s, valid_time => %s, k => 30)", (S, personal, vt)).fetchall()
            out[f"recall {personal} {vt}"] = [(h["name"], h["tenant"], h["score"]) for h in conn.execute(
                "SELECT dna.recall(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), personal => %s, "
                "reconsolidate => false, now => %s, k => 20) -> 'hits'", (S, personal, vt)).fetchone()[0]]
        out[f"list {personal}"] = [(m["name"], m["tenant"]) for m in conn.execute(
            "SELECT dna.list_memories(%s, personal => %s, include_invalid => true, now => %s) -> 'memories'",
            (S, personal, NOW)).fetchone()[0]]
    return out


def test_the_role_gets_the_superusers_answers_at_every_valid_time(sql, app):
    seed(sql, app)
    su, role = answers(sql), answers(app)
    assert role == su
    early = {n for _k, n, _t, _p, _s in su[f"search True {NOW + timedelta(days=1)} NULL"]}
    late = {n for _k, n, _t, _p, _s in su[f"search True {LATER + timedelta(days=1)} NULL"]}
    assert {"b-later", "p-later"} & early == set() and {"b-later", "p-later"} <= late   # the probe's rows
    assert {"b3", "p3"} & (early | late) == set()                                        # forgotten
    assert {"p1", "b1", "d1"} <= early
    recalled = {n for n, _t, _s in su[f"recall True {NOW + timedelta(days=1)}"]}
    assert "p1" in recalled and "p-later" not in recalled


def _role_plans(sql, statement, params):
    """The plans of every statement ``statement`` runs as the role (auto_explain loaded and set on the
    superuser connection, then SET ROLE), with sequential scans, hash and merge joins off: an index path (a
    parameterized one for a join) is then taken wherever one exists, so what its index condition holds is
    what the policy let through, whatever a small table's costs would prefer."""
    plans = Plans(sql)
    with plans.capture():
        sql.execute(f"SET ROLE {ROLE}")
        try:
            sql.execute("SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off")
            sql.execute(statement, params).fetchall()
        finally:
            sql.execute("RESET enable_seqscan; RESET enable_hashjoin; RESET enable_mergejoin")
            sql.execute("RESET ROLE")
    return list(plans.statements())


def _scans(plans, marker, table="dna_search_docs_384"):
    found = [p for p in plans if marker in " ".join(p["Query Text"].split())]
    assert found, f"no statement with {marker!r}"
    return [n for p in found for n in _walk(p["Plan"]) if n.get("Relation Name") == table]


def _ahead_of_policy(node, pattern) -> bool:
    """``pattern`` is an index condition of ``node``, or a filter the planner evaluates before the policy's
    (only a leakproof qual may go ahead of a security qual: one that may not stays after it, and so can
    never be an index condition either)."""
    if re.search(pattern, str(node.get("Index Cond", ""))):
        return True
    where, policy = str(node.get("Filter", "")), str(node.get("Filter", "")).find("tenant = ''::text")
    found = re.search(pattern, where)
    return found is not None and policy >= 0 and found.start() < policy


def test_the_roles_validity_probe_and_collapse_probe_are_leakproof(sql, app):
    seed(sql, app)
    assert app.execute("SELECT dna.privileged()").fetchone()[0] is False     # row-level security applies to it
    for personal in (False, True):
        plans = _role_plans(sql, "SELECT * FROM dna.search(%s, 'alpha gamma', personal => %s, valid_time => %s)",
                            (S, personal, NOW))
        later = [n for n in _scans(plans, "t.valid_from > $3") if "valid_from" in str(n)]
        assert later and all(_ahead_of_policy(n, r"valid_from > ") for n in later), \
            [(n.get("Index Name"), n.get("Index Cond"), n.get("Filter")) for n in later]
        plans = _role_plans(sql, "SELECT dna.recall(%s, 'alpha gamma', dna.fake_embed('alpha gamma'), "
                                 "personal => %s, reconsolidate => false, now => %s)", (S, personal, NOW))
        # the collapse step: its join to the search rows compares plain columns, so the planner may
        # probe the index per hit beneath the policy (on a table this small it may still prefer one scan
        # of the scope); a key read out of the JSON in the join (h.hit ->> 'kind') could never be probed
        found = [p for p in plans if "jsonb_array_elements($1) WITH ORDINALITY" in p["Query Text"]]
        assert found and _scans(found, "jsonb_array_elements"), "the collapse step reads the search rows"
        joins = [str(n.get(key, "")) for p in found for n in _walk(p["Plan"])
                 for key in ("Index Cond", "Join Filter", "Hash Cond", "Merge Cond", "Filter")]
        keyed = [c for c in joins if re.search(r"\bd\.(kind|name|tenant) = |\((kind|name|tenant) = ", c)]
        assert keyed and not any("->>" in c for c in keyed), keyed
