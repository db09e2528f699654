"""``dna index``: read markdown/text files, directories and JSONL files, check them, index them.

    dna index PATH... --scope S       # markdown/text files, directories, JSONL
"""
from __future__ import annotations

import dataclasses
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

from pydna.cli_files import (FORMATS, JSONL_SUFFIXES, MAX_DOCUMENT_BYTES, TEXT_SUFFIXES, BadFile, _file_record,
                             _jsonl_records, _walk, include_hint)
from pydna.cli_sources import UnchangedFilter, record_sources, warn_replaced

# ---------------------------------------------------------------------------------------------
# dna index
# ---------------------------------------------------------------------------------------------

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
                               f"or without a suffix{', with' + globs if globs else ''}){include_hint(path, include)}{hint}")
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
                          "'*.rst', or a path relative to the folder: '*' stays in one folder, 'ref/*' = the "
                          "files directly in ref, '**' crosses folders, 'ref/**' = all under ref, "
                          "'**/*.txt'; then any text file).",
        show_default=False)] = None,
    exclude: Annotated[Optional[List[str]], typer.Option(
        "--exclude", help="In directories, leave out files matching this glob (repeatable; wins over --include; "
                          "globs as --include's, e.g. 'releases/**').", show_default=False)] = None,
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
        where = f"scope [bold]{escape(scope)}[/] ({escape(', '.join(sorted(report.tables)))})"
        changed = report.inserted + report.updated + report.embedded
        if inputs.count and not changed and report.unchanged:       # what changed first: here, nothing
            what = (f"{sources[0]} unchanged" if len(sources) == 1 and stats["files"]
                    else f"{docs} unchanged ({', '.join(sources)})")
            out.print(f"nothing changed: {what} in {where}", soft_wrap=True)
        elif report.unchanged:
            out.print(f"indexed {changed} changed of {docs} ({', '.join(sources)}; {report.unchanged} unchanged)"
                      f"{rows} into {where}", soft_wrap=True)
        else:
            out.print(f"indexed {docs}{rows} ({', '.join(sources)}) into {where}", soft_wrap=True)
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
