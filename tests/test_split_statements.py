"""Migration texts one statement at a time (citus-probe B9; migrations/sql_files.py): the parser's
split of every plane file, frozen copy and fragment gives the statements of the whole text, in
order; and the head's plane files (and 0018's fragments) run statement by statement into a fresh
database give the same catalog as run whole."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg
import pytest

from pydna import migrate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "migrations"))
from sql_files import read_sql, read_statements, split_statements  # noqa: E402

import citus_guard as guard  # noqa: E402

FILES = sorted((REPO / "sql").glob("*.sql")) + sorted((REPO / "migrations" / "versions").glob("*/*.sql"))


def _strip(node):
    """A parse tree without source positions."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items()
                if not k.endswith(("location", "_start", "_end")) and k != "stmt_len"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_split_gives_the_statements_of_the_whole_text(path):
    text = path.read_text(encoding="utf-8")
    pieces = split_statements(text)
    assert pieces and all(guard.count_statements(p) == 1 for p in pieces)
    assert _strip([t for p in pieces for t in guard.parse(p)]) == _strip(guard.parse(text))


def test_split_keeps_dollar_quotes_strings_and_colons_whole():
    text = ("CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$;\n"
            "-- a comment; with a semicolon\n"
            "SELECT 'x;y' AS \"a;b\", to_char(now(), 'HH24:MI:SS'), 1::int;")
    pieces = split_statements(text)
    assert len(pieces) == 2
    assert pieces[0].endswith("END $body$") and "'a;b'" in pieces[0]
    assert "'HH24:MI:SS'" in pieces[1] and "1::int" in pieces[1]


def test_read_statements_wraps_as_read_sql_does():
    stmts = [s.text for s in read_statements("tenancy.sql")]
    assert stmts[0] == "SET LOCAL check_function_bodies = off" and stmts[-1] == "SET LOCAL check_function_bodies = on"
    assert all("\\:" in s or ":" not in s.replace("\\:", "") for s in stmts)        # every colon escaped
    whole = read_sql("tenancy.sql").text
    assert len(stmts) == guard.count_statements(whole.replace("\\:", ":"))


def _catalog(conn):
    return {
        "functions": conn.execute(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid), p.prosrc, "
            "p.provolatile, p.proretset, p.proconfig, p.prolang, obj_description(p.oid, 'pg_proc') "
            "FROM pg_proc AS p WHERE p.pronamespace = 'dna'::regnamespace ORDER BY 1, 2").fetchall(),
        "tables": conn.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_class AS c "
            "JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE c.relnamespace = 'dna'::regnamespace ORDER BY 1, 2").fetchall(),
        "policies": conn.execute("SELECT tablename, policyname, qual, with_check FROM pg_policies "
                                 "WHERE schemaname = 'dna' ORDER BY 1, 2").fetchall(),
        "triggers": conn.execute("SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                                 "WHERE NOT tgisinternal AND tgrelid::regclass::text LIKE 'dna.%' ORDER BY 1, 2").fetchall(),
        "types": conn.execute("SELECT t.typname FROM pg_type AS t WHERE t.typnamespace = 'dna'::regnamespace "
                              "ORDER BY 1").fetchall(),
    }


def test_head_plane_files_run_split_or_whole_give_the_same_catalog(pg_server, empty_dsn):
    head = guard.revision_sources(REPO / "migrations" / "versions")[-1]
    sys.path.insert(0, str(REPO / "migrations"))
    import importlib.util

    spec = importlib.util.spec_from_file_location(head.stem, head)
    rev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rev)
    fragments = REPO / "migrations" / "versions" / rev.revision
    # the before_ fragments run as an upgrade runs them, on the previous head's functions (they call
    # helpers such as dna.search_widths); then every function is dropped and the plane files remake them
    before = [(f.name, rev.revision) for f in sorted(fragments.glob("before_*.sql"))]
    steps = ([(name, None) for name in rev.ORDER]
             + [(f.name, rev.revision) for f in sorted(fragments.glob("after_*.sql"))])
    other = f"dna_split_{os.getpid()}"
    with pg_server.janitor(other):
        dsns = {"whole": empty_dsn, "split": pg_server.dsn(other)}
        for kind, dsn in dsns.items():
            migrate.upgrade(dsn, rev.down_revision)
            with psycopg.connect(dsn) as conn:
                for name, frozen in before:
                    if kind == "whole":
                        conn.execute(read_sql(name, frozen_in=frozen).text.replace("\\:", ":"))
                    else:
                        for statement in read_statements(name, frozen_in=frozen):
                            conn.execute(statement.text.replace("\\:", ":"))
            with psycopg.connect(dsn, autocommit=True) as conn:
                # no function left, so a statement the split lost would be missing from the catalog; but the
                # ones a generated column is computed by (dna.text_tsvector for tsv) or a trigger runs, which a
                # CASCADE would take the column or the trigger with: the after_ fragments read and rewrite tsv
                # and lift dna_versions' trigger, and the plane files replace those functions
                conn.execute("DO $$ DECLARE f regprocedure; BEGIN FOR f IN SELECT p.oid::regprocedure FROM pg_proc AS p "
                             "WHERE p.pronamespace = 'dna'::regnamespace AND NOT EXISTS (SELECT 1 FROM pg_depend AS d "
                             "WHERE d.refobjid = p.oid AND d.classid = 'pg_attrdef'::regclass) "
                             "AND NOT EXISTS (SELECT 1 FROM pg_trigger AS t WHERE t.tgfoid = p.oid) LOOP "
                             "EXECUTE format('DROP FUNCTION IF EXISTS %s CASCADE', f); END LOOP; END $$")
        with psycopg.connect(dsns["whole"]) as conn:
            for name, frozen in steps:
                conn.execute(read_sql(name, frozen_in=frozen).text.replace("\\:", ":"))
        with psycopg.connect(dsns["split"]) as conn:
            for name, frozen in steps:
                for statement in read_statements(name, frozen_in=frozen):
                    conn.execute(statement.text.replace("\\:", ":"))
        with psycopg.connect(dsns["whole"]) as a, psycopg.connect(dsns["split"]) as b:
            whole, split = _catalog(a), _catalog(b)
    assert len(whole["functions"]) > 150
    assert split == whole
