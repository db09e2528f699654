"""The inputs of ``dna index``: text files and their format (Markdown, reStructuredText, plain text: by
suffix, then by content), titles and snippets, JSONL records, and the walk of a directory with its
``--include`` / ``--exclude`` globs. Reads and checks; writes nothing.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from pydna.cli_common import CliError

if TYPE_CHECKING:
    from pydna.client import Record

#: Suffixes picked up when walking a directory (Markdown, reStructuredText, plain text).
TEXT_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd", ".mdx", ".rst", ".rest", ".txt")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd", ".mdx")
RST_SUFFIXES = (".rst", ".rest")
#: ``--format``: ``auto`` reads a file's suffix, then (``.txt``, none) its content (``sniff_format``).
FORMATS = ("auto", "markdown", "rst", "text")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
#: The server's per-document limit (dna.index_document); checked up front so bad input writes nothing.
MAX_DOCUMENT_BYTES = 1_000_000


_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```+|~~~+)")


def _front_matter_end(lines: list[str]) -> int:
    """Index of the first line after YAML front matter (0 when there is none)."""
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return i + 1
    return 0


def _find_heading(lines: list[str], start: int) -> tuple[str, int, int] | None:
    """(title, first line, last line) of the first heading from ``start``, outside fenced code."""
    fence: str | None = None
    previous_blank = True
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)[0]
            fence = None if fence == marker else (fence or marker)
            previous_blank = False
            continue
        if fence:
            continue
        m = _ATX.match(line)
        if m and m.group(1).strip():
            return m.group(1).strip(), i, i
        if (line.strip() and previous_blank and i + 1 < len(lines) and _SETEXT.match(lines[i + 1])
                and not line.lstrip().startswith(("-", "*", "+", ">", "|"))):
            return line.strip(), i, i + 1
        previous_blank = not line.strip()
    return None


def markdown_title(text: str) -> str | None:
    """The first heading of a markdown text (ATX ``# x`` or setext ``x\\n===``), outside front
    matter and fenced code; None when there is none."""
    lines = text.splitlines()
    found = _find_heading(lines, _front_matter_end(lines))
    return found[0] if found else None


def markdown_snippet(text: str, length: int = 240) -> str | None:
    """A display snippet of a markdown text: without front matter and the title heading, spaces
    collapsed, at most ``length`` characters; None when nothing is left."""
    lines = text.splitlines()
    start = _front_matter_end(lines)
    found = _find_heading(lines, start)
    if found:
        lines = lines[:found[1]] + lines[found[2] + 1:]
    rest = " ".join(" ".join(lines[start:]).split())
    return rest[:length] or None


class BadFile(Exception):
    """A file that is not text pydna can index (undecodable as UTF-8, NUL bytes, unreadable):
    skipped with a warning naming it, counted in the summary."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def _read_text(path: Path) -> str:
    """The text of ``path`` (UTF-8, a BOM dropped); ``BadFile`` when it is not UTF-8, holds a NUL
    byte (a binary file, and PostgreSQL text cannot hold NUL) or cannot be read."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadFile(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise BadFile(path, f"cannot read: {exc.strerror or exc}") from exc
    nul = text.find("\x00")
    if nul >= 0:
        raise BadFile(path, f"holds a NUL byte (character {nul}): binary, or not plain text")
    return text


def sniff_text(path: Path, probe: int = 8192) -> bool:
    """Whether a file without a known suffix looks like text: its first ``probe`` bytes decode as
    UTF-8 (a character cut at the end of the probe allowed) and hold no NUL byte."""
    try:
        with path.open("rb") as fh:
            head = fh.read(probe)
    except OSError:
        return False
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return len(head) == probe and exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def file_format(path: Path, text: str, fmt: str = "auto") -> str:
    """How a file is cut and titled: ``fmt`` when it is not ``auto``; else by suffix (Markdown, RST),
    else by content (``pydna.passages.sniff_format``: a Sphinx ``.txt`` is RST)."""
    from pydna.passages import sniff_format

    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    return sniff_format(text)


_RST_ADORNMENT_LINE = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")


def rst_snippet(text: str, length: int = 240) -> str | None:
    """A display snippet of an RST text: without its first title and adornment lines, directive
    lines (``.. code-block:: python``), labels and comments, roles as their text; at most ``length``."""
    from pydna.passages import plain_markup, rst_headings

    heads = rst_headings(text[:20000])
    lines = text[heads[0].start:].splitlines()[1:] if heads else text.splitlines()
    kept = [line for line in lines if not _RST_ADORNMENT_LINE.match(line.strip() or "x")
            and not line.lstrip().startswith("..")]
    rest = " ".join(plain_markup(" ".join(kept)).split())
    return rest[:length] or None


def _file_record(path: Path, name: str, kind: str, tenant: str, skip_empty: bool = False,
                 fmt: str = "auto") -> "Record | None":
    """The record of one text file; an empty file is an error when named, None (skipped) when
    found by walking a directory (``skip_empty``). ``fmt``: see :func:`file_format`; the title is the
    document's first heading (Markdown, RST), else the file's stem."""
    from pydna.client import Record
    from pydna.passages import plain_markup, rst_title

    text = _read_text(path)
    if not text.strip():
        if skip_empty:
            return None
        raise CliError(f"{path}: empty document (no text to index)")
    title = snippet = None
    cut = file_format(path, text, fmt)
    if cut == "markdown":
        title, snippet = markdown_title(text), markdown_snippet(text)
    elif cut == "rst":
        title, snippet = rst_title(text), rst_snippet(text)
        title = plain_markup(title) if title else title
    return Record(kind=kind, name=name, body=text, title=title or path.stem, tenant=tenant, snippet=snippet,
                  format=cut)


def _jsonl_records(path: Path, kind: str, tenant: str, fmt: str = "auto") -> Iterator[tuple["Record", str]]:
    from pydna.client import Record, record_metadata

    text = _read_text(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        where = f"{path}, line {lineno}"
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(item, dict):
            raise CliError(f"{where}: must be a JSON object, got {type(item).__name__}")
        name = item.get("name", item.get("_id"))
        if isinstance(name, bool) or not isinstance(name, (str, int)) or not str(name).strip():
            raise CliError(f"{where}: no `name` (or `_id`) string")
        fields: dict[str, str | None] = {}
        for key in ("kind", "title", "tenant", "snippet", "format"):
            value = item.get(key)
            if value is not None and not isinstance(value, str):
                raise CliError(f"{where}: `{key}` must be a string, got {type(value).__name__}")
            fields[key] = value
        if fields["format"] is not None and fields["format"] not in ("markdown", "rst", "text"):
            raise CliError(f"{where}: `format` must be markdown, rst or text, got {fields['format']!r}")
        body = item.get("body", item.get("text"))
        if body is not None and not isinstance(body, str):
            raise CliError(f"{where}: `body` (or `text`) must be a string, got {type(body).__name__}")
        for key, value in (("body", body), ("title", fields["title"]), ("name", str(name))):
            if value and "\x00" in value:
                raise CliError(f"{where}: `{key}` holds a NUL character (\\u0000), which PostgreSQL text cannot")
        if not (body or "").strip() and not (fields["title"] or "").strip():
            raise CliError(f"{where}: empty document (no `body`/`text` and no `title`)")
        try:
            metadata = record_metadata(item)        # every other field is kept as metadata
        except ValueError as exc:
            raise CliError(f"{where}: {exc}") from None
        yield Record(kind=fields["kind"] or kind, name=str(name), body=body or "", title=fields["title"],
                     tenant=fields["tenant"] if fields["tenant"] is not None else tenant,
                     snippet=fields["snippet"], format=fields["format"] or (None if fmt == "auto" else fmt),
                     metadata=metadata), where


def glob_regex(pattern: str) -> "re.Pattern[str]":
    """``pattern`` as a regular expression over a ``/``-separated relative path, as shells and
    ``.gitignore`` read globs: ``*`` and ``?`` stay within one folder (``[^/]*``, ``[^/]``), ``**`` crosses
    folders (``a/**/b`` also matches ``a/b``, ``**/x`` also ``x``, ``a/**`` everything under ``a``),
    ``[abc]`` / ``[!abc]`` are character classes; everything else is literal. (fnmatch's ``*`` crosses
    ``/``; ``PurePath.full_match`` reads globs so only from Python 3.13.)"""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            j = i + 2
            at_start = i == 0 or pattern[i - 1] == "/"
            if at_start and j < n and pattern[j] == "/":
                out.append("(?:[^/]*(?:/[^/]*)*/)?")     # **/ : any folders, or none
                i = j + 1
            else:
                out.append(".*")
                i = j
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:                                   # no closing bracket: a literal [
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1:j]
            neg = body[:1] in ("!", "^")
            body = body[1:] if neg else body
            out.append("[" + ("^/" if neg else "") + body.replace("\\", "\\\\") + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.S)


def glob_match(rel: str, pattern: str) -> bool:
    """Whether a path relative to the folder given (``ref/models/querysets.txt``) matches ``pattern``
    (:func:`glob_regex`: ``*`` stops at ``/``, ``**`` crosses it): as a whole (``ref/*`` = the files
    directly in ``ref``, ``ref/**`` = all under it, ``**/*.txt``), or by its file name alone when the
    pattern has no ``/`` (``*.rst``, ``README``)."""
    pattern = pattern.removeprefix("./")
    if "/" not in pattern:
        rx = glob_regex(pattern)
        return rx.match(rel.rsplit("/", 1)[-1]) is not None or rx.match(rel) is not None
    return glob_regex(pattern).match(rel) is not None


def include_hint(directory: Path, include: list[str] | None) -> str:
    """Why ``--include`` globs that matched nothing under ``directory`` may be meant otherwise, as
    ``"; …"`` text for an error (``""`` when there is nothing to say): a glob naming a folder
    (``topics/db``) matches files, not folders, so ``'topics/db/**'`` is suggested; a glob whose folder
    part names no folder (``topic/db/**``) gets the nearest folder's (``topics/db/**``, difflib)."""
    import difflib

    hints: list[str] = []
    folders: list[str] | None = None
    for g in include or []:
        bare = g.removeprefix("./").rstrip("/")
        parts = bare.split("/")
        literal = []
        for part in parts:
            if any(c in part for c in "*?["):
                break
            literal.append(part)
        rest = parts[len(literal):]
        prefix = "/".join(literal)
        if not prefix:
            continue
        if not rest and (directory / prefix).is_dir():
            hints.append(f"'{g}' names a folder: --include '{prefix}/**' takes the files under it")
            continue
        if rest and (directory / prefix).is_dir():
            continue
        if len(literal) == 1 and not rest and "/" not in g:
            continue                                     # a file name (README) matched anywhere: no folder meant
        if folders is None:
            folders = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                             if p.is_dir() and not any(x.startswith(".") for x in p.relative_to(directory).parts))
        near = difflib.get_close_matches(prefix, folders, n=1, cutoff=0.6)
        if near:
            hints.append(f"no folder '{prefix}' here: did you mean --include '{'/'.join([near[0], *(rest or ['**'])])}'?")
    return "".join("; " + h for h in hints)


def _walk(directory: Path, include: list[str] | None = None,
          exclude: list[str] | None = None) -> tuple[list[Path], list[Path], list[Path]]:
    """The files under ``directory``, recursively, sorted, in three lists: the text files indexed
    (Markdown, RST and ``*.txt`` files, :data:`TEXT_SUFFIXES`, and files without a suffix that look
    like text, :func:`sniff_text`: ``README``, ``LICENSE``); the JSONL files (read as records only when
    named: a dataset folder holds queries and judgements beside its corpus); every other file (another
    suffix, or no suffix and not text). Hidden files and folders are left out of all three.
    ``include`` (globs, :func:`glob_match`): only matching files, a text file of any suffix among
    them; ``exclude``: matching files are left out (exclude wins)."""
    found, jsonl, other = [], [], []
    for p in directory.rglob("*"):
        rel = p.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if not p.is_file():
            continue
        posix = rel.as_posix()
        if exclude and any(glob_match(posix, g) for g in exclude):
            continue
        if include and not any(glob_match(posix, g) for g in include):
            continue
        suffix = p.suffix.lower()
        if suffix in TEXT_SUFFIXES or ((not p.suffix or include) and suffix not in JSONL_SUFFIXES and sniff_text(p)):
            found.append(p)
        elif suffix in JSONL_SUFFIXES:
            jsonl.append(p)
        else:
            other.append(p)

    def order(paths: list[Path]) -> list[Path]:
        return sorted(paths, key=lambda p: p.relative_to(directory).as_posix())
    return order(found), order(jsonl), order(other)
