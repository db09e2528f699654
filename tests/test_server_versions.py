"""Supported servers (PostgreSQL 15 to 18, pgvector >= 0.8.0): the check before any revision runs, the
version branch of 0016 (released text on 17+, below_17/ on 15 and 16), and what a failed upgrade says.

The check is tested through SQL on the test server itself (pydna.supported.check reads it; a minimum
raised above what the server is makes the same server "too old"), and through ``dna db upgrade``.
"""
from __future__ import annotations

import hashlib
import io

import psycopg
import pytest
from alembic import command
from typer.testing import CliRunner

from pydna import migrate, supported
from pydna.cli import app

# The statements each released revision renders (``alembic upgrade A:B --sql``, from its "-- Running
# upgrade A -> B" line to its version-table UPDATE), sha256, as released (main b78f0af, 2026-12-02).
# On 17+ (and offline without -x server_version_num) the revisions must render these exactly.
RELEASED = {
    ("upgrade", "0014_doors", "0015_governed_history"):
        "2cb4cfc8b34c8dfd6732ac77a5efec6739865f142be626e9acbd695e6d2a5262",
    ("upgrade", "0015_governed_history", "0016_answers_and_bounds"):
        "2e6373b7b3f94a59b589e518c402d06725d68a17573589bde509e9b358e8fb3e",
    ("downgrade", "0016_answers_and_bounds", "0015_governed_history"):
        "13fa69c825b63b094c21710dba5e0e5d0f948e8748fb40158631a9fbcd9df3a6",
    ("downgrade", "0015_governed_history", "0014_doors"):
        "5f866cfd3ae9c9a0cff8d98518ffffe9ef29bcf162e1d215be2ed4d9838bf87f",
}


def rendered(direction: str, start: str, end: str, server_version_num: int | None = None) -> str:
    """What one revision step renders offline (its statements only)."""
    from argparse import Namespace

    cfg = migrate.alembic_config("")
    if server_version_num is not None:
        cfg.cmd_opts = Namespace(x=[f"server_version_num={server_version_num}"])
    buf = io.StringIO()
    cfg.output_buffer = buf
    getattr(command, direction)(cfg, f"{start}:{end}", sql=True)
    text = buf.getvalue()
    begin = text.index(f"-- Running {direction} {start} -> {end}\n")
    return text[begin:text.index("UPDATE public.dna_alembic_version", begin)]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("server_version_num", [None, 170000, 170006, 180001])
@pytest.mark.parametrize("step", sorted(RELEASED))
def test_on_17_and_later_the_revisions_run_their_released_statements(step, server_version_num):
    assert sha(rendered(*step, server_version_num)) == RELEASED[step]


def test_below_17_revision_0016_runs_the_below_17_texts_and_nothing_of_17():
    for direction, start, end, fragment in (("upgrade", "0015_governed_history", "0016_answers_and_bounds",
                                             "after_bounds.sql"),
                                            ("downgrade", "0016_answers_and_bounds", "0015_governed_history",
                                             "undo_bounds.sql")):
        released = rendered(direction, start, end)
        for version in (150000, 150020, 160004):
            text = rendered(direction, start, end, version)
            assert "SET EXPRESSION AS" not in text and "DROP COLUMN tsv, ADD COLUMN tsv tsvector" in text
            below_17 = migrate.migrations_dir() / "versions" / "0016_answers_and_bounds" / "below_17" / fragment
            assert below_17.read_text(encoding="utf-8") in text
            # Everything else is the released text.
            ours = (migrate.migrations_dir() / "versions" / "0016_answers_and_bounds" / fragment).read_text()
            assert text.replace(below_17.read_text(encoding="utf-8"), ours) == released


# --- the check, through SQL on the real server ---------------------------------------------------


def test_the_check_reads_the_real_server_and_accepts_it(sql):
    info = supported.check(sql)
    real = int(sql.execute("SHOW server_version_num").fetchone()[0])
    vector = sql.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    assert (info.server_version_num, info.vector_installed, info.vector) == (real, vector, vector)
    assert info.describe() == f"PostgreSQL {sql.execute('SHOW server_version').fetchone()[0].split()[0]}, " \
                              f"pgvector {vector}"
    assert real >= supported.MIN_SERVER and supported.version_tuple(vector) >= supported.MIN_VECTOR


def test_a_server_below_the_minimum_is_refused_with_both_versions(sql):
    real = int(sql.execute("SHOW server_version_num").fetchone()[0])
    with pytest.raises(supported.UnsupportedServer) as err:
        supported.check(sql, min_server=(real // 10000 + 1) * 10000)
    text = str(err.value)
    assert f"server_version_num {real}" in text and f"below the minimum {real // 10000 + 1}.0" in text
    vector = sql.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    with pytest.raises(supported.UnsupportedServer) as err:
        supported.check(sql, min_vector=(99, 0, 0))
    assert f"pgvector {vector} is created in this database, below the minimum 99.0.0" in str(err.value)
    assert "ALTER EXTENSION vector UPDATE" in str(err.value)


def test_pgvector_offered_but_not_created_is_refused_for_a_non_superuser(pg_server, empty_dsn):
    role = f"dna_nosuper_{id(empty_dsn) % 100000}"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} NOSUPERUSER")
        try:
            assert supported.check(conn).superuser  # the superuser may create it: accepted
            conn.execute(f"SET ROLE {role}")
            with pytest.raises(supported.UnsupportedServer) as err:
                supported.check(conn)
            assert "runs CREATE EXTENSION vector; in database" in str(err.value)
            assert f"role {role} is not a superuser" in str(err.value)
        finally:
            conn.execute("RESET ROLE")
            conn.execute(f"DROP ROLE {role}")


def test_the_check_is_pure_logic_on_what_it_read():
    base = dict(server_version_num=140011, server_version="14.11 (Debian)", vector_installed="0.7.4",
                vector_available="0.8.0", vector_trusted=False, superuser=True, role="r", database="d")
    found = supported.problems(supported.ServerInfo(**base))
    assert len(found) == 2
    assert "PostgreSQL 14.11 (server_version_num 140011), below the minimum 15.0" in found[0]
    assert "pgvector 0.7.4 is created in this database, below the minimum 0.8.0" in found[1]
    ok = supported.ServerInfo(**{**base, "server_version_num": 150020, "vector_installed": "0.8.0"})
    assert supported.problems(ok) == []
    assert "not installed" in supported.problems(supported.ServerInfo(
        **{**base, "server_version_num": 180000, "vector_installed": None, "vector_available": None}))[0]


# --- dna db upgrade ------------------------------------------------------------------------------


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def _schema(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return (conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'dna'").fetchone()[0],
                conn.execute("SELECT to_regclass('public.dna_alembic_version') IS NOT NULL").fetchone()[0],
                sorted(r[0] for r in conn.execute("SELECT extname FROM pg_extension")))


def test_db_upgrade_refuses_a_server_below_the_minimum_and_changes_nothing(runner, empty_dsn, monkeypatch):
    before = _schema(empty_dsn)
    with psycopg.connect(empty_dsn) as conn:
        real = int(conn.execute("SHOW server_version_num").fetchone()[0])
        shown = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    monkeypatch.setattr(supported, "MIN_SERVER", real + 1)  # the real server, read for real, is now too old
    result = runner.invoke(app, ["--dsn", empty_dsn, "db", "upgrade"])
    assert result.exit_code == 1, result.output
    line = " ".join(result.stderr.split())
    assert f"the server is PostgreSQL {shown} (server_version_num {real}), below the minimum " \
           f"{(real + 1) // 10000}.{(real + 1) % 10000}" in line
    assert "refused before any change" in line and "pgvector 0.8.0 or newer" in line
    assert _schema(empty_dsn) == before


def test_a_failed_upgrade_names_revision_file_statement_server_and_hint(runner, empty_dsn):
    migrate.upgrade(empty_dsn, "0015_governed_history")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # A real failure of 0016: the table its before_receipts.sql creates is already there.
        conn.execute("CREATE TABLE dna.dna_search_receipts (x integer)")
        shown = conn.execute("SHOW server_version").fetchone()[0].split()[0]
        vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    result = runner.invoke(app, ["--dsn", empty_dsn, "db", "upgrade"])
    assert result.exit_code == 1, result.output
    line = " ".join(result.stderr.split())
    assert line.startswith("error: revision 0016_answers_and_bounds, "
                           "migrations/versions/0016_answers_and_bounds/before_receipts.sql failed on "
                           f"PostgreSQL {shown}, pgvector {vector}: relation \"dna_search_receipts\" already exists "
                           "(SQLSTATE 42P07); statement: CREATE TABLE dna.dna_search_receipts ("), line
    assert "; hint: " in line and "nothing was changed" in line and "Traceback" not in result.output
    with psycopg.connect(empty_dsn) as conn:
        assert migrate.current(conn) == "0015_governed_history"


def test_a_failure_in_a_plane_file_names_it(empty_dsn):
    migrate.upgrade(empty_dsn, "0018_citus_ready")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # The same signature with another return type: 0019's CREATE OR REPLACE of
        # dna.bm25_build_segment (its released text of sql/bm25_write.sql, frozen in its folder since 0020;
        # one statement per op.execute) fails, 42P13.
        conn.execute("DROP FUNCTION dna.bm25_build_segment")
        conn.execute("CREATE FUNCTION dna.bm25_build_segment(text, text, text, integer, integer, text, bigint[], "
                     "double precision, double precision, integer[] DEFAULT NULL) "
                     "RETURNS text LANGUAGE sql AS $$ SELECT 'x' $$")
    with pytest.raises(migrate.MigrationFailed) as err:
        migrate.upgrade(empty_dsn)
    failure = err.value
    assert failure.revision == "0019_where_users_run" and failure.source == "migrations/versions/0019_where_users_run/bm25_write.sql"
    assert failure.sqlstate == "42P13" and failure.server.startswith("PostgreSQL ")
    assert failure.statement.startswith("CREATE OR REPLACE FUNCTION dna.bm25_build_segment(")
    assert isinstance(failure.__cause__, Exception) and "(SQLSTATE 42P13)" in str(failure)
    with psycopg.connect(empty_dsn) as conn:
        assert migrate.current(conn) == "0018_citus_ready"


def test_db_upgrade_sql_renders_for_the_server_version_given(runner):
    for given, branch in (("15", True), ("16.4", True), ("160004", True), ("17", False), (None, False)):
        args = ["db", "upgrade", "--sql"] + (["--server-version", given] if given else [])
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        # 0016's below-17 text (0022's passage_headings drops and adds tsv on every version, by dna.%I)
        assert ("dna.dna_search_docs_%s DROP COLUMN tsv, ADD COLUMN tsv tsvector" in result.stdout) is branch, given
        assert ("ALTER COLUMN tsv SET EXPRESSION AS" in result.stdout) is not branch, given
    bad = runner.invoke(app, ["db", "upgrade", "--sql", "--server-version", "fifteen"])
    assert bad.exit_code == 2 and "a PostgreSQL version such as 15" in " ".join(bad.output.replace("│", " ").split())
