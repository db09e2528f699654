"""Issue 27 item 8, the rough edges of paging: over documents whose scores tie, dna.search's top k is the
prefix of its top 2k on every route of the dense lane. The lane's cut at its depth (max(4k, 100)) took
whichever of several equal cosines the graph or a bounded sort returned first, differently for each depth:
pages of k = 10 read as the last 10 of k = 10, 20, ... 50 gave 31 distinct names in 50 places. Plain SQL."""
from __future__ import annotations

import random

import pytest

MODEL = "dna-fake-hash-v1"
TEXT = "the same words in every document"
QUERY = "same words"


@pytest.fixture
def tied(sql):
    names = [f"doc-{i:03d}" for i in range(300)]
    random.Random(27).shuffle(names)                  # written out of name order
    for name in names:
        sql.execute("SELECT dna.index_document('tied', 'Doc', %s, %s, dna.fake_embed(%s), %s)",
                    (name, TEXT, TEXT, MODEL))
    return sql


def _names(sql, k, exact, offset=0):
    return [r[0] for r in sql.execute(
        "SELECT name FROM dna.search('tied', %s, dna.fake_embed(%s), %s, k => %s, \"offset\" => %s, exact => %s, "
        "diversity => 'off')",   # one text: duplicate collapse (0022) would answer it once
        (QUERY, QUERY, MODEL, k, offset, exact)).fetchall()]


def _dense_path(sql, exact):
    answer = sql.execute("SELECT explain -> 'answer' FROM dna.search('tied', %s, dna.fake_embed(%s), %s, k => 10, "
                         "exact => %s, explain => true) LIMIT 1", (QUERY, QUERY, MODEL, exact)).fetchone()[0]
    return answer["dense"]["path"]


def _check_pages_compose(sql, exact):
    every = _names(sql, 300, exact)
    assert sorted(every) == sorted(f"doc-{i:03d}" for i in range(300))
    assert every == sorted(every)                     # equal scores: by key
    for k in (1, 5, 10, 20, 25, 30, 50, 100, 150):
        assert _names(sql, k, exact) == every[:k], k  # top k is a prefix of top 2k (and of every deeper answer)
    by_k = [n for page in range(1, 6) for n in _names(sql, 10 * page, exact)[-10:]]
    assert by_k == every[:50]                         # 50 distinct names in 50 places
    by_offset = [n for page in range(5) for n in _names(sql, 10, exact, offset=10 * page)]
    assert by_offset == every[:50]


@pytest.mark.parametrize("exact", [None, True, False])
def test_pages_of_any_k_compose_over_tied_documents(tied, exact):
    """exact => NULL (the rule: an exact scan here) and true cut by key; exact => false leaves the path to the
    planner (here a sort of the scope's rows, whose bounded top-N kept arbitrary ties)."""
    _check_pages_compose(tied, exact)


def test_pages_compose_when_the_graph_answers(tied):
    """The same over the HNSW graph (sorts and bitmap scans off for this session, so the planner takes it):
    every tie of the cut is read, and the depth is taken by key."""
    tied.execute("SET enable_sort = off")
    tied.execute("SET enable_bitmapscan = off")
    assert _dense_path(tied, False) == "hnsw"
    _check_pages_compose(tied, False)


# The passage splitter on a long line ---------------------------------------------------------------

def _one_line(n_words: int) -> str:
    """~10 characters a word, 30,000 distinct words, a sentence every 17 words, no line break."""
    words = [f"w{i:05d}{'abcdefghij'[: 1 + i % 6]}" for i in range(30_000)]
    return " ".join(w + ("." if i % 17 == 16 else "") for i, w in enumerate((words * 4)[:n_words]))


class _Recording:
    """The splitter in front of the real one, keeping the longest line of each text it was handed."""

    def __init__(self, inner):
        self.inner, self.lines = inner, []

    def chunk_indices(self, text):
        self.lines.append(max(len(line) for line in text.split("\n")))
        return self.inner.chunk_indices(text)


@pytest.mark.parametrize("fmt", ["text", "markdown", "rst"])
def test_a_long_line_reaches_the_splitter_in_pieces(fmt):
    """A ~950 kB document on one line (30,000 distinct words) took ~54 s in Client.index, half of it in the
    splitter, whose work on one line grows with its square: the line is cut (after a sentence end) into
    pieces of at most LONG_LINE_CHARS before the splitter sees it, and the passages still tile the text."""
    from pydna.passages import LONG_LINE_CHARS, PassageSplitter

    text = _one_line(90_000)
    splitter = PassageSplitter()
    splitter._text = _Recording(splitter._text)
    splitter._markdown = _Recording(splitter._markdown)
    passages = splitter.split(text, fmt)
    handed = splitter._text.lines + splitter._markdown.lines
    assert len(handed) > 1 and max(handed) <= LONG_LINE_CHARS, (len(handed), max(handed))
    assert all(text[p.char_start:p.char_end] == p.text for p in passages)
    assert [p.ordinal for p in passages] == list(range(len(passages)))
    assert all(a.char_start < b.char_start for a, b in zip(passages, passages[1:]))
    covered = sum(len(p.text.split()) for p in passages)
    assert covered >= 90_000                            # every word in a passage (overlaps count twice)


def test_long_line_cuts_fall_after_sentences_then_spaces():
    from pydna.passages import long_line_cuts

    text = _one_line(10_000)
    cuts = long_line_cuts(text, 4096)
    bounds = [0, *cuts, len(text)]
    assert all(0 < b - a <= 4096 for a, b in zip(bounds, bounds[1:]))
    assert all(text[c - 2:c] == ". " for c in cuts)   # after a sentence end and its space
    no_stop = text.replace(".", "")
    assert all(no_stop[c - 1] == " " for c in long_line_cuts(no_stop, 4096))
    assert long_line_cuts("x" * 10_000, 4096) == [4096, 8192]
    short_lines = "\n".join([text[:4000]] * 20)         # no line over the limit: no cut
    assert long_line_cuts(short_lines, 4096) == []


def test_text_without_a_long_line_splits_as_before():
    """No cut, so the splitter's own answer: the same spans as a direct chunk_indices call."""
    from pydna.passages import PassageSplitter

    paragraphs = _one_line(40_000).replace(". ", ".\n\n")
    splitter = PassageSplitter()
    direct = [(off, off + len(ch)) for off, ch in splitter._text.chunk_indices(paragraphs) if ch.strip()]
    assert [(p.char_start, p.char_end) for p in splitter.split(paragraphs)] == splitter._merge_small(direct, paragraphs)


def test_heading_paths_are_heading_path_of_each_offset():
    from pydna.passages import heading_path, heading_paths, markdown_headings

    md = "".join(f"{'#' * (1 + i % 3)} H{i}\n\n{'body words. ' * 30}\n\n" for i in range(40))
    heads = markdown_headings(md)
    offsets = list(range(0, len(md), 97))
    assert heading_paths(heads, offsets) == [heading_path(heads, o) for o in offsets]
