"""sql/catalog.sql (revision 0012_first_day): dna.scopes, dna.nearest_scopes, the name rule of
scopes and Kinds (dna.check_scope, dna.check_kind), and the checks the memory verbs gained with it
(spec.affect, dna.forget's superseded_by). Plain SQL: the any-language contract."""
from __future__ import annotations

import json

import psycopg
import pytest

from pydna import migrate

MODEL = "dna-fake-hash-v1"

# Every scope and Kind the repository, README, docs and tests use, plus names the rule means to allow.
GOOD_SCOPES = ["s", "team", "my-app", "dna-development", "scale", "bulk", "docs", "retry", "s-memory", "m",
               "nothing-here", "lex", "kinds", "Feature/kernel", "user@example.org", "a.b_c:d/e+f", "_private",
               "2026", "café", "日本語", "x" * 200]
GOOD_KINDS = ["Doc", "Engram", "Research", "Evidence", "Story", "Note", "doc", "api.v1/Page", "_internal"]
BAD_NAMES = ["My Scope!", "bad kind!", "a b", "-leading-dash", ".hidden", "tab\tname", "new\nline", "semi;colon",
             "quote'", "nbsp\u00a0inside", "ideographic\u3000space", "star*", "100%"]


def _sqlstate(conn, query, params=()):
    with pytest.raises(psycopg.Error) as exc:
        conn.execute(query, params)
    return exc.value.sqlstate, exc.value.diag.message_primary


@pytest.mark.parametrize("scope", GOOD_SCOPES)
def test_check_scope_accepts_the_names_in_use(sql, scope):
    assert sql.execute("SELECT dna.check_scope(%s)", (scope,)).fetchone()[0] == scope


@pytest.mark.parametrize("kind", GOOD_KINDS)
def test_check_kind_accepts_the_names_in_use(sql, kind):
    assert sql.execute("SELECT dna.check_kind(%s)", (kind,)).fetchone()[0] == kind


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_outside_the_rule_are_22023_naming_the_rule(sql, name):
    state, message = _sqlstate(sql, "SELECT dna.check_scope(%s)", (name,))
    assert state == "22023" and "invalid scope" in message and "letters, digits" in message
    state, message = _sqlstate(sql, "SELECT dna.check_kind(%s)", (name,))
    assert state == "22023" and "invalid kind" in message


def test_blank_and_long_names(sql):
    for blank in (None, "", "   "):
        assert _sqlstate(sql, "SELECT dna.check_scope(%s)", (blank,))[0] == "22023"
        assert _sqlstate(sql, "SELECT dna.check_kind(%s)", (blank,))[0] == "22023"
    assert _sqlstate(sql, "SELECT dna.check_scope(%s)", ("x" * 201,))[0] == "22001"
    assert _sqlstate(sql, "SELECT dna.check_kind(%s)", ("K" * 201,))[0] == "22001"


def test_hint_suggests_a_name_that_follows_the_rule(sql):
    with pytest.raises(psycopg.Error) as exc:
        sql.execute("SELECT dna.check_scope('My Scope!')")
    assert exc.value.diag.message_hint == "For example 'my-scope'."
    assert sql.execute("SELECT dna.check_scope('my-scope')").fetchone()[0] == "my-scope"


def test_a_scope_stored_before_the_rule_stays_usable(sql):
    sql.execute("INSERT INTO dna.dna_instances (scope, kind, name, spec) VALUES ('Legacy Scope!', 'Note', 'n', '{}')")
    assert sql.execute("SELECT dna.check_scope('Legacy Scope!')").fetchone()[0] == "Legacy Scope!"
    assert _sqlstate(sql, "SELECT dna.check_scope('Legacy Scope?')")[0] == "22023"


def test_memory_verbs_check_scope_and_kind(sql):
    spec = json.dumps({"summary": "always deep-copy before mutating"})
    assert _sqlstate(sql, "SELECT dna.remember('My Scope!', %s)", (spec,))[0] == "22023"
    assert _sqlstate(sql, "SELECT dna.remember('team', %s, kind => 'bad kind!')", (spec,))[0] == "22023"
    for verb in ("SELECT dna.recall('My Scope!', 'x')", "SELECT dna.list_memories('My Scope!')",
                 "SELECT dna.forget('My Scope!', 'n')", "SELECT dna.revive('My Scope!', 'n')"):
        assert _sqlstate(sql, verb)[0] == "22023", verb
    state, message = _sqlstate(sql, "SELECT dna.recall('team', 'x', kinds => ARRAY['bad kind!'])")
    assert state == "22023" and "invalid kind" in message
    state, message = _sqlstate(sql, "SELECT dna.recall('team', 'x', kinds => ARRAY['Dco'])")
    assert state == "22023" and "not a memory Kind" in message and "Engram" in message
    assert sql.execute("SELECT count(*) FROM dna.dna_instances").fetchone()[0] == 0


def test_affect_is_one_of_the_listed_values(sql):
    state, message = _sqlstate(sql, "SELECT dna.remember('team', %s)",
                               (json.dumps({"summary": "the demo went well", "affect": "happy"}),))
    assert state == "22023" and "'happy' is not an affect" in message
    assert "triumph, regret, surprise, wistful, ominous, neutral" in message
    assert sql.execute("SELECT count(*) FROM dna.dna_instances").fetchone()[0] == 0
    for affect in sql.execute("SELECT unnest(dna.memory_affects())").fetchall():
        got = sql.execute("SELECT dna.remember('team', %s)",
                          (json.dumps({"summary": f"felt {affect[0]}", "affect": affect[0]}),)).fetchone()[0]
        assert got["spec"]["affect"] == affect[0]


def test_forget_refuses_a_successor_that_does_not_exist(sql):
    old = sql.execute("SELECT dna.remember('team', %s, name => 'old')",
                      (json.dumps({"summary": "we deploy on fridays"}),)).fetchone()[0]
    assert old["action"] == "created"
    state, message = _sqlstate(sql, "SELECT dna.forget('team', 'old', 'nope')")
    assert state == "23503" and "'nope'" in message
    assert _sqlstate(sql, "SELECT dna.forget('team', 'old', 'old')")[0] == "22023"
    assert sql.execute("SELECT spec ? 'valid_to' FROM dna.dna_instances WHERE name = 'old'").fetchone()[0] is False
    sql.execute("SELECT dna.remember('team', %s, name => 'new')", (json.dumps({"summary": "we deploy on mondays"}),))
    got = sql.execute("SELECT dna.forget('team', 'old', 'new')").fetchone()[0]
    assert got["superseded_by"] == "new" and not got["already_forgotten"]
    # A memory already forgotten keeps its first successor: naming another is not checked again.
    assert sql.execute("SELECT dna.forget('team', 'old', 'whatever')").fetchone()[0]["superseded_by"] == "new"


def _index(sql, scope, name, text, tenant=""):
    sql.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s, NULL, %s)",
                (scope, name, text, text, MODEL, tenant))


def test_scopes_lists_documents_memories_and_models(sql):
    assert sql.execute("SELECT * FROM dna.scopes()").fetchall() == []
    _index(sql, "my-app", "a.md", "reciprocal rank fusion")
    _index(sql, "my-app", "b.md", "hybrid search")
    sql.execute("SELECT dna.register_model('other-model', 384)")
    sql.execute("SELECT dna.index_document('my-app', 'Doc', 'a.md', 'reciprocal rank fusion', NULL, 'other-model')")
    sql.execute("SELECT dna.remember('team', %s, embedding => dna.fake_embed('x'), model_id => %s)",
                (json.dumps({"summary": "always deep-copy"}), MODEL))
    sql.execute("SELECT dna.remember('my-app', %s)", (json.dumps({"summary": "fusion is RRF"}),))
    got = sql.execute("SELECT scope, documents, memories, model_ids FROM dna.scopes()").fetchall()
    assert got == [("my-app", 2, 1, [MODEL, "other-model"]), ("team", 0, 1, [MODEL])]
    sql.execute("SELECT dna.forget('team', (SELECT name FROM dna.dna_instances WHERE scope = 'team'))")
    assert sql.execute("SELECT memories FROM dna.scopes() WHERE scope = 'team'").fetchone()[0] == 1


def test_nearest_scopes_names_the_typo_first(sql):
    for scope in ("my-app", "my-api", "team", "scale", "dna-development"):
        _index(sql, scope, "x", "some text")
    got = sql.execute("SELECT scope, distance FROM dna.nearest_scopes('my-ap')").fetchall()
    assert got[:2] == [("my-api", 1), ("my-app", 1)] and got[2][1] > 1 and len(got) == 3
    assert [r[0] for r in sql.execute("SELECT scope FROM dna.nearest_scopes('tema', 1)")] == ["team"]
    assert [r[0] for r in sql.execute("SELECT scope FROM dna.nearest_scopes('My-App', 1)")] == ["my-app"]
    assert sql.execute("SELECT dna.nearest_scopes_text('my-ap', 2)").fetchone()[0] == "'my-api', 'my-app'"
    # A scope is not its own neighbour; no other scope: 'none'.
    assert "team" not in [r[0] for r in sql.execute("SELECT scope FROM dna.nearest_scopes('team', 10)")]
    assert sql.execute("SELECT count(*) FROM dna.nearest_scopes('x', 0)").fetchone()[0] == 0


def test_nearest_scopes_text_is_none_without_scopes(sql):
    assert sql.execute("SELECT dna.nearest_scopes_text('my-app')").fetchone()[0] == "none"
    assert sql.execute("SELECT dna.scope_exists('my-app')").fetchone()[0] is False


def test_edit_distance(sql):
    for a, b, d in [("", "", 0), ("abc", "", 3), ("my-ap", "my-app", 1), ("tema", "team", 1), ("kitten", "sitting", 3),
                    ("café", "cafe", 1)]:
        assert sql.execute("SELECT dna.edit_distance(%s, %s)", (a, b)).fetchone()[0] == d, (a, b)


def test_scopes_see_only_what_row_level_security_shows(sql, dna_dsn):
    _index(sql, "shared", "a", "base text")
    _index(sql, "acme-only", "b", "workspace text", tenant="acme")
    sql.execute("DROP ROLE IF EXISTS catalog_reader")
    sql.execute("CREATE ROLE catalog_reader LOGIN PASSWORD 'pw'")
    try:
        sql.execute("SELECT dna.grant_app_role('catalog_reader')")
        with psycopg.connect(dna_dsn, user="catalog_reader", password="pw", autocommit=True) as conn:
            assert [r[0] for r in conn.execute("SELECT scope FROM dna.scopes()")] == ["shared"]
            assert [r[0] for r in conn.execute("SELECT scope FROM dna.nearest_scopes('acme-onl')")] == ["shared"]
        assert [r[0] for r in sql.execute("SELECT scope FROM dna.scopes()")] == ["acme-only", "shared"]
    finally:
        sql.execute("DROP OWNED BY catalog_reader")
        sql.execute("DROP ROLE catalog_reader")


def test_upgrade_from_0011_with_data_answers_the_same_and_downgrades(empty_dsn):
    migrate.upgrade(empty_dsn, "0011_lane_speed")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for i in range(20):
            conn.execute("SELECT dna.index_document('my-app', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                         (f"d{i}", f"document {i} about rank fusion {i % 3}", f"document {i}", MODEL))
        conn.execute("SELECT dna.remember('team', %s, name => 'm1', now => '2026-01-01T00:00:00Z')",
                     (json.dumps({"summary": "always deep-copy before mutating", "affect": "happy"}),))
        query = ("SELECT name, round(score::numeric, 9) FROM dna.search('my-app', 'rank fusion 2', "
                 "dna.fake_embed('rank fusion 2'), %s, k => 10)")
        before = conn.execute(query, (MODEL,)).fetchall()
        recall = "SELECT dna.recall('team', 'deep-copy', reconsolidate => false, now => '2026-01-02T00:00:00Z')"
        recall_before = conn.execute(recall).fetchone()[0]
        assert conn.execute("SELECT to_regprocedure('dna.scopes()')").fetchone()[0] is None
    migrate.upgrade(empty_dsn, "0012_first_day")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute(query, (MODEL,)).fetchall() == before
        assert conn.execute(recall).fetchone()[0] == recall_before     # a stored 'happy' stays readable
        assert conn.execute("SELECT scope, documents, memories FROM dna.scopes()").fetchall() == [
            ("my-app", 20, 0), ("team", 0, 1)]
        assert _sqlstate(conn, "SELECT dna.forget('team', 'm1', 'nope')")[0] == "23503"
    migrate.downgrade(empty_dsn, "0011_lane_speed")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute(query, (MODEL,)).fetchall() == before
        for fn in ("dna.scopes()", "dna.check_scope(text)", "dna.memory_affects()", "dna.edit_distance(text,text)"):
            assert conn.execute("SELECT to_regprocedure(%s)", (fn,)).fetchone()[0] is None, fn
        # The released memory.sql again: a successor is not checked.
        assert conn.execute("SELECT dna.forget('team', 'm1', 'nope')").fetchone()[0]["superseded_by"] == "nope"
    migrate.upgrade(empty_dsn, "head")


def test_document_sources_record_and_conflict(sql):
    _index(sql, "s2", "README.md", "alpha")
    args = ("s2", ["Doc"], ["README.md"], [""])
    assert sql.execute("SELECT dna.record_document_sources(%s, %s, %s, %s, %s)", (*args, ["/a/README.md"])).fetchone()[0] == 1
    assert sql.execute("SELECT dna.record_document_sources(%s, %s, %s, %s, %s)", (*args, ["/a/README.md"])).fetchone()[0] == 0
    assert sql.execute("SELECT * FROM dna.source_conflicts(%s, %s, %s, %s, %s)", (*args, ["/a/README.md"])).fetchall() == []
    assert sql.execute("SELECT kind, name, tenant, source, new_source FROM dna.source_conflicts(%s, %s, %s, %s, %s)",
                       (*args, ["/b/README.md"])).fetchall() == [("Doc", "README.md", "", "/a/README.md", "/b/README.md")]
    # A document deleted since is no conflict; bad arrays are 22023; the table is under row-level security.
    sql.execute("SELECT dna.delete_document('s2', 'Doc', 'README.md')")
    assert sql.execute("SELECT count(*) FROM dna.source_conflicts(%s, %s, %s, %s, %s)", (*args, ["/b/README.md"])).fetchone()[0] == 0
    assert _sqlstate(sql, "SELECT dna.record_document_sources('s2', ARRAY['Doc'], ARRAY[]::text[], ARRAY[''], ARRAY['x'])")[0] == "22023"
    assert "dna.dna_document_sources" in [r[0] for r in sql.execute("SELECT dna.protected_tables()::text")]
    assert sql.execute("SELECT relrowsecurity AND relforcerowsecurity FROM pg_class "
                       "WHERE oid = 'dna.dna_document_sources'::regclass").fetchone()[0] is True


def test_schema_comment_has_no_placeholder_url(sql):
    from pydna import migrate

    text = migrate.upgrade("", sql=True)
    comments = [line for line in text.splitlines() if line.startswith("COMMENT ON SCHEMA")]
    assert comments and all("https://github.com/ -" not in c and "://" not in c for c in comments)
    got = sql.execute("SELECT obj_description('dna'::regnamespace, 'pg_namespace')").fetchone()[0]
    assert got.startswith("pydna: hybrid search and agent memory inside PostgreSQL") and "://" not in got
