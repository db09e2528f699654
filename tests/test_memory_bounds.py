"""Bounded inputs (issue 13): numeric spec fields and claim objects are range-checked at the door
(22003/22023 naming the field), and nothing accepted can later break a read of the scope — a
property test writes arbitrary specs into one scope and runs every read verb after each."""
from __future__ import annotations

import itertools
import json

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

S = "bounds"
NOW = "2026-06-01T12:00:00Z"
_names = itertools.count()


def _remember_text(conn, spec_text, name):
    return conn.execute("SELECT dna.remember(%s, %s::jsonb, name => %s, now => %s)", (S, spec_text, name, NOW)).fetchone()[0]


def _state(conn, spec_text):
    with pytest.raises(psycopg.Error) as info:
        _remember_text(conn, spec_text, f"x{next(_names)}")
    return info.value.sqlstate, str(info.value)


@pytest.mark.parametrize("field, literal, state", [
    ("confidence_score", "1e400", "22003"),
    ("confidence_score", "-0.5", "22003"),
    ("confidence_score", "10.5", "22003"),
    ("engram_stability_days", "1e400", "22003"),
    ("engram_stability_days", "0", "22023"),
    ("surface_count", "1e30", "22003"),
    ("surface_count", "-1", "22003"),
    ("surface_count", "1.5", "22023"),
])
def test_numeric_spec_fields_are_range_checked_naming_the_field(sql, field, literal, state):
    got, message = _state(sql, f'{{"summary": "a memory", "{field}": {literal}}}')
    assert got == state and f"spec.{field}" in message


@pytest.mark.parametrize("literal", ["1" + "0" * 400, "1e400", "1e-400", "0.1234567890123456789"])
def test_claim_objects_are_range_checked(sql, literal):
    got, message = _state(sql, '{"summary": "a memory", "claims": [{"predicate": "p", "object": %s}]}' % literal)
    assert got == "22003" and "claims[0].object" in message


def test_in_range_values_are_accepted(sql):
    got = _remember_text(sql, '{"summary": "a memory", "confidence_score": 10, "engram_stability_days": 365000, '
                              '"surface_count": 1000000000, "claims": [{"predicate": "p", "object": -1e15}]}', "ok")
    assert got["action"] == "created"


_number = st.one_of(
    st.integers(min_value=-(10 ** 420), max_value=10 ** 420).map(str),
    st.builds(lambda sign, mant, exp: f"{sign}{mant}e{exp}", st.sampled_from(["", "-"]),
              st.integers(0, 10 ** 6), st.integers(-500, 500)),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0", "1", "10", "0.05", "3", "-1", "1e15", "2147483648", "9223372036854775808"]),
)
_value = st.one_of(_number, st.sampled_from(['"faint"', '"burning"', '"x"', "true", "null", "[]", "{}"]))
_fields = st.dictionaries(
    st.sampled_from(["confidence_score", "engram_stability_days", "surface_count", "extra", "claims"]),
    _value, max_size=5)


def _spec_text(fields: dict[str, str], i: int) -> str:
    parts = [f'"summary": "memory {i} about porto offices"', '"tags": ["porto"]']
    for key, literal in fields.items():
        if key == "claims":
            literal = '[{"subject": "office", "predicate": "city", "object": %s}]' % literal
        parts.append(f'"{key}": {literal}')
    return "{" + ", ".join(parts) + "}"


def _read_everything(conn):
    recall = conn.execute("SELECT dna.recall(%s, 'porto offices', k => 50, now => %s)", (S, NOW)).fetchone()[0]
    past = conn.execute("SELECT dna.recall(%s, 'porto offices', as_of => now(), k => 50)", (S,)).fetchone()[0]
    listed = conn.execute("SELECT dna.list_memories(%s, include_invalid => true, max_rows => 10000, now => %s)",
                          (S, NOW)).fetchone()[0]
    report = conn.execute("SELECT dna.consolidate(%s, now => %s)", (S, NOW)).fetchone()[0]
    applied = conn.execute("SELECT dna.consolidate(%s, apply => true, dry_run => true, now => %s)", (S, NOW)).fetchone()[0]
    conn.execute("SELECT dna.search(%s, 'porto', NULL, 'dna-fake-hash-v1', k => 50)", (S,)).fetchall()
    return recall, past, listed, report, applied


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=_fields)
def test_no_accepted_spec_breaks_a_read_of_the_scope(sql, fields):
    if sql.execute("SELECT count(*) FROM dna.dna_instances WHERE scope = %s AND name = 'healthy'", (S,)).fetchone()[0] == 0:
        _remember_text(sql, '{"summary": "the healthy memory about porto offices"}', "healthy")
    i = next(_names)
    try:
        _remember_text(sql, _spec_text(fields, i), f"p{i}")
    except psycopg.Error as error:
        assert error.sqlstate in {"22003", "22023", "22007", "22001"}, (fields, error.sqlstate, str(error))
    recall, _, listed, _, _ = _read_everything(sql)
    assert "healthy" in {m["name"] for m in listed["memories"]}
    assert recall["hits"] and "reconsolidation_errors" not in recall, json.dumps(recall)[:2000]


def test_merge_candidates_refuses_two_members_of_one_name(sql):
    members = [{"name": "a", "spec": {"summary": "deploys happen on fridays"}},
               {"name": "a", "spec": {"summary": "deploys happen on fridays too"}}]
    with pytest.raises(psycopg.Error) as info:
        sql.execute("SELECT dna.merge_candidates(%s::jsonb)", (json.dumps(members),))
    assert info.value.sqlstate == "22023" and "'a'" in str(info.value)
    members[1]["name"] = "b"
    got = sql.execute("SELECT dna.merge_candidates(%s::jsonb)", (json.dumps(members),)).fetchone()[0]
    assert got[0]["names"] == ["a", "b"]
