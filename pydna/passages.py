"""Split long text into passages: the unit both search lanes rank.

A passage is a window of a document sized in the embedder's tokens, so the dense lane sees all of a
long file (the embedder reads at most 256 tokens of each text) and a hit can point at the part that
answers. Splitting is done by ``semantic-text-splitter`` (a maintained Rust splitter): Markdown at
its semantic levels (headings, then blocks, paragraphs, sentences, words), plain text at paragraphs,
then sentences, with an overlap between neighbouring windows so a sentence cut at one edge is whole
in the next. reStructuredText is first cut at its section titles (a title line underlined — and
optionally overlined — by one repeated punctuation character), then each section as plain text.

Each passage carries its span in the document's text (``char_start``/``char_end``, characters,
end exclusive: ``text[char_start:char_end] == passage.text``) and its heading path
(``"Install > From source"``): the titles of the sections that enclose its start. A window that
holds only titles (a section's title directly followed by a subsection's) is not a passage: its titles
are in the next passage's heading path (:func:`fold_heading_only`), so its span is left uncovered.

The SQL side stores what this module produces (``dna.index_documents(..., passages, headings,
char_starts, char_ends)``); callers from other languages split with any splitter and send the same
arrays.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

#: Passage size in embedder tokens: windows of at most MAX_TOKENS (the title is embedded with each
#: passage and MiniLM reads 256 tokens, [CLS] and [SEP] included), at least MIN_TOKENS where the
#: text allows it.
MAX_TOKENS = 200
MIN_TOKENS = 100
#: Tokens shared by neighbouring plain-text windows.
OVERLAP_TOKENS = 32
#: Without the embedder's tokenizer, sizes are counted in characters at this many per token
#: (English prose under WordPiece runs at about 4-5).
CHARS_PER_TOKEN = 4


#: A line (a run without a line break) longer than this many characters is cut before the splitter
#: sees it, after its last sentence end (else whitespace) past half this length: the splitter's work
#: on one line grows with the square of its length (a 1 MB text on one line took ~10 s in characters and
#: more with a tokenizer, 4x per doubling); cut, it is linear. Windows do not overlap across such a cut.
#: A text without such a line is split exactly as before.
LONG_LINE_CHARS = 16_384


def splitter_fingerprint() -> str:
    """What decides how a text is cut, besides the text and the embedder's tokenizer (which the
    model_id names): this module's sizes and the splitting library's version. ``dna index`` puts it
    in each input's digest, so that another splitter re-splits what it would cut otherwise."""
    from importlib.metadata import version

    return (f"semantic-text-splitter {version('semantic-text-splitter')}; tokens {MIN_TOKENS}-{MAX_TOKENS}/"
            f"{OVERLAP_TOKENS}; long lines {LONG_LINE_CHARS}; title-only windows folded; "
            f"RST markup-only windows folded, targets with their section")


MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
RST_SUFFIXES = frozenset({".rst", ".rest"})


@dataclass(frozen=True)
class Passage:
    """One passage: ``ordinal`` (0-based), ``text`` (== the document's ``text[char_start:char_end]``),
    ``heading`` (heading path, ``None`` outside any section)."""

    ordinal: int
    text: str
    char_start: int
    char_end: int
    heading: str | None


_RST_DIRECTIVE = re.compile(r"^\.\. [A-Za-z][\w:-]*::", re.M)
_RST_ROLE = re.compile(r":[a-z][\w:+-]*:`[^`]+`")
_RST_LITERAL_INTRO = re.compile(r"\S::[ \t]*$", re.M)
_MD_FENCE = re.compile(r"^ {0,3}```", re.M)          # not ~~~: an RST underline too
_MD_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.M)
_MD_LINK = re.compile(r"\]\([^)\s]+\)")


def sniff_format(text: str, probe: int = 20000) -> str:
    """``"rst"``, ``"markdown"`` or ``"text"`` from what the first ``probe`` characters hold: RST's
    directives (``.. code-block::``, 2 each), roles (``:ref:`x```) and ``::`` literal intros against
    Markdown's ATX headings and code fences (2 each) and links; the side with at least 2 and more wins;
    with neither, underlined section titles alone read as RST (Markdown's setext titles cut the same
    way), else plain text. For files whose suffix says nothing (``.txt``, none): Sphinx doc sets are
    ``.txt`` files of RST."""
    head = text[:probe]
    adorned = rst_headings(head)
    rst = 2 * len(_RST_DIRECTIVE.findall(head)) + len(_RST_ROLE.findall(head)) + len(_RST_LITERAL_INTRO.findall(head))
    markdown = 2 * len(_MD_ATX.findall(head)) + 2 * len(_MD_FENCE.findall(head)) + len(_MD_LINK.findall(head))
    if rst >= 2 and rst > markdown:
        return "rst"
    if markdown >= 2 and markdown > rst:
        return "markdown"
    if adorned and not markdown:
        return "rst"                                     # titles underlined, nothing else: RST reads them
    return "text"


_ROLE = re.compile(r":[a-z][\w:+-]*:`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`")
_INLINE = re.compile(r"``([^`]+)``")
_DIRECTIVE_MARK = re.compile(r"(?:^|(?<=\s))\.\. [A-Za-z][\w:-]*::[^\n]*?(?=\s{2,}|\n|$)")
_ADORNMENT_RUN = re.compile(r"(?:^|(?<=\s))([=\-~^*#+`'\"_.:])\1{3,}(?=\s|$)")


def plain_markup(text: str) -> str:
    """RST inline markup as its text: ``:ref:`Title <label>``` → Title, ``:func:`f``` → f, ````x```` →
    x; section adornments (``=====``) and directive marks (``.. code-block:: python``) left out. For
    display: a snippet or highlight reads as prose."""
    text = _ROLE.sub(lambda m: (m.group(1) or m.group(2) or "").lstrip("~!"), text)
    return _ADORNMENT_RUN.sub("", _DIRECTIVE_MARK.sub("", _INLINE.sub(r"\1", text)))


def rst_title(text: str) -> str | None:
    """The first section title of a reStructuredText text; None when there is none."""
    heads = rst_headings(text[:20000])
    return heads[0].title if heads else None


def text_format(name: str) -> str:
    """``"markdown"``, ``"rst"`` or ``"text"``, from a file name's suffix."""
    suffix = PurePath(name).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    return "text"


class PassageSplitter:
    """Splits texts into :class:`Passage` lists.

    ``tokenizer``: a ``tokenizers.Tokenizer`` (the embedder's) to size windows in its tokens; ``None``
    sizes them in characters (``CHARS_PER_TOKEN`` per token). ``max_tokens``/``min_tokens``/
    ``overlap_tokens``: see the module constants. Raises ``ValueError`` for sizes that are not
    ``0 < min_tokens <= max_tokens`` and ``0 <= overlap_tokens < max_tokens``."""

    def __init__(self, tokenizer: Any | None = None, *, max_tokens: int = MAX_TOKENS,
                 min_tokens: int = MIN_TOKENS, overlap_tokens: int = OVERLAP_TOKENS):
        if not (0 < min_tokens <= max_tokens) or not (0 <= overlap_tokens < max_tokens):
            raise ValueError(f"passage sizes need 0 < min_tokens <= max_tokens and 0 <= overlap_tokens < "
                             f"max_tokens, got min {min_tokens}, max {max_tokens}, overlap {overlap_tokens}")
        from semantic_text_splitter import MarkdownSplitter, TextSplitter

        if tokenizer is not None:
            # A copy without the embedder's truncation and padding: sizes count every token.
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_str(tokenizer.to_str())
            tokenizer.no_truncation()
            tokenizer.no_padding()
        self.tokenizer = tokenizer
        if tokenizer is not None:
            capacity, overlap = (min_tokens, max_tokens), overlap_tokens
            self._text = TextSplitter.from_huggingface_tokenizer(tokenizer, capacity, overlap=overlap)
            self._markdown = MarkdownSplitter.from_huggingface_tokenizer(tokenizer, capacity)
            self._size = lambda t: len(tokenizer.encode(t, add_special_tokens=False).ids)
        else:
            capacity = (min_tokens * CHARS_PER_TOKEN, max_tokens * CHARS_PER_TOKEN)
            overlap = overlap_tokens * CHARS_PER_TOKEN
            self._text = TextSplitter(capacity, overlap=overlap)
            self._markdown = MarkdownSplitter(capacity)
            self._size = lambda t: -(-len(t) // CHARS_PER_TOKEN)
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens

    def fits(self, text: str) -> bool:
        """Whether ``text`` is one passage (at most ``max_tokens``); bounded work for long text."""
        # A text longer than max_tokens * 16 characters never fits (no token is < 1/16 character).
        return len(text) <= self.max_tokens * 16 and self._size(text) <= self.max_tokens

    def split(self, text: str, fmt: str = "text") -> list[Passage]:
        """The passages of ``text`` (``fmt``: ``"markdown"``, ``"rst"`` or ``"text"``), in order;
        ``[]`` for blank text. A text that fits one window is one passage spanning all of it."""
        if fmt not in ("markdown", "rst", "text"):
            raise ValueError(f"unknown text format {fmt!r}: use 'markdown', 'rst' or 'text'")
        if not text.strip():
            return []
        if self.fits(text):
            return [Passage(0, text, 0, len(text), None)]
        if fmt == "markdown":
            heads = markdown_headings(text)
            chunks = _chunk_indices(self._markdown, text)
        elif fmt == "rst":
            heads = rst_section_starts(text, rst_headings(text))
            chunks = [(start + off, ch) for start, body in _sections(text, heads)
                      for off, ch in _chunk_indices(self._text, body)]
        else:
            heads = []
            chunks = _chunk_indices(self._text, text)
        spans = self._merge_small([(off, off + len(ch)) for off, ch in chunks if ch.strip()], text)
        spans = fold_heading_only(text, heads, spans)
        at = [a for a, _ in spans]
        if fmt == "rst":
            spans, at = self._fold_markup_only(text, heads, spans)
        paths = heading_paths(heads, at)
        return [Passage(i, text[a:b], a, b, path) for i, ((a, b), path) in enumerate(zip(spans, paths))]

    def _fold_markup_only(self, text: str, heads: list[Heading], spans: list[tuple[int, int]]
                          ) -> tuple[list[tuple[int, int]], list[int]]:
        """RST ``spans`` without a window that holds no prose (:func:`rst_markup_only`: labels, link
        targets, directive lines, titles, adornments; 19 of Django 5.1's 2,000 passages in
        topics/db + ref/models before): it is folded into the next window, which then starts where it
        started when both fit ``max_tokens + OVERLAP_TOKENS`` (232 tokens: the title still fits the
        embedder's 256; so its directive arguments such as
        ``.. class:: Value(value)`` stay searchable), else it stays a passage of its own. Returns the spans
        and the offset whose heading path each passage takes: its first line of prose, so the path
        names the section whose prose the passage opens on, folded titles included. A last such window joins
        the one before under the same bound, else stays alone; no text is left out."""
        titles = {h.title for h in heads}
        out: list[tuple[int, int]] = []
        at: list[int] = []
        pending: int | None = None                   # start of the markup-only windows waiting
        for i, (a, b) in enumerate(spans):
            if rst_markup_only(text[a:b], titles):
                if i + 1 < len(spans):
                    pending = a if pending is None else pending
                    continue
                if out and pending is None:          # the last window: into the one before, or alone
                    pa, pb = out[-1]
                    if self._size(text[pa:b]) <= self.max_tokens + OVERLAP_TOKENS:
                        out[-1] = (pa, b)
                        break
            start = a
            if pending is not None:
                if self._size(text[pending:b]) <= self.max_tokens + OVERLAP_TOKENS:
                    start = pending
                else:                                # too long to join: a passage of its own (nothing is lost)
                    out.append((pending, a))
                    at.append(pending)
            pending = None
            out.append((start, b))
            at.append(a + (rst_first_prose(text[a:b], titles) or 0))
        return out, at

    def _merge_small(self, spans: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
        """Joins a window shorter than a quarter of ``min_tokens`` (a heading cut off from its
        section, a one-line paragraph) to the next one when both fit one window together."""
        out: list[tuple[int, int]] = []
        for a, b in spans:
            if out:
                pa, pb = out[-1]
                if pb <= a and self._size(text[pa:pb]) * 4 < self.min_tokens and self.fits(text[pa:b]):
                    out[-1] = (pa, b)
                    continue
            out.append((a, b))
        return out


_SETEXT_UNDERLINE = re.compile(r" {0,3}(=+|-+)[ \t]*")
_ATX_MARKS = re.compile(r"^ {0,3}#{1,6}[ \t]+|[ \t]+#+[ \t]*$")


def headings_only(text: str, titles: set[str]) -> bool:
    """Whether ``text`` holds nothing but section titles: each non-blank line one of ``titles`` (an ATX
    heading's ``#`` marks aside) or an adornment/underline line (``=====``, ``-----``)."""
    for line in text.splitlines():
        bare = line.strip()
        if not bare or _RST_ADORNMENT.match(bare) or _SETEXT_UNDERLINE.fullmatch(line):
            continue
        if _ATX_MARKS.sub("", line).strip() not in titles:
            return False
    return True


def fold_heading_only(text: str, heads: list[Heading], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` without the windows that hold only section titles (a section's title directly followed
    by its first subsection's, when the subsection's first window is too full to take it: 46 of Django's
    1,322 RST passages): such a window is not a passage of its own, its titles are in the next passage's
    heading path (``Cache > Setting up the cache``), so with the heading context they do not count twice
    against the passage that holds the text. Kept when it is the last window, or when the next one's
    path does not hold its titles (an empty section followed by a sibling). Linear."""
    if len(spans) < 2 or not heads:
        return spans
    starts = [h.start for h in heads]
    ends = [a for a, _ in spans[1:]]
    next_paths = heading_paths(heads, ends)
    out: list[tuple[int, int]] = []

    for i, (a, b) in enumerate(spans):
        if i + 1 < len(spans):
            lo, hi = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
            inside = heads[lo:hi]
            if inside and headings_only(text[a:b], {h.title for h in inside}):
                path = (next_paths[i] or "").split(" > ")
                if all(h.title in path for h in inside):
                    continue
        out.append((a, b))
    return out


_RST_TARGET = re.compile(r"^[ \t]*(?:\.\. _[^\n]*:(?:[ \t].*)?|\.\. __:.*|__ \S.*)$")
_RST_MARKUP_LINE = re.compile(r"^[ \t]*(?:\.\.(?:[ \t]+\S.*)?|__ \S.*)$")


def rst_markup_only(text: str, titles: set[str]) -> bool:
    """Whether an RST ``text`` holds no prose: each non-blank line a label or link target
    (``.. _name:``, ``.. _name: URL``, ``__ URL``), a directive line without its body
    (``.. currentmodule:: django.db.models``, ``.. fieldlookup:: contains``), a comment, an
    adornment line or one of ``titles``."""
    return rst_first_prose(text, titles) is None


def rst_first_prose(text: str, titles: set[str]) -> int | None:
    """Offset in ``text`` of its first line of prose (see :func:`rst_markup_only`); None when none."""
    pos = 0
    for line in text.splitlines(keepends=True):
        bare = line.strip()
        if not (not bare or bare in titles or _RST_ADORNMENT.match(bare)
                or _RST_MARKUP_LINE.match(line.rstrip("\r\n"))):
            return pos
        pos += len(line)
    return None


def rst_section_starts(text: str, heads: list[Heading]) -> list[Heading]:
    """``heads`` with each start moved back over the labels and link targets (``.. _name:``,
    ``__ URL``, blank lines between) that stand right before its title: they belong to that section,
    not to the end of the one before. Linear."""
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    out: list[Heading] = []
    floor = 0                                        # the first line after the previous title
    for h in heads:
        i = bisect.bisect_right(line_starts, h.start) - 1
        start, j = h.start, i - 1
        while j >= floor:
            line = text[line_starts[j]:line_starts[j + 1]].rstrip("\r\n")
            if _RST_TARGET.match(line):
                start = line_starts[j]
            elif line.strip():
                break
            j -= 1
        out.append(Heading(start, h.level, h.title))
        floor = bisect.bisect_right(line_starts, h.start) + 1
    return out


_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f][\"')\]\u201d\u2019]*\s+")


def long_line_cuts(text: str, limit: int = LONG_LINE_CHARS) -> list[int]:
    """Offsets, ascending, that cut every line of ``text`` longer than ``limit`` characters into pieces
    of at most ``limit``: each after the last sentence end (``.``, ``!``, ``?`` and the CJK ones, then
    closing quotes or brackets and whitespace) in the second half of the piece, else after its last
    space or tab, else at ``limit``. ``[]`` when no line is that long. Linear in ``len(text)``."""
    cuts: list[int] = []
    pos, n = 0, len(text)
    while pos < n:
        end = text.find("\n", pos)
        end = n if end < 0 else end
        start = pos
        while end - start > limit:
            lo, hi = start + limit // 2, start + limit
            window = text[lo:hi]
            last = None
            for last in _SENTENCE_END.finditer(window):
                pass
            if last is not None:
                cut = lo + last.end()
            else:
                space = max(window.rfind(" "), window.rfind("\t"))
                cut = lo + space + 1 if space >= 0 else hi
            cuts.append(cut)
            start = cut
        pos = end + 1
    return cuts


def _chunk_indices(splitter: Any, text: str) -> list[tuple[int, str]]:
    """``splitter.chunk_indices(text)`` (character offsets), run on the pieces of ``text`` between
    :func:`long_line_cuts`, offsets shifted into ``text``: the same answer when no line is longer than
    ``LONG_LINE_CHARS``, and linear work when one is."""
    cuts = long_line_cuts(text)
    if not cuts:
        return list(splitter.chunk_indices(text))
    bounds = [0, *cuts, len(text)]
    return [(a + off, ch) for a, b in zip(bounds, bounds[1:]) for off, ch in splitter.chunk_indices(text[a:b])]


@dataclass(frozen=True)
class Heading:
    """A section title at character ``start`` of its document, nesting ``level`` (1 = outermost)."""

    start: int
    level: int
    title: str


_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_headings(text: str) -> list[Heading]:
    """ATX headings (``#`` … ``######``) and setext headings (a line underlined by ``===`` or
    ``---``) outside fenced code blocks, in document order."""
    heads: list[Heading] = []
    fence: str | None = None
    pos = 0
    prev: tuple[int, str] | None = None        # (start, line) of the previous non-blank line
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        m = _FENCE.match(bare)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
        elif m:
            fence = m.group(1)
        elif (h := _ATX.match(bare)) is not None:
            heads.append(Heading(pos, len(h.group(1)), h.group(2).strip()))
        elif prev is not None and re.fullmatch(r" {0,3}(=+|-+)[ \t]*", bare) and prev[1].strip() \
                and not _ATX.match(prev[1]):
            heads.append(Heading(prev[0], 1 if bare.strip()[0] == "=" else 2, prev[1].strip()))
        prev = (pos, bare) if bare.strip() else None
        pos += len(line)
    return heads


_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")


def rst_headings(text: str) -> list[Heading]:
    """Section titles of reStructuredText: a title line underlined (and optionally overlined) by one
    repeated punctuation character at least as long as the title; levels in order of first use of
    each (character, overlined) style, as docutils assigns them."""
    lines = text.splitlines(keepends=True)
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line)
    bare = [line.rstrip("\r\n") for line in lines]
    styles: list[tuple[str, bool]] = []
    heads: list[Heading] = []
    i = 0
    while i < len(bare) - 1:
        title, under = bare[i], bare[i + 1]
        over = i > 0 and _RST_ADORNMENT.match(bare[i - 1]) is not None
        if (title.strip() and not _RST_ADORNMENT.match(title) and _RST_ADORNMENT.match(under)
                and len(under.rstrip()) >= len(title.rstrip())):
            style = (under[0], over and bare[i - 1][0] == under[0])
            if style not in styles:
                styles.append(style)
            start = starts[i - 1] if style[1] else starts[i]
            heads.append(Heading(start, styles.index(style) + 1, title.strip()))
            i += 2
            continue
        i += 1
    return heads


def _sections(text: str, heads: list[Heading]) -> list[tuple[int, str]]:
    """``text`` cut at each heading's start: (offset, section text) pairs covering all of it."""
    cuts = sorted({0, *(h.start for h in heads)})
    return [(a, text[a:b]) for a, b in zip(cuts, cuts[1:] + [len(text)]) if text[a:b]]


def heading_paths(heads: list[Heading], offsets: list[int]) -> list[str | None]:
    """:func:`heading_path` of each of ``offsets`` (ascending), in one pass over ``heads``."""
    out: list[str | None] = []
    path: list[Heading] = []
    i = 0
    for offset in offsets:
        while i < len(heads) and heads[i].start <= offset:
            h = heads[i]
            while path and path[-1].level >= h.level:
                path.pop()
            path.append(h)
            i += 1
        out.append(" > ".join(h.title for h in path) or None)
    return out


def heading_path(heads: list[Heading], offset: int) -> str | None:
    """The titles enclosing ``offset`` (the last heading at or before it, and the nearest heading of
    each outer level before that), outermost first, joined by ``" > "``; ``None`` before any."""
    path: list[Heading] = []
    for h in heads:
        if h.start > offset:
            break
        while path and path[-1].level >= h.level:
            path.pop()
        path.append(h)
    return " > ".join(h.title for h in path) or None
