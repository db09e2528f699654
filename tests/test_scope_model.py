"""dna.scope_model, the model a search reads when the caller names none (revision 0024, topic
scope_model): the model with the most documents in the scope (of the width asked, ties by model_id), as
before; a scope whose rows carry one model_id is answered from two index probes per width table,
without reading its rows (before, every call counted every row the caller could see). Plain SQL."""
from __future__ import annotations

import pytest

FAKE = "dna-fake-hash-v1"
# dna.scope_model as revision 0023 released it: the reference.
REFERENCE = """SELECT (SELECT m.model_id FROM dna.scope_models(%(scope)s) AS m
               WHERE %(dims)s::integer IS NULL OR m.dims = %(dims)s::integer
               ORDER BY m.documents DESC, m.model_id LIMIT 1)"""


def index(sql, scope, names, model=FAKE, dims=384):
    if model != FAKE:
        sql.execute("SELECT dna.register_model(%s, %s)", (model, dims))
    sql.execute("SELECT count(*) FROM unnest(%s::text[]) AS u(n), "
                "LATERAL dna.index_document(%s, 'Doc', u.n, 'body of ' || u.n, "
                "CASE WHEN %s = 384 THEN dna.fake_embed(u.n) END, %s)", (names, scope, dims, model))


def rows_read(sql, scope, dims=None):
    """dna.scope_model's answer, and the heap and index tuples of the width tables it read, in one transaction."""
    with sql.transaction():
        before = sql.execute("SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) "
                             "FROM pg_stat_xact_user_tables WHERE schemaname = 'dna' "
                             "AND relname LIKE 'dna_search_docs_%%'").fetchone()[0]
        model = sql.execute("SELECT dna.scope_model(%s, %s)", (scope, dims)).fetchone()[0]
        after = sql.execute("SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) "
                            "FROM pg_stat_xact_user_tables WHERE schemaname = 'dna' "
                            "AND relname LIKE 'dna_search_docs_%%'").fetchone()[0]
    return model, after - before


def reference(sql, scope, dims=None):
    return sql.execute(REFERENCE, {"scope": scope, "dims": dims}).fetchone()[0]


def test_one_model_is_answered_without_reading_the_scope(sql):
    index(sql, "one", [f"d{i}" for i in range(600)])
    sql.execute("ANALYZE dna.dna_search_docs_384")
    model, read = rows_read(sql, "one")
    assert model == FAKE == reference(sql, "one")
    assert read <= 10, f"dna.scope_model read {read} rows of a 600-document scope"
    assert rows_read(sql, "one", 384)[0] == FAKE


@pytest.mark.parametrize("layout", [
    {"a-model": 3, FAKE: 5},            # two models in one width: the one with more documents
    {"a-model": 4, FAKE: 4},            # a tie: the smaller model_id
    {"z-model": 6, FAKE: 2},
])
def test_several_models_in_one_width_match_the_count(sql, layout):
    for model, n in layout.items():
        index(sql, "many", [f"{model}-{i}" for i in range(n)], model=model)
    assert sql.execute("SELECT dna.scope_model('many')").fetchone()[0] == reference(sql, "many")
    assert sql.execute("SELECT dna.scope_model('many', 384)").fetchone()[0] == reference(sql, "many", 384)


def test_models_of_two_widths_and_the_width_filter(sql):
    index(sql, "wide", [f"s{i}" for i in range(2)])                           # 384 (fake)
    index(sql, "wide", [f"w{i}" for i in range(5)], model="wide-768", dims=768)
    for dims in (None, 384, 768, 1024):
        assert sql.execute("SELECT dna.scope_model('wide', %s)", (dims,)).fetchone()[0] == reference(sql, "wide", dims)
    assert sql.execute("SELECT dna.scope_model('wide')").fetchone()[0] == "wide-768"
    assert sql.execute("SELECT dna.scope_model('wide', 384)").fetchone()[0] == FAKE
    assert sql.execute("SELECT dna.scope_model('wide', 1024)").fetchone()[0] is None


def test_an_empty_or_unknown_scope_has_no_model(sql):
    assert sql.execute("SELECT dna.scope_model('nothing-here')").fetchone()[0] is None
    assert sql.execute("SELECT dna.scope_model('nothing-here', 384)").fetchone()[0] is None
    assert sql.execute("SELECT dna.scope_model(NULL)").fetchone()[0] is None


def test_search_without_model_id_reads_the_scopes_model(sql):
    index(sql, "srch", ["alpha", "beta", "gamma"])
    named = sql.execute("SELECT name FROM dna.search('srch', 'body of beta', model_id => %s, k => 3)", (FAKE,)).fetchall()
    unnamed = sql.execute("SELECT name FROM dna.search('srch', 'body of beta', k => 3)").fetchall()
    assert named == unnamed and named[0] == ("beta",)


def test_recall_without_model_id_reads_the_scopes_model(sql):
    for i, text in enumerate(["river stones are smooth", "mountain air is thin", "river fish swim upstream"]):
        sql.execute("SELECT dna.remember('rec', jsonb_build_object('summary', %s::text), name => %s, "
                    "embedding => dna.fake_embed(%s))", (text, f"m{i}", text))
    args = "'rec', 'river', k => 3, reconsolidate => false"
    unnamed = sql.execute(f"SELECT dna.recall({args})").fetchone()[0]
    named = sql.execute(f"SELECT dna.recall({args}, model_id => %s)", (FAKE,)).fetchone()[0]
    assert unnamed["model_id"] == named["model_id"] == FAKE
    assert [h["name"] for h in unnamed["hits"]] == [h["name"] for h in named["hits"]]
    assert {h["name"] for h in unnamed["hits"]} >= {"m0", "m2"}
