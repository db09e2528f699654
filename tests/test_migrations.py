"""Alembic revisions: upgrade, downgrade and upgrade again; --sql prints and runs nothing;
two installs racing on one database both succeed; data-access calls never run DDL."""
from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from pydna import migrate


def dna_objects(dsn):
    with psycopg.connect(dsn) as conn:
        schema = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'dna'").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'dna'").fetchone()[0]
        funcs = conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace::regnamespace::text = 'dna'"
                             ).fetchone()[0]
        exts = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
    return schema, tables, funcs, exts


def test_round_trip_upgrade_downgrade_upgrade(empty_dsn):
    migrate.upgrade(empty_dsn)
    schema, tables, funcs, exts = dna_objects(empty_dsn)
    assert schema == 1 and tables >= 9 and funcs >= 10 and {"vector", "btree_gist"} <= exts
    with psycopg.connect(empty_dsn) as conn:
        assert migrate.current(conn) == migrate.head()
    migrate.downgrade(empty_dsn, "base")
    assert dna_objects(empty_dsn)[:3] == (0, 0, 0)
    with psycopg.connect(empty_dsn) as conn:
        assert migrate.current(conn) is None
    migrate.upgrade(empty_dsn)
    assert dna_objects(empty_dsn)[:3] == (schema, tables, funcs)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_kinds").fetchone()[0] == 5


def test_upgrade_is_idempotent(dna_dsn):
    before = dna_objects(dna_dsn)
    migrate.upgrade(dna_dsn)
    assert dna_objects(dna_dsn) == before


def test_sql_mode_prints_reviewable_sql_and_runs_nothing(empty_dsn):
    text = migrate.upgrade(empty_dsn, sql=True)
    for expected in ("CREATE TABLE dna.dna_search_docs_384", "CREATE TABLE dna.dna_search_docs_3072",
                     "USING hnsw ((embedding::halfvec(3072)) halfvec_cosine_ops)", "USING gin (tsv)",
                     "CREATE OR REPLACE FUNCTION dna.search(", "CREATE EXTENSION IF NOT EXISTS vector",
                     "dna_alembic_version", "pg_advisory_xact_lock"):
        assert expected in text, expected
    assert dna_objects(empty_dsn)[:3] == (0, 0, 0)


def test_sql_mode_output_runs_as_printed_and_gives_the_head(empty_dsn, dna_dsn):
    # What a DBA reviews is what a DBA runs: the script, applied by hand, builds the same schema.
    with psycopg.connect(empty_dsn) as conn:  # rendered for the server it runs on (0016 branches below 17)
        version = int(conn.execute("SHOW server_version_num").fetchone()[0])
    script = migrate.upgrade("postgresql://nobody@127.0.0.1:1/none", sql=True, server_version_num=version)
    assert "%%" not in script
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(script)
        assert migrate.current(conn) == migrate.head()
    assert dna_objects(empty_dsn) == dna_objects(dna_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("SELECT dna.index_document('s', 'Doc', 'n', 'rank fusion', NULL, 'dna-fake-hash-v1')")
        assert conn.execute("SELECT name FROM dna.search('s', 'fusion', NULL, 'dna-fake-hash-v1')").fetchall() == [("n",)]


def test_sql_mode_needs_no_server():
    text = migrate.upgrade("postgresql://nobody@127.0.0.1:1/none", sql=True)
    assert "CREATE SCHEMA IF NOT EXISTS dna" in text


def test_two_installs_racing_both_succeed(empty_dsn):
    # Separate processes, as two real installs would be (alembic's context is process-global).
    code = "import sys; from pydna import migrate; migrate.upgrade(sys.argv[1])"
    procs = [subprocess.Popen([sys.executable, "-c", code, empty_dsn], stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0], results
    with psycopg.connect(empty_dsn) as conn:
        assert migrate.current(conn) == migrate.head()


def test_client_on_unmigrated_database_fails_loud_and_creates_nothing(empty_dsn):
    import pydna

    with pytest.raises(pydna.NotMigratedError, match="dna db upgrade"):
        pydna.connect(empty_dsn, embedder=None)
    assert dna_objects(empty_dsn)[:3] == (0, 0, 0)


def test_head_re_runs_exactly_the_plane_files_it_changed():
    """The head re-runs a static list of plane files (CHANGED): every file whose text differs
    from the text released before it (PREVIOUS, frozen copies), and no other. A plane file edited
    without a new revision (or without freezing the head's text) shows up here."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "migrations"
    sys.path.insert(0, str(root))

    def load(name):
        spec = importlib.util.spec_from_file_location(name, root / "versions" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    from pydna import migrate

    rev = load(migrate.head())
    # a later revision that re-runs plane files takes this check over (its own CHANGED), and 0018
    # then reads frozen copies of the texts it released
    assert set(rev.PREVIOUS) == set(rev.ORDER) - set(rev.NEW)
    differ = {name for name in rev.ORDER if name in rev.NEW or
              (root.parent / "sql" / name).read_text(encoding="utf-8")
              != (root / "versions" / rev.PREVIOUS[name] / name).read_text(encoding="utf-8")}
    assert differ == set(rev.CHANGED)
    # 0016 and 0017 read the texts they released from their frozen copies, every one of them present
    for name in ("0016_answers_and_bounds", "0017_recall_past_ingest"):
        released = load(name)
        assert all((root / "versions" / released.revision / f).exists() for f in released.CHANGED)
    # every plane file is run by some revision
    ran = set(rev.ORDER) | {"doors.sql", "bm25_write.sql"}
    assert {p.name for p in (root.parent / "sql").glob("*.sql")} <= ran
