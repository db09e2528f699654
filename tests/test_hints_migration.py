"""Revision 0017, topic hints: a 0016_answers_and_bounds database holding documents, memories and a
receipt upgrades with the same answers, the receipt taken at 0016 replays as a match, and the
refusals carry their hints (dna.take_receipt names a malformed argument); the downgrade gives 0016's
functions back (dna.receipt_arg gone, the bare errors again) with the data."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pydna import migrate

# to 0024, the last revision whose answers this test holds (0025 topic fusion_scale rescales the convex
# fusion: tests/test_fusion_scale_migration.py)
HELD_TO = "0024_at_scale"

MODEL = "dna-fake-hash-v1"


def _seed(conn):
    for name, body in (("a", "alpha beta gamma"), ("b", "beta delta"), ("c", "gamma delta epsilon beta")):
        conn.execute("SELECT dna.index_document('docs', 'Doc', %s, %s, dna.fake_embed(%s), %s)", (name, body, body, MODEL))
    for i, text in enumerate(["the office is in lisbon", "deploys happen on fridays"]):
        conn.execute("SELECT dna.remember('team', %s, name => %s, embedding => dna.fake_embed(%s), model_id => %s)",
                     (Jsonb({"summary": text}), f"m{i}", text, MODEL))


def _answers(conn):
    out = [[(r[0], r[1]) for r in conn.execute("SELECT name, score FROM dna.search('docs', %s, dna.fake_embed(%s), %s)",
                                               (q, q, MODEL))] for q in ("beta delta", "gamma")]
    r = conn.execute("SELECT dna.recall('team', 'office lisbon', dna.fake_embed('office lisbon'), %s, "
                     "reconsolidate => false, now => '2026-12-01T00:00:00Z')", (MODEL,)).fetchone()[0]
    return out + [[(h["name"], h["score"]) for h in r["hits"]]]


def _functions(conn):
    return {r[0]: r[1] for r in conn.execute(
        "SELECT p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)) FROM pg_proc AS p "
        "WHERE p.pronamespace = 'dna'::regnamespace AND p.prokind = 'f'")}


def _refusal(conn, query, params=()):
    with pytest.raises(psycopg.Error) as err:
        conn.execute(query, params)
    return err.value.sqlstate, err.value.diag.message_primary, err.value.diag.message_hint


def test_upgrade_from_0016_adds_the_hints_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        _seed(conn)
        receipt = conn.execute("SELECT dna.take_receipt('search', jsonb_build_object('scope', 'docs', 'query', 'beta', "
                               "'query_embedding', dna.fake_embed('beta')::text, 'model_id', %s::text), "
                               "keep_query => true)", (MODEL,)).fetchone()[0]
        before = _answers(conn)
        functions = _functions(conn)
        assert _refusal(conn, "SELECT * FROM dna.search('docs', 'x', fusion => 'linear')")[2] is None
        assert _refusal(conn, "SELECT dna.take_receipt('search', '{\"scope\": \"docs\", \"query\": \"x\", "
                              "\"k\": \"ten\"}')")[1] == 'invalid input syntax for type integer: "ten"'
    migrate.upgrade(empty_dsn, HELD_TO)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _answers(conn) == before
        replayed = conn.execute("SELECT dna.replay(%s::uuid)", (receipt["receipt_id"],)).fetchone()[0]
        assert replayed["match"] is True and replayed["scores_match"] is True
        assert "revision" in {c["setting"] for c in replayed["settings_changed"]}
        state, message, hint = _refusal(conn, "SELECT * FROM dna.search('docs', 'x', fusion => 'linear')")
        assert state == "22023" and "got 'linear'" in message and "'rrf'" in hint
        state, message, hint = _refusal(conn, "SELECT dna.take_receipt('search', '{\"scope\": \"docs\", "
                                              "\"query\": \"x\", \"k\": \"ten\"}')")
        assert (state, message.split(":")[0]) == ("22P02", 'args.k of dna.search must be integer, got "ten"')
        assert "JSON number" in hint
        assert conn.execute("SELECT count(*) FROM dna.dna_search_receipts").fetchone()[0] == 1
    migrate.downgrade(empty_dsn, "0016_answers_and_bounds")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _functions(conn) == functions                  # dna.receipt_arg gone, 0016's texts back
        assert _answers(conn) == before
        assert _refusal(conn, "SELECT * FROM dna.search('docs', 'x', fusion => 'linear')")[2] is None
        assert conn.execute("SELECT dna.replay(%s::uuid)", (receipt["receipt_id"],)).fetchone()[0]["match"] is True
