"""`dna index DIR` says what it skipped and why (issue 23): a JSONL file in a directory is not read
(a BEIR folder holds queries.jsonl beside corpus.jsonl) but named in a warning with the command that
indexes its records; files of other types are named too; both are counted in the summary and listed
under --json. Through typer's CliRunner, on a fresh database."""
from __future__ import annotations

import json
import shlex

import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app

FAKE = ["--embedder", "fake"]


@pytest.fixture
def run(monkeypatch, tmp_path, dna_dsn):
    monkeypatch.delenv("DNA_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNA_HOME", str(tmp_path / "dna-home"))
    runner = CliRunner()

    def invoke(*args, code=0):
        result = runner.invoke(app, ["--dsn", dna_dsn, *[str(a) for a in args]])
        assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
        return result
    return invoke


@pytest.fixture
def beir(tmp_path):
    """A folder laid out as a BEIR data set: README.md, corpus.jsonl, queries.jsonl, qrels/*.tsv."""
    d = tmp_path / "scifact-like"
    (d / "qrels").mkdir(parents=True)
    (d / "README.md").write_text("# A data set\n\nThree abstracts and two claims.\n", encoding="utf-8")
    corpus = [{"_id": "d1", "title": "Vitamin D", "text": "vitamin D deficiency and bone fractures"},
              {"_id": "d2", "title": "Smoking", "text": "the effect of smoking on lung function"},
              {"_id": "d3", "title": "Insulin", "text": "insulin resistance in obesity"}]
    (d / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (d / "queries.jsonl").write_text('{"_id": "q1", "text": "vitamin D helps bones"}\n'
                                     '{"_id": "q2", "text": "smoking harms lungs"}\n', encoding="utf-8")
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    (d / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t1\n", encoding="utf-8")
    return d


def _names(dsn, scope):
    with psycopg.connect(dsn) as conn:
        return sorted(r[0] for r in conn.execute("SELECT DISTINCT name FROM dna.dna_search_docs_384 WHERE scope = %s",
                                                 (scope,)))


def test_jsonl_in_a_directory_is_named_with_the_command_that_indexes_it(run, beir, dna_dsn):
    result = run("index", beir, "--scope", "sf", *FAKE, "--json")
    summary = json.loads(result.stdout)
    assert summary["records"] == 1 and summary["files"] == 1
    commands = {s["path"]: s["command"] for s in summary["skipped_jsonl"]}
    assert set(commands) == {str(beir / "corpus.jsonl"), str(beir / "queries.jsonl")}
    assert commands[str(beir / "corpus.jsonl")] == f"dna index {shlex.quote(str(beir / 'corpus.jsonl'))} --scope sf"
    assert [s["path"] for s in summary["skipped_other"]] == [str(beir / "qrels" / "test.tsv"),
                                                             str(beir / "qrels" / "train.tsv")]
    err = " ".join(result.stderr.split())
    assert f"skipped {beir / 'corpus.jsonl'}: a JSONL file in a directory is not read" in err
    assert f"to index them: {commands[str(beir / 'corpus.jsonl')]}" in err
    assert f"skipped 2 files in {beir}, not a text file" in err and "qrels/test.tsv, qrels/train.tsv" in err
    assert _names(dna_dsn, "sf") == ["README.md"]
    # The human summary counts them; the command in the warning indexes the records.
    plain = run("index", beir, "--scope", "sf", *FAKE).stdout
    assert "skipped 4 files: 0 not text, 0 empty, 2 JSONL not named, 2 of other types (named above)" in \
        " ".join(plain.split())
    args = shlex.split(commands[str(beir / "corpus.jsonl")])
    assert args[:2] == ["dna", "index"]
    summary = json.loads(run(*args[1:], *FAKE, "--json").stdout)
    assert summary["jsonl_records"] == 3 and summary["skipped_jsonl"] == []
    assert _names(dna_dsn, "sf") == ["README.md", "d1", "d2", "d3"]


def test_a_jsonl_file_named_beside_its_directory_is_read_and_not_warned_about(run, beir, dna_dsn):
    result = run("index", beir, beir / "corpus.jsonl", "--scope", "sf2", *FAKE, "--json")
    summary = json.loads(result.stdout)
    assert summary["records"] == 4 and summary["jsonl_records"] == 3
    assert [s["path"] for s in summary["skipped_jsonl"]] == [str(beir / "queries.jsonl")]
    assert "corpus.jsonl: a JSONL file" not in " ".join(result.stderr.split())
    assert _names(dna_dsn, "sf2") == ["README.md", "d1", "d2", "d3"]


def test_the_command_keeps_kind_tenant_and_name_prefix(run, beir):
    summary = json.loads(run("index", beir, "--scope", "sf3", "--kind", "Paper", "--tenant", "acme",
                             "--name-prefix", "sf/", *FAKE, "--json").stdout)
    command = {s["path"]: s["command"] for s in summary["skipped_jsonl"]}[str(beir / "corpus.jsonl")]
    assert shlex.split(command)[3:] == ["--scope", "sf3", "--kind", "Paper", "--tenant", "acme", "--name-prefix", "sf/"]


def test_a_directory_of_only_jsonl_is_an_error_that_gives_the_command(run, tmp_path, dna_dsn):
    d = tmp_path / "only-jsonl"
    d.mkdir()
    (d / "a.jsonl").write_text('{"name": "a", "body": "alpha"}\n', encoding="utf-8")
    (d / "b.ndjson").write_text('{"name": "b", "body": "beta"}\n', encoding="utf-8")
    err = " ".join(run("index", d, "--scope", "oj", *FAKE, code=1).stderr.split())
    command = f"dna index {shlex.quote(str(d / 'a.jsonl'))} {shlex.quote(str(d / 'b.ndjson'))} --scope oj"
    assert f"{d}: no text files in this directory" in err and f"its JSONL files are indexed when named: {command}" in err
    assert _names(dna_dsn, "oj") == []


def test_many_files_of_other_types_are_counted_and_listed_under_json(run, tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    (d / "index.md").write_text("# Pictures\n\nseven of them\n", encoding="utf-8")
    for i in range(7):
        (d / f"p{i}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes([i]))
    (d / "blob").write_bytes(b"\x00\x01\x02")   # no suffix and not text
    (d / ".cache").mkdir()
    (d / ".cache" / "state.jsonl").write_text('{"name": "x", "body": "hidden"}\n', encoding="utf-8")  # hidden: left out
    result = run("index", d, "--scope", "img", *FAKE, "--json")
    summary = json.loads(result.stdout)
    assert len(summary["skipped_other"]) == 8 and summary["records"] == 1 and summary["skipped_jsonl"] == []
    err = " ".join(result.stderr.split())
    assert f"skipped 8 files in {d}" in err and "blob, p0.png, p1.png, p2.png, p3.png and 3 more (--json lists them)" in err
