"""Issue 27's open findings in the CLI, through its runner: the top hit's snippet shows the lines that
hold the identifier searched (item 4); `--include 'topics/db/*'` stays in that folder and `**` crosses
folders (item 5); an unknown command that another tool's name for one of ours suggests ours: `dna db
down` → stop, `dna db start` → up (item 6)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pydna.cli import app
from pydna.cli_files import glob_match

FAKE = ["--embedder", "fake"]


@pytest.fixture
def run(monkeypatch, tmp_path, dna_dsn):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))

    def invoke(*args, code=0, dsn=True):
        result = CliRunner().invoke(app, (["--dsn", dna_dsn] if dsn else []) + [str(a) for a in args])
        assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
        return result
    return invoke


DOC = ("# Database transactions\n\nDjango commits each query in autocommit mode, and a block commits when it "
       "ends; nothing commits twice and each of the commits is logged. " + "Isolation levels and savepoints matter "
       "here as well. " * 6 + "To run a callback after the transaction, register it with transaction.on_commit(func) "
       "in the view.\n\n" + "More words about isolation levels and savepoints. " * 30 + "\n")


def test_the_snippet_shows_the_lines_holding_the_identifier(run, tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "transactions.md").write_text(DOC, encoding="utf-8")
    run("index", d, "--scope", "tx", *FAKE)
    shown = run("search", "on_commit", "--scope", "tx", *FAKE, "-k", "1").stdout
    body = [line for line in shown.splitlines() if line.startswith("    ")]
    assert 1 <= len(body) <= 3, shown
    assert any("on_commit" in line for line in body), shown
    # a query without an identifier keeps the passage's first lines
    plain = run("search", "autocommit mode", "--scope", "tx", *FAKE, "-k", "1").stdout
    assert "Django commits each query" in plain, plain


def test_a_star_stays_in_its_folder_and_two_stars_cross_folders(run, tmp_path, sql):
    assert glob_match("topics/db/models.txt", "topics/db/*")
    assert not glob_match("topics/db/examples/one.txt", "topics/db/*")
    assert glob_match("topics/db/examples/one.txt", "topics/db/**")
    assert glob_match("topics/db/examples/one.txt", "topics/**/*.txt") and glob_match("topics/x.txt", "topics/**/*.txt")
    assert glob_match("x.txt", "**/*.txt") and glob_match("a/b/x.rst", "*.rst")
    assert glob_match("a/b.txt", "a/?.txt") and not glob_match("a/bb.txt", "a/?.txt")
    assert not glob_match("a/b/c.txt", "a/?/c.txt".replace("?", "[!b]"))
    d = tmp_path / "docs"
    (d / "topics" / "db" / "examples").mkdir(parents=True)
    (d / "topics" / "db" / "models.txt").write_text("Models define your data.\n", encoding="utf-8")
    (d / "topics" / "db" / "examples" / "one.txt").write_text("An example of a many-to-one.\n", encoding="utf-8")
    (d / "intro.txt").write_text("Start here.\n", encoding="utf-8")

    def names(scope):
        return sorted(r[0] for r in sql.execute("SELECT DISTINCT name FROM dna.dna_search_docs_384 WHERE scope = %s",
                                                (scope,)).fetchall())

    one = json.loads(run("index", d, "--scope", "one", *FAKE, "--include", "topics/db/*", "--json").stdout)
    assert one["files"] == 1 and names("one") == ["topics/db/models.txt"]
    deep = json.loads(run("index", d, "--scope", "deep", *FAKE, "--include", "topics/db/**", "--json").stdout)
    assert deep["files"] == 2 and names("deep") == ["topics/db/examples/one.txt", "topics/db/models.txt"]
    out = json.loads(run("index", d, "--scope", "out", *FAKE, "--exclude", "topics/*", "--json").stdout)
    assert out["files"] == 3                               # topics/* names no file: each is deeper
    helped = run("index", "--help", dsn=False).stdout
    assert "'**' crosses" in " ".join(helped.split()), helped


def test_an_unknown_command_suggests_the_one_meant(run):
    down = run("db", "down", code=2, dsn=False)
    assert "No such command 'down'. Did you mean 'stop'?" in down.stderr, down.stderr
    start = run("db", "start", code=2, dsn=False)
    assert "Did you mean 'up'?" in start.stderr and "'status'" not in start.stderr, start.stderr
    ls = run("memory", "ls", code=2, dsn=False)
    assert "Did you mean 'list'?" in ls.stderr, ls.stderr
    typo = run("serach", "x", code=2, dsn=False)
    assert "Did you mean 'search'?" in typo.stderr, typo.stderr       # typer's spelling guess still stands



#: Django's ref/models/querysets.txt: a title in markup, the section a hit is in at the end of a long path.
def _rst_title(title: str, mark: str, over: bool = False) -> str:
    return (mark * len(title) + "\n" if over else "") + title + "\n" + mark * len(title) + "\n\n"


QUERYSETS = (_rst_title("``QuerySet`` API reference", "=", over=True) + "Intro words about querysets.\n\n"
             + _rst_title("``QuerySet`` API", "=") + _rst_title("Methods that return new ``QuerySet``\\s", "-")
             + _rst_title("``select_related()``", "~") + ".. method:: select_related(*fields)\n\n"
             + "Returns a QuerySet that will follow foreign-key relationships when it executes its query. " * 12 + "\n")


def test_a_hits_heading_path_keeps_the_section_it_is_in(run, tmp_path, dna_dsn):
    from types import SimpleNamespace

    from pydna.cli_search import _hit_head, fit_heading

    d = tmp_path / "docs"
    (d / "ref" / "models").mkdir(parents=True)
    (d / "ref" / "models" / "querysets.txt").write_text(QUERYSETS, encoding="utf-8")
    run("index", d, "--scope", "qs", *FAKE)
    for columns in ("200", "80"):
        shown = CliRunner().invoke(app, ["--dsn", dna_dsn, "search", "follow foreign-key relationships", "--scope",
                                         "qs", *FAKE, "-k", "1"], env={"COLUMNS": columns}).stdout
        head = next(line for line in shown.splitlines() if "querysets.txt" in line)
        assert head.rstrip().endswith("select_related()"), shown          # before: "… · ``QuerySet`` API refere…"
        assert head.count("QuerySet API reference") <= 1 and "``" not in head, head
    wide = CliRunner().invoke(app, ["--dsn", dna_dsn, "search", "follow foreign-key relationships", "--scope",
                                    "qs", *FAKE, "-k", "1"], env={"COLUMNS": "200"}).stdout
    assert "QuerySet API > Methods that return new QuerySets > select_related()" in wide, wide
    assert fit_heading(["A", "B", "select_related()"], 40) == "A > B > select_related()"
    assert fit_heading(["Long section one", "Methods", "select_related()"], 30) == "… > Methods > select_related()"
    assert fit_heading(["Long section one", "select_related()"], 10) == "select_re…"
    hit = SimpleNamespace(name="querysets.txt", title="QuerySet API reference", kind="Doc", tenant="",
                          heading="``QuerySet`` API reference > ``QuerySet`` API > ``select_related()``")
    assert str(_hit_head(1, hit, 40)).endswith("select_related()") and len(str(_hit_head(1, hit, 40))) <= 40
    # a last section too long beside the title: the title gives way, not the section
    long = SimpleNamespace(name="topics/db/optimization.txt", title="Database access optimization", kind="Doc",
                           tenant="", heading="Database access optimization > Retrieve everything at once > "
                                              "Use ``QuerySet.select_related()`` and ``prefetch_related()``")
    assert str(_hit_head(2, long, 100)) == " 2. topics/db/optimization.txt · … > Use QuerySet.select_related() and prefetch_related()"


def test_an_include_naming_a_folder_or_a_misspelt_one_hints_the_glob_meant(run, tmp_path):
    d = tmp_path / "docs"
    (d / "topics" / "db").mkdir(parents=True)
    (d / "topics" / "db" / "models.txt").write_text("Models define your data.\n", encoding="utf-8")
    plain = run("index", d, "--scope", "inc", *FAKE, "--include", "topics/db", code=1).stderr
    assert "no text files in this directory" in plain
    assert "--include 'topics/db/**'" in plain, plain                     # before: no hint
    typo = run("index", d, "--scope", "inc", *FAKE, "--include", "topic/db/**", code=1).stderr
    assert "did you mean --include 'topics/db/**'?" in typo, typo
    ext = run("index", d, "--scope", "inc", *FAKE, "--include", "topic/db/*.txt", code=1).stderr
    assert "--include 'topics/db/*.txt'" in ext, ext
    none = run("index", d, "--scope", "inc", *FAKE, "--include", "*.rst", code=1).stderr
    assert "did you mean" not in none and "names a folder" not in none
    assert run("index", d, "--scope", "inc", *FAKE, "--include", "topics/db/**").exit_code == 0


def test_re_indexing_leads_with_what_changed(run, tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    for i in range(3):
        (d / f"page{i}.txt").write_text(f"Page {i} holds words about models number {i}.\n", encoding="utf-8")
    first = run("index", d, "--scope", "again", *FAKE).stdout.splitlines()
    assert first[1].startswith("indexed 3 documents (3 files) into scope again"), first
    same = run("index", d, "--scope", "again", *FAKE).stdout.splitlines()
    assert same[1].startswith("nothing changed: 3 files unchanged in scope again"), same   # before: "indexed 3 …"
    (d / "page1.txt").write_text("Page 1 now says something else.\n", encoding="utf-8")
    one = run("index", d, "--scope", "again", *FAKE).stdout.splitlines()
    assert one[1].startswith("indexed 1 changed of 3 documents (3 files; 2 unchanged) into scope again"), one
