"""PostgreSQL 15 guard: no plane file, revision, fragment or frozen copy uses what PostgreSQL 15 lacks
outside a version branch (tests/pg15_guard.py says what that is and where the list comes from).

Static over the repository's text (every server runs it), and live on the server the suite runs on:
the catalog facts the list is built from hold there, and every function body of schema dna
validates there with check_function_bodies on (the migrations create them with it off, so a body
written for a newer server would otherwise fail only when called).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pg15_guard as guard

REPO = Path(__file__).resolve().parents[1]
VERSIONS = REPO / "migrations" / "versions"

# Released texts that a later revision replaced: a server at that later revision never runs them.
# (file, what) → (the revision that replaced it, the plane file it re-ran). A PostgreSQL 15 database
# stopped at 0017 or 0018 has a dna.bm25_build_segment that fails (R1); 0019 replaces it.
SUPERSEDED = {
    ("migrations/versions/0017_recall_past_ingest/bm25_write.sql", "setting enable_presorted_aggregate"):
        ("0019_where_users_run", "bm25_write.sql"),
}


def below_branches() -> dict[Path, int]:
    """Released fragments a revision runs only from some major on: ``BELOW_<major> = (...)`` in a
    revision names the files of ``versions/<revision>/`` whose ``below_<major>/`` copy runs on older
    servers. {path of the released file: major}."""
    out: dict[Path, int] = {}
    for module in sorted(VERSIONS.glob("*.py")):
        for node in ast.parse(module.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                m = re.fullmatch(r"BELOW_(\d+)", node.targets[0].id)
                if m:
                    for name in ast.literal_eval(node.value):
                        out[VERSIONS / module.stem / name] = int(m.group(1))
    return out


def python_sql(path: Path) -> list[str]:
    """The string constants of a Python file that are not docstrings (f-strings with X for each
    placeholder): the SQL a revision or helper runs from its own text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values))
            skip.update(id(v) for v in node.values)
    out += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip]
    return out


def scanned() -> list[tuple[str, str, int]]:
    """(shown path, text, minimum major) of everything the guard reads."""
    minimum = below_branches()
    items = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8"), 15) for p in sorted((REPO / "sql").glob("*.sql"))]
    items += [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8"), minimum.get(p, 15))
              for p in sorted(VERSIONS.rglob("*.sql"))]
    items += [(str(p.relative_to(REPO)), text, 15) for p in sorted((REPO / "migrations").rglob("*.py"))
              for text in python_sql(p)]
    return items


def test_nothing_uses_what_postgresql_15_lacks_outside_a_version_branch():
    found = []
    for shown, text, minimum in scanned():
        for v in guard.violations(text, minimum):
            if (shown, v.what) not in SUPERSEDED:
                found.append(f"{shown} {v}")
    assert found == [], "newer than PostgreSQL 15 outside a version branch:\n" + "\n".join(found)


def test_the_guard_reads_every_plane_file_revision_and_fragment():
    shown = {s for s, _, _ in scanned()}
    assert {f"sql/{p.name}" for p in (REPO / "sql").glob("*.sql")} <= shown
    assert "migrations/versions/0016_answers_and_bounds/after_bounds.sql" in shown
    assert "migrations/versions/0016_answers_and_bounds/below_17/after_bounds.sql" in shown
    assert "migrations/versions/0017_recall_past_ingest/bm25_write.sql" in shown
    assert {f"migrations/versions/{p.name}" for p in VERSIONS.glob("*.py")} <= shown
    assert len(shown) > 130


def test_superseded_texts_are_still_there_and_replaced_by_text_postgresql_15_runs():
    import importlib.util

    for (shown, what), (revision, plane) in SUPERSEDED.items():
        assert what in {v.what for v in guard.violations((REPO / shown).read_text(encoding="utf-8"))}, \
            f"{shown}: no {what} any more; drop the entry"
        spec = importlib.util.spec_from_file_location(revision, VERSIONS / f"{revision}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert plane in module.CHANGED
        replaced = VERSIONS / revision / plane if (VERSIONS / revision / plane).exists() else REPO / "sql" / plane
        assert what not in {v.what for v in guard.violations(replaced.read_text(encoding="utf-8"))}


def test_each_below_branch_has_its_postgresql_15_text():
    branches = below_branches()
    assert VERSIONS / "0016_answers_and_bounds" / "after_bounds.sql" in branches
    for released, major in branches.items():
        older = released.parent / f"below_{major}" / released.name
        assert older.exists(), older
        assert guard.violations(older.read_text(encoding="utf-8")) == []
        # The branch is there for a reason: the released text needs that major.
        assert any(v.since == major for v in guard.violations(released.read_text(encoding="utf-8")))


# --- the guard itself, on snippets ---------------------------------------------------------------


def test_it_fails_on_0016s_released_text_were_its_branch_absent():
    for name in ("after_bounds.sql", "undo_bounds.sql"):
        text = (VERSIONS / "0016_answers_and_bounds" / name).read_text(encoding="utf-8")
        assert [v.what for v in guard.violations(text)] == ["ALTER COLUMN … SET EXPRESSION"]
        assert guard.violations(text, minimum=17) == []
        assert [v.what for v in guard.violations(text, minimum=16)] == ["ALTER COLUMN … SET EXPRESSION"]


FLAGGED = [
    ("SELECT JSON_OBJECT('a': 1)", "JSON_OBJECT"),
    ("SELECT json_object('a' VALUE 1 ABSENT ON NULL)", "JSON_OBJECT"),
    ("SELECT json_array(1, 2)", "JSON_ARRAY"),
    ("SELECT json_arrayagg(x) FROM t", "JSON_ARRAY"),
    ("SELECT x IS JSON OBJECT FROM t", "IS [NOT] JSON"),
    ("SELECT SYSTEM_USER", "SYSTEM_USER"),
    ("SELECT 0x1F", "non-decimal"),
    ("SELECT 1_000_000", "underscore"),
    ("GRANT r TO u WITH INHERIT FALSE", "WITH INHERIT"),
    ("COPY t FROM STDIN (FORMAT csv, DEFAULT '\\D')", "COPY … DEFAULT"),
    ("ALTER TABLE t ALTER COLUMN c SET EXPRESSION AS (1)", "SET EXPRESSION"),
    ("MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN DELETE RETURNING *", "MERGE … RETURNING"),
    ("MERGE INTO t USING s ON true WHEN NOT MATCHED BY SOURCE THEN DELETE", "NOT MATCHED BY"),
    ("SELECT * FROM JSON_TABLE(j, '$[*]' COLUMNS (a int PATH '$.a'))", "JSON_TABLE"),
    ("SELECT json_value(j, '$.a' RETURNING int)", "JSON_TABLE"),
    ("SELECT jsonb_path_query(j, '$.a.bigint()')", "jsonpath type method"),
    ("GRANT MAINTAIN ON t TO r", "MAINTAIN"),
    ("COPY t FROM STDIN (ON_ERROR ignore)", "ON_ERROR"),
    ("SELECT now() AT LOCAL", "AT LOCAL"),
    ("SELECT random(1, 10)", "random(min, max)"),
    ("SELECT 'infinity'::interval", "infinite interval"),
    ("ALTER TABLE t ALTER c SET STATISTICS DEFAULT", "SET STATISTICS DEFAULT"),
    ("DECLARE ids dna.t.id%TYPE[];", "%TYPE[]"),
    ("CREATE TABLE t (a int, b int GENERATED ALWAYS AS (a * 2))", "virtual generated column"),
    ("CREATE TABLE t (a int, b int GENERATED ALWAYS AS (a * 2) VIRTUAL)", "virtual generated column"),
    ("UPDATE t SET a = 1 RETURNING old.a, new.a", "RETURNING OLD/NEW"),
    ("CREATE TABLE t (r tstzrange, PRIMARY KEY (id, r WITHOUT OVERLAPS))", "WITHOUT OVERLAPS"),
    ("ALTER TABLE t ADD CHECK (a > 0) NOT ENFORCED", "NOT ENFORCED"),
    ("COPY t FROM STDIN (ON_ERROR ignore, REJECT_LIMIT 10)", "REJECT_LIMIT"),
    ("SELECT jsonb_strip_nulls(j, true)", "strip_nulls"),
    ("SELECT any_value(x) FROM t", "function any_value"),
    ("SELECT pg_input_is_valid('1', 'int')", "function pg_input_is_valid"),
    ("SELECT random_normal()", "function random_normal"),
    ("SELECT uuidv7()", "function uuidv7"),
    ("SELECT array_sort(a), casefold(t) FROM x", "function array_sort"),
    ("SELECT * FROM pg_stat_io", "relation pg_stat_io"),
    ("GRANT pg_maintain TO r", "role pg_maintain"),
    ("SET LOCAL enable_presorted_aggregate = off", "setting enable_presorted_aggregate"),
    ("SELECT current_setting('enable_presorted_aggregate')", "setting enable_presorted_aggregate"),
    ("PERFORM set_config('transaction_timeout', '1s', true);", "setting transaction_timeout"),
    ("SET force_parallel_mode = on", "setting force_parallel_mode"),  # gone in 16
]


@pytest.mark.parametrize("sql, what", FLAGGED, ids=[w for _, w in FLAGGED])
def test_it_flags(sql, what):
    assert any(what in v.what for v in guard.violations(sql)), guard.violations(sql)


ALLOWED = [
    "SELECT jsonb_build_object('a', 1), json_object_agg(k, v), jsonb_object(ARRAY['a'], ARRAY['b']) FROM t",
    "SELECT json_object('{a,b}'::text[])",  # the old text[] form
    "-- SET EXPRESSION, any_value(x), SYSTEM_USER in a comment\nSELECT 1 /* MERGE INTO t RETURNING * */",
    "COMMENT ON FUNCTION dna.f() IS 'returns JSON (an object); SET EXPRESSION is PostgreSQL 17''s';",
    "SELECT dna.any_value(x), t.uuidv7() FROM t",  # qualified: not the built-in
    "SELECT x FROM t WHERE a::text = '0x1F'::text OR b = 'a_1'",
    "DECLARE pa text := current_setting('enable_presorted_aggregate', true);\nBEGIN\n"
    "IF pa IS NOT NULL THEN\n PERFORM set_config('enable_presorted_aggregate', 'off', true);\nEND IF;",
    "IF current_setting('server_version_num')::int >= 170000 THEN\n"
    " EXECUTE 'ALTER TABLE t ALTER COLUMN c SET EXPRESSION AS (1)';\nEND IF;",
    "CREATE TABLE IF NOT EXISTS t (a int, b tsvector GENERATED ALWAYS AS (to_tsvector('english', a::text)) STORED)",
    "SELECT random(), 'infinity'::timestamptz",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_it_lets_pass(sql):
    assert guard.violations(sql) == []


def test_a_branch_allows_only_its_major_and_only_its_then_part():
    for condition in ("current_setting('server_version_num')::int >= 160000",
                      "current_setting('server_version_num')::int > 159999"):
        text = (f"IF {condition} THEN\n EXECUTE 'ALTER TABLE t ALTER COLUMN c SET EXPRESSION AS (1)';\n"
                f" PERFORM any_value(1);\nEND IF;")
        assert [v.what for v in guard.violations(text)] == ["ALTER COLUMN … SET EXPRESSION"]  # 17 > 16
    text = ("IF current_setting('server_version_num')::int >= 170000 THEN\n NULL;\nELSE\n"
            " EXECUTE 'ALTER TABLE t ALTER COLUMN c SET EXPRESSION AS (1)';\nEND IF;")
    assert [v.what for v in guard.violations(text)] == ["ALTER COLUMN … SET EXPRESSION"]
    text = ("DECLARE pa text := current_setting('enable_presorted_aggregate', true);\nBEGIN\n"
            "IF pa IS NOT NULL THEN NULL; END IF;\nPERFORM set_config('enable_presorted_aggregate', 'off', true);")
    assert [v.what for v in guard.violations(text)] == ["setting enable_presorted_aggregate"]
    assert guard.violations("IF x THEN\n IF y THEN NULL; END IF;\n PERFORM any_value(1);\nEND IF;")[0].what \
        == "function any_value"


# --- live: on the server the suite runs on --------------------------------------------------------


def _version_num(version: str) -> int:
    major, minor = version.split(".")
    return int(major) * 10000 + int(minor)


def test_the_catalog_facts_hold_on_this_server(sql):
    version = int(sql.execute("SHOW server_version_num").fetchone()[0])
    major = version // 10000
    # Names a minor release of every major added (a security fix): 15 has them from that minor on
    # (output_plugin_libraries from 15.19), so they are facts of the minor, checked as such.
    minor = {name: {int(m): _version_num(v) for m, v in when.items() if m.isdigit()}
             for name, when in guard.CATALOG["minor_releases"].items()}
    present = {
        "functions": {r[0] for r in sql.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace")},
        "settings": {r[0] for r in sql.execute("SELECT name FROM pg_settings")},
        "relations": {r[0] for r in sql.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'pg_catalog'::regnamespace")},
        "roles": {r[0] for r in sql.execute("SELECT rolname FROM pg_roles")},
    }
    for kind in ("functions", "settings", "relations", "roles"):
        new = set(guard.CATALOG[kind])
        for name in new & set(minor):
            if major in minor[name]:
                assert (name in present[kind]) == (version >= minor[name][major]), (kind, name)
        if major == 15:
            assert (new - set(minor)) & present[kind] == set(), kind
        elif major >= 18:
            assert new - present[kind] == {n for n in new & set(minor) if version < minor[n].get(major, 0)}, kind
        else:  # 16, 17: what 16 added is there
            assert {n for n in new if guard.SINCE.get(n) == 16} <= present[kind], kind
    gone = {"functions": set(guard.CATALOG["removed_functions"]), "settings": set(guard.CATALOG["removed_settings"])}
    for kind, names in gone.items():
        assert (names <= present[kind]) if major == 15 else True, kind
        if major >= 18:
            assert names & present[kind] == set(), kind


def test_every_function_body_of_schema_dna_validates_on_this_server(sql):
    # The migrations create the functions with check_function_bodies off; the language validators,
    # called with it on, parse every body (PL/pgSQL: its statements' syntax; SQL: full analysis).
    rows = sql.execute("SELECT p.oid::regprocedure::text, l.lanname FROM pg_proc AS p "
                       "JOIN pg_language AS l ON l.oid = p.prolang "
                       "WHERE p.pronamespace = 'dna'::regnamespace ORDER BY 1").fetchall()
    assert len(rows) > 150 and {lang for _, lang in rows} <= {"plpgsql", "sql"}
    sql.execute("SET check_function_bodies = on")
    failed = []
    for name, lang in rows:
        validator = "plpgsql_validator" if lang == "plpgsql" else "fmgr_sql_validator"
        try:
            sql.execute(f"SELECT {validator}(%s::regprocedure::oid)", (name,))
        except Exception as exc:  # noqa: BLE001 - every failure is listed
            failed.append(f"{name}: {exc}")
    assert failed == []
