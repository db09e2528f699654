"""`dna index` on a first day (issue 12): files that are not text are skipped with a warning naming
each and counted; extension-less text files are indexed; --name-prefix; a warning before a document
of the same name from another folder is replaced; Ctrl-C says how far it got (exit 130); the scope
and kind are checked by the server's rule (dna.check_scope / dna.check_kind) before anything is written."""
from __future__ import annotations

import json

import psycopg
import pytest
from typer.testing import CliRunner

from pydna.cli import app
from pydna.cli_files import sniff_text

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


def _names(dsn, scope):
    with psycopg.connect(dsn) as conn:
        return sorted(r[0] for r in conn.execute("SELECT DISTINCT name FROM dna.dna_search_docs_384 WHERE scope = %s",
                                                 (scope,)))


def test_bad_files_are_skipped_named_and_counted(run, tmp_path, dna_dsn):
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "good.md").write_text("# Good\n\nplain text about rank fusion\n", encoding="utf-8")
    (d / "nul.txt").write_bytes(b"text with a \x00 NUL byte in it\n")
    (d / "latin1.md").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"))
    result = run("index", d, "--scope", "mixed", *FAKE, "--json")
    summary = json.loads(result.stdout)
    assert summary["records"] == 1 and summary["inserted"] == 1
    bad = {b["path"]: b["reason"] for b in summary["skipped_bad"]}
    assert set(bad) == {str(d / "nul.txt"), str(d / "latin1.md")}
    assert "NUL byte" in bad[str(d / "nul.txt")] and "not UTF-8" in bad[str(d / "latin1.md")]
    err = " ".join(result.stderr.split())
    assert f"skipped {d / 'nul.txt'}: holds a NUL byte" in err and f"skipped {d / 'latin1.md'}: not UTF-8" in err
    plain = run("index", d, "--scope", "mixed", *FAKE).stdout
    assert "skipped 2 files: 2 not text, 0 empty" in plain
    assert _names(dna_dsn, "mixed") == ["good.md"]
    # A named bad file is skipped too; nothing left at all is an error that says why.
    result = run("index", d / "nul.txt", "--scope", "mixed", *FAKE, code=1)
    assert "nothing to index: 1 file skipped (1 not text, 0 empty)" in " ".join(result.stderr.split())


def test_jsonl_with_a_nul_names_the_line(run, tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"name": "a", "body": "ok"}) + "\n" + json.dumps({"name": "b", "body": "x\u0000y"}) + "\n",
                 encoding="utf-8")
    result = run("index", f, "--scope", "j", *FAKE, code=1)
    assert f"{f}, line 2: `body` holds a NUL character" in " ".join(result.stderr.split())


def test_extension_less_text_files_are_indexed(run, tmp_path, dna_dsn):
    d = tmp_path / "repo"
    d.mkdir()
    (d / "README").write_text("How to build: run make, then make install.\n", encoding="utf-8")
    (d / "LICENSE").write_text("MIT License. Permission is hereby granted.\n", encoding="utf-8")
    (d / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00binary")
    (d / "setup.py").write_text("print('not picked up: an unknown suffix')\n", encoding="utf-8")
    summary = json.loads(run("index", d, "--scope", "repo", *FAKE, "--json").stdout)
    assert summary["records"] == 2 and summary["skipped_bad"] == []
    assert _names(dna_dsn, "repo") == ["LICENSE", "README"]
    hits = json.loads(run("recall", "how to build", "--scope", "repo", *FAKE, "--json").stdout)["hits"]
    assert hits[0]["name"] == "README"


def test_sniff_text(tmp_path):
    cases = {"utf8": "naïve café ✓\n".encode(), "nul": b"a\x00b", "latin1": "caf\xe9".encode("latin-1"), "empty": b""}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    assert [n for n in cases if sniff_text(tmp_path / n)] == ["utf8", "empty"]
    cut = tmp_path / "cut"                          # a multi-byte character cut by the probe is still text
    cut.write_bytes(b"a" * 8191 + "é".encode())
    assert sniff_text(cut)


def test_two_folders_readme_warns_before_replacing_and_name_prefix_keeps_both(run, tmp_path, dna_dsn):
    for folder, text in (("a", "alpha project readme"), ("b", "beta project readme")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "README.md").write_text(f"# {folder}\n\n{text}\n", encoding="utf-8")
    first = run("index", tmp_path / "a", "--scope", "two", *FAKE)
    assert "warning" not in first.stderr
    again = run("index", tmp_path / "a", "--scope", "two", *FAKE)            # the same file: no warning
    assert "warning" not in again.stderr
    second = run("index", tmp_path / "b", "--scope", "two", *FAKE, "--json")
    warning = " ".join(second.stderr.split())
    assert (f"warning: Doc/README.md in scope two was indexed from {(tmp_path / 'a' / 'README.md').resolve()}; "
            f"it is replaced by {(tmp_path / 'b' / 'README.md').resolve()}") in warning
    assert json.loads(second.stdout)["updated"] == 1
    assert _names(dna_dsn, "two") == ["README.md"]
    run("index", tmp_path / "a", "--scope", "two", "--name-prefix", "a/", *FAKE)
    run("index", tmp_path / "b", "--scope", "two", "--name-prefix", "b/", *FAKE)
    assert _names(dna_dsn, "two") == ["README.md", "a/README.md", "b/README.md"]
    hits = json.loads(run("recall", "alpha project", "--scope", "two", "--name-prefix", "a/", *FAKE,
                          "--json").stdout)["hits"]
    assert [h["name"] for h in hits] == ["a/README.md"]


def test_scope_and_kind_are_checked_before_writing(run, tmp_path, dna_dsn):
    (tmp_path / "x.md").write_text("# x\n\ntext\n", encoding="utf-8")
    result = run("index", tmp_path / "x.md", "--scope", "My Scope!", *FAKE, code=1)
    assert "invalid scope 'My Scope!'" in result.stderr and "SQLSTATE 22023" in result.stderr
    assert "For example 'my-scope'" in result.stderr
    result = run("index", tmp_path / "x.md", "--scope", "ok", "--kind", "bad kind!", *FAKE, code=1)
    assert "invalid kind 'bad kind!'" in result.stderr
    with psycopg.connect(dna_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM dna.scopes()").fetchone()[0] == 0


def test_ctrl_c_says_how_far_it_got_and_a_rerun_resumes(run, tmp_path, dna_dsn, monkeypatch):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(6):
        (d / f"doc{i}.md").write_text(f"# Doc {i}\n\nbody {i}\n", encoding="utf-8")
    from pydna.client import Client

    real = Client._write_batch
    calls = {"n": 0}

    def interrupt_third(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Client, "_write_batch", interrupt_third)
    result = run("index", d, "--scope", "many", "--batch-size", "2", *FAKE, code=130)
    assert "interrupted: 4 of 6 written or unchanged; re-run to resume" in result.stderr
    assert len(_names(dna_dsn, "many")) == 4
    monkeypatch.setattr(Client, "_write_batch", real)
    summary = json.loads(run("index", d, "--scope", "many", "--batch-size", "2", *FAKE, "--json").stdout)
    assert (summary["inserted"], summary["unchanged"]) == (2, 4)


def test_jsonl_format_field_is_read_and_checked(run, tmp_path, dna_dsn):
    f = tmp_path / "f.jsonl"
    f.write_text(json.dumps({"name": "n", "body": "# Title\n\ntext", "format": "markdown", "extra": 1}) + "\n",
                 encoding="utf-8")
    assert json.loads(run("index", f, "--scope", "fmt", *FAKE, "--json").stdout)["inserted"] == 1
    f.write_text(json.dumps({"name": "n", "body": "x", "format": "docx"}) + "\n", encoding="utf-8")
    result = run("index", f, "--scope", "fmt", *FAKE, code=1)
    assert "line 1: `format` must be markdown, rst or text, got 'docx'" in " ".join(result.stderr.split())
