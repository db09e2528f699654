"""Exact identifiers (issue 27 item 4): ``snake_case``, ``dotted.names`` and ``CamelCase`` are found as
written and by their parts, and a highlight marks an identifier whole.

The corpus: a transactions page that names ``transaction.on_commit()`` once among prose, a settings page
that names ``django.db.transaction.atomic`` once, a models page that names ``QuerySet`` once, and pages
that say "commit", "on", "transaction", "atomic", "query" and "set" many times. Before revision
0022_first_week (topic identifiers) PostgreSQL's parser split ``on_commit`` into ``on`` (a stop word)
and ``commit``, so the query "on_commit" was the query "commit"; it kept ``django.db.transaction.atomic``
and ``QuerySet`` as one lexeme each, so neither was found by a part. Tested through plain SQL, the client
and the CLI (``dna recall`` / ``dna search`` through typer's CliRunner)."""
from __future__ import annotations

import json
import re

import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app

MODEL = "dna-fake-hash-v1"
FAKE = ["--embedder", "fake"]
PROSE = ("Databases keep data safe when many people write at once. A page like this one explains the "
         "ideas in plain words, with examples that readers can try on their own machine. ")
DOCS = {
    "transactions": PROSE * 3 + "To run code once the work is saved, register it with "
                    "transaction.on_commit() and it runs after the outer block ends. " + PROSE * 3,
    "settings": PROSE * 3 + "The decorator django.db.transaction.atomic wraps a view. " + PROSE * 3,
    "models": PROSE * 3 + "Each manager method returns a QuerySet that you can filter further. " + PROSE * 3,
    "commits": "Commit early, commit often. On a busy day you commit on every change, on each branch, "
               "and on the main line: commit, commit, commit. Turn on the hook that runs on commit.",
    "atomic": "A transaction is atomic: the whole transaction happens or no part of the transaction does. "
              "Atomic writes, atomic transaction, transaction log.",
    "queries": "A query can set a limit. Set the query, set the order, query again; the query set grows. "
               "Query, set, query, set.",
}


def _load(conn, scope="ids"):
    for name, body in DOCS.items():
        conn.execute("SELECT dna.index_document(%s, 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                     (scope, name, body, body, MODEL))


def lexical(conn, query, scope="ids", k=6):
    """Names of the lexical lane's ranking (dense weight 0) for query."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM dna.search(%s, %s, dna.fake_embed(%s), %s, k => %s, fusion => 'convex', "
        "dense_weight => 0) WHERE lexical_score IS NOT NULL", (scope, query, query, MODEL, k)).fetchall()]


def highlight(conn, query, name, scope="ids"):
    return conn.execute(
        "SELECT highlight FROM dna.search(%s, %s, dna.fake_embed(%s), %s, k => 6, highlight => true) "
        "WHERE name = %s", (scope, query, query, MODEL, name)).fetchone()[0]


@pytest.fixture
def corpus(sql):
    _load(sql)
    return sql


# -- the tokenizer ------------------------------------------------------------------------------------


def test_identifier_lexemes_are_whole_and_parts(sql):
    terms = lambda q: set(sql.execute("SELECT dna.bm25_terms(%s)", (q,)).fetchone()[0])  # noqa: E731
    assert {"on_commit", "commit"} <= terms("on_commit")
    assert {"transaction.on_commit", "on_commit", "transact", "commit"} <= terms("transaction.on_commit()")
    assert {"django.db.transaction", "db.transaction", "django.db", "django", "db", "transact"} \
        <= terms("django.db.transaction")
    assert {"queryset", "queri", "set"} <= terms("QuerySet")
    assert {"getelementbyid", "get", "element", "id"} <= terms("getElementById")
    # prose is tokenized as before: no identifier, no extra lexeme
    prose = "Commit early, e.g. on a busy day; mRNA levels in HeLa cells, TatAd and H2A.Z, i.e. 0.05 of them"
    assert terms(prose) == set(sql.execute("SELECT tsvector_to_array(to_tsvector('english', %s))",
                                           (prose,)).fetchone()[0])


def test_a_name_opened_by_a_dot_is_an_identifier(sql):
    """Sphinx writes :meth:`.QuerySet.select_for_update()` and ``.transaction.on_commit``: the opening dot
    is not part of the name (before, the whole name was skipped and only the parser's lexemes stayed)."""
    lexemes = lambda t: set(sql.execute("SELECT tsvector_to_array(dna.text_tsvector('english', %s))",  # noqa: E731
                                        (t,)).fetchone()[0])
    assert {"queryset.select_for_update", "select_for_update", "queryset", "select"} \
        <= lexemes(":meth:`.QuerySet.select_for_update()`")
    assert {"transaction.on_commit", "on_commit"} <= lexemes("see .transaction.on_commit for hooks")
    assert "select_for_update" in lexemes("the .select_for_update method")
    assert lexemes("a sentence. Then .5 of it") == set(sql.execute(      # a full stop or a decimal: nothing added
        "SELECT tsvector_to_array(to_tsvector('english', 'a sentence. Then .5 of it'))").fetchone()[0])


def test_identifier_positions_count_occurrences(sql):
    tsv = dict(sql.execute("SELECT lexeme, cardinality(positions) FROM unnest(dna.text_tsvector('english', "
                           "'on_commit here, on_commit there, commit'))").fetchall())
    assert tsv["on_commit"] == 2 and tsv["commit"] == 3


# -- ranking: as written -----------------------------------------------------------------------------


def test_snake_case_as_written_ranks_its_page_first(corpus):
    assert lexical(corpus, "on_commit")[0] == "transactions"


def test_dotted_name_as_written_ranks_its_page_first(corpus):
    assert lexical(corpus, "transaction.atomic")[0] == "settings"
    assert lexical(corpus, "django.db.transaction.atomic")[0] == "settings"


def test_camel_case_as_written_ranks_its_page_first(corpus):
    assert lexical(corpus, "QuerySet")[0] == "models"


# -- ranking: by their parts -------------------------------------------------------------------------


def test_identifiers_are_found_by_their_parts(corpus):
    assert "transactions" in lexical(corpus, "commit")
    assert "settings" in lexical(corpus, "atomic")
    assert "models" in lexical(corpus, "set")
    assert "transactions" in lexical(corpus, "on_commit hook")


# -- highlights ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("query,name,whole", [
    ("on_commit", "transactions", "«transaction.on_commit»()"),
    ("commit", "transactions", "«transaction.on_commit»()"),
    ("transaction.atomic", "settings", "«django.db.transaction.atomic»"),
    ("atomic", "settings", "«django.db.transaction.atomic»"),
    ("QuerySet", "models", "«QuerySet»"),
    ("set", "models", "«QuerySet»"),
])
def test_highlight_marks_the_identifier_whole(corpus, query, name, whole):
    text = highlight(corpus, query, name)
    assert whole in text, text
    assert not re.search(r"[A-Za-z0-9_.]«|»[A-Za-z0-9_]|»\.[A-Za-z]", text), text


def test_identifier_highlight_leaves_prose_alone(sql):
    got = sql.execute("SELECT dna.identifier_headline('english', %s, dna.lexical_query('commit'))",
                      ("Commit early. We commit, then push.",)).fetchone()[0]
    assert got == sql.execute("SELECT ts_headline('english', %s, dna.lexical_query('commit'), "
                              "'StartSel=«, StopSel=», MaxWords=40, MinWords=15, MaxFragments=2, "
                              "FragmentDelimiter=\" … \"')", ("Commit early. We commit, then push.",)).fetchone()[0]
    assert sql.execute("SELECT dna.identifier_headline('english', 'a b', NULL)").fetchone()[0] is None


# -- the client and the CLI ---------------------------------------------------------------------------


def test_client_search_puts_the_identifier_page_first(client, sql):
    _load(sql)
    hits = client.search("ids", "on_commit", model_id=MODEL, dense_weight=0, fusion="convex").hits
    assert hits[0].name == "transactions"


@pytest.fixture
def runner(monkeypatch, tmp_path):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    return CliRunner()


def _ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


@pytest.mark.parametrize("verb", ["recall", "search"])
@pytest.mark.parametrize("query,first,whole,flags", [
    # the fake embedder's vector of "on_commit" is near the "commits" page's (cosine 0.885 against 0.168),
    # which the convex fusion's dense weight 0.5 (0025) puts first: the lexical lane alone
    ("on_commit", "transactions", "transaction.on_commit", ["--dense-weight", "0"]),
    # the fake embedder's vector of "transaction.atomic" is the "atomic" page's: the lexical lane alone
    ("transaction.atomic", "settings", "django.db.transaction.atomic", ["--dense-weight", "0"]),
    ("QuerySet", "models", "QuerySet", []),
])
def test_cli_finds_identifiers_and_marks_them_whole(runner, dna_dsn, tmp_path, verb, query, first, whole, flags):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"kind": "Doc", "name": n, "body": b}) + "\n" for n, b in DOCS.items()),
                    encoding="utf-8")
    _ok(runner.invoke(app, ["--dsn", dna_dsn, "index", str(path), "--scope", "cli", *FAKE, "--json"]))
    answer = json.loads(_ok(runner.invoke(app, ["--dsn", dna_dsn, verb, query, "--scope", "cli", *FAKE,
                                                *flags, "--json"])).stdout)
    assert answer["hits"][0]["name"] == first
    shown = _ok(runner.invoke(app, ["--dsn", dna_dsn, verb, query, "--scope", "cli", *FAKE, *flags,
                                 "-k", "1"])).stdout
    assert first in shown
    with psycopg.connect(dna_dsn, autocommit=True) as conn:
        assert f"«{whole}»" in highlight(conn, query, first, scope="cli")
