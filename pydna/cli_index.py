"""``dna index``: read markdown/text files, directories and JSONL files, check them, index them.

    dna index PATH... --scope S       # markdown/text files, directories, JSONL
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator, List, Optional

import typer
from rich.markup import escape
from rich.text import Text

from pydna.cli_common import (CliError, EmbedderName, EmbedderOpt, announce_embedder, describe_error, echo_json,
                              open_client, stderr, stdout)

if TYPE_CHECKING:
    from rich.progress import Progress

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


# ---------------------------------------------------------------------------------------------
# dna index
# ---------------------------------------------------------------------------------------------

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


def glob_match(rel: str, pattern: str) -> bool:
    """Whether a path relative to the folder given (``ref/models/querysets.txt``) matches ``pattern``:
    as a whole (``ref/*``, ``**/*.txt``; ``*`` crosses folders, as fnmatch does), or by its file name
    alone when the pattern has no ``/`` (``*.rst``, ``README``)."""
    from fnmatch import fnmatchcase

    pattern = pattern.removeprefix("./")
    if "/" not in pattern:
        return fnmatchcase(rel.rsplit("/", 1)[-1], pattern) or fnmatchcase(rel, pattern)
    return fnmatchcase(rel, pattern) or (pattern.startswith("**/") and fnmatchcase(rel, pattern[3:]))


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


def index_command(paths: list[Path], scope: str | None, kind: str = "Doc", tenant: str = "",
                  name_prefix: str = "") -> str:
    """The ``dna index`` command line that indexes ``paths`` with the same scope, kind, tenant and
    name prefix (shell-quoted), for a message to copy from."""
    words = ["dna", "index", *(str(p) for p in paths), "--scope", scope or "SCOPE"]
    if kind != "Doc":
        words += ["--kind", kind]
    if tenant:
        words += ["--tenant", tenant]
    if name_prefix:
        words += ["--name-prefix", name_prefix]
    return " ".join(shlex.quote(w) for w in words)


#: Files of other types named in a warning, at most (``--json`` lists them all).
OTHER_SHOWN = 5


@dataclass
class IndexInputs:
    """The checked inputs of one ``dna index``: ``count`` documents from ``sources`` (a text file:
    ``(path, name)``; a JSONL file: ``(path, None)``). Only their keys were kept by the check
    (``keys``: (kind, name, tenant, source) per document, source = the absolute path it came from);
    :meth:`records` reads them again, so a large load streams through ``Client.index`` one batch at
    a time instead of holding every text in memory. ``name_prefix`` is put before every name."""

    kind: str
    tenant: str
    name_prefix: str = ""
    fmt: str = "auto"
    sources: list[tuple[Path, str | None]] = field(default_factory=list)
    keys: list[tuple[str, str, str, str]] = field(default_factory=list)
    count: int = 0
    stats: dict[str, Any] = field(default_factory=lambda: {
        "files": 0, "jsonl_files": 0, "jsonl_records": 0, "chars": 0, "skipped_empty": [], "skipped_bad": [],
        "skipped_jsonl": [], "skipped_other": []})

    def records(self) -> Iterator["Record"]:
        """The records, in input order (a file emptied or spoiled since the check is skipped)."""
        for path, name in self.sources:
            try:
                if name is None:
                    for record, _ in _jsonl_records(path, self.kind, self.tenant, self.fmt):
                        yield _prefixed(record, self.name_prefix)
                else:
                    record = _file_record(path, self.name_prefix + name, self.kind, self.tenant, skip_empty=True,
                                          fmt=self.fmt)
                    if record is not None:
                        yield record
            except BadFile as exc:
                _warn_bad(exc)


def _prefixed(record: "Record", prefix: str) -> "Record":
    return dataclasses.replace(record, name=prefix + record.name) if prefix else record


def _warn_bad(exc: BadFile) -> None:
    stderr().print(Text(f"skipped {exc.path}: {exc.reason}", style="yellow"), soft_wrap=True)


def collect_records(paths: list[Path], kind: str, tenant: str, name_prefix: str = "",
                    scope: str | None = None, fmt: str = "auto", include: list[str] | None = None,
                    exclude: list[str] | None = None) -> IndexInputs:
    """Read and check every input before anything is written; returns the ``IndexInputs`` to
    stream (``.records()``, ``.count``, ``.stats``). A file that is not text (not UTF-8, a NUL
    byte, unreadable) is skipped with a warning naming it (``stats["skipped_bad"]``), an empty file
    found in a directory too (``stats["skipped_empty"]``). In a directory, a JSONL file is not read
    (its records are indexed when the file is named): a warning names it with the command that
    indexes it (``stats["skipped_jsonl"]``, ``scope`` goes in that command), unless it is named too;
    files of other types are named in one warning (``stats["skipped_other"]``). Raises ``CliError``
    for a missing path, an invalid JSONL line (with its line number), an empty named file, a
    document above the server's size limit, two inputs with the same (kind, name, tenant), or
    nothing left to index."""
    if fmt not in FORMATS:
        raise CliError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    inputs = IndexInputs(kind, tenant, name_prefix, fmt)
    stats = inputs.stats
    seen: dict[tuple[str, str, str], str] = {}
    named = {p.resolve() for p in paths if p.is_file()}

    def check(record: "Record", where: str, source: Path) -> None:
        size = len(record.body.encode("utf-8")) + len((record.title or "").encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES:
            raise CliError(f"{where}: document {record.name!r} is {size} bytes; the limit is "
                           f"{MAX_DOCUMENT_BYTES} bytes per document: split it")
        key = (record.kind, record.name, record.tenant)
        if key in seen:
            raise CliError(f"{where}: duplicate document {record.kind}/{record.name}"
                           f"{' tenant ' + record.tenant if record.tenant else ''} (also from {seen[key]}); "
                           f"--name-prefix keeps them apart")
        seen[key] = where
        inputs.keys.append((*key, str(source.resolve())))
        inputs.count += 1
        stats["chars"] += len(record.body) + len(record.title or "")

    def bad(exc: BadFile) -> None:
        _warn_bad(exc)
        stats["skipped_bad"].append({"path": str(exc.path), "reason": exc.reason})

    def skipped_elsewhere(directory: Path, jsonl: list[Path], other: list[Path]) -> None:
        err = stderr()
        for f in jsonl:
            command = index_command([f], scope, kind, tenant, name_prefix)
            stats["skipped_jsonl"].append({"path": str(f), "command": command})
            err.print(Text(f"skipped {f}: a JSONL file in a directory is not read (its records are indexed when the "
                           f"file is named); to index them: {command}", style="yellow"), soft_wrap=True)
        if other:
            reason = f"not a text file ({', '.join('*' + s for s in TEXT_SUFFIXES)}, or text without a suffix)"
            stats["skipped_other"] += [{"path": str(f), "reason": reason} for f in other]
            shown = ", ".join(str(f.relative_to(directory)) for f in other[:OTHER_SHOWN])
            more = f" and {len(other) - OTHER_SHOWN} more (--json lists them)" if len(other) > OTHER_SHOWN else ""
            err.print(Text(f"skipped {len(other)} file{'s' if len(other) != 1 else ''} in {directory}, {reason}: "
                           f"{shown}{more}; name a file to index it as text", style="yellow"), soft_wrap=True)

    for path in paths:
        if not path.exists():
            raise CliError(f"{path}: no such file or directory")
        if path.is_dir():
            files, jsonl, other = _walk(path, include, exclude)
            jsonl = [f for f in jsonl if f.resolve() not in named]
            if not files:
                hint = (f"; its JSONL files are indexed when named: {index_command(jsonl, scope, kind, tenant, name_prefix)}"
                        if jsonl else "")
                globs = "".join([f" --include {g}" for g in include or []] + [f" --exclude {g}" for g in exclude or []])
                raise CliError(f"{path}: no text files in this directory ({', '.join('*' + s for s in TEXT_SUFFIXES)}, "
                               f"or without a suffix{', with' + globs if globs else ''}){hint}")
            skipped_elsewhere(path, jsonl, other)
            found = 0
            bad_before = len(stats["skipped_bad"])
            for f in files:
                name = name_prefix + f.relative_to(path).as_posix()
                try:
                    record = _file_record(f, name, kind, tenant, skip_empty=True, fmt=fmt)
                except BadFile as exc:
                    bad(exc)
                    continue
                if record is None:
                    stats["skipped_empty"].append(str(f))
                    continue
                check(record, str(f), f)
                inputs.sources.append((f, name[len(name_prefix):]))
                found += 1
            if not found and len(stats["skipped_bad"]) == bad_before:
                raise CliError(f"{path}: every file in this directory is empty (nothing to index)")
            stats["files"] += found
        elif path.suffix.lower() in JSONL_SUFFIXES:
            before = inputs.count
            try:
                for record, where in _jsonl_records(path, kind, tenant, fmt):
                    check(_prefixed(record, name_prefix), where, path)
            except BadFile as exc:
                bad(exc)
                continue
            if inputs.count == before:
                raise CliError(f"{path}: no records (the JSONL file is empty)")
            inputs.sources.append((path, None))
            stats["jsonl_files"] += 1
            stats["jsonl_records"] += inputs.count - before
        elif path.is_file():
            try:
                record = _file_record(path, name_prefix + path.name, kind, tenant, fmt=fmt)
            except BadFile as exc:
                bad(exc)
                continue
            check(record, str(path), path)
            inputs.sources.append((path, path.name))
            stats["files"] += 1
        else:
            raise CliError(f"{path}: not a regular file or directory")
    if not inputs.count:
        skipped = sum(len(stats[k]) for k in SKIPPED)
        raise CliError(f"nothing to index: {skipped} file{'s' if skipped != 1 else ''} skipped ({skipped_counts(stats)})")
    return inputs


#: The lists of skipped files in ``IndexInputs.stats``, in the order the summary counts them.
SKIPPED = ("skipped_bad", "skipped_empty", "skipped_jsonl", "skipped_other")


def skipped_counts(stats: dict[str, Any]) -> str:
    """``1 not text, 0 empty`` (+ ``, 1 JSONL, 2 other`` when there are such): why files were skipped."""
    text = f"{len(stats['skipped_bad'])} not text, {len(stats['skipped_empty'])} empty"
    if stats["skipped_jsonl"]:
        text += f", {len(stats['skipped_jsonl'])} JSONL not named"
    if stats["skipped_other"]:
        text += f", {len(stats['skipped_other'])} of other types"
    return text


#: Characters per passage for the first estimate of a run's passages (before any document is done).
CHARS_PER_PASSAGE = 700


def _progress_bar() -> "Progress":
    """A transient progress bar on stderr: passages done / (estimated) total, passages per second,
    time left and elapsed. stdout stays the command's output (JSON under ``--json``); without a
    terminal rich draws nothing."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("passages · {task.fields[rate]}/s"), TimeRemainingColumn(), TimeElapsedColumn(),
                    console=stderr(), transient=True)


class PassageCount:
    """The bar's count: passages done, the total estimated from the characters to index at first, then
    from the passages per document done so far (``documents`` of ``count`` done)."""

    def __init__(self, bar: "Progress", count: int, chars: int):
        self.bar, self.count, self.passages, self.documents = bar, count, 0, 0
        self.task = bar.add_task("indexing", total=max(count, chars // CHARS_PER_PASSAGE), rate="–")

    def add(self, passages: int = 0, documents: int = 0) -> None:
        self.passages += passages
        self.documents += documents
        task = self.bar.tasks[self.task]
        total = task.total
        if self.documents:
            total = round(self.passages * self.count / self.documents) if self.documents < self.count else self.passages
        speed = task.finished_speed or task.speed
        self.bar.update(self.task, advance=passages, total=max(total, self.passages),
                        rate=f"{speed:.0f}" if speed else "–")


def index(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(
        help="Markdown/RST/text files, directories (recursive over *.md, *.markdown, *.rst, *.txt and text files "
             "without a suffix, e.g. README; the JSONL and other files in them are named in a warning, "
             "not read) and JSONL files named here (one record per line: name or _id; body or "
             "text and/or title; optional kind, tenant, snippet, format).",
        show_default=False)],
    scope: Annotated[str, typer.Option("--scope", "-s", help="Scope to index into.")],
    kind: Annotated[str, typer.Option(
        "--kind", help="Kind of file documents, and of JSONL records without one.")] = "Doc",
    tenant: Annotated[str, typer.Option(
        "--tenant", help="Tenant ('' = the shared base); JSONL records may set their own.")] = "",
    name_prefix: Annotated[str, typer.Option(
        "--name-prefix", help="Put this before every document's name (names are relative to the folder "
                              "given: two folders' README.md need a prefix each to stand side by side).")] = "",
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="Documents per batch (one COPY + dna.index_staged transaction).")] = 2000,
    compact: Annotated[bool, typer.Option(
        "--compact/--no-compact", help="Afterwards, compact the scope's BM25 index (dna.bm25_compact, "
                                       "its own transaction; it changes no answer).")] = True,
    passages: Annotated[bool, typer.Option(
        "--passages/--whole", help="Index long text as passages (~200 tokens; Markdown/RST cut at headings, "
                                   "plain text at paragraphs): each searched on its own, a hit shows the "
                                   "part that answers. --whole: one row per document (the embedder reads "
                                   "its first 256 tokens).")] = True,
    fmt: Annotated[str, typer.Option(
        "--format", help="How to cut and title files: auto (by suffix, then by content: a Sphinx .txt is "
                         "reStructuredText), markdown, rst or text; JSONL records without a format get it too.",
        show_default=True)] = "auto",
    include: Annotated[Optional[List[str]], typer.Option(
        "--include", help="In directories, only files matching this glob (repeatable; a name glob such as "
                          "'*.rst', or a path relative to the folder such as 'ref/*'; then any text file).",
        show_default=False)] = None,
    exclude: Annotated[Optional[List[str]], typer.Option(
        "--exclude", help="In directories, leave out files matching this glob (repeatable; wins over --include; "
                          "e.g. 'releases/*').", show_default=False)] = None,
    embedder: EmbedderOpt = EmbedderName.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON only.")] = False,
) -> None:
    """Index markdown/text files, directories and JSONL files into a scope.

    Unchanged text is never re-embedded. Every input is read and checked before anything is
    written (a file that is not UTF-8 text, or holds a NUL byte, is skipped with a warning and
    counted); a document of the same name indexed before from another file is named in a warning
    before it is replaced (--name-prefix keeps both). Then the documents stream through in
    batches, each written atomically (retried on a deadlock or serialization failure), with a
    progress bar on stderr; Ctrl-C stops between batches: what was written stays, re-running
    resumes (unchanged documents are skipped). Then the scope's BM25 index is compacted
    (dna.bm25_compact) unless --no-compact. Limits: 1,000,000 bytes per document (title + text).
    """
    from pydna import maintenance

    inputs = collect_records(paths, kind, tenant, name_prefix, scope=scope, fmt=fmt, include=include, exclude=exclude)
    stats = inputs.stats
    client, choice = open_client(ctx, embedder, scope=scope)
    written = 0

    def progress(done: int, _total) -> None:
        nonlocal written
        counter.add(documents=done - written)
        written = done

    try:
        client.conn.execute("SELECT dna.check_scope(%s), dna.check_kind(%s)", (scope, kind))
        announce_embedder(choice, as_json)
        warn_replaced(client.conn, scope, inputs.keys)
        unchanged = UnchangedFilter(client.conn, scope, choice.provider.model_id, passages,
                                    {(k[0], k[1], k[2]): k[3] for k in inputs.keys})
        try:
            with _progress_bar() as bar:
                counter = PassageCount(bar, inputs.count, stats["chars"])
                fresh = unchanged(inputs.records(), on_skip=lambda rows: counter.add(rows, 1))
                report = client.index(scope, fresh, batch_size=batch_size, progress=progress,
                                      passages=passages, compact=False,   # compacted below, errors reported
                                      on_passages=counter.add)
        except KeyboardInterrupt:
            record_sources(client.conn, scope, unchanged.done_keys(written))
            unchanged.record(written)
            stderr().print(Text(f"interrupted: {written + len(unchanged.unchanged)} of {inputs.count} written or "
                                "unchanged; re-run to resume", style="yellow"), soft_wrap=True)
            raise typer.Exit(130) from None                 # 128 + SIGINT, as a shell reports it
        record_sources(client.conn, scope, inputs.keys)
        unchanged.record()
        report.unchanged += len(unchanged.unchanged)
        report.passages += unchanged.rows
        if unchanged.unchanged and not report.tables:
            report.tables.add(client.conn.execute("SELECT dna.search_table(dna.model_dims(%s))::text",
                                                  (choice.provider.model_id,)).fetchone()[0])
        compaction = compaction_error = None
        if compact:
            try:
                compaction = maintenance.compact(client.conn, scope)
            except Exception as exc:  # the documents are written: say so, then fail
                compaction_error = describe_error(exc)
                if compaction_error is None:
                    raise
    finally:
        client.close()
    skipped_bad = stats["skipped_bad"]
    summary = {
        "scope": scope, "model_id": choice.provider.model_id, "embedder": choice.detail,
        "records": inputs.count, "files": stats["files"], "jsonl_records": stats["jsonl_records"],
        "inserted": report.inserted, "updated": report.updated, "embedded": report.embedded,
        "unchanged": report.unchanged, "embedded_texts": report.embedded_texts,
        "tables": sorted(report.tables), "skipped_empty": stats["skipped_empty"], "skipped_bad": skipped_bad,
        "skipped_jsonl": stats["skipped_jsonl"], "skipped_other": stats["skipped_other"],
        "compaction": compaction,
    }
    summary["passages"], summary["passages_deleted"] = report.passages, report.passages_deleted
    for skipped in stats["skipped_empty"]:
        stderr().print(Text(f"skipped {skipped}: empty file", style="yellow"), soft_wrap=True)
    if as_json:
        echo_json(summary)
    else:
        out = stdout()
        sources = []
        if stats["files"]:
            sources.append(f"{stats['files']} file{'s' if stats['files'] != 1 else ''}")
        if stats["jsonl_records"]:
            sources.append(f"{stats['jsonl_records']} JSONL record{'s' if stats['jsonl_records'] != 1 else ''}")
        docs = f"{inputs.count} document{'s' if inputs.count != 1 else ''}"
        rows = f", {report.passages} passage{'s' if report.passages != 1 else ''}" \
            if report.passages != inputs.count else ""
        out.print(f"indexed {docs}{rows} ({', '.join(sources)}) into scope "
                  f"[bold]{escape(scope)}[/] ({escape(', '.join(sorted(report.tables)))})", soft_wrap=True)
        out.print(f"  inserted {report.inserted} · updated {report.updated} · "
                  f"vector added to unchanged text {report.embedded} · unchanged {report.unchanged}", soft_wrap=True)
        out.print(f"  texts sent to the model: {report.embedded_texts} · model_id: {escape(choice.provider.model_id)}",
                  soft_wrap=True)
        skipped = sum(len(stats[k]) for k in SKIPPED)
        if skipped:
            out.print(f"  skipped {skipped} file{'s' if skipped != 1 else ''}: {skipped_counts(stats)} (named above)",
                      soft_wrap=True)
        if compaction is not None:
            for line in maintenance.compaction_lines(compaction):
                out.print(f"  BM25 compacted: {escape(line)}", soft_wrap=True)
    if compaction_error is not None:
        raise CliError(f"the documents are indexed, but compacting the BM25 index failed: {compaction_error}; "
                       f"run `dna db compact --scope {scope}`")


#: Keys per call of dna.source_conflicts / dna.record_document_sources.
SOURCE_CHUNK = 5000


def _key_arrays(keys: list[tuple[str, str, str, str]]) -> tuple[list[str], ...]:
    return tuple(list(column) for column in zip(*keys)) if keys else ([], [], [], [])


def warn_replaced(conn, scope: str, keys: list[tuple[str, str, str, str]]) -> list[tuple]:
    """Warn (stderr, one line each) about the documents about to be written that stand in ``scope``
    indexed from another source (``dna.source_conflicts``); returns them."""
    found = []
    for start in range(0, len(keys), SOURCE_CHUNK):
        kinds, names, tenants, sources = _key_arrays(keys[start:start + SOURCE_CHUNK])
        found += conn.execute("SELECT kind, name, tenant, source, new_source FROM dna.source_conflicts(%s, %s, %s, %s, %s)",
                              (scope, kinds, names, tenants, sources)).fetchall()
    err = stderr()
    for kind_, name, tenant_, old, new in found:
        where = f" (tenant {tenant_})" if tenant_ else ""
        err.print(Text(f"warning: {kind_}/{name}{where} in scope {scope} was indexed from {old}; it is replaced by "
                       f"{new} (--name-prefix keeps both)", style="yellow"), soft_wrap=True)
    return found


def input_digest(record: "Record", passages: bool, splitter: str) -> str:
    """sha256 of everything that decides an input's rows under one model_id: kind, name, tenant, title,
    text, snippet, format, metadata, passages on/off and the splitter (``splitter_fingerprint``)."""
    h = hashlib.sha256()
    for part in (record.kind, record.name, record.tenant, record.title or "", record.body, record.snippet or "",
                 record.format or "", json.dumps(dict(record.metadata or {}), sort_keys=True, default=str),
                 "passages" if passages else "whole", splitter):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


class UnchangedFilter:
    """Streams the inputs that changed since they were last written under ``model_id`` and counts the
    rest: per chunk of inputs one ``dna.unchanged_sources`` call says which digests are the recorded
    ones, so an unchanged file is neither split into passages nor sent to the server again. Keeps each
    input's digest for :meth:`record` (``dna.record_source_digests``). On a database before revision
    0021 (no ``dna.unchanged_sources``) every input streams, as before."""

    CHUNK = 500

    def __init__(self, conn, scope: str, model_id: str, passages: bool, sources: dict[tuple[str, str, str], str]):
        from pydna.passages import splitter_fingerprint

        self.conn, self.scope, self.model_id, self.passages, self.sources = conn, scope, model_id, passages, sources
        self.splitter = splitter_fingerprint()
        self.enabled = conn.execute("SELECT to_regproc('dna.unchanged_sources') IS NOT NULL").fetchone()[0]
        self.unchanged: list["Record"] = []
        self.streamed: list["Record"] = []
        self.digests: dict[tuple[str, str, str], str] = {}
        self.rows = 0              # rows (passages) of the unchanged inputs' documents

    def __call__(self, records: Iterator["Record"], on_skip=None) -> Iterator["Record"]:
        chunk: list["Record"] = []
        for record in records:
            chunk.append(record)
            if len(chunk) >= self.CHUNK:
                yield from self._pass(chunk, on_skip)
                chunk = []
        if chunk:
            yield from self._pass(chunk, on_skip)

    def _pass(self, chunk: list["Record"], on_skip) -> Iterator["Record"]:
        digests = [input_digest(r, self.passages, self.splitter) for r in chunk]
        for r, d in zip(chunk, digests):
            self.digests[(r.kind, r.name, r.tenant)] = d
        same: dict[int, int] = {}
        if self.enabled:
            same = {row[0]: row[1] for row in self.conn.execute(
                "SELECT ord, passages FROM dna.unchanged_sources(%s, %s, %s, %s, %s, %s)",
                (self.scope, self.model_id, [r.kind for r in chunk], [r.name for r in chunk],
                 [r.tenant for r in chunk], digests))}
        for i, record in enumerate(chunk, start=1):
            if i in same:
                self.unchanged.append(record)
                self.rows += same[i]
                if on_skip:
                    on_skip(same[i])
                continue
            self.streamed.append(record)
            yield record

    def _done(self, written: int | None) -> list["Record"]:
        return self.unchanged + (self.streamed if written is None else self.streamed[:written])

    def done_keys(self, written: int | None = None) -> list[tuple[str, str, str, str]]:
        """(kind, name, tenant, source) of the unchanged inputs and the first ``written`` streamed ones."""
        return [(r.kind, r.name, r.tenant, self.sources.get((r.kind, r.name, r.tenant))) for r in self._done(written)]

    def record(self, written: int | None = None) -> None:
        """Record the digests of the unchanged inputs and of the first ``written`` streamed ones (all: None)."""
        if not self.enabled:
            return
        done = self._done(written)
        for start in range(0, len(done), SOURCE_CHUNK):
            part = done[start:start + SOURCE_CHUNK]
            keys = [(r.kind, r.name, r.tenant) for r in part]
            self.conn.execute("SELECT dna.record_source_digests(%s, %s, %s, %s, %s, %s, %s)",
                              (self.scope, self.model_id, [k[0] for k in keys], [k[1] for k in keys],
                               [k[2] for k in keys], [self.sources.get(k) for k in keys],
                               [self.digests[k] for k in keys]))


def record_sources(conn, scope: str, keys: list[tuple[str, str, str, str]]) -> None:
    """Record where the written documents came from (``dna.record_document_sources``)."""
    for start in range(0, len(keys), SOURCE_CHUNK):
        kinds, names, tenants, sources = _key_arrays(keys[start:start + SOURCE_CHUNK])
        conn.execute("SELECT dna.record_document_sources(%s, %s, %s, %s, %s)", (scope, kinds, names, tenants, sources))
