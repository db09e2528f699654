"""Passages: long text indexed as passage rows tied to their document (0013_passages).

Plain SQL first (the contract any language gets): dna.index_documents with passage arrays, one hit per
document (its best passage) or per passage, re-indexing replaces exactly a document's passages and
never re-embeds an unchanged one, whole-document writes and deletes take the passages with them,
BM25 statistics count passage rows and stay exact, tenant overlays shadow a document's every passage,
bad passage input is refused before anything is written. Then the splitter and Client.index.
"""
from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector

import pydna
from test_bulk_ingest import CountingEmbedder  # the fake embedder, counting what it embeds
from pydna.passages import (PassageSplitter, fold_heading_only, heading_path, headings_only, markdown_headings,
                            rst_headings, rst_markup_only, rst_section_starts, splitter_fingerprint, text_format)

MODEL = "dna-fake-hash-v1"


def _vec(sql, text: str):
    return sql.execute("SELECT dna.fake_embed(%s)", (text,)).fetchone()[0]


def _index(sql, name: str, parts: list[str], *, kind: str = "Doc", title: str | None = "Guide",
           tenant: str = "", embed: bool = True, headings: list[str | None] | None = None):
    """Index ``parts`` as the passages of one document through plain SQL; returns the result rows."""
    spans, pos = [], 0
    for p in parts:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    embeddings = [_vec(sql, f"{title} {p}") for p in parts] if embed else None
    return sql.execute(
        "SELECT ord, kind, name, action, embedded, passage FROM dna.index_documents("
        "'s', %s, %s, %s, %s::vector[], %s, %s, tenant => %s, passages => %s, headings => %s, "
        "char_starts => %s, char_ends => %s)",
        ([kind] * len(parts), [name] * len(parts), parts, embeddings, MODEL, [title] * len(parts), tenant,
         list(range(len(parts))), headings or [None] * len(parts), [a for a, _ in spans],
         [b for _, b in spans])).fetchall()


def _rows(sql, name: str = "guide"):
    return sql.execute("SELECT passage, body, embedding IS NOT NULL, heading, char_start, char_end "
                       "FROM dna.dna_search_docs_384 WHERE scope = 's' AND name = %s ORDER BY tenant, passage",
                       (name,)).fetchall()


def _search(sql, query: str, **kw):
    args = ", ".join(f"{k} => %({k})s" for k in kw)
    return sql.execute(
        "SELECT name, passage, heading, char_start, char_end, highlight, rank_lexical, snippet "
        f"FROM dna.search('s', %(q)s, dna.fake_embed(%(q)s), %(m)s{', ' + args if args else ''})",
        {"q": query, "m": MODEL, **kw}).fetchall()


GUIDE = ["Installing the tool needs a compiler and cmake.",
         "The daemon listens on port 8080; EADDRINUSE means another process holds the port.",
         "Mount the volume read-only with the ro option to keep backups safe."]


@pytest.fixture
def vsql(sql):
    register_vector(sql)
    sql.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
    return sql


def test_passages_are_rows_and_search_answers_one_hit_per_document_by_its_best_passage(vsql):
    rows = _index(vsql, "guide", GUIDE, headings=["Install", "Run > Ports", "Storage"])
    assert [(r[3], r[5]) for r in rows] == [("inserted", 0), ("inserted", 1), ("inserted", 2)]
    _index(vsql, "other", ["Unrelated text about gardening and tomatoes."])
    hits = _search(vsql, "what does EADDRINUSE mean")
    assert hits[0][:5] == ("guide", 1, "Run > Ports", len(GUIDE[0]) + 2, len(GUIDE[0]) + 2 + len(GUIDE[1]))
    assert [h[0] for h in hits].count("guide") == 1             # one hit per document
    assert "«eaddrinuse»" in hits[0][5].lower()                # the matched term marked
    assert hits[0][7].startswith("The daemon listens")           # that passage's snippet
    every = _search(vsql, "port read-only compiler", passages=True)
    assert sorted(h[1] for h in every if h[0] == "guide") == [0, 1, 2]


def test_reindex_replaces_exactly_the_passages_and_keeps_unchanged_vectors(vsql):
    _index(vsql, "guide", GUIDE)
    before = {r[1]: r for r in _rows(vsql)}
    # A new first passage shifts the others; the second is dropped. No vectors are sent at all:
    # texts the document already stores keep theirs, the new one is lexical until embedded.
    new = ["A new preface.", GUIDE[0], GUIDE[2]]
    rows = _index(vsql, "guide", new, embed=False)
    actions = {(r[5], r[3]) for r in rows}
    assert actions == {(0, "updated"), (1, "updated"), (2, "moved")}, rows
    got = _rows(vsql)
    assert [r[1] for r in got] == new
    assert [r[2] for r in got] == [False, True, True]            # moved texts kept their vectors
    assert before[GUIDE[0]][2] is True
    # stale_documents names only the text the document does not store with a vector.
    stale = [r[0] for r in vsql.execute(
        "SELECT dna.stale_documents('s', %s, %s, %s, %s, %s)",
        (MODEL, ["Doc"] * 3, ["guide"] * 3, ["Guide"] * 3, new)).fetchall()]
    assert stale == [1]
    # Fewer passages: the tail goes (reported as deleted), the postings with it.
    rows = _index(vsql, "guide", ["A new preface."])
    assert sorted((r[3], r[5]) for r in rows) == [("deleted", 1), ("deleted", 2), ("embedded", 0)]
    assert [r[0] for r in _rows(vsql)] == [0]
    assert [h for h in _search(vsql, "backups read-only") if h[6] is not None] == []   # no lexical match left
    # Unchanged: nothing written.
    assert [r[3] for r in _index(vsql, "guide", ["A new preface."])] == ["unchanged"]


def test_whole_document_write_and_delete_take_every_passage(vsql):
    _index(vsql, "guide", GUIDE)
    r = vsql.execute("SELECT dna.index_document('s', 'Doc', 'guide', 'now one short text', "
                     "dna.fake_embed('now one short text'), %s, 'Guide')", (MODEL,)).fetchone()[0]
    assert r["action"] == "updated"
    assert [(p, b) for p, b, *_ in _rows(vsql)] == [(0, "now one short text")]
    _index(vsql, "guide", GUIDE)
    assert vsql.execute("SELECT dna.delete_document('s', 'Doc', 'guide')").fetchone()[0] == 3
    assert _rows(vsql) == []
    assert vsql.execute("SELECT n_docs FROM dna.bm25_partition_stats('s', %s)", (MODEL,)).fetchone()[0] == 0


def test_bm25_counts_passages_exactly(vsql):
    _index(vsql, "guide", GUIDE)
    _index(vsql, "notes", ["port numbers", "more about the port"])
    stats = vsql.execute("SELECT n_docs, total_len FROM dna.bm25_partition_stats('s', %s)", (MODEL,)).fetchone()
    expect = vsql.execute("SELECT count(*), sum(dna.bm25_doc_length(tsv)) FROM dna.dna_search_docs_384 "
                          "WHERE scope = 's'").fetchone()
    assert stats == (expect[0], expect[1]) and stats[0] == 5
    exact = vsql.execute("SELECT doc_id, score FROM dna.bm25('s', 'port', %s, exact => true) ORDER BY doc_id",
                         (MODEL,)).fetchall()
    lane = vsql.execute("SELECT doc_id, score FROM dna.bm25('s', 'port', %s) ORDER BY doc_id", (MODEL,)).fetchall()
    assert lane == exact and len(lane) == 3                    # df('port') = 3 passage rows


def test_a_tenant_document_shadows_every_base_passage(vsql):
    _index(vsql, "guide", GUIDE)
    _index(vsql, "guide", ["tenant text about ports", "tenant second passage"], tenant="ws-a")
    stats = vsql.execute("SELECT n_docs, cardinality(shadowed) FROM dna.bm25_partition_stats('s', %s, 'ws-a')",
                         (MODEL,)).fetchone()
    assert stats == (2, 3)
    hits = vsql.execute("SELECT name, tenant, passage FROM dna.search('s', 'port', NULL, %s, tenant => 'ws-a', "
                        "passages => true)", (MODEL,)).fetchall()
    assert {(h[1], h[2]) for h in hits} == {("ws-a", 0)}


@pytest.mark.parametrize("passages, spans, message", [
    ([0, 2], None, "numbered 0..1"),
    ([1, 1], None, "numbered 0..1"),
    ([0, -1], None, "outside 0..99999"),
    ([0, 1], ([0, 5], [3, 1]), "not a span"),
    ([0, None], None, "ordinal is NULL"),
])
def test_bad_passages_are_refused_before_anything_is_written(vsql, passages, spans, message):
    starts, ends = spans if spans else (None, None)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        vsql.execute("SELECT * FROM dna.index_documents('s', '{Doc,Doc}', '{g,g}', '{one,two}', NULL, %s, "
                     "passages => %s::int[], char_starts => %s::int[], char_ends => %s::int[])",
                     (MODEL, passages, starts, ends))
    assert _rows(vsql, "g") == []


def test_unknown_kind_and_scope_get_a_notice(vsql):
    _index(vsql, "guide", GUIDE)
    notices: list[str] = []
    vsql.add_notice_handler(lambda d: notices.append(d.message_primary))
    vsql.execute("SELECT * FROM dna.search('s', 'port', NULL, %s, kinds => '{Dco}')", (MODEL,)).fetchall()
    assert any("no documents of kind Dco" in n and "kinds there: Doc" in n for n in notices), notices
    notices.clear()
    vsql.execute("SELECT * FROM dna.search('s', 'port', NULL, %s, kinds => '{Doc,Engram}')", (MODEL,)).fetchall()
    assert notices == []                       # some Kind asked for has documents: no typo to report
    vsql.execute("SELECT * FROM dna.search('z', 'port', NULL, %s)", (MODEL,)).fetchall()
    assert any("scope 'z' has no documents" in n and "'s'" in n for n in notices), notices


# -- the splitter ----------------------------------------------------------------------------------

MARKDOWN = ("# Tool\n\nIntro.\n\n## Install\n\n" + "Build it from source with make and a compiler. " * 40
            + "\n\n### Options\n\n" + "Pass the ro flag to mount read-only. " * 40 + "\n\n## Errors\n\n"
            + "EADDRINUSE means the port is taken by another process. " * 30 + "\n")
RST = ("Tool\n====\n\nIntro.\n\nInstall\n-------\n\n" + "Build it with make. " * 120
       + "\n\nErrors\n------\n\n" + "EADDRINUSE means the port is taken. " * 60 + "\n")


@pytest.mark.parametrize("text, fmt", [(MARKDOWN, "markdown"), (RST, "rst"), (MARKDOWN, "text")])
def test_passages_are_spans_of_the_text_with_their_heading_path(text, fmt):
    parts = PassageSplitter(None).split(text, fmt)
    assert len(parts) > 3
    assert [p.ordinal for p in parts] == list(range(len(parts)))
    for p in parts:
        assert text[p.char_start:p.char_end] == p.text and p.text.strip()
        assert len(p.text) <= PassageSplitter(None).max_tokens * 4
    covered = set()
    for p in parts:
        covered.update(range(p.char_start, p.char_end))
    left = "".join(c if i not in covered else "\n" for i, c in enumerate(text))
    titles = {h.title for h in (markdown_headings(text) if fmt == "markdown" else rst_headings(text))}
    assert headings_only(left, titles) if fmt != "text" else not left.strip()  # only titles folded away
    if fmt != "text":
        errors = [p for p in parts if "EADDRINUSE" in p.text]
        assert errors and all(p.heading.endswith("Errors") for p in errors)
        assert errors[0].heading == "Tool > Errors"


#: A section's title directly followed by its first subsection's, whose first window is full: before, the
#: section's title was a passage of its own ("Cache\n=====", 11 characters, path "Cache").
FULL_FIRST = ("Cache\n=====\n\nSetting up the cache\n--------------------\n\n"
              + " ".join(["memcached keeps entries in memory"] * 22) + "\n\n"
              + "Memcached is an entirely memory-based cache server. " * 20
              + "\n\nThe per-view cache\n------------------\n\n" + "Cache the output of views with cache_page. " * 30 + "\n")


@pytest.mark.parametrize("text, fmt", [
    (FULL_FIRST, "rst"),
    (FULL_FIRST.replace("Cache\n=====", "# Cache").replace("Setting up the cache\n--------------------",
                                                          "## Setting up the cache")
     .replace("The per-view cache\n------------------", "## The per-view cache"), "markdown")])
def test_a_window_of_titles_alone_is_folded_into_the_next_passages_heading_path(text, fmt):
    parts = PassageSplitter(None).split(text, fmt)
    heads = rst_headings(text) if fmt == "rst" else markdown_headings(text)
    for p in parts:
        inside = {h.title for h in heads if p.char_start <= h.start < p.char_end}
        assert not (inside and headings_only(p.text, inside)), p          # every passage holds body text
    assert [p.ordinal for p in parts] == list(range(len(parts)))
    assert "memcached keeps" in parts[0].text and parts[0].heading.startswith("Cache")
    if fmt == "rst":                                  # Markdown's splitter keeps the two titles with the text
        assert parts[0].heading == "Cache > Setting up the cache" and parts[0].text.startswith("Setting up")
    assert fold_heading_only("T\n=\n", rst_headings("T\n=\n"), [(0, 4)]) == [(0, 4)]   # the last window stays
    # an empty section followed by a sibling keeps its title (the next path does not hold it)
    sibling = "A\n=\n\nB\n=\n\nbody"
    assert fold_heading_only(sibling, rst_headings(sibling), [(0, 4), (5, len(sibling))]) == [(0, 4), (5, len(sibling))]
    assert "title-only windows folded" in splitter_fingerprint()          # so `dna index` re-splits


def test_headings_markdown_rst_and_path():
    md = "# A\n\n```\n# not a heading\n```\n\nB\n---\n\n### C\n\ntext\n"
    assert [(h.level, h.title) for h in markdown_headings(md)] == [(1, "A"), (2, "B"), (3, "C")]
    rst = "=====\nTitle\n=====\n\nSub\n---\n\nSub2\n----\n\nDeep\n~~~~\n"
    assert [(h.level, h.title) for h in rst_headings(rst)] == [(1, "Title"), (2, "Sub"), (2, "Sub2"), (3, "Deep")]
    heads = markdown_headings(md)
    assert heading_path(heads, 0) == "A" and heading_path(heads, len(md) - 1) == "A > B > C"
    assert text_format("x/README.md") == "markdown" and text_format("a.RST") == "rst"
    assert text_format("README") == "text"


def test_a_short_text_is_one_passage_and_sizes_are_checked():
    sp = PassageSplitter(None)
    assert sp.split("short text") == [type(sp.split("x")[0])(0, "short text", 0, 10, None)]
    assert sp.split("   ") == []
    with pytest.raises(ValueError):
        PassageSplitter(None, min_tokens=300, max_tokens=200)
    with pytest.raises(ValueError):
        sp.split("x", "html")


def test_tokenizer_sized_windows_fit_the_embedder():
    tokenizers = pytest.importorskip("tokenizers")
    from pydna.embeddings.onnx import resolve_model_source

    src = resolve_model_source()
    tok = tokenizers.Tokenizer.from_file(str(src.tokenizer_path))
    sp = PassageSplitter(tok)
    parts = sp.split(MARKDOWN, "markdown")
    sizes = [len(sp.tokenizer.encode(p.text, add_special_tokens=False).ids) for p in parts]
    assert len(parts) > 3 and max(sizes) <= sp.max_tokens, sizes


# -- Client.index ----------------------------------------------------------------------------------

def test_client_indexes_long_text_as_passages_and_reembeds_only_what_changed(dna_dsn):
    emb = CountingEmbedder()
    with pydna.connect(dna_dsn, embedder=emb) as c:
        rep = c.index("s", [{"kind": "Doc", "name": "tool.md", "title": "Tool", "body": MARKDOWN},
                            {"kind": "Doc", "name": "short.txt", "body": "a short note about ports"}])
        n = rep.passages
        assert rep.inserted == 2 and n > 4 and rep.embedded_texts == n
        hit = c.search("s", "what does EADDRINUSE mean", k=3).hits[0]
        assert hit.name == "tool.md" and hit.passage > 0 and hit.heading == "Tool > Errors"
        assert MARKDOWN[hit.char_start:hit.char_end].startswith("## Errors") or "EADDRINUSE" in \
            MARKDOWN[hit.char_start:hit.char_end]
        again = c.index("s", [{"kind": "Doc", "name": "tool.md", "title": "Tool", "body": MARKDOWN}])
        assert (again.unchanged, again.embedded_texts) == (1, 0)
        edited = MARKDOWN.replace("Intro.", "Intro, now longer.")
        again = c.index("s", [{"kind": "Doc", "name": "tool.md", "title": "Tool", "body": edited}])
        assert again.updated == 1 and again.embedded_texts == 1           # only the changed passage
        whole = c.index("s", [{"kind": "Doc", "name": "tool.md", "title": "Tool", "body": edited}], passages=False)
        assert whole.updated == 1 and whole.passages == 1 and whole.passages_deleted == n - 2  # n: 1 is short.txt


# -- the revision ----------------------------------------------------------------------------------

def test_upgrade_keeps_documents_as_passage_0_and_downgrade_refuses_to_lose_passages(empty_dsn):
    from pydna import migrate

    migrate.upgrade(empty_dsn, "0012_first_day")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.register_model(%s, 384)", (MODEL,))
        for name, body in (("a", GUIDE[0]), ("b", GUIDE[1]), ("c", GUIDE[2])):
            conn.execute("SELECT dna.index_document('s', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                         (name, body, body, MODEL))
        # Scores to 9 decimals: from 0016 dna.search rounds them to 12 significant digits (equal scores tie).
        query = ("SELECT kind, name, round(score::numeric, 9) FROM dna.search('s', 'port process backups', "
                 "dna.fake_embed('port'), %s)")
        before = conn.execute(query, (MODEL,)).fetchall()
    migrate.upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT dna.set_search_config('s', fusion => 'rrf')")  # 0016's default fusion is convex
        assert conn.execute(query, (MODEL,)).fetchall() == before
        assert conn.execute("SELECT array_agg(DISTINCT passage) FROM dna.dna_search_docs_384").fetchone()[0] == [0]
        _index(conn, "guide", GUIDE)
    with pytest.raises(Exception, match="would lose 2 passage rows"):
        migrate.downgrade(empty_dsn, "0012_first_day")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == 6   # nothing lost
        conn.execute("SELECT dna.delete_document('s', 'Doc', 'guide')")
    migrate.downgrade(empty_dsn, "0012_first_day")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        register_vector(conn)
        assert conn.execute(query, (MODEL,)).fetchall() == before
    migrate.upgrade(empty_dsn)


@pytest.mark.parametrize("call", [
    "SELECT dna.index_document('My Scope!', 'Doc', 'n', 'text', NULL, %s)",
    "SELECT dna.index_document('s', 'bad kind!', 'n', 'text', NULL, %s)",
    "SELECT * FROM dna.index_documents('My Scope!', '{Doc}', '{n}', '{text}', NULL, %s)",
    "SELECT * FROM dna.index_documents('s', '{Doc,bad kind!}', '{n,m}', '{text,more}', NULL, %s)",
])
def test_the_document_door_checks_scope_and_kind_by_the_name_rule(vsql, call):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid (scope|kind)"):
        vsql.execute(call, (MODEL,))
    assert vsql.execute("SELECT count(*) FROM dna.dna_search_docs_384").fetchone()[0] == 0


#: Django's RST shapes (topics/db/sql.txt, queries.txt, ref/models/fields.txt): labels and link targets right
#: before a title, a title followed by directive lines only. Before, each was a passage with no prose
#: ("__ https://…\n\n.. _executing-custom-sql:" under the previous section's path) and ranked first.
FULL = "Raw queries run the SQL you pass and map each row to a model instance. " * 11
MARKUP = ("Raw SQL\n=======\n\nPassing parameters\n------------------\n\n" + FULL
          + "\n\nDo not quote placeholders: see `SQL injection`__.\n\n" + FULL
          + "\n\n__ https://en.wikipedia.org/wiki/SQL_injection\n\n.. _executing-custom-sql:\n\n"
          + "Executing custom SQL directly\n=============================\n\n" + FULL
          + "\n\n.. _containment-and-key-lookups:\n\nContainment and key lookups\n---------------------------\n\n"
          + ".. fieldlookup:: jsonfield.contains\n\n" + FULL.replace("Raw queries", "Contains lookups")
          + "\n\nField types\n===========\n\n.. currentmodule:: django.db.models\n\n"
          + "``AutoField``\n-------------\n\n" + FULL.replace("Raw queries", "AutoField columns")
          + "\n\n.. _covering indexes: https://www.postgresql.org/docs/current/indexes-index-only-scans.html\n")


def test_rst_labels_targets_and_directive_lines_are_never_a_passage_alone():
    parts = PassageSplitter(None).split(MARKUP, "rst")
    titles = {h.title for h in rst_headings(MARKUP)}
    assert [p.ordinal for p in parts] == list(range(len(parts)))
    for p in parts:
        assert MARKUP[p.char_start:p.char_end] == p.text
        assert not rst_markup_only(p.text, titles), p                       # every passage holds prose
    # the target and label before a title go with that section, not the end of the one before
    custom = next(p for p in parts if "_executing-custom-sql:" in p.text)
    assert custom.heading == "Executing custom SQL directly"
    assert "Executing custom SQL directly" in custom.text and "Raw queries run" in custom.text
    assert not any("_executing-custom-sql" in p.text for p in parts if p.heading.startswith("Raw SQL"))
    contains = next(p for p in parts if "fieldlookup::" in p.text)
    assert contains.heading == "Executing custom SQL directly > Containment and key lookups"
    assert "Contains lookups" in contains.text
    auto = next(p for p in parts if "currentmodule::" in p.text)
    assert auto.heading == "Field types > ``AutoField``" and "AutoField columns" in auto.text
    assert "covering indexes" not in parts[-1].text or "AutoField columns" in parts[-1].text
    assert rst_markup_only(".. _x:\n\nT\n===\n\n.. currentmodule:: a.b\n__ http://x\n", {"T"})
    assert not rst_markup_only(".. note::\n\n    Some words.\n", set())
    assert [h.start for h in rst_section_starts("x\n\n.. _l:\n\nT\n===\n", rst_headings("x\n\n.. _l:\n\nT\n===\n"))] == [3]
    assert "RST markup-only windows folded" in splitter_fingerprint()      # so `dna index` re-splits


def test_rst_markup_too_long_to_join_stays_a_passage_of_its_own():
    # a window of directive lines alone (class signatures) that cannot join the next passage within
    # 232 tokens is kept as a passage of its own: its signatures stay searchable, no text is left out
    sigs = "\n".join(f".. class:: Trunc{i}(expression, output_field=None, tzinfo=None, **extra)" for i in range(40))
    prose = " ".join(f"word{i}" for i in range(190))
    text = f"Functions\n=========\n\n{sigs}\n\nDetails\n-------\n\n{prose}\n"
    parts = PassageSplitter(None).split(text, "rst")
    covered = "".join(p.text for p in parts)
    for i in (0, 20, 39):
        assert f"Trunc{i}(" in covered
