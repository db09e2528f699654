"""Sphinx-style doc sets (issue 27 item 1): a folder of .rst files is indexed; a .txt of RST (Django's
docs) is recognised by its content and cut at its section titles, titled by its first title, its hits
showing the heading path and prose (no `=====`, no `.. code-block::`); `--format` overrides the guess;
`--include` / `--exclude` choose files by glob. Through the CLI's runner."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pydna.cli import app
from pydna.passages import plain_markup, sniff_format

FAKE = ["--embedder", "fake"]

CACHE_TXT = """.. _cache:

========================
Django's cache framework
========================

A fundamental trade-off in dynamic websites is, well, they're dynamic.

.. _per-view-cache:

The per-view cache
==================

.. function:: django.views.decorators.cache.cache_page()

A more granular way to use the caching framework is by caching the output of
individual views. Use :func:`~django.views.decorators.cache.cache_page`::

    from django.views.decorators.cache import cache_page

.. code-block:: python

    @cache_page(60 * 15)
    def my_view(request): ...

The low-level cache API
=======================

Sometimes caching an entire rendered page doesn't gain you very much. """ + "More words about keys. " * 120


@pytest.fixture
def run(monkeypatch, tmp_path, dna_dsn):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))

    def invoke(*args, code=0):
        result = CliRunner().invoke(app, ["--dsn", dna_dsn, *[str(a) for a in args]])
        assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
        return result
    return invoke


def _rows(sql, scope):
    return sql.execute("SELECT name, title, passage, heading FROM dna.dna_search_docs_384 WHERE scope = %s "
                       "ORDER BY name, passage", (scope,)).fetchall()


def test_sniff_format_reads_content():
    assert sniff_format(CACHE_TXT) == "rst"
    assert sniff_format("# Title\n\nSome text with a [link](http://x).\n\n```py\nx = 1\n```\n") == "markdown"
    assert sniff_format("Just a note.\n\nAnother paragraph, nothing else.\n") == "text"
    assert sniff_format("Title\n=====\n\nplain words\n") == "rst"          # underlined titles alone
    assert plain_markup("see :ref:`the cache <cache>` and ``on_commit`` ===== .. code-block:: python  x").split() \
        == "see the cache and on_commit x".split()


def test_a_folder_of_rst_and_sphinx_txt_is_cut_at_titles(run, tmp_path, sql):
    d = tmp_path / "docs"
    (d / "topics").mkdir(parents=True)
    (d / "topics" / "cache.txt").write_text(CACHE_TXT, encoding="utf-8")
    (d / "intro.rst").write_text("Getting started\n===============\n\nInstall it, then run it.\n", encoding="utf-8")
    summary = json.loads(run("index", d, "--scope", "sphinx", *FAKE, "--json").stdout)
    assert summary["files"] == 2
    rows = _rows(sql, "sphinx")
    assert {r[0]: r[1] for r in rows} == {"intro.rst": "Getting started", "topics/cache.txt": "Django's cache framework"}
    headings = {r[3] for r in rows if r[0] == "topics/cache.txt"}
    assert "Django's cache framework > The per-view cache" in headings
    assert "Django's cache framework > The low-level cache API" in headings
    shown = run("search", "caching the output of individual views", "--scope", "sphinx", *FAKE, "-k", "3").stdout
    assert "The per-view cache" in shown
    assert "=====" not in shown and ".. code-block::" not in shown and ":func:" not in shown


def test_format_overrides_the_guess_and_globs_choose_files(run, tmp_path, sql):
    d = tmp_path / "docs"
    (d / "releases").mkdir(parents=True)
    (d / "ref").mkdir()
    (d / "releases" / "5.0.txt").write_text("Django 5.0 release notes\n========================\n\nNew.\n",
                                            encoding="utf-8")
    (d / "ref" / "cache.txt").write_text(CACHE_TXT, encoding="utf-8")
    (d / "ref" / "notes.text").write_text("Plain notes in an unusual suffix.\n", encoding="utf-8")
    kept = json.loads(run("index", d, "--scope", "globs", *FAKE, "--exclude", "releases/*", "--json").stdout)
    assert kept["files"] == 1 and [r[0] for r in _rows(sql, "globs")][0] == "ref/cache.txt"
    only = json.loads(run("index", d, "--scope", "only", *FAKE, "--include", "*.text", "--json").stdout)
    assert only["files"] == 1 and {r[0] for r in _rows(sql, "only")} == {"ref/notes.text"}
    none = run("index", d, "--scope", "none", *FAKE, "--include", "*.rst", code=1)
    assert "no text files in this directory" in none.stderr and "--include *.rst" in none.stderr
    plain = json.loads(run("index", d / "ref" / "cache.txt", "--scope", "plain", *FAKE, "--format", "text",
                           "--json").stdout)
    assert plain["files"] == 1
    assert {r[1] for r in _rows(sql, "plain")} == {"cache"}                  # text: titled by the file's stem
    assert all(r[3] is None for r in _rows(sql, "plain"))                   # and not cut at titles
    bad = run("index", d, "--scope", "x", *FAKE, "--format", "word", code=1)
    assert "--format must be one of auto, markdown, rst, text" in bad.stderr


#: A Sphinx page whose section title is directly followed by a subsection whose first paragraph fills a window.
TITLES_ALONE = ("Cache\n=====\n\nSetting up the cache\n--------------------\n\n"
                + " ".join(["memcached keeps entries in memory"] * 22) + "\n\n"
                + "Memcached is an entirely memory-based cache server. " * 20
                + "\n\nThe per-view cache\n------------------\n\n" + "Cache the output of views with cache_page. " * 30 + "\n")


def test_no_passage_is_titles_alone_and_a_new_splitter_re_splits(run, tmp_path, sql, monkeypatch):
    """A window holding only section titles ("Cache\\n=====", before: a passage with heading "Cache", whose
    title words counted twice with the heading context) is folded into the next passage's heading path;
    the splitter's fingerprint says so, so a folder indexed before is split again, and then unchanged."""
    import pydna.passages

    d = tmp_path / "docs"
    d.mkdir()
    (d / "cache.txt").write_text(TITLES_ALONE, encoding="utf-8")
    real, fold = pydna.passages.splitter_fingerprint, pydna.passages.fold_heading_only
    monkeypatch.setattr(pydna.passages, "splitter_fingerprint", lambda: real().split("; title-only")[0])
    monkeypatch.setattr(pydna.passages, "fold_heading_only", lambda text, heads, spans: spans)
    markup = pydna.passages.PassageSplitter._fold_markup_only             # titles are markup too
    monkeypatch.setattr(pydna.passages.PassageSplitter, "_fold_markup_only",
                        lambda self, text, heads, spans: (spans, [a for a, _ in spans]))
    run("index", d, "--scope", "titles", *FAKE)                         # as indexed by the splitter before
    before = sql.execute("SELECT heading FROM dna.dna_search_docs_384 WHERE scope = 'titles' AND passage = 0"
                         ).fetchone()[0]
    assert before == "Cache"                                            # the title alone was a passage
    monkeypatch.setattr(pydna.passages, "splitter_fingerprint", real)
    monkeypatch.setattr(pydna.passages, "fold_heading_only", fold)
    monkeypatch.setattr(pydna.passages.PassageSplitter, "_fold_markup_only", markup)
    again = json.loads(run("index", d, "--scope", "titles", *FAKE, "--json").stdout)
    assert again["unchanged"] == 0 and again["updated"] == 1            # another splitter: split again
    rows = _rows(sql, "titles")
    assert [r[2] for r in rows] == list(range(len(rows)))
    texts = sql.execute("SELECT passage, body, heading FROM dna.dna_search_docs_384 WHERE scope = 'titles' "
                        "ORDER BY passage").fetchall()
    assert texts[0][2] == "Cache > Setting up the cache" and "memcached keeps" in texts[0][1]
    assert not any(body.strip() in ("Cache\n=====", "Cache") for _, body, _ in texts)
    same = json.loads(run("index", d, "--scope", "titles", *FAKE, "--json").stdout)
    assert same["unchanged"] == 1 and same["updated"] == 0
    hits = json.loads(run("search", "cache", "--scope", "titles", *FAKE, "--json").stdout)["hits"]
    assert hits and hits[0]["heading"] != "Cache"


#: Django's topics/db/sql.txt shape: an anonymous target and a label right before a title, after a full paragraph.
FULL = "Raw queries run the SQL you pass and map each row to a model instance. " * 11
TARGETS = ("Raw SQL\n=======\n\nPassing parameters\n------------------\n\n" + FULL + "\n\nSee `SQL injection`__.\n\n"
           + FULL + "\n\n__ https://en.wikipedia.org/wiki/SQL_injection\n\n.. _executing-custom-sql:\n\n"
           + "Executing custom SQL directly\n=============================\n\n" + FULL.replace("Raw", "Cursor") + "\n")


def test_no_passage_is_rst_markup_alone_and_a_new_splitter_re_splits(run, tmp_path, sql, monkeypatch):
    """Before, ``__ https://…\\n\\n.. _executing-custom-sql:`` was a passage of its own under the previous
    section's path and ranked first for "SQL injection"; now the target and label open the next section's
    passage, and the splitter's fingerprint makes a folder indexed before split again once."""
    import pydna.passages

    d = tmp_path / "docs"
    d.mkdir()
    (d / "sql.txt").write_text(TARGETS, encoding="utf-8")
    real, starts = pydna.passages.splitter_fingerprint, pydna.passages.rst_section_starts
    fold = pydna.passages.PassageSplitter._fold_markup_only
    monkeypatch.setattr(pydna.passages, "splitter_fingerprint", lambda: real().split("; RST markup")[0])
    monkeypatch.setattr(pydna.passages, "rst_section_starts", lambda text, heads: heads)
    monkeypatch.setattr(pydna.passages.PassageSplitter, "_fold_markup_only",
                        lambda self, text, heads, spans: (spans, [a for a, _ in spans]))
    run("index", d, "--scope", "targets", *FAKE)                        # as indexed by the splitter before
    body = "SELECT body, heading FROM dna.dna_search_docs_384 WHERE scope = 'targets' ORDER BY passage"
    assert any(b.startswith("__ https") and h == "Raw SQL > Passing parameters" for b, h in sql.execute(body))
    monkeypatch.setattr(pydna.passages, "splitter_fingerprint", real)
    monkeypatch.setattr(pydna.passages, "rst_section_starts", starts)
    monkeypatch.setattr(pydna.passages.PassageSplitter, "_fold_markup_only", fold)
    again = json.loads(run("index", d, "--scope", "targets", *FAKE, "--json").stdout)
    assert again["unchanged"] == 0 and again["updated"] == 1            # another splitter: split again
    rows = sql.execute(body).fetchall()
    opening = [(b, h) for b, h in rows if "_executing-custom-sql:" in b]
    assert len(opening) == 1 and opening[0][1] == "Executing custom SQL directly" and "Cursor queries" in opening[0][0]
    assert not any(b.lstrip().startswith("__ https") and "Cursor" not in b for b, _ in rows)
    same = json.loads(run("index", d, "--scope", "targets", *FAKE, "--json").stdout)
    assert same["unchanged"] == 1 and same["updated"] == 0
    hits = json.loads(run("search", "SQL injection", "--scope", "targets", *FAKE, "--json").stdout)["hits"]
    assert hits and not any(h.get("snippet", "").strip().startswith("__") for h in hits)
