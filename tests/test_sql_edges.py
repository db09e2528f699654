"""Issue 27 item 8: the rough edges a fuzz of the SQL functions an application role may call found —
text spliced into dynamic SQL, unbounded helpers, a missing argument that surfaced as 42883. Plain SQL."""
from __future__ import annotations

import time

import psycopg
import pytest


def _fails(sql, statement, params=(), sqlstate="22023"):
    with pytest.raises(psycopg.Error) as err:
        sql.execute(statement, params)
    assert err.value.sqlstate == sqlstate, (err.value.sqlstate, str(err.value))
    return err.value


def test_receipt_arg_reads_its_type_as_a_type_name_and_never_runs_it(sql):
    # the sub-select in the type used to run (1/0 raised 22012 from inside it)
    err = _fails(sql, "SELECT dna.receipt_arg('f', 'a', 'text, (SELECT 1/0)', '\"x\"')")
    assert "is not a type name" in str(err)
    _fails(sql, "SELECT dna.receipt_arg('f', 'a', 'no_such_type', '\"x\"')")
    # real types behave as before: a value that casts passes, one that does not names the argument
    sql.execute("SELECT dna.receipt_arg('search', 'k', 'integer', '5')")
    sql.execute("SELECT dna.receipt_arg('search', 'kinds', 'text[]', '[\"Doc\"]')")
    err = _fails(sql, "SELECT dna.receipt_arg('search', 'k', 'integer', '\"five\"')", sqlstate="22P02")
    assert "args.k of dna.search must be integer" in str(err)


def test_take_receipt_without_a_scope_names_it(sql):
    for verb in ("search", "recall"):
        err = _fails(sql, "SELECT dna.take_receipt(%s, '{\"query\": \"x\"}')", (verb,))
        assert "args.scope" in str(err) and f"dna.{verb} needs" in str(err), str(err)
        assert err.diag.message_hint and "scope" in err.diag.message_hint
    _fails(sql, "SELECT dna.take_receipt('search', '{\"query\": \"x\", \"scope\": null}')")
    # with its scope it answers (an empty scope: no hits, one receipt)
    got = sql.execute("SELECT dna.take_receipt('search', '{\"query\": \"x\", \"scope\": \"nowhere\"}')").fetchone()[0]
    assert got["hits"] == [] and got["receipt_id"]


def test_scope_kinds_text_and_protect_table_take_only_their_tables(sql):
    sql.execute("CREATE TABLE public.not_dna (tenant text)")
    _fails(sql, "SELECT dna.scope_kinds_text('s', 'm', 'public.not_dna'::regclass)")
    _fails(sql, "SELECT dna.scope_kinds_text('s', 'm', 'dna.dna_kinds'::regclass)")
    assert sql.execute("SELECT dna.scope_kinds_text('s', 'm', 'dna.dna_search_docs_384'::regclass)").fetchone()[0] == "none"
    _fails(sql, "SELECT dna.protect_table('public.not_dna'::regclass)")
    _fails(sql, "SELECT dna.protect_table('dna.dna_kinds'::regclass)")        # no tenant column
    sql.execute("SELECT dna.protect_table('dna.dna_search_docs_384'::regclass)")
    assert sql.execute("SELECT relforcerowsecurity FROM pg_class WHERE oid = 'dna.dna_search_docs_384'::regclass"
                       ).fetchone()[0] is True


@pytest.mark.parametrize("dims", [0, -1, 16001, 1628549775])
def test_fake_embed_float8_bounds_dims_as_fake_embed_does(sql, dims):
    err = _fails(sql, "SELECT dna.fake_embed_float8('x', %s)", (dims,))
    assert "between 1 and 16000" in str(err)
    _fails(sql, "SELECT dna.fake_embed('x', %s)", (dims,))


def test_fake_embed_float8_unchanged_in_range(sql):
    a, b = sql.execute("SELECT dna.fake_embed_float8('hello world', 8), dna.fake_embed('hello world', 8)::real[]").fetchone()
    assert len(a) == 8 and [float(x) for x in b] == [pytest.approx(x, rel=1e-6) for x in a]


def test_nearest_names_on_a_long_text_is_bounded_and_still_names_the_typo(sql):
    names = ["my-app", "my-api", "team"] + [f"scope-{i}" for i in range(40)]
    assert sql.execute("SELECT dna.nearest_names_text('my-ap', %s, 2)", (names,)).fetchone()[0] == "'my-api', 'my-app'"
    long = "x" * 80_000
    started = time.process_time()
    got = sql.execute("SELECT count(*) FROM dna.nearest_names(%s, %s)", (long, names)).fetchone()[0]
    assert got == 3
    # the server's work is what is bounded; the client's CPU is only the round trip
    assert time.process_time() - started < 5

